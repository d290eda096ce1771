#include "exec/op_info.h"

namespace qforge {

void registerElementwiseOps(OpRegistry& registry) { (void)registry; }

}  // namespace qforge
