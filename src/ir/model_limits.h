// The resource limits (core/resource_limits.h) a model file is held to before anything of it is
// allocated, inferred or executed: each initializer's declared size, all initializers together,
// the number of nodes and how deep control-flow bodies nest, over the graph and every body in it.
#pragma once

#include <onnx/onnx_pb.h>

namespace qforge {

// Throws ResourceLimitError naming the initializer or node that passes a limit.
void checkModelLimits(const onnx::GraphProto& graph);

}  // namespace qforge
