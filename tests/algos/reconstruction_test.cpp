// AdaRound, BRECQ and QDrop on a tiny residual CNN with 3-bit weights: the rounded weights stay on
// their grid within one step of the float weight, the quantized model's output moves closer to
// the float model's than round-to-nearest leaves it, runs repeat for a seed, and a cache budget
// of zero recomputes instead of failing. Two ranks on loopback, each with half the data, follow
// one process on the whole batch. A layer followed by an attention-style head split trains
// on its own output, and a unit without one row per sample is refused. Bad input gets clear
// errors.
#include <gtest/gtest.h>

#include "algos/distributed.h"
#include "algos/reconstruction.h"
#include "core/error.h"
#include "passes/fake_quantize_node.h"
#include "support/checks.h"
#include "support/head_split_graph.h"
#include "support/quant_graphs.h"
#include "support/rank_processes.h"
#include "support/residual_graph.h"

namespace qforge::testing {
namespace {

using algos::reconstruct;
using algos::ReconstructionConfig;
using algos::reconstructionPreset;

const at::Tensor& calibrationImages() {
  static const at::Tensor images = [] {
    at::manual_seed(21);
    return at::randn({96, 2, 6, 6});
  }();
  return images;
}

nlohmann::json lowBitBackend() {
  return tinyBackendDocument({{"weight", {{"bits", 3}}}, {"activation", {{"bits", 6}}}});
}

std::unique_ptr<passes::PreparedModel> calibratedModel() {
  auto m = passes::prepare(residualCnn(), backends::parseBackendConfig(lowBitBackend(), "test"));
  calibrateOn(*m, calibrationImages());
  return m;
}

// Mean squared distance between the model's output and the float graph's on the calibration set.
double outputError(passes::PreparedModel& m) {
  static const at::Tensor reference = [] {
    Graph g = residualCnn();
    return Executor(g).run({{"x", calibrationImages()}}).at("y");
  }();
  const at::Tensor y = m.executor().run({{"x", calibrationImages()}}).at("y");
  return (y - reference).pow(2).mean().item<double>();
}

ReconstructionConfig quick(const std::string& algorithm, int64_t iterations = 300) {
  ReconstructionConfig c = reconstructionPreset(algorithm);
  c.max_count = iterations;
  c.batch = 16;
  c.seed = 5;
  return c;
}

// The weight each conv/Gemm reads, by initializer name.
std::map<std::string, at::Tensor> weights(const passes::PreparedModel& m) {
  std::map<std::string, at::Tensor> w;
  for (const Value* v : m.graph().initializers()) {
    if (v->name().size() > 2 && v->name().substr(v->name().size() - 2) == ".w") {
      w[v->name()] = v->initializer().clone();
    }
  }
  return w;
}

TEST(Reconstruction, AdaRoundKeepsWeightsOnTheirGridWithinOneStepAndLowersTheOutputError) {
  auto m = calibratedModel();
  const double naive = outputError(*m);
  const auto before = weights(*m);
  ASSERT_EQ(before.size(), 6u);  // conv_a..conv_e and fc
  const auto report = reconstruct(*m, calibrationImages(), quick("adaround", 2000));
  ASSERT_EQ(report.units.size(), 6u);
  EXPECT_EQ(report.iterations, 6 * 2000);
  const double reconstructed = outputError(*m);
  EXPECT_LT(reconstructed, naive * 0.9) << "naive " << naive << ", AdaRound " << reconstructed;

  double flipped = 0;
  for (const auto& u : report.units)
    flipped += u.flipped;
  EXPECT_GT(flipped, 0.0);  // some weights rounded away from nearest
  size_t checked = 0;
  for (const Node* n : m->graph().nodes()) {
    if (!passes::isFakeQuantize(n) || !n->input(0)->isInitializer()) continue;
    const std::string w = n->input(0)->name();
    if (!before.count(w)) continue;
    SCOPED_TRACE(w);
    ++checked;
    const quant::QParams p = m->quantizer(passes::quantizerOf(*n))->qparams();
    std::vector<int64_t> shape(before.at(w).dim(), 1);
    shape[0] = -1;  // per output channel
    const at::Tensor s = p.scale.reshape(shape);
    const at::Tensor after = n->input(0)->initializer();
    const at::Tensor levels = after / s;
    EXPECT_LT((levels - levels.round()).abs().max().item<double>(), 1e-3);         // on the grid
    EXPECT_TRUE(((after - before.at(w)).abs() <= s * 1.0001).all().item<bool>());  // floor or ceil
    EXPECT_LE(levels.round().abs().max().item<double>(), 4.0);  // 3-bit signed: [-4, 3]
  }
  EXPECT_EQ(checked, before.size());  // every weight sits behind its quantizer
}

TEST(Reconstruction, BrecqAndQDropLowerTheOutputErrorAndRepeatForASeed) {
  for (const char* algorithm : {"brecq", "qdrop"}) {
    SCOPED_TRACE(algorithm);
    auto first = calibratedModel();
    const double naive = outputError(*first);
    const auto report = reconstruct(*first, calibrationImages(), quick(algorithm));
    ASSERT_EQ(report.units.size(), 3u);
    EXPECT_TRUE(report.units[1].layers == 2);
    EXPECT_LT(outputError(*first), naive * 0.9);

    auto second = calibratedModel();
    reconstruct(*second, calibrationImages(), quick(algorithm));
    ASSERT_EQ(weights(*first).size(), 6u);
    for (const auto& [name, w] : weights(*first))
      EXPECT_TRUE(at::equal(w, weights(*second).at(name))) << name;
  }
}

TEST(Reconstruction, QDropLearnsActivationScalesAndLeavesThemInTheModel) {
  auto m = calibratedModel();
  std::map<std::string, double> before;
  for (quant::FakeQuantizer* q : m->quantizers())
    before[q->name()] = q->qparams().scale[0].item<double>();
  ReconstructionConfig c = quick("qdrop");
  c.scale_lr = 1e-3;
  reconstruct(*m, calibrationImages(), c);
  int moved = 0;
  for (quant::FakeQuantizer* q : m->quantizers())
    moved += q->qparams().scale[0].item<double>() != before.at(q->name());
  EXPECT_GT(moved, 0);
  c = quick("qdrop");
  c.scale_lr = 0;  // scales stay as calibrated
  auto fixed = calibratedModel();
  reconstruct(*fixed, calibrationImages(), c);
  int per_tensor = 0;
  for (quant::FakeQuantizer* q : fixed->quantizers()) {
    if (q->scheme().perChannel()) continue;
    ++per_tensor;
    EXPECT_EQ(q->qparams().scale[0].item<double>(), before.at(q->name())) << q->name();
  }
  EXPECT_EQ(per_tensor, 7);  // the activations: all but the six per-channel weights
  EXPECT_EQ(fixed->quantizers().size(), 13u);
}

TEST(Reconstruction, AZeroCacheBudgetRecomputesEveryBatchAndGivesTheSameWeights) {
  auto cached = calibratedModel();
  const auto full = reconstruct(*cached, calibrationImages(), quick("brecq"));
  EXPECT_EQ(full.units[0].cached_samples, 96);
  EXPECT_EQ(full.units[0].recomputed_samples, 0);
  auto streamed = calibratedModel();
  ReconstructionConfig c = quick("brecq");
  c.cache_limit = 0;
  const auto none = reconstruct(*streamed, calibrationImages(), c);
  EXPECT_EQ(none.peak_cache_bytes, 0);
  EXPECT_EQ(none.units[0].cached_samples, 0);
  EXPECT_EQ(none.units[0].recomputed_samples, 300 * 16);
  const auto a = weights(*cached), b = weights(*streamed);
  ASSERT_EQ(a.size(), 6u);
  for (const auto& [name, w] : a)
    EXPECT_TRUE(at::allclose(w, b.at(name))) << name;
  // A budget between the two caches part of the samples.
  auto partial = calibratedModel();
  c.cache_limit = full.units[0].cached_bytes / 2;
  const auto half = reconstruct(*partial, calibrationImages(), c);
  EXPECT_GT(half.units[0].cached_samples, 0);
  EXPECT_LT(half.units[0].cached_samples, 96);
  EXPECT_LE(half.peak_cache_bytes, c.cache_limit);
}

// prepare() folds an op on initializers into a new initializer; these tests keep the op, as a
// pass list without fold-constants does, to reach the write-back through it.
passes::PrepareOptions withoutConstantFolding() {
  passes::PrepareOptions options;
  options.passes = "constants-to-initializers";
  return options;
}

// x[N,4] -> MatMul(x, Transpose(w[3,4])) -> y, with an inference Dropout after the Transpose
// when `dropout`: the quantizer reads the transposed weight, and the rounded values must land
// back in w, transposed.
void expectWeightWrittenBackThroughLayoutOps(bool dropout) {
  at::manual_seed(8);
  Graph g;
  Value* x = g.addValue("x");
  x->type = TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(4)}};
  g.addInput(x);
  const at::Tensor w0 = at::randn({3, 4});
  Value* w = g.addInitializer("w", w0);
  Node* t = g.addNode("Transpose", {w}, {dropout ? "t" : "wt"}, "transpose");
  t->attributes.set(Attribute::makeInts("perm", {1, 0}));
  Value* weight = t->output(0);
  if (dropout) weight = g.addNode("Dropout", {weight}, {"wt"}, "dropout")->output(0);
  Node* mm = g.addNode("MatMul", {x, weight}, {"y"}, "matmul");
  mm->output(0)->type =
      TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(3)}};
  g.addOutput(mm->output(0));
  auto m = passes::prepare(
      std::move(g), tinyBackend({{"weight", {{"bits", 3}}}, {"ops", {{"MatMul", "quantizable"}}}}),
      withoutConstantFolding());
  const at::Tensor images = at::randn({64, 4});
  calibrateOn(*m, images);
  reconstruct(*m, images, quick("adaround", 200));
  const at::Tensor after = m->graph().value("w")->initializer();
  EXPECT_FALSE(at::equal(after, w0));
  for (const Node* n : m->graph().nodes()) {
    if (!passes::isFakeQuantize(n) || n->input(0)->name() != "wt") continue;
    // Per tensor, or per output channel of the MatMul weight [4, 3] (axis 1: the rows of w).
    const at::Tensor scale = m->quantizer(passes::quantizerOf(*n))->qparams().scale;
    const at::Tensor s = scale.numel() == 1 ? scale : scale.reshape({3, 1});
    const at::Tensor levels = after / s;
    EXPECT_LT((levels - levels.round()).abs().max().item<double>(), 1e-3);
    EXPECT_TRUE(((after - w0).abs() <= s * 1.0001).all().item<bool>());
    return;
  }
  ADD_FAILURE() << "no quantizer reads the transposed weight";
}

