// Small helpers shared by the op lowerings.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "exec/op_info.h"

namespace qforge::ops {

// Maps a possibly negative ONNX axis into [0, rank); fails naming the node when out of range.
inline int64_t normalizeAxis(const OpContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1)) {
    ctx.fail("axis " + std::to_string(axis) + " is out of range for a tensor of rank " +
             std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

// Reads a 0-d or 1-d integer tensor (shapes, axes, pads given as inputs) into a vector.
inline std::vector<int64_t> toInt64Vector(const at::Tensor& t) {
  at::Tensor c = t.to(at::kLong).contiguous().reshape({-1});
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}

// One lowering for a whole opset range, the common case.
inline OpInfo op(std::string op_type, int64_t since, int64_t until, Lowering run) {
  OpInfo info;
  info.op_type = std::move(op_type);
  info.since_version = since;
  info.until_version = until;
  info.run = std::move(run);
  return info;
}

constexpr int64_t kLatestOpset = 1 << 30;

}  // namespace qforge::ops
