#include "exec/op_info.h"

namespace qforge {

void registerPoolingOps(OpRegistry& registry) { (void)registry; }

}  // namespace qforge
