// A trace reads ONNX Runtime's intermediate tensors. Exposed as outputs of the exported file, an
// int8 QuantizeLinear's output keeps ORT from converting the pair to uint8 and from fusing the
// Conv before it into a QLinearConv, so the trace would watch another computation than the one
// verify judges. OrtObservedModel reads them from ORT's own optimized graph instead.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <string>

#include "core/error.h"
#include "deploy/ort_double_qdq_guard.h"
#include "ir/onnx_export.h"
#include "ir/parse.h"
#include "support/onnx_builder.h"
#include "support/onnx_validity.h"
#include "support/ort_dir.h"
#include "verify/ort_observed_model.h"
#include "verify/ort_runner.h"

namespace qforge::testing {
namespace {

constexpr double kInputScale = 0.02, kWeightScale = 0.01, kOutputScale = 0.05;

// int8 activations and weights around a bias-free Conv: the form ORT fuses into QLinearConv.
// With `pool`, a quantized GlobalAveragePool reads the Conv's levels, so ORT fuses that pair of
// QuantizeLinear/DequantizeLinear away too (QLinearConv -> QLinearGlobalAveragePool, both
// channels-last).
Graph qdqConv(bool expose_levels, bool pool = false) {
  const std::string tail = pool ? R"(
    %p = GlobalAveragePool(%yd)  # pool
    %pq = QuantizeLinear(%p, %sy, %zy)  # p_q
    %pd = DequantizeLinear(%pq, %sy, %zy)  # p_dq
    %out = Relu(%pd)  # relu
    output %out: float32[1,4,1,1]
  )"
                                : R"(
    %out = Relu(%yd)  # relu
    output %out: float32[1,4,10,9]
  )";
  Graph g = parseGraph(std::string(R"(
    graph qdq_conv
    opset "" 13
    input %x: float32[1,3,12,11]
    init %wq: int8[4,3,3,3]
    init %sx: float32[] = {0.02}
    init %zx: int8[] = {0}
    init %sw: float32[] = {0.01}
    init %zw: int8[] = {0}
    init %sy: float32[] = {0.05}
    init %zy: int8[] = {0}
    %xq = QuantizeLinear(%x, %sx, %zx)  # x_q
    %xd = DequantizeLinear(%xq, %sx, %zx)  # x_dq
    %wd = DequantizeLinear(%wq, %sw, %zw)  # w_dq
    %c = Conv(%xd, %wd)  # conv
    %y = QuantizeLinear(%c, %sy, %zy)  # y_q
    %yd = DequantizeLinear(%y, %sy, %zy)  # y_dq
  )") + tail + (expose_levels ? "output %y: int8[1,4,10,9]\n" : ""));
  at::manual_seed(5);
  g.findValue("wq")->setInitializer(at::randint(-100, 100, {4, 3, 3, 3}).to(at::kChar));
  return g;
}

verify::OrtRunner ortAt(verify::OrtOptimization level) {
  verify::OrtRunnerOptions options;
  options.ort_dir = testOrtDir();
  options.optimization = level;
  return verify::OrtRunner(options);
}

// Op counts of an ONNX file as written (ORT's optimized graphs hold com.microsoft ops qforge's
// importer need not know).
std::map<std::string, int> opCountsOfFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  onnx::ModelProto model;
  EXPECT_TRUE(model.ParseFromIstream(&in)) << path;
  std::map<std::string, int> counts;
  for (const onnx::NodeProto& n : model.graph().node())
    ++counts[n.op_type()];
  return counts;
}

at::Tensor sampleInput() {
  at::manual_seed(6);
  return at::randn({1, 3, 12, 11});
}

