#include "quant/autograd_util.h"

namespace qforge {
namespace quant {

void saveGrid(torch::autograd::AutogradContext* ctx, const AffineGrid& grid) {
  ctx->saved_data["qmin"] = grid.qmin;
  ctx->saved_data["qmax"] = grid.qmax;
  ctx->saved_data["rounding"] = static_cast<int64_t>(grid.rounding);
  ctx->saved_data["division"] = static_cast<int64_t>(grid.division);
  ctx->saved_data["channels"] = grid.channels;
  ctx->saved_data["inner"] = grid.inner;
  ctx->saved_data["scales"] = grid.scales;
  ctx->saved_data["zero_points"] = grid.zero_points;
}

AffineGrid loadGrid(torch::autograd::AutogradContext* ctx) {
  AffineGrid grid;
  grid.qmin = ctx->saved_data["qmin"].toInt();
  grid.qmax = ctx->saved_data["qmax"].toInt();
  grid.rounding = static_cast<RoundingMode>(ctx->saved_data["rounding"].toInt());
  grid.division = static_cast<ScaleDivision>(ctx->saved_data["division"].toInt());
  grid.channels = ctx->saved_data["channels"].toInt();
  grid.inner = ctx->saved_data["inner"].toInt();
  grid.scales = ctx->saved_data["scales"].toDoubleVector();
  grid.zero_points = ctx->saved_data["zero_points"].toDoubleVector();
  return grid;
}

at::Tensor sumsAsTensor(const std::vector<double>& sums, const at::Tensor& like) {
  return at::tensor(sums, at::TensorOptions().dtype(at::kDouble))
      .to(like.scalar_type())
      .view(like.sizes());
}

std::vector<double> toDoubles(const at::Tensor& t) {
  const at::Tensor flat = t.detach().to(at::kDouble).contiguous().reshape({-1});
  const double* p = flat.data_ptr<double>();
  return std::vector<double>(p, p + flat.numel());
}

}  // namespace quant
}  // namespace qforge
