// Models converted to float16 (fp16 weights, Casts to float16 after the inputs) are quantized in
// float32: observers, fake quantizers, reconstruction and QAT work in float32, and QuantizeLinear
// reads float16 only from opset 19. This pass widens everything float16 inside the graph to
// float32 and keeps the model's interface: a float16 graph input or output stays float16 behind
// a Cast.
#pragma once

#include <cstddef>

#include "ir/graph.h"

namespace qforge::passes {

struct Float16Widening {
  size_t initializers = 0;     // float16 initializers now float32
  size_t casts_removed = 0;    // Casts to float16 that became no-ops (their input was float32)
  size_t nodes_retyped = 0;    // Casts, Constants and dtype attributes now naming float32
  size_t interface_casts = 0;  // Casts added to keep float16 graph inputs and outputs

  size_t total() const { return initializers + casts_removed + nodes_retyped + interface_casts; }
};

Float16Widening float16ToFloat32(Graph& graph);

}  // namespace qforge::passes