TEST(Reconstruction, AWeightReadThroughATransposeIsWrittenBackIntoItsInitializer) {
  expectWeightWrittenBackThroughLayoutOps(/*dropout=*/false);
}

// qforge runs Dropout as Identity (inference only), a layout-only op like Transpose: AdaRound used
// to refuse a weight behind it as "not data movement".
TEST(Reconstruction, AWeightReadThroughAnInferenceDropoutIsWrittenBackIntoItsInitializer) {
  expectWeightWrittenBackThroughLayoutOps(/*dropout=*/true);
}

// x[N,4] -> MatMul(x, Neg(w[4,3])) -> y: Neg computes, so a rounded value has no place in w.
TEST(Reconstruction, AWeightComputedByAnotherOpIsRefusedNamingTheOp) {
  Graph g;
  Value* x = g.addValue("x");
  x->type = TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(4)}};
  g.addInput(x);
  Node* neg = g.addNode("Neg", {g.addInitializer("w", at::randn({4, 3}))}, {"wn"}, "neg");
  g.addOutput(g.addNode("MatMul", {x, neg->output(0)}, {"y"}, "matmul")->output(0));
  auto m = passes::prepare(std::move(g), tinyBackend({{"ops", {{"MatMul", "quantizable"}}}}),
                           withoutConstantFolding());
  const at::Tensor images = at::randn({32, 4});
  calibrateOn(*m, images);
  const std::string e = errorOf([&] { reconstruct(*m, images, quick("adaround", 10)); });
  EXPECT_NE(e.find("'wn' is computed by node 'neg' (Neg), which does more than reshape or "
                   "reorder it"),
            std::string::npos)
      << e;
}

