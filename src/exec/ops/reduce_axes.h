// The axes a Reduce* node reduces over, shared by reduction.cpp and reduction_more.cpp.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "exec/op_info.h"
#include "exec/ops/common.h"

namespace qforge::ops {

// The normalized, distinct dims to reduce over: from optional input 1 when `axes_from_input`
// (ReduceSum 13+, the other reductions 18+), else from the `axes` attribute; no axes means all of
// them. nullopt when the node is the identity: no axes and `noop_with_empty_axes` = 1 (input form
// only). Fails naming the node for an axis out of range or listed twice.
inline std::optional<std::vector<int64_t>> reduceDims(const OpContext& ctx, bool axes_from_input) {
  const at::Tensor& x = ctx.input(0);
  std::vector<int64_t> axes;
  if (axes_from_input) {
    if (ctx.hasInput(1)) axes = toInt64Vector(ctx.input(1));
    if (axes.empty() && ctx.attrInt("noop_with_empty_axes", 0) != 0) return std::nullopt;
  } else {
    axes = ctx.attrInts("axes", {});
  }
  const int64_t rank = x.dim();
  std::vector<int64_t> dims;
  for (int64_t axis : axes) {
    const int64_t d = normalizeAxis(ctx, axis, rank);
    if (std::find(dims.begin(), dims.end(), d) != dims.end()) {
      ctx.fail("axis " + std::to_string(axis) + " is listed twice in axes");
    }
    dims.push_back(d);
  }
  if (axes.empty()) {
    // No axes: reduce over all of them.
    for (int64_t d = 0; d < rank; ++d) {
      dims.push_back(d);
    }
  }
  return dims;
}

}  // namespace qforge::ops