TEST(OrtObservedModel, ExposingALevelInTheFileStopsOnnxRuntimeFusingItsConv) {
  if (!ortAvailable("the observed-model test")) GTEST_SKIP();
  const std::string dir = makeTempDir("ort_observed");
  exportOnnxFile(qdqConv(false), dir + "/plain.onnx");
  exportOnnxFile(qdqConv(true), dir + "/exposed.onnx");
  const verify::OrtRunner ort = ortAt(verify::OrtOptimization::All);
  ort.saveOptimized(dir + "/plain.onnx", dir + "/plain.opt.onnx");
  ort.saveOptimized(dir + "/exposed.onnx", dir + "/exposed.opt.onnx");
  // What the trace used to run: no QLinearConv once y is an output; what verify judges: one.
  EXPECT_EQ(opCountsOfFile(dir + "/plain.opt.onnx")["QLinearConv"], 1);
  EXPECT_EQ(opCountsOfFile(dir + "/exposed.opt.onnx")["QLinearConv"], 0);

  const verify::OrtObservedModel observed(ort, dir + "/plain.onnx");
  EXPECT_NE(observed.writer("y").find("QLinearConv"), std::string::npos) << observed.writer("y");
  EXPECT_EQ(observed.writer("xq").rfind("QuantizeLinear", 0), 0u) << observed.writer("xq");
}

// The Conv's expected levels on `x`: the input on its int8 grid, the product in double, rounded
// to the output grid; within one level of ORT's (requantization ties).
void expectConvLevels(const Graph& g, const at::Tensor& x, const at::Tensor& levels) {
  const at::Tensor xq = (x.to(at::kDouble) / kInputScale).round().clamp(-128, 127);
  const at::Tensor w = g.findValue("wq")->initializer().to(at::kDouble) * kWeightScale;
  const at::Tensor want = (at::conv2d(xq * kInputScale, w) / kOutputScale).round().clamp(-128, 127);
  ASSERT_EQ(levels.sizes(), want.sizes());
  const at::Tensor apart = (levels.to(at::kDouble) - want).abs();
  EXPECT_LE(apart.max().item<double>(), 1.0);
  EXPECT_LT(apart.gt(0).sum().item<int64_t>(), 4) << "of " << apart.numel();
}

TEST(OrtObservedModel, LevelsAreTheRunsOwnOnTheExportedZeroPoint) {
  if (!ortAvailable("the observed-model test")) GTEST_SKIP();
  const std::string dir = makeTempDir("ort_observed");
  const Graph g = qdqConv(false);
  exportOnnxFile(g, dir + "/plain.onnx");
  const verify::OrtRunner ort = ortAt(verify::OrtOptimization::All);
  const at::Tensor x = sampleInput();
  const verify::OrtObservedModel observed(ort, dir + "/plain.onnx");
  const TensorMap got = observed.run({{"x", x}}, {"xq", "y"});
  ASSERT_EQ(got.count("y"), 1u);
  const at::Tensor y = got.at("y").to(at::kInt);
  EXPECT_GE(y.min().item<int>(), -128);
  EXPECT_LE(y.max().item<int>(), 127);

  // The same run: relu(levels * scale) is the model's output in ORT bit for bit.
  const at::Tensor out = ort.run(dir + "/plain.onnx", {{"x", x}}).at("out");
  EXPECT_TRUE(at::equal(at::relu(y.to(at::kFloat) * static_cast<float>(kOutputScale)), out));

  const at::Tensor xq = (x.to(at::kDouble) / kInputScale).round().clamp(-128, 127);
  EXPECT_TRUE(at::equal(got.at("xq").to(at::kDouble), xq));
  expectConvLevels(g, x, y);
}

