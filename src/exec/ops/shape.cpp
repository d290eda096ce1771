#include "exec/op_info.h"

namespace qforge {

void registerShapeOps(OpRegistry& registry) { (void)registry; }

}  // namespace qforge
