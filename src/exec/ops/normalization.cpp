#include "exec/op_info.h"

namespace qforge {

void registerNormalizationOps(OpRegistry& registry) { (void)registry; }

}  // namespace qforge
