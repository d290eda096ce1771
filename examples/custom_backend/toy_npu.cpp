#include "custom_backend/toy_npu.h"

#include <cmath>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "core/files.h"
#include "quant/fake_quantize.h"

namespace toy_npu {

using namespace qforge;
using quant::QParams;
using quant::QScheme;

namespace {

class ThreeSigmaObserver : public quant::Observer {
 public:
  ThreeSigmaObserver(std::string tensor_name, QScheme scheme, double sigmas)
      : Observer("Toy3Sigma", std::move(tensor_name), scheme, /*supports_per_channel=*/false),
        sigmas_(sigmas) {
    if (!(sigmas > 0)) fail("sigmas must be positive, got " + std::to_string(sigmas));
  }

 protected:
  // One batch as [count, sum, sum of squares, min, max]: what ranks of a data-parallel
  // calibration exchange before folding.
  quant::BatchSummary summarizeBatch(const at::Tensor& x, const quant::MinMax& stats) override {
    const at::Tensor values = x.to(at::kDouble);
    return {at::tensor({static_cast<double>(values.numel()), values.sum().item<double>(),
                        values.square().sum().item<double>(), static_cast<double>(stats.min),
                        static_cast<double>(stats.max)},
                       at::kDouble)};
  }
  void foldBatch(const quant::BatchSummary& summary) override {
    const at::Tensor s = summary.at(0);
    const float lo = static_cast<float>(s[3].item<double>());
    const float hi = static_cast<float>(s[4].item<double>());
    min_ = count_ == 0 ? lo : std::min(min_, lo);
    max_ = count_ == 0 ? hi : std::max(max_, hi);
    count_ += s[0].item<double>();
    sum_ += s[1].item<double>();
    sum_squares_ += s[2].item<double>();
  }
  std::pair<at::Tensor, at::Tensor> computeRange() const override {
    const double mean = sum_ / count_;
    const double sigma = std::sqrt(std::max(0.0, sum_squares_ / count_ - mean * mean));
    return scalarRange(std::max<double>(min_, mean - sigmas_ * sigma),
                       std::min<double>(max_, mean + sigmas_ * sigma));
  }
  void resetState() override { count_ = sum_ = sum_squares_ = 0; }

 private:
  double sigmas_, count_ = 0, sum_ = 0, sum_squares_ = 0;
  float min_ = 0, max_ = 0;
};

class ShiftFakeQuantizer : public quant::FakeQuantizer {
 public:
  ShiftFakeQuantizer(std::string name, QScheme scheme, std::unique_ptr<quant::Observer> observer)
      : FakeQuantizer("ToyShift", std::move(name), scheme, std::move(observer)) {
    // The QDQ export lowers by the scheme's rounding: it must be what quantize() does.
    if (scheme.rounding != quant::RoundingMode::HalfAwayFromZero) {
      fail("ToyNPU rounds half away from zero; set \"rounding\": \"half_away_from_zero\"");
    }
  }
  std::map<std::string, at::Tensor> state() const override {
    if (!hasParameters()) return {};
    return {{"scale", params_.scale.clone()}, {"zero_point", params_.zero_point.clone()}};
  }
  void loadState(const std::map<std::string, at::Tensor>& state) override {
    const at::Tensor scale = stateEntry(state, "scale").to(at::kFloat);
    params_ = QParams{scale, stateEntry(state, "zero_point", scale.numel()).to(at::kLong)};
  }

 protected:
  // The grid arithmetic (rounding half away from zero, clipping, straight-through gradient) is the
  // library's; what is ToyNPU's own is the choice of scales below.
  at::Tensor quantize(const at::Tensor& x) override {
    return quant::fakeQuantize(x, params_, scheme());
  }
  void initFromObserver() override {
    auto [lo, hi] = observer()->range();
    params_ = quant::qparamsFromMinMax(lo, hi, scheme());
    for (int64_t c = 0; c < params_.numel(); ++c) {
      const float scale = quant::roundScaleToPowerOfTwo(params_.scale[c].item<float>(),
                                                        quant::PowerOfTwoRounding::Ceil);
      params_.scale[c] = scale;
      params_.zero_point[c] = quant::zeroPointFor(scale, lo[c].item<float>(), scheme());
    }
  }
  bool hasParameters() const override { return params_.defined(); }
  QParams currentQParams() const override { return params_; }

 private:
  QParams params_;
};

std::vector<std::string> writeParams(passes::PreparedModel& model, const deploy::DeployModel&,
                                     const std::string& out_dir) {
  std::ostringstream out;
  auto writeLine = [&out](const char* key, const at::Tensor& values) {
    const at::Tensor flat = values.to(at::kLong).contiguous().reshape({-1});
    out << key;
    for (int64_t i = 0; i < flat.numel(); ++i)
      out << ' ' << flat.data_ptr<int64_t>()[i];
    out << '\n';
  };
  out << "# ToyNPU parameters: real = (q - zero_point) * 2^-shift\n";
  for (const passes::QuantPoint& p : model.points()) {
    quant::FakeQuantizer& q = *model.quantizer(p.quantizer);
    const QParams params = q.qparams();
    const at::Tensor shifts = params.scale.log2().neg().round();
    require(at::equal(at::exp2(-shifts), params.scale),
            "ToyNPU stores scales as shifts, but quantizer '" + p.quantizer +
                "' has other scales; give it the ToyShift fake quantizer");
    out << "quantizer " << p.quantizer << ' ' << passes::toString(p.kind)
        << " bits=" << q.scheme().bits << " unsigned=" << q.scheme().is_unsigned
        << " axis=" << q.scheme().axis << '\n';
    writeLine("shift", shifts);
    writeLine("zero_point", params.zero_point);
    if (p.kind == passes::PointKind::Weight) {
      const at::Tensor w = model.graph().value(p.value)->initializer();
      writeLine("shape", at::tensor(w.sizes().vec(), at::kLong));
      writeLine("levels", quant::quantize(w, params, q.scheme()));
    }
  }
  const std::string path = (std::filesystem::path(out_dir) / "toy_npu.params").string();
  writeFileAtomically(path, out.str());
  return {path};
}

}  // namespace

void registerToyNpu(quant::ObserverRegistry& observers,
                    quant::FakeQuantizerRegistry& fake_quantizers,
                    deploy::WriterRegistry& writers) {
  observers.add("Toy3Sigma", [](const std::string& tensor, const QScheme& scheme,
                                quant::QuantOptions& options) {
    return std::make_unique<ThreeSigmaObserver>(tensor, scheme, options.get("sigmas", 3.0));
  });
  fake_quantizers.add(
      "ToyShift", [](const std::string& name, const QScheme& scheme,
                     std::unique_ptr<quant::Observer> observer, quant::QuantOptions&) {
        return std::make_unique<ShiftFakeQuantizer>(name, scheme, std::move(observer));
      });
  writers.add("toy_npu", writeParams);
}

}  // namespace toy_npu
