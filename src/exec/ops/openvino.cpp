// OpenVINO's FakeQuantize (domain org.openvinotoolkit), as its ONNX frontend imports it, so that
// qforge can run the models its OpenVINO writer produces. Per OpenVINO's operation spec:
//   x <= min(input_low, input_high)  -> output_low
//   x >  max(input_low, input_high)  -> output_high
//   otherwise round((x - il) / (ih - il) * (levels - 1)) / (levels - 1) * (oh - ol) + ol
// with round to nearest, ties to even; the four bounds broadcast against x.
#include <ATen/ATen.h>

#include "exec/op_info.h"
#include "exec/ops/common.h"

namespace qforge {
namespace {

std::vector<at::Tensor> fakeQuantize(const OpContext& ctx) {
  const at::Tensor& x = ops::floatInput(ctx, 0);
  const at::Tensor il = ctx.input(1).to(x.scalar_type());
  const at::Tensor ih = ctx.input(2).to(x.scalar_type());
  const at::Tensor ol = ctx.input(3).to(x.scalar_type());
  const at::Tensor oh = ctx.input(4).to(x.scalar_type());
  const int64_t levels = ctx.attrInt("levels");
  if (levels < 2) ctx.fail("levels must be at least 2, got " + std::to_string(levels));
  const double steps = static_cast<double>(levels - 1);
  const at::Tensor inside = at::round((x - il) / (ih - il) * steps) / steps * (oh - ol) + ol;
  at::Tensor y = at::where(x <= at::minimum(il, ih), ol.expand_as(inside), inside);
  y = at::where(x > at::maximum(il, ih), oh.expand_as(inside), y);
  return {y};
}

}  // namespace

void registerOpenVinoOps(OpRegistry& registry) {
  OpInfo info = ops::op("FakeQuantize", 1, ops::kLatestOpset, fakeQuantize);
  info.domain = "org.openvinotoolkit";
  registry.add(info);
}

}  // namespace qforge
