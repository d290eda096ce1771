// Raising a graph's default-domain opset, so that a deploy format can use the ops it needs
// (QuantizeLinear from opset 10, Round and Clip's input bounds from 11, per-channel
// QuantizeLinear from 13). Ops whose signature changed between the graph's opset and the target
// are rewritten into their new form (ONNX's own schemas say which changed); a change qforge has
// no rewrite for is an error naming the node and both opsets, before anything is edited.
//
// Rewrites, at the opset where the op changed:
//   9   BatchNormalization: `spatial` dropped (1 only); Upsample: `scales` attribute -> input
//   10  Slice: starts/ends/axes attributes -> inputs; TopK: k -> input; Dropout: an unused mask
//       output dropped (it turns boolean); Upsample -> Resize
//   11  Clip: min/max -> inputs; Pad: pads/value -> inputs; Resize: empty roi input, with the
//       asymmetric coordinates and floor rounding of opset 10 made explicit; Scatter ->
//       ScatterElements
//   12  Dropout: ratio -> input
//   13  Softmax/LogSoftmax/Hardmax: axis now means one axis: Flatten -> op -> Reshape unless the
//       axis is the last (needs the input's rank: declared, or from a sample run); Split: split
//       -> input; Squeeze/Unsqueeze/ReduceSum: axes -> input; Resize: refuses
//       tf_half_pixel_for_nn, which opset 13 dropped
//   14  BatchNormalization: unused training outputs dropped
// Every other change between opsets 7 and 17 was reviewed as compatible (new types, new
// attributes whose default keeps the old behaviour) and needs no edit. The bodies of If, Loop and
// Scan are upgraded as graphs of their own, with the same rewrites, and written back into their
// node; Scan-8 (batch axis, sequence_lens) has no rewrite and is refused.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ir/graph.h"

namespace qforge::passes {

// The newest opset the upgrade reaches: the newest the ONNX library qforge builds with (and its
// checker) knows.
inline constexpr int64_t kMaxUpgradeOpset = 17;

struct OpsetUpgrade {
  int64_t from = 0;
  int64_t to = 0;
  size_t rewritten = 0;  // nodes edited or replaced
};

// Raises the default-domain opset of `graph` to `target` (nothing when it is already there or
// above). Throws qforge::Error naming the node, op and opsets for an op that changed in a way
// no rewrite covers (in a control-flow body too), or a target above kMaxUpgradeOpset; the graph
// is then unchanged.
OpsetUpgrade upgradeOpset(Graph& graph, int64_t target);

}  // namespace qforge::passes