// With every sample in every batch (no random draw), two ranks holding half the samples each
// compute, after averaging, the gradient one process computes on all of them: same rounding,
// same learned scales (whose LSQ gradient is scaled by the batch each rank sees), same losses, up
// to float summation order. A wrong average or a missing 1/sqrt(2) on the scales moves them apart.
TEST(Reconstruction, TwoRanksWithHalfTheSamplesEachFollowOneProcessOnTheWholeBatch) {
  const auto options = spawnedRankOptions();
  if (!options) return runThisTestAsRanks(2, std::chrono::seconds(90));
  algos::ProcessGroup group(*options);
  ReconstructionConfig c = quick("brecq", 120);
  c.batch = 96;  // every sample: each rank's 48 are its whole share
  c.scale_lr = 1e-4;
  auto one = calibratedModel();
  const auto alone = reconstruct(*one, calibrationImages(), c);
  auto ranked = calibratedModel();
  const at::Tensor share = calibrationImages().narrow(0, 48 * group.rank(), 48);
  const auto shared = reconstruct(*ranked, share, c, {}, &group);

  const auto expected = weights(*one), got = weights(*ranked);
  ASSERT_FALSE(expected.empty());
  int64_t differing = 0, total = 0;
  for (const auto& [name, w] : expected) {
    differing += w.ne(got.at(name)).sum().item<int64_t>();
    total += w.numel();
    // Every rank ends with the same model: rank 0's weights, broadcast, equal this rank's.
    const at::Tensor lead = got.at(name).clone();
    group.broadcast({lead}, 0);
    EXPECT_TRUE(at::equal(lead, got.at(name))) << name;
  }
  EXPECT_LE(differing, total / 500) << differing << " of " << total << " weights rounded apart";
  int learned = 0;
  for (quant::FakeQuantizer* q : one->quantizers()) {
    if (q->scheme().perChannel()) continue;
    const double a = q->qparams().scale[0].item<double>();
    const double b = ranked->quantizer(q->name())->qparams().scale[0].item<double>();
    EXPECT_NEAR(b, a, 1e-4 * a) << q->name();
    learned += 1;
  }
  EXPECT_GT(learned, 0);
  ASSERT_EQ(alone.units.size(), shared.units.size());
  for (size_t u = 0; u < alone.units.size(); ++u) {
    EXPECT_NEAR(shared.units[u].last_rec_loss, alone.units[u].last_rec_loss,
                1e-3 * alone.units[u].last_rec_loss);
  }
  // A batch that does not split evenly over the ranks is refused, naming both flags.
  c.batch = 15;
  auto refused = calibratedModel();
  const std::string e = errorOf([&] { reconstruct(*refused, share, c, {}, &group); });
  EXPECT_NE(e.find("--recon-batch"), std::string::npos) << e;
  EXPECT_NE(e.find("--world-size"), std::string::npos) << e;
}

