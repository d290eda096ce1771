#include "exec/op_info.h"

namespace qforge {

void registerNnOps(OpRegistry& registry) { (void)registry; }

}  // namespace qforge
