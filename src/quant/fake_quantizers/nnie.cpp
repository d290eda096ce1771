#include "quant/fake_quantizers/nnie.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "quant/affine_kernels.h"
#include "quant/fake_quantize.h"

namespace qforge {
namespace quant {

namespace {

template <typename T>
void nnieKernel(const T* x, T* y, int64_t n, double z) {
  const double pos_zero = std::exp2((z - 16.0) / 16.0);
  const double neg_zero = -std::exp2((z + 1.0 - 16.0) / 16.0);
  forEachChunk(n, 16384, [&](int64_t, int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const double v = static_cast<double>(x[i]);
      double out;
      if (v >= pos_zero) {
        const double code = std::clamp(std::nearbyint(16.0 * std::log2(v) - z), 0.0, 127.0);
        out = std::exp2((code + z) / 16.0);
      } else if (v < neg_zero) {
        const double code = std::clamp(std::nearbyint(16.0 * std::log2(-v) - z), 1.0, 127.0);
        out = -std::exp2((code + z) / 16.0);
      } else {
        out = 0.0;
      }
      y[i] = static_cast<T>(out);
    }
  });
}

}  // namespace

double nnieGridOffset(double data_max) {
  return std::nearbyint(16.0 * std::log2(data_max)) - 127.0;
}

at::Tensor nnieLogQuantize(const at::Tensor& x, double data_max) {
  require(data_max > 0.0 && std::isfinite(data_max),
          "NNIE quantize: data_max must be positive and finite");
  require(x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble,
          "NNIE quantize: input must be float32 or float64");
  const at::Tensor input = x.detach().contiguous();
  at::Tensor out = at::empty_like(input);
  const double z = nnieGridOffset(data_max);
  if (input.scalar_type() == at::kFloat) {
    nnieKernel(input.data_ptr<float>(), out.data_ptr<float>(), input.numel(), z);
  } else {
    nnieKernel(input.data_ptr<double>(), out.data_ptr<double>(), input.numel(), z);
  }
  return out.view(x.sizes());
}

NnieFakeQuantizer::NnieFakeQuantizer(std::string name, QScheme scheme,
                                     std::unique_ptr<Observer> observer)
    : FakeQuantizer("NNIE", std::move(name), scheme, std::move(observer)) {
  if (scheme.perChannel()) fail("NNIE log quantization is per tensor");
}

void NnieFakeQuantizer::setDataMax(double data_max) {
  if (!(data_max > 0.0) || !std::isfinite(data_max)) {
    fail("data_max " + std::to_string(data_max) + " must be positive and finite");
  }
  data_max_ = data_max;
}

at::Tensor NnieFakeQuantizer::quantize(const at::Tensor& x) {
  return straightThrough(x, nnieLogQuantize(x, data_max_));
}

void NnieFakeQuantizer::initFromObserver() {
  auto [lo, hi] = observer()->range();
  // Like MQBench, the clip only ever grows across calibration rounds.
  setDataMax(std::max({data_max_, -lo.item<double>(), hi.item<double>(), scheme().eps}));
}

QParams NnieFakeQuantizer::currentQParams() const {
  fail("a logarithmic grid has no affine scale / zero point; deploy with dataMax()");
}

std::map<std::string, at::Tensor> NnieFakeQuantizer::state() const {
  if (!hasParameters()) return {};
  return {{"data_max", at::full({1}, data_max_, at::kDouble)}};
}

void NnieFakeQuantizer::loadState(const std::map<std::string, at::Tensor>& state) {
  setDataMax(stateEntry(state, "data_max", 1).item<double>());
}

}  // namespace quant
}  // namespace qforge
