// Sensitivity analysis on one Gemm with 4-bit weights and activations, where every figure has a
// closed form: isolated and leave-one-out noise from ATen's own fake-quantize ops on the MinMax
// grids, local and accumulated noise, the Fisher estimate (exact in expectation for a linear
// model), top-1 counts, and the quantizers' modes restored; then ranges, Spearman's rho and the
// errors.
#include "algos/sensitivity.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "pipelines/tiny_classifier.h"
#include "support/checks.h"
#include "support/quant_graphs.h"

namespace qforge::algos {
namespace {

using testing::errorOf;

const nlohmann::json kFourBit = {{"weight", {{"bits", 4}}}, {"activation", {{"bits", 4}}}};

struct Fixture {
  std::unique_ptr<passes::PreparedModel> model;
  at::Tensor x;
  std::vector<AnalysisBatch> batches;

  explicit Fixture(bool calibrate = true) {
    model = passes::prepare(testing::linearClassifier(), testing::tinyBackend(kFourBit));
    x = testing::classifierInputs(48, 3);
    if (calibrate) testing::calibrateOn(*model, x);
    // Two runs of 24 labelled samples.
    const at::Tensor labels = testing::classifierLabels(x, 3);
    batches.push_back({{{"x", x.narrow(0, 0, 24)}}, labels.narrow(0, 0, 24)});
    batches.push_back({{{"x", x.narrow(0, 24, 24)}}, labels.narrow(0, 24, 24)});
  }
  const QuantizerSensitivity& of(const SensitivityResult& r, const std::string& kind) const {
    for (size_t i = 0; i < model->points().size(); ++i) {
      const passes::QuantPoint& p = model->points()[i];
      if (std::string(passes::toString(p.kind)) != kind) continue;
      for (const QuantizerSensitivity& q : r.quantizers) {
        if (q.quantizer == p.quantizer) return q;
      }
    }
    throw Error("no " + kind + " quantizer");
  }
};

// The MinMax grids of 4-bit asymmetric activations and symmetric per-channel weights, applied with
// ATen's fake-quantize ops.
at::Tensor quantizedInput(const at::Tensor& x) {
  const double scale = testing::asymmetricScale(x, 15);
  return at::fake_quantize_per_tensor_affine(x, scale, testing::asymmetricZeroPoint(x, scale), 0,
                                             15);
}
at::Tensor quantizedWeight(const at::Tensor& w) {
  const at::Tensor scales = testing::symmetricScalesPerChannel(w, 15).to(at::kFloat);
  return at::fake_quantize_per_channel_affine(w, scales, at::zeros({w.size(0)}, at::kInt), 0, -8,
                                              7);
}
at::Tensor gemm(const at::Tensor& x, const at::Tensor& w) {
  return at::addmm(testing::classifierBias(), x, w.t()).to(at::kDouble);
}
double energy(const at::Tensor& t) {
  return t.to(at::kDouble).square().sum().item<double>();
}

TEST(Sensitivity, IsolatedAndLeaveOneOutNoiseMatchTheClosedForm) {
  Fixture f;
  SensitivityOptions o;
  const SensitivityResult r = analyzeSensitivity(*f.model, f.batches, o);
  const at::Tensor w = testing::classifierWeight();
  const at::Tensor y = gemm(f.x, w);
  const double weight_alone = energy(gemm(f.x, quantizedWeight(w)) - y);
  const double input_alone = energy(gemm(quantizedInput(f.x), w) - y);
  const double both = energy(gemm(quantizedInput(f.x), quantizedWeight(w)) - y);
  ASSERT_GT(weight_alone, 0);
  ASSERT_GT(input_alone, 0);

  EXPECT_EQ(r.samples, 48);
  EXPECT_EQ(r.outputs, std::vector<std::string>{"y"});
  EXPECT_EQ(r.runs, 2 * (2 + 2 + 2));  // per batch: float, all on, 2 isolated, 2 leave-one-out
  EXPECT_NEAR(r.quantized.signal, energy(y), 1e-6 * energy(y));
  EXPECT_NEAR(r.quantized.noise, both, 1e-4 * both);
  const QuantizerSensitivity& wq = f.of(r, "weight");
  const QuantizerSensitivity& xq = f.of(r, "activation");
  EXPECT_NEAR(wq.isolated->noise, weight_alone, 1e-4 * weight_alone);
  EXPECT_NEAR(xq.isolated->noise, input_alone, 1e-4 * input_alone);
  // With two quantizers, all but one is the other alone.
  EXPECT_NEAR(wq.leave_one_out->noise, input_alone, 1e-4 * input_alone);
  EXPECT_NEAR(xq.leave_one_out->noise, weight_alone, 1e-4 * weight_alone);
  EXPECT_NEAR(wq.isolated->sqnrDb(), 10 * std::log10(energy(y) / weight_alone), 1e-3);
  const at::Tensor yq = gemm(f.x, quantizedWeight(w)).to(at::kFloat);
  EXPECT_NEAR(
      wq.isolated->cosine(),
      at::cosine_similarity(yq.reshape({1, -1}), y.to(at::kFloat).reshape({1, -1})).item<double>(),
      1e-5);
}

TEST(Sensitivity, MeasuresOnlyTheQuantizersNamed) {
  Fixture f;
  SensitivityOptions o;
  o.measured = {f.of(analyzeSensitivity(*f.model, f.batches, {}), "weight").quantizer};
  const SensitivityResult r = analyzeSensitivity(*f.model, f.batches, o);
  EXPECT_EQ(r.runs, 2 * (2 + 1 + 1));  // per batch: float, all on, the weight alone and left out
  const double weight_alone = energy(gemm(f.x, quantizedWeight(testing::classifierWeight())) -
                                     gemm(f.x, testing::classifierWeight()));
  EXPECT_NEAR(f.of(r, "weight").isolated->noise, weight_alone, 1e-4 * weight_alone);
  EXPECT_FALSE(f.of(r, "activation").isolated.has_value());
  EXPECT_FALSE(f.of(r, "activation").leave_one_out.has_value());
  // What needs no extra run is still there for every quantizer.
  EXPECT_TRUE(f.of(r, "activation").local.has_value());
  o.measured = {"no_such_quantizer"};
  EXPECT_EQ(errorOf([&] { analyzeSensitivity(*f.model, f.batches, o); }),
            "sensitivity analysis: the model has no quantizer 'no_such_quantizer'");
}

TEST(Sensitivity, LocalAndAccumulatedNoiseAreWhatEachQuantizerDoesWhereItSits) {
  Fixture f;
  const SensitivityResult r = analyzeSensitivity(*f.model, f.batches, {});
  const at::Tensor w = testing::classifierWeight();
  const QuantizerSensitivity& wq = f.of(r, "weight");
  const QuantizerSensitivity& xq = f.of(r, "activation");
  const double weight_error = energy(quantizedWeight(w) - w);
  const double input_error = energy(quantizedInput(f.x) - f.x);
  EXPECT_NEAR(wq.local->noise, weight_error, 1e-4 * weight_error);
  EXPECT_NEAR(wq.accumulated->noise, weight_error, 1e-4 * weight_error);
  EXPECT_NEAR(xq.local->noise, input_error, 1e-4 * input_error);
  // The input quantizer reads the graph input: nothing upstream adds to its error.
  EXPECT_NEAR(xq.accumulated->noise, input_error, 1e-4 * input_error);
  EXPECT_NEAR(xq.local->signal, energy(f.x), 1e-6 * energy(f.x));
}

TEST(Sensitivity, FisherPredictsTheIsolatedNoiseOfALinearModel) {
  // y = x W^T + b: the output's change is J delta exactly, so the estimate's expectation is the
  // isolated noise; 400 probes put one standard deviation near 7%.
  Fixture f;
  SensitivityOptions o;
  o.isolated = true;
  o.leave_one_out = false;
  o.fisher = true;
  o.fisher_probes = 200;
  const SensitivityResult r = analyzeSensitivity(*f.model, f.batches, o);
  for (const char* kind : {"weight", "activation"}) {
    const QuantizerSensitivity& q = f.of(r, kind);
    ASSERT_TRUE(q.fisher.has_value()) << kind;
    EXPECT_NEAR(*q.fisher / q.isolated->noise, 1.0, 0.3) << kind;
  }
  // Same seed, same estimate.
  const SensitivityResult again = analyzeSensitivity(*f.model, f.batches, o);
  EXPECT_EQ(*f.of(again, "weight").fisher, *f.of(r, "weight").fisher);
}

TEST(Sensitivity, ErrorAlignmentIsTheOutputsErrorAgainstWhatEachQuantizerAddsToIt) {
  // y = xq Wq^T + b with both on. Leaving W's quantizer out changes y by exactly xq dW^T, and
  // leaving x's out by dx Wq^T: the alignment is <e, that> with e = y_all - y_float.
  Fixture f;
  SensitivityOptions o;
  o.isolated = false;
  o.leave_one_out = true;
  o.fisher = true;
  const SensitivityResult r = analyzeSensitivity(*f.model, f.batches, o);
  const at::Tensor w = testing::classifierWeight(), wq = quantizedWeight(w);
  const at::Tensor xq = quantizedInput(f.x);
  const at::Tensor e = gemm(xq, wq) - gemm(f.x, w);
  const at::Tensor by_weight = (xq.to(at::kDouble).mm((wq - w).t().to(at::kDouble)));
  const at::Tensor by_input = ((xq - f.x).to(at::kDouble).mm(wq.t().to(at::kDouble)));
  const double weight_alignment = (e * by_weight).sum().item<double>();
  const double input_alignment = (e * by_input).sum().item<double>();
  const QuantizerSensitivity& wq_s = f.of(r, "weight");
  const QuantizerSensitivity& xq_s = f.of(r, "activation");
  EXPECT_NEAR(*wq_s.error_alignment, weight_alignment, 1e-3 * std::abs(weight_alignment));
  EXPECT_NEAR(*xq_s.error_alignment, input_alignment, 1e-3 * std::abs(input_alignment));
  // So 2 <e, J d> - |J d|^2 with the exact |J d|^2 is the leave-one-out reduction, exactly.
  const double all_on = r.quantized.noise;
  EXPECT_NEAR(2 * weight_alignment - energy(by_weight), all_on - wq_s.leave_one_out->noise,
              1e-3 * all_on);
  EXPECT_NEAR(*wq_s.fisher_gain, 2 * *wq_s.error_alignment - *wq_s.fisher, 1e-9 * all_on);
  // Without Fisher, neither figure.
  o.fisher = false;
  EXPECT_FALSE(f.of(analyzeSensitivity(*f.model, f.batches, o), "weight").fisher_gain.has_value());
}

TEST(Sensitivity, ReferenceOutputsKeptOnceSkipTheFloatRunsAfter) {
  Fixture f;
  SensitivityOptions o;
  o.isolated = o.leave_one_out = false;
  o.keep_references = true;
  const SensitivityResult first = analyzeSensitivity(*f.model, f.batches, o);
  ASSERT_EQ(first.references.size(), 2u);
  const at::Tensor w = testing::classifierWeight();
  EXPECT_TRUE(at::allclose(first.references[0].at("y").to(at::kDouble),
                           gemm(f.x.narrow(0, 0, 24), w), 1e-5, 1e-5));
  o.keep_references = false;
  o.references = &first.references;
  const SensitivityResult again = analyzeSensitivity(*f.model, f.batches, o);
  EXPECT_EQ(again.runs, 2);  // the all-on run of each batch only
  EXPECT_DOUBLE_EQ(again.quantized.noise, first.quantized.noise);
  EXPECT_EQ(again.float_top1, first.float_top1);
  EXPECT_EQ(again.quantized_top1, first.quantized_top1);
  EXPECT_TRUE(again.references.empty());
  // Without the float run, activations get no range; weights still do.
  EXPECT_FALSE(f.of(again, "activation").range.has_value());
  EXPECT_TRUE(f.of(again, "weight").range.has_value());
  const std::vector<TensorMap> one = {first.references[0]};
  o.references = &one;
  EXPECT_NE(errorOf([&] {
              analyzeSensitivity(*f.model, f.batches, o);
            }).find("one set of reference outputs per batch"),
            std::string::npos);
}

TEST(Sensitivity, CountsTopOneFloatAndQuantizedWhenEveryBatchHasLabels) {
  Fixture f;
  const SensitivityResult r = analyzeSensitivity(*f.model, f.batches, {});
  const at::Tensor labels = testing::classifierLabels(f.x, 3);
  const at::Tensor w = testing::classifierWeight();
  ASSERT_TRUE(r.float_top1.has_value());
  EXPECT_EQ(*r.float_top1, testing::correct(gemm(f.x, w), labels));
  EXPECT_EQ(*r.quantized_top1,
            testing::correct(gemm(quantizedInput(f.x), quantizedWeight(w)), labels));

  f.batches[1].labels = at::Tensor();
  EXPECT_FALSE(analyzeSensitivity(*f.model, f.batches, {}).float_top1.has_value());
}

TEST(Sensitivity, LeavesEveryQuantizerAsItFoundIt) {
  Fixture f;
  std::vector<quant::FakeQuantizer*> qs = f.model->quantizers();
  qs[0]->setFakeQuantEnabled(false);
  qs[1]->setObserverEnabled(true);
  SensitivityOptions o;
  o.fisher = true;
  o.fisher_probes = 1;
  analyzeSensitivity(*f.model, f.batches, o);
  EXPECT_FALSE(qs[0]->fakeQuantEnabled());
  EXPECT_FALSE(qs[0]->observerEnabled());
  EXPECT_TRUE(qs[1]->fakeQuantEnabled());
  EXPECT_TRUE(qs[1]->observerEnabled());
  // The executor runs without autograd again.
  const at::Tensor y = f.model->executor().run({{"x", f.x}}).at("y");
  EXPECT_FALSE(y.requires_grad());
}

TEST(Sensitivity, RefusesAnUncalibratedModelNoDataAndUnknownOutputs) {
  Fixture uncalibrated(false);
  EXPECT_NE(errorOf([&] {
              analyzeSensitivity(*uncalibrated.model, uncalibrated.batches, {});
            }).find("needs a calibrated model"),
            std::string::npos);
  Fixture f;
  EXPECT_NE(errorOf([&] { analyzeSensitivity(*f.model, {}, {}); }).find("at least one batch"),
            std::string::npos);
  SensitivityOptions o;
  o.outputs = {"nope"};
  EXPECT_EQ(errorOf([&] { analyzeSensitivity(*f.model, f.batches, o); }),
            "'nope' is not an output of the model");
}

TEST(RangeAccumulator, ExtremesPercentilesAndHistogramOfEveryValueWhenFew) {
  const at::Tensor x = at::linspace(-1, 3, 5001);
  RangeAccumulator acc;
  acc.add(x.narrow(0, 0, 2000), std::nullopt, quant::QScheme{});
  acc.add(x.narrow(0, 2000, 3001), std::nullopt, quant::QScheme{});
  const RangeSummary s = acc.finish();
  EXPECT_EQ(s.elements, 5001);
  EXPECT_EQ(s.sampled, 5001);
  EXPECT_DOUBLE_EQ(s.min, -1);
  EXPECT_DOUBLE_EQ(s.max, 3);
  EXPECT_NEAR(s.p0_1, at::quantile(x.to(at::kDouble), 0.001).item<double>(), 1e-6);
  EXPECT_NEAR(s.p99_9, at::quantile(x.to(at::kDouble), 0.999).item<double>(), 1e-6);
  ASSERT_EQ(s.histogram.size(), 64u);
  int64_t total = 0;
  for (int64_t c : s.histogram)
    total += c;
  EXPECT_EQ(total, 5001);
  EXPECT_NEAR(static_cast<double>(s.histogram[0]), 5001.0 / 64, 2);
  EXPECT_FALSE(s.clipped_fraction.has_value());  // no grid given
}

TEST(RangeAccumulator, ClippedShareIsWhatFallsHalfAStepBeyondTheGrid) {
  // int8 [-128, 127] with scale 0.1: the grid reaches -12.85 .. 12.75 with rounding. The values
  // sit between those bounds' neighbours (-19.975, -19.875, ...), none on a bound.
  const at::Tensor x = at::linspace(-20, 20, 401) + 0.025;
  RangeAccumulator acc;
  acc.add(x, quant::makeQParams({0.1f}, {0}), quant::QScheme{});  // int8, full range
  const RangeSummary s = acc.finish();
  ASSERT_TRUE(s.clipped_fraction.has_value());
  const double expected = ((x < -12.85) | (x > 12.75)).sum().item<double>() / 401.0;
  EXPECT_NEAR(*s.clipped_fraction, expected, 1e-12);
  EXPECT_NEAR(*s.clipped_fraction, 145.0 / 401.0, 3.0 / 401.0);  // 72 below, 73 above
}

TEST(RangeAccumulator, OutlierRatioIsTheExtremeOverTheBulk) {
  at::Tensor x = at::linspace(-1, 1, 4001);
  x[2000] = 10.0f;
  RangeAccumulator acc;
  acc.add(x, std::nullopt, quant::QScheme{});
  const RangeSummary s = acc.finish();
  EXPECT_NEAR(s.outlier_ratio, 10.0 / s.p99_9, 1e-9);
  EXPECT_GT(s.outlier_ratio, 9.0);
  EXPECT_TRUE(RangeAccumulator().empty());
}

TEST(RangeAccumulator, ASampleOfManyValuesStillBoundsThePercentiles) {
  at::manual_seed(5);
  const at::Tensor x = at::randn({400000});
  RangeAccumulator acc(1);
  for (int64_t i = 0; i < 8; ++i)
    acc.add(x.narrow(0, i * 50000, 50000), std::nullopt, quant::QScheme{});
  const RangeSummary s = acc.finish();
  EXPECT_EQ(s.elements, 400000);
  EXPECT_EQ(s.sampled, 8 * RangeAccumulator::kPerBatch);
  EXPECT_DOUBLE_EQ(s.max, x.max().item<double>());
  // The 99.9th percentile of N(0, 1) is 3.09; a sample of 65536 gets within a few percent.
  EXPECT_NEAR(s.p99_9, 3.09, 0.15);
  EXPECT_NEAR(s.p0_1, -3.09, 0.15);
}

TEST(WeightRange, ChannelSpreadIsTheLargestChannelOverTheMedianOne) {
  const at::Tensor w =
      at::tensor({1.0f, -0.5f, -2.0f, 1.0f, 3.0f, 0.0f, 0.5f, -8.0f, 4.0f, 1.0f}).view({5, 2});
  const RangeSummary s = weightRange(w, std::nullopt, quant::QScheme{}, 0);
  ASSERT_TRUE(s.channel_spread.has_value());
  EXPECT_DOUBLE_EQ(*s.channel_spread, 8.0 / 3.0);
  // Channels along axis 1: max |w| 4 and 8.
  EXPECT_DOUBLE_EQ(*weightRange(w, std::nullopt, quant::QScheme{}, 1).channel_spread, 8.0 / 4.0);
  EXPECT_FALSE(weightRange(at::ones({4}), std::nullopt, quant::QScheme{}, 0).channel_spread);
}

TEST(Spearman, RankCorrelationWithAndWithoutTies) {
  // No ties: 1 - 6 sum d^2 / (n (n^2 - 1)) with d = (1, 1, 1, 1, 0).
  EXPECT_NEAR(*spearman({1, 2, 3, 4, 5}, {2, 1, 4, 3, 5}), 1 - 6.0 * 4 / (5 * 24), 1e-12);
  EXPECT_NEAR(*spearman({1, 2, 3}, {30, 20, 10}), -1, 1e-12);
  // Ties take their average rank: (1, 2, 3, 4) against (1.5, 1.5, 3, 4) by hand.
  EXPECT_NEAR(*spearman({1, 2, 3, 4}, {1, 1, 2, 3}), 4.5 / std::sqrt(5 * 4.5), 1e-12);
  EXPECT_FALSE(spearman({1, 2}, {2, 1}).has_value());
  EXPECT_FALSE(spearman({1, 2, 3}, {5, 5, 5}).has_value());
}

TEST(NoiseSums, SqnrAndCosineOfKnownSignals) {
  NoiseSums n;
  n.add(at::tensor({1.0f, 2.0f, 2.0f}), at::tensor({1.0f, 2.0f, 3.0f}));
  EXPECT_DOUBLE_EQ(n.sqnrDb(), 10 * std::log10(14.0 / 1.0));
  EXPECT_NEAR(n.cosine(), 11.0 / std::sqrt(9.0 * 14.0), 1e-12);
  NoiseSums exact;
  exact.add(at::ones({3}), at::ones({3}));
  EXPECT_TRUE(std::isinf(exact.sqnrDb()));
  EXPECT_DOUBLE_EQ(exact.cosine(), 1);
  NoiseSums merged = n;
  merged.merge(exact);
  EXPECT_DOUBLE_EQ(merged.noise, 1.0);
  EXPECT_DOUBLE_EQ(merged.signal, 17.0);
}

}  // namespace
}  // namespace qforge::algos