TEST(OrtObservedModel, AFusedAwayLevelIsTheKernelsOutputInTheModelsLayout) {
  if (!ortAvailable("the observed-model test")) GTEST_SKIP();
  const std::string dir = makeTempDir("ort_observed");
  const Graph g = qdqConv(false, true);
  exportOnnxFile(g, dir + "/pooled.onnx");
  const verify::OrtRunner ort = ortAt(verify::OrtOptimization::All);
  ort.saveOptimized(dir + "/pooled.onnx", dir + "/pooled.opt.onnx");
  std::map<std::string, int> ops = opCountsOfFile(dir + "/pooled.opt.onnx");
  // Nothing of y's QuantizeLinear/DequantizeLinear is left: the two kernels pass y between them.
  EXPECT_EQ(ops["QLinearConv"], 1);
  EXPECT_EQ(ops["QLinearGlobalAveragePool"], 1);
  EXPECT_EQ(ops["QuantizeLinear"] + ops["DequantizeLinear"], 2)
      << "x's QuantizeLinear, p's DequantizeLinear";

  const verify::OrtObservedModel observed(ort, dir + "/pooled.onnx");
  EXPECT_NE(observed.writer("y").find("QLinearConv"), std::string::npos) << observed.writer("y");
  const at::Tensor x = sampleInput();
  const TensorMap got = observed.run({{"x", x}}, {"y", "pq"});
  ASSERT_EQ(got.count("y"), 1u);
  // ORT holds y channels-last ([1, 10, 9, 4]); it comes back as the model's [1, 4, 10, 9].
  expectConvLevels(g, x, got.at("y"));
  // The pooled levels: the mean of y's, requantized on the same grid, ties at most one off.
  const at::Tensor pooled = got.at("y").to(at::kDouble).mean({2, 3}, true).round();
  EXPECT_LE((got.at("pq").to(at::kDouble) - pooled).abs().max().item<double>(), 1.0);
}

// Two pairs in a row of one type: ORT merges them (DoubleQDQPairsRemover), and the second pair's
// levels come from the first QuantizeLinear, which the writer says. Written in the other type
// (deploy/ort_double_qdq_guard.h) the pairs stay, on the file's zero point.
TEST(OrtObservedModel, AMergedPairIsNamedAndARetypedOneKeepsItsFilesZeroPoint) {
  if (!ortAvailable("the observed-model test")) GTEST_SKIP();
  const std::string dir = makeTempDir("ort_observed");
  Graph g = parseGraph(R"(
    graph two_pairs
    opset "" 13
    input %x: float32[1,64]
    init %s1: float32[] = {0.03}
    init %s2: float32[] = {0.02}
    init %z: int8[] = {0}
    %q1 = QuantizeLinear(%x, %s1, %z)  # q1
    %d1 = DequantizeLinear(%q1, %s1, %z)  # d1
    %q2 = QuantizeLinear(%d1, %s2, %z)  # q2
    %d2 = DequantizeLinear(%q2, %s2, %z)  # d2
    %y = Relu(%d2)  # relu
    output %y: float32[1,64]
  )");
  exportOnnxFile(g, dir + "/merged.onnx");
  deploy::keepDoubleQdqPairsApart(g);
  g.eliminateDeadCode();
  exportOnnxFile(g, dir + "/kept.onnx");
  const verify::OrtRunner ort = ortAt(verify::OrtOptimization::All);

  const verify::OrtObservedModel merged(ort, dir + "/merged.onnx");
  EXPECT_NE(merged.writer("q2").find("DoubleQDQPairsRemover"), std::string::npos)
      << merged.writer("q2");
  EXPECT_EQ(merged.exportedZeroPoint("q2"), 0);

  const verify::OrtObservedModel kept(ort, dir + "/kept.onnx");
  EXPECT_EQ(kept.writer("q2").find("DoubleQDQPairsRemover"), std::string::npos)
      << kept.writer("q2");
  EXPECT_EQ(kept.exportedZeroPoint("q2"), 128);
  EXPECT_EQ(kept.exportedZeroPoint("d2"), std::nullopt) << "a DequantizeLinear writes no levels";
  // The second rounding on the first one's grid, written out: levels of 0.02 around 128.
  const at::Tensor x = at::linspace(-2.5, 2.5, 64).reshape({1, 64});
  const at::Tensor first = x.div(0.03f).round().clamp(-128, 127).mul(0.03f);
  const at::Tensor want = first.div(0.02f).round().clamp(-128, 127).add(128);
  const TensorMap got = kept.run({{"x", x}}, {"q2"});
  ASSERT_EQ(got.count("q2"), 1u);
  EXPECT_TRUE(at::equal(got.at("q2").to(at::kFloat), want));
}