TEST(Reconstruction, BadInputGetsOneClearError) {
  auto m = calibratedModel();
  ReconstructionConfig c = quick("qdrop");
  c.batch = 200;
  EXPECT_NE(errorOf([&] {
              reconstruct(*m, calibrationImages(), c);
            }).find("a reconstruction batch of 200 needs at least 200 calibration samples, got 96"),
            std::string::npos);
  EXPECT_NE(errorOf([] {
              reconstructionPreset("optq");
            }).find("unknown reconstruction algorithm 'optq'; known: adaround, brecq, qdrop"),
            std::string::npos);
  c = quick("qdrop");
  c.prob = 0;
  EXPECT_NE(errorOf([&] { reconstruct(*m, calibrationImages(), c); }).find("prob"),
            std::string::npos);
  // Weights on a logarithmic (non-affine) grid have no levels for AdaRound to choose between.
  nlohmann::json doc = lowBitBackend();
  doc["weight"]["fake_quantizer"] = "NNIE";
  doc["weight"]["observer"] = "MinMax";
  doc["weight"]["per_channel"] = false;  // NNIE's log grid is per tensor
  auto nnie = passes::prepare(residualCnn(), backends::parseBackendConfig(doc, "test"));
  calibrateOn(*nnie, calibrationImages());
  const std::string e = errorOf([&] { reconstruct(*nnie, calibrationImages(), quick("brecq")); });
  EXPECT_NE(e.find("AdaRound needs an affine weight grid"), std::string::npos) << e;
}

// The head split's layer (MatMul, then Reshape and a Transpose putting the heads before the
// samples) trained on a [2, N, ...] exit and died slicing it; it now trains on the MatMul's own
// [N, 3, 6] output, as BRECQ's block always did on y.
std::unique_ptr<passes::PreparedModel> calibratedHeadSplit(const at::Tensor& images) {
  auto m = passes::prepare(headSplitGraph(), tinyBackend({{"weight", {{"bits", 3}}},
                                                          {"ops", {{"MatMul", "quantizable"}}}}));
  calibrateOn(*m, images);
  return m;
}

