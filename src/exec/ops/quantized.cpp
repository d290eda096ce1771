#include "exec/op_info.h"

namespace qforge {

void registerQuantizedOps(OpRegistry& registry) { (void)registry; }

}  // namespace qforge