// A float Conv reading a channels-last input (tf2onnx's Transpose to NCHW): ORT runs it in its
// blocked NCHWc layout, between a ReorderInput that takes the NHWC input (channels_last = 1) and a
// ReorderOutput back to NCHW (channels_last = 0). The levels after it are in the model's layout;
// read as channels-last, none of M-LSD's 16 quantized tensors lined up and the trace was empty.
TEST(OrtObservedModel, TensorsAfterOrtsBlockedFloatConvAreInTheModelsLayout) {
  if (!ortAvailable("the observed-model test")) GTEST_SKIP();
  const std::string dir = makeTempDir("ort_observed");
  Graph g = parseGraph(R"(
    graph nhwc_input
    opset "" 13
    input %x: float32[1,8,8,16]
    init %w: float32[16,16,3,3]
    init %s: float32[] = {0.05}
    init %z: int8[] = {0}
    %xt = Transpose[perm=[0,3,1,2]](%x)  # to_nchw
    %c = Conv[pads=[1,1,1,1]](%xt, %w)  # conv
    %cq = QuantizeLinear(%c, %s, %z)  # c_q
    %y = DequantizeLinear(%cq, %s, %z)  # c_dq
    output %y: float32[1,16,8,8]
  )");
  at::manual_seed(7);
  g.findValue("w")->setInitializer(at::randn({16, 16, 3, 3}) * 0.1);
  exportOnnxFile(g, dir + "/nhwc.onnx");
  const verify::OrtRunner ort = ortAt(verify::OrtOptimization::All);
  ort.saveOptimized(dir + "/nhwc.onnx", dir + "/nhwc.opt.onnx");
  std::map<std::string, int> ops = opCountsOfFile(dir + "/nhwc.opt.onnx");
  EXPECT_EQ(ops["ReorderInput"], 1) << "ORT no longer runs this Conv in NCHWc";
  EXPECT_EQ(ops["ReorderOutput"], 1);

  const at::Tensor x = at::randn({1, 8, 8, 16});
  const verify::OrtObservedModel observed(ort, dir + "/nhwc.onnx");
  const TensorMap got = observed.run({{"x", x}}, {"cq"});
  ASSERT_EQ(got.count("cq"), 1u);
  // The same run's output is those levels times the scale, element for element.
  const at::Tensor out = ort.run(dir + "/nhwc.onnx", {{"x", x}}).at("y");
  ASSERT_EQ(got.at("cq").sizes(), out.sizes());
  EXPECT_TRUE(at::equal(got.at("cq").to(at::kFloat) * 0.05f, out));
}

