// If, Loop and Scan: their bodies run on an Executor of their own, fed the node's inputs and the
// outer values the bodies read (the node's extra inputs, ir/captured_values.h).
#pragma once

#include "exec/op_info.h"

namespace qforge {

void registerControlFlowOps(OpRegistry& registry);

}  // namespace qforge
