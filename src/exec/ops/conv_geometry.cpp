#include "exec/ops/conv_geometry.h"

namespace qforge::ops {

WindowGeometry resolveWindowGeometry(const OpContext& ctx, at::IntArrayRef input_spatial,
                                     at::IntArrayRef kernel_spatial) {
  const size_t rank = input_spatial.size();
  if (kernel_spatial.size() != rank) {
    ctx.fail("kernel has " + std::to_string(kernel_spatial.size()) +
             " spatial dims but the input has " + std::to_string(rank));
  }
  WindowGeometry g;
  g.strides = ctx.attrInts("strides", std::vector<int64_t>(rank, 1));
  g.dilations = ctx.attrInts("dilations", std::vector<int64_t>(rank, 1));
  if (g.strides.size() != rank || g.dilations.size() != rank) {
    ctx.fail("strides/dilations must have one entry per spatial dim (" + std::to_string(rank) +
             ")");
  }
  for (size_t i = 0; i < rank; ++i) {
    if (g.strides[i] <= 0 || g.dilations[i] <= 0)
      ctx.fail("strides and dilations must be positive");
  }
  const std::string auto_pad = ctx.attrString("auto_pad", "NOTSET");
  g.pads_begin.assign(rank, 0);
  g.pads_end.assign(rank, 0);
  if (auto_pad == "NOTSET") {
    std::vector<int64_t> pads = ctx.attrInts("pads", std::vector<int64_t>(2 * rank, 0));
    if (pads.size() != 2 * rank) {
      ctx.fail("pads must have 2 x " + std::to_string(rank) + " entries, has " +
               std::to_string(pads.size()));
    }
    for (size_t i = 0; i < rank; ++i) {
      if (pads[i] < 0 || pads[i + rank] < 0) ctx.fail("pads must not be negative");
      g.pads_begin[i] = pads[i];
      g.pads_end[i] = pads[i + rank];
    }
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < rank; ++i) {
      const int64_t out = (input_spatial[i] + g.strides[i] - 1) / g.strides[i];
      const int64_t extent = (kernel_spatial[i] - 1) * g.dilations[i] + 1;
      const int64_t total =
          std::max<int64_t>(0, (out - 1) * g.strides[i] + extent - input_spatial[i]);
      const int64_t small = total / 2;
      g.pads_begin[i] = auto_pad == "SAME_UPPER" ? small : total - small;
      g.pads_end[i] = total - g.pads_begin[i];
    }
  } else if (auto_pad != "VALID") {
    ctx.fail("auto_pad '" + auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  }
  return g;
}

at::Tensor padSpatial(const at::Tensor& x, const WindowGeometry& g, double value) {
  // constant_pad_nd takes pairs from the last dim backwards.
  std::vector<int64_t> pad;
  for (size_t i = g.pads_begin.size(); i-- > 0;) {
    pad.push_back(g.pads_begin[i]);
    pad.push_back(g.pads_end[i]);
  }
  return at::constant_pad_nd(x, pad, value);
}

}  // namespace qforge::ops
