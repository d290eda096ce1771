#include "exec/op_info.h"

namespace qforge {

void registerResizeOps(OpRegistry& registry) { (void)registry; }

}  // namespace qforge