TEST(Reconstruction, AdaRoundOnAHeadSplitLayerLowersItsOutputErrorOnTheGrid) {
  at::manual_seed(12);
  const at::Tensor images = at::randn({64, 3, 16});
  auto m = calibratedHeadSplit(images);
  const at::Tensor w0 = m->graph().value("w")->initializer().clone();
  // The float graph is the reference computation, and the quantizers' parameters give the
  // closed-form round-to-nearest weight and quantized input to measure the layer against.
  Graph float_graph = headSplitGraph();
  EXPECT_TRUE(at::allclose(Executor(float_graph).run({{"x", images}}).at("y"),
                           headSplitReference(images, w0), 1e-5, 1e-6));
  const quant::QParams wq = m->quantizer("w")->qparams();
  const quant::QParams xq = m->quantizer("x")->qparams();
  ASSERT_EQ(wq.scale.numel(), 6);  // per output column of the MatMul weight
  const at::Tensor ws = wq.scale.to(at::kFloat).reshape({1, 6});
  const double xs = xq.scale.item<double>();
  const double xz = xq.zero_point.item<double>();
  const at::Tensor xq_images = (at::clamp(at::round(images / xs) + xz, 0, 255) - xz) * xs;
  const at::Tensor nearest = at::clamp(at::round(w0 / ws), -4, 3) * ws;  // 3-bit signed
  auto layerError = [&](const at::Tensor& w) {
    return (at::matmul(xq_images, w) - at::matmul(images, w0)).pow(2).mean().item<double>();
  };

  ReconstructionConfig c = quick("adaround", 1000);
  c.scale_lr = 0;  // the input's grid stays as calibrated: the rounding alone is compared
  const auto report = reconstruct(*m, images, c);
  ASSERT_EQ(report.units.size(), 1u);
  EXPECT_EQ(report.units[0].entry, "x");
  EXPECT_EQ(report.units[0].exit, "mm_out");
  const at::Tensor after = m->graph().value("w")->initializer();
  const at::Tensor levels = after / ws;
  EXPECT_LT((levels - levels.round()).abs().max().item<double>(), 1e-3);  // on the grid
  EXPECT_TRUE(((after - w0).abs() <= ws * 1.0001).all().item<bool>());    // floor or ceil
  EXPECT_FALSE(at::equal(after, nearest));  // AdaRound chose otherwise somewhere
  EXPECT_LT(layerError(after), layerError(nearest))
      << "nearest " << layerError(nearest) << ", AdaRound " << layerError(after);
  // The model runs the rounded weight: its output is the reference on the quantized input.
  const at::Tensor y = m->executor().run({{"x", images}}).at("y");
  EXPECT_TRUE(at::allclose(y, headSplitReference(xq_images, after), 1e-4, 1e-5))
      << (y - headSplitReference(xq_images, after)).abs().max();
}

// A unit whose entry has no row per sample on axis 0 (the input transposed before the first
// layer) gets one clear error naming the value, instead of an ATen slicing error or a silently
// wrong cache.
TEST(Reconstruction, AUnitWithoutOneRowPerSampleIsRefusedByName) {
  Graph g;
  Value* x = g.addValue("x");
  x->type =
      TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(3), Dim::known(4)}};
  g.addInput(x);
  Node* t = g.addNode("Transpose", {x}, {"tokens_first"}, "transpose");
  t->attributes.set(Attribute::makeInts("perm", {1, 0, 2}));
  Node* mm = g.addNode("MatMul", {t->output(0), g.addInitializer("w", at::randn({4, 5}))}, {"y"},
                       "matmul");
  mm->output(0)->type =
      TensorType{DType::Float, std::vector<Dim>{Dim::known(3), Dim::symbolic("N"), Dim::known(5)}};
  g.addOutput(mm->output(0));
  g.model.opset_imports[""] = 13;
  auto m = passes::prepare(std::move(g), tinyBackend({{"ops", {{"MatMul", "quantizable"}}}}));
  const at::Tensor images = at::randn({40, 3, 4});
  calibrateOn(*m, images);
  const at::Tensor w0 = m->graph().value("w")->initializer().clone();
  const std::string e = errorOf([&] { reconstruct(*m, images, quick("adaround", 5)); });
  EXPECT_NE(e.find("value 'tokens_first' has shape [3, 40, 4], not one row per sample (40) on "
                   "axis 0"),
            std::string::npos)
      << e;
  EXPECT_TRUE(at::equal(m->graph().value("w")->initializer(), w0));  // nothing half-written
}

}  // namespace
}  // namespace qforge::testing