// A float Conv -> Relu -> MaxPool quantized after the MaxPool only (as Academic places it): ORT
// moves the QuantizeLinear before the MaxPool, fuses the Conv into a QLinearConv and runs the
// MaxPool on its levels channels-last (NhwcMaxPool); nothing of the QuantizeLinear is left. The
// MaxPool's levels are the run's; unlocated, the Conv reading them could not be rerun on ORT's
// inputs (shufflenet on Academic failed verify so).
TEST(OrtObservedModel, LevelsAMaxPoolMovesAreFoundOnItsInputsGrid) {
  if (!ortAvailable("the observed-model test")) GTEST_SKIP();
  const std::string dir = makeTempDir("ort_observed");
  Graph g = parseGraph(R"(
    graph pooled_levels
    opset "" 13
    input %x: float32[1,3,12,12]
    init %wq: int8[8,3,3,3]
    init %w2q: int8[8,8,1,1]
    init %sx: float32[] = {0.02}
    init %zx: int8[] = {0}
    init %sw: float32[] = {0.01}
    init %zw: int8[] = {0}
    init %sm: float32[] = {0.03}
    init %zm: uint8[] = {0}
    init %sy: float32[] = {0.05}
    init %zy: int8[] = {0}
    %xq = QuantizeLinear(%x, %sx, %zx)  # x_q
    %xd = DequantizeLinear(%xq, %sx, %zx)  # x_dq
    %wd = DequantizeLinear(%wq, %sw, %zw)  # w_dq
    %c = Conv[pads=[1,1,1,1]](%xd, %wd)  # conv
    %r = Relu(%c)  # relu
    %m = MaxPool[kernel_shape=[3,3], strides=[2,2], pads=[1,1,1,1]](%r)  # pool
    %mq = QuantizeLinear(%m, %sm, %zm)  # m_q
    %md = DequantizeLinear(%mq, %sm, %zm)  # m_dq
    %w2d = DequantizeLinear(%w2q, %sw, %zw)  # w2_dq
    %c2 = Conv(%md, %w2d)  # conv2
    %yq = QuantizeLinear(%c2, %sy, %zy)  # y_q
    %y = DequantizeLinear(%yq, %sy, %zy)  # y_dq
    output %y: float32[1,8,6,6]
  )");
  at::manual_seed(8);
  g.findValue("wq")->setInitializer(at::randint(-100, 100, {8, 3, 3, 3}).to(at::kChar));
  g.findValue("w2q")->setInitializer(at::randint(-100, 100, {8, 8, 1, 1}).to(at::kChar));
  exportOnnxFile(g, dir + "/pooled.onnx");
  const verify::OrtRunner ort = ortAt(verify::OrtOptimization::All);
  ort.saveOptimized(dir + "/pooled.onnx", dir + "/pooled.opt.onnx");
  std::map<std::string, int> ops = opCountsOfFile(dir + "/pooled.opt.onnx");
  EXPECT_EQ(ops["QLinearConv"], 2) << "ORT no longer fuses the Conv before the MaxPool";
  EXPECT_EQ(ops["NhwcMaxPool"], 1);

  const verify::OrtObservedModel observed(ort, dir + "/pooled.onnx");
  EXPECT_NE(observed.writer("mq").find("NhwcMaxPool"), std::string::npos) << observed.writer("mq");
  const at::Tensor x = at::randn({1, 3, 12, 12});
  const TensorMap got = observed.run({{"x", x}}, {"mq"});
  ASSERT_EQ(got.count("mq"), 1u);
  // Closed form: the Conv on the grids in double, Relu, MaxPool, rounded onto m's grid; within
  // one level of ORT's (its requantization at ties).
  const at::Tensor xq = (x.to(at::kDouble) / 0.02).round().clamp(-128, 127);
  const at::Tensor w = g.findValue("wq")->initializer().to(at::kDouble) * 0.01;
  const at::Tensor pooled =
      at::max_pool2d(at::relu(at::conv2d(xq * 0.02, w, {}, 1, 1)), {3, 3}, {2, 2}, {1, 1});
  const at::Tensor want = (pooled / 0.03).round().clamp(0, 255);
  ASSERT_EQ(got.at("mq").sizes(), want.sizes());
  const at::Tensor apart = (got.at("mq").to(at::kDouble) - want).abs();
  EXPECT_LE(apart.max().item<double>(), 1.0);
  EXPECT_LT(apart.gt(0).sum().item<int64_t>(), 4) << "of " << apart.numel();
  EXPECT_GT(want.gt(0).sum().item<int64_t>(), want.numel() / 4) << "a test of mostly zeros";
}

TEST(OrtObservedModel, TensorsOrtDoesNotHaveAreLeftOutAndBadModelsRefused) {
  if (!ortAvailable("the observed-model test")) GTEST_SKIP();
  const std::string dir = makeTempDir("ort_observed");
  exportOnnxFile(qdqConv(false), dir + "/plain.onnx");
  const verify::OrtRunner ort = ortAt(verify::OrtOptimization::All);
  const verify::OrtObservedModel observed(ort, dir + "/plain.onnx");
  const TensorMap got = observed.run({{"x", sampleInput()}}, {"no_such_tensor", "y"});
  EXPECT_EQ(got.count("no_such_tensor"), 0u);
  EXPECT_EQ(got.count("y"), 1u);
  EXPECT_EQ(observed.writer("no_such_tensor"), "");

  {
    std::ofstream bad(dir + "/bad.onnx");
    bad << "not a model";
  }
  try {
    verify::OrtObservedModel refused(ort, dir + "/bad.onnx");
    FAIL() << "ORT's optimized graph of a file that is no model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.onnx"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace qforge::testing
