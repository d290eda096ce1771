#include "exec/op_info.h"

namespace qforge {

void registerActivationOps(OpRegistry& registry) { (void)registry; }

}  // namespace qforge
