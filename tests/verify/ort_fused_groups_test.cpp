// The float groups ONNX Runtime fuses into kernels of other arithmetic, emulated as ORT fused
// them (verify/ort_fused_groups): an RMSNorm written out as ops (ORT's SimplifiedLayerNormFusion)
// and a MatMul of two dequantized tensors
// with no QuantizeLinear after it (MatMulIntegerToFloat). Each test compares with ONNX Runtime
// itself and with a closed form, and shows the unfused emulation differs from ORT there.
#include "verify/ort_fused_groups.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "exec/executor.h"
#include "exec/ort_emulation.h"
#include "ir/onnx_import.h"
#include "support/onnx_builder.h"
#include "support/ort_dir.h"
#include "verify/ort_runner.h"

namespace qforge::testing {
namespace {

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

verify::OrtRunner ort(verify::OrtOptimization level = verify::OrtOptimization::All) {
  verify::OrtRunnerOptions options;
  options.ort_dir = testOrtDir();
  options.optimization = level;
  return verify::OrtRunner(options);
}

int count(const Graph& g, const std::string& op_type) {
  int n = 0;
  for (const Node* node : g.nodes())
    n += node->opType() == op_type;
  return n;
}

// LayerNorm as torch.onnx writes it, y = (x - mean) / sqrt(mean((x - mean)^2) + eps) * w + b,
// or without the mean and the bias (`rms`): y = x / sqrt(mean(x^2) + eps) * w, an RMSNorm.
std::string normModel(int64_t row, const at::Tensor& weight, bool rms) {
  OnnxBuilder b;
  b.input("x", kFloat, {-1, 49, row}).output("y", kFloat, {-1, 49, row});
  b.initializer("two", at::scalar_tensor(2.0f));
  b.initializer("eps", at::scalar_tensor(1e-5f));
  b.initializer("w", weight);
  if (!rms) {
    b.initializer("b", at::full({row}, 0.25f));
    addIntsAttribute(b.node("ReduceMean", {"x"}, {"mean"}), "axes", {-1});
    b.node("Sub", {"x", "mean"}, {"centred"});
  }
  const std::string x = rms ? "x" : "centred";
  b.node("Pow", {x, "two"}, {"squares"});
  addIntsAttribute(b.node("ReduceMean", {"squares"}, {"variance"}), "axes", {-1});
  b.node("Add", {"variance", "eps"}, {"shifted"});
  b.node("Sqrt", {"shifted"}, {"deviation"});
  b.node("Div", {x, "deviation"}, {"normed"});
  b.node("Mul", {"normed", "w"}, {rms ? "y" : "scaled"});
  if (!rms) b.node("Add", {"scaled", "b"}, {"y"});
  const std::string path = makeTempDir("ort-layernorm") + "/model.onnx";
  b.save(path);
  return path;
}

// The closed form of ORT 1.30's SimplifiedLayerNormalization, as measured: rows of 8 or more sum
// x * x in 8 float lanes with fused multiply-adds, fold them in halves, add the rest one by one,
// and multiply x by 1 / sqrt(sum / n + eps); shorter rows add every square in order and divide.
at::Tensor rmsNorm(const at::Tensor& input, const at::Tensor& w) {
  const int64_t row = input.size(-1);
  const at::Tensor rows = input.contiguous().view({-1, row});
  at::Tensor y = at::empty_like(rows);
  auto x = rows.accessor<float, 2>();
  auto out = y.accessor<float, 2>();
  auto scale = w.accessor<float, 1>();
  const int64_t packets = row / 8;
  for (int64_t r = 0; r < rows.size(0); ++r) {
    float lanes[8] = {};
    for (int64_t p = 0; p < packets; ++p) {
      for (int l = 0; l < 8; ++l)
        lanes[l] = std::fmaf(x[r][p * 8 + l], x[r][p * 8 + l], lanes[l]);
    }
    for (int width = 4; width >= 1; width /= 2) {
      for (int l = 0; l < width; ++l)
        lanes[l] += lanes[l + width];
    }
    float sum = lanes[0];
    for (int64_t h = packets * 8; h < row; ++h)
      sum += x[r][h] * x[r][h];  // the build keeps a * b + c unfused (-ffp-contract=off)
    const float root = std::sqrt(sum / static_cast<float>(row) + 1e-5f);
    const float inverse = 1.0f / root;
    for (int64_t h = 0; h < row; ++h)
      out[r][h] = (packets > 0 ? x[r][h] * inverse : x[r][h] / root) * scale[h];
  }
  return y.view(input.sizes());
}

// Widths a multiple of the lanes, with a remainder, and below one packet.
TEST(OrtFusedGroups, AnRmsNormWrittenOutRunsAsOrtsSimplifiedLayerNormalization) {
  for (int64_t row : {48, 52, 7}) {
    at::manual_seed(row);
    const at::Tensor x = at::randn({16, 49, row}) * at::exp(at::randn({16, 49, row}) * 2);
    const at::Tensor weight = at::randn({row});
    const std::string model = normModel(row, weight, true);
    const at::Tensor expected = ort().run(model, {{"x", x}}).at("y");

    Graph unfused = importOnnxFile(model);
    const at::Tensor before = Executor(unfused, {}, ortEmulationRegistry()).run({{"x", x}}).at("y");
    EXPECT_FALSE(at::equal(before, expected)) << row;  // Eigen's lanes sum otherwise

    Graph g = importOnnxFile(model);
    const std::vector<std::string> fused = verify::fuseAsOrtDid(g, ort().optimizedModel(model));
    ASSERT_EQ(fused.size(), 1u) << row;
    EXPECT_EQ(fused[0], "SimplifiedLayerNormalization 'y'");
    EXPECT_EQ(count(g, "SimplifiedLayerNormalization"), 1);
    EXPECT_EQ(count(g, "Pow") + count(g, "Sqrt") + count(g, "Div") + count(g, "ReduceMean"), 0);
    const at::Tensor emulated = Executor(g, {}, ortEmulationRegistry()).run({{"x", x}}).at("y");
    EXPECT_TRUE(at::equal(emulated, expected))
        << row << ": " << (emulated - expected).ne(0).sum().item<int64_t>() << " elements differ";
    EXPECT_TRUE(at::equal(emulated, rmsNorm(x, weight))) << row;
  }
}

// ORT fuses a whole LayerNorm into LayerNormalization; rewriting qforge's own graph leaves that
// group as written (ORT's kernel runs where the emulation runs ORT's graph: ort_layer_norm_test).
TEST(OrtFusedGroups, AWholeLayerNormIsLeftUnfused) {
  const std::string model = normModel(48, at::ones({48}), false);
  const onnx::ModelProto optimized = ort().optimizedModel(model);
  ASSERT_EQ(optimized.graph().node_size(), 1);
  EXPECT_EQ(optimized.graph().node(0).op_type(), "LayerNormalization");
  Graph g = importOnnxFile(model);
  const size_t nodes = g.nodeCount();
  EXPECT_TRUE(verify::fuseAsOrtDid(g, optimized).empty());
  EXPECT_EQ(g.nodeCount(), nodes);
}

TEST(OrtFusedGroups, NothingIsFusedWhereOrtFusedNothing) {
  const std::string model = normModel(48, at::ones({48}), true);
  Graph g = importOnnxFile(model);
  const size_t nodes = g.nodeCount();
  EXPECT_TRUE(verify::fuseAsOrtDid(g, ort(verify::OrtOptimization::Disabled).optimizedModel(model))
                  .empty());
  EXPECT_EQ(g.nodeCount(), nodes);
  EXPECT_EQ(count(g, "SimplifiedLayerNormalization"), 0);
}

// q @ k^T of attention with both operands dequantized from uint8 and no quantizer after it.
std::string dequantizedMatMulModel(float a_scale, float b_scale) {
  OnnxBuilder b;
  b.input("a", kFloat, {-1, 3, 10, 16}).input("b", kFloat, {-1, 3, 10, 16});
  b.output("y", kFloat, {-1, 3, 10, 10});
  b.initializer("a_scale", at::scalar_tensor(a_scale));
  b.initializer("a_zp", at::scalar_tensor(131, at::kByte));
  b.initializer("b_scale", at::scalar_tensor(b_scale));
  b.initializer("b_zp", at::scalar_tensor(117, at::kByte));
  b.node("QuantizeLinear", {"a", "a_scale", "a_zp"}, {"a_q"});
  b.node("DequantizeLinear", {"a_q", "a_scale", "a_zp"}, {"a_dq"});
  b.node("QuantizeLinear", {"b", "b_scale", "b_zp"}, {"b_q"});
  b.node("DequantizeLinear", {"b_q", "b_scale", "b_zp"}, {"b_dq"});
  addIntsAttribute(b.node("Transpose", {"b_dq"}, {"b_t"}), "perm", {0, 1, 3, 2});
  b.node("MatMul", {"a_dq", "b_t"}, {"y"}, "attn/MatMul");
  const std::string path = makeTempDir("ort-dq-matmul") + "/model.onnx";
  b.save(path);
  return path;
}

TEST(OrtFusedGroups, AMatMulOfTwoDequantizedTensorsRunsAsOrtsMatMulIntegerToFloat) {
  at::manual_seed(22);
  const float a_scale = 0.0371f;
  const float b_scale = 0.0213f;
  const at::Tensor a = at::randn({8, 3, 10, 16}) * 2;
  const at::Tensor b = at::randn({8, 3, 10, 16}) * 1.5;
  const std::string model = dequantizedMatMulModel(a_scale, b_scale);
  const at::Tensor expected = ort().run(model, {{"a", a}, {"b", b}}).at("y");

  Graph unfused = importOnnxFile(model);
  Executor plain(unfused, {}, ortEmulationRegistry());
  EXPECT_FALSE(at::equal(plain.run({{"a", a}, {"b", b}}).at("y"), expected));

  Graph g = importOnnxFile(model);
  const std::vector<std::string> fused = verify::fuseAsOrtDid(g, ort().optimizedModel(model));
  ASSERT_EQ(fused.size(), 1u);
  EXPECT_EQ(fused[0], "MatMulIntegerToFloat 'y'");
  EXPECT_EQ(count(g, "MatMulIntegerToFloat"), 1);
  EXPECT_EQ(count(g, "MatMul"), 0);
  const at::Tensor emulated =
      Executor(g, {}, ortEmulationRegistry()).run({{"a", a}, {"b", b}}).at("y");
  EXPECT_TRUE(at::equal(emulated, expected))
      << (emulated - expected).ne(0).sum().item<int64_t>() << " elements differ";

  // The closed form: the levels' exact integer product, to float, times a_scale * b_scale.
  const TensorMap levels = plain.run({{"a", a}, {"b", b}}, {"a_q", "b_q"});
  const at::Tensor sums = at::matmul(levels.at("a_q").to(at::kDouble) - 131,
                                     (levels.at("b_q").to(at::kDouble) - 117).transpose(2, 3));
  EXPECT_TRUE(at::equal(emulated, sums.to(at::kFloat) * (a_scale * b_scale)));
}

TEST(OrtFusedGroups, AMatMulWhoseOperandIsNotALevelOfTheFileIsLeftAsItIs) {
  const std::string model = dequantizedMatMulModel(0.0371f, 0.0213f);
  Graph g = importOnnxFile(model);
  // In the emulated file A passes a Relu after its DequantizeLinear: not levels any more.
  Node* matmul = g.findNode("attn/MatMul");
  Value* a = matmul->input(0);
  g.setInput(matmul, 0, g.addNode("Relu", {a}, {"a_relu"})->output(0));
  EXPECT_TRUE(verify::fuseAsOrtDid(g, ort().optimizedModel(model)).empty());
  EXPECT_EQ(count(g, "MatMul"), 1);
  EXPECT_EQ(count(g, "MatMulIntegerToFloat"), 0);
}

// A weight per column, int8 activations (ORT moves them to uint8 with zero points + 128, names
// the emulated file does not have): the parameters come from the file's own dequantizations.
TEST(OrtFusedGroups, APerColumnWeightAndInt8ActivationsRunAsOrtsMatMulIntegerToFloat) {
  at::manual_seed(24);
  const at::Tensor weight = at::randint(-127, 128, {16, 6}).to(at::kChar);
  const at::Tensor column_scales = at::rand({6}) * 0.02 + 0.005;
  OnnxBuilder b;
  b.input("a", kFloat, {-1, 10, 16}).output("y", kFloat, {-1, 10, 6});
  b.initializer("a_scale", at::scalar_tensor(0.05f));
  b.initializer("a_zp", at::scalar_tensor(3, at::kChar));
  b.initializer("w", weight).initializer("w_scale", column_scales);
  b.initializer("w_zp", at::zeros({6}, at::kChar));
  b.node("QuantizeLinear", {"a", "a_scale", "a_zp"}, {"a_q"});
  b.node("DequantizeLinear", {"a_q", "a_scale", "a_zp"}, {"a_dq"});
  addIntAttribute(b.node("DequantizeLinear", {"w", "w_scale", "w_zp"}, {"w_dq"}), "axis", 1);
  b.node("MatMul", {"a_dq", "w_dq"}, {"y"}, "fc/MatMul");
  const std::string model = makeTempDir("ort-dq-matmul-columns") + "/model.onnx";
  b.save(model);
  const at::Tensor a = at::randn({8, 10, 16}) * 3;
  const at::Tensor expected = ort().run(model, {{"a", a}}).at("y");

  Graph g = importOnnxFile(model);
  ASSERT_EQ(verify::fuseAsOrtDid(g, ort().optimizedModel(model)).size(), 1u);
  Executor emulation(g, {}, ortEmulationRegistry());
  const at::Tensor emulated = emulation.run({{"a", a}}).at("y");
  EXPECT_TRUE(at::equal(emulated, expected))
      << (emulated - expected).ne(0).sum().item<int64_t>() << " elements differ";
  // The closed form, per column: the exact integer sum, to float, times a_scale * w_scale[n].
  Graph plain = importOnnxFile(model);
  const at::Tensor levels = Executor(plain).run({{"a", a}}, {"a_q"}).at("a_q");
  const at::Tensor sums = at::matmul(levels.to(at::kDouble) - 3, weight.to(at::kDouble));
  EXPECT_TRUE(at::equal(emulated, sums.to(at::kFloat) * (0.05f * column_scales)));
}

}  // namespace
}  // namespace qforge::testing
