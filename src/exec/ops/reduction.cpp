#include "exec/op_info.h"

namespace qforge {

void registerReductionOps(OpRegistry& registry) { (void)registry; }

}  // namespace qforge
