// The emulation's LayerNormalization and com.microsoft SkipLayerNormalization against ONNX Runtime
// itself, bit for bit on every output (Y, Mean, InvStdDev; SkipLayerNormalization's sum), for
// rows shorter than one AVX2 register, whole registers and registers with a remainder, with and
// without bias; each also against a closed form written here as scalar loops (a float64 mean in
// 4 lanes and centred squares in 8 fused lanes, or Welford's loop). ATen's layer norm, which the
// built-in table runs, rounds otherwise.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "exec/executor.h"
#include "exec/ort_emulation.h"
#include "ir/onnx_import.h"
#include "support/onnx_builder.h"
#include "support/ort_dir.h"
#include "verify/ort_runner.h"

namespace qforge::testing {
namespace {

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

verify::OrtRunner ort() {
  verify::OrtRunnerOptions options;
  options.ort_dir = testOrtDir();
  return verify::OrtRunner(options);
}

// Rows of mixed magnitudes around offsets far from zero, where the order of a sum shows.
at::Tensor rowsOfMixedMagnitude(int64_t row, int64_t seed) {
  at::manual_seed(seed);
  return at::randn({3, 49, row}) * at::rand({3, 49, 1}) * 50 + at::randn({3, 49, 1}) * 20;
}

struct Expected {
  at::Tensor y, mean, inverse_std_dev;
};

// Fills y, mean and inverse_std_dev row by row: `normalize(in, out, n)` writes one row of n
// values and returns its {mean, inverse standard deviation}.
template <typename Normalize>
Expected byRows(const at::Tensor& x, Normalize normalize) {
  const int64_t n = x.size(-1);
  const at::Tensor rows = x.contiguous().view({-1, n});
  Expected e{at::empty_like(rows), at::empty({rows.size(0)}), at::empty({rows.size(0)})};
  for (int64_t r = 0; r < rows.size(0); ++r) {
    const std::pair<float, float> stats =
        normalize(rows[r].data_ptr<float>(), e.y[r].data_ptr<float>(), n);
    e.mean[r] = stats.first;
    e.inverse_std_dev[r] = stats.second;
  }
  return e;
}

std::vector<float> valuesOf(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

// Welford's loop in float32, every operation rounded.
Expected welfordClosedForm(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& bias) {
  const std::vector<float> w = valuesOf(scale);
  const std::vector<float> b = bias.defined() ? valuesOf(bias) : std::vector<float>();
  return byRows(x, [&](const float* in, float* y, int64_t n) {
    float mean = 0, m2 = 0;
    for (int64_t k = 0; k < n; ++k) {
      const float d = in[k] - mean;
      mean += d / static_cast<float>(k + 1);
      const float after = in[k] - mean;
      m2 += d * after;  // the tests build without contracting a * b + c
    }
    const float std_dev = std::sqrt(m2 / static_cast<float>(n) + 1e-5f);
    for (int64_t h = 0; h < n; ++h) {
      y[h] = (in[h] - mean) / std_dev * w[h];
      if (!b.empty()) y[h] += b[h];
    }
    return std::make_pair(mean, 1.0f / std_dev);
  });
}

// MLAS's AVX2 kernel: the mean of a float64 sum in 4 lanes, the centred squares in 8 float lanes
// with fused multiply-adds, both folded (0+4, ...) then (0+2) + (1+3), remainders in order.
Expected mlasClosedForm(const at::Tensor& x, const at::Tensor& scale, const at::Tensor& bias) {
  const std::vector<float> w = valuesOf(scale);
  const std::vector<float> b = bias.defined() ? valuesOf(bias) : std::vector<float>();
  return byRows(x, [&](const float* in, float* y, int64_t n) {
    double quad[4] = {};
    int64_t h = 0;
    for (; h + 4 <= n; h += 4) {
      for (int l = 0; l < 4; ++l)
        quad[l] += in[h + l];
    }
    double sum = (quad[0] + quad[2]) + (quad[1] + quad[3]);
    for (; h < n; ++h)
      sum += in[h];
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    float lanes[8] = {};
    for (h = 0; h + 8 <= n; h += 8) {
      for (int l = 0; l < 8; ++l) {
        const float d = in[h + l] - mean;
        lanes[l] = std::fmaf(d, d, lanes[l]);
      }
    }
    for (int l = 0; l < 4; ++l)
      lanes[l] += lanes[l + 4];
    float squares = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3]);
    for (; h < n; ++h) {
      const float d = in[h] - mean;
      squares += d * d;
    }
    const float inverse = 1.0f / std::sqrt(squares / static_cast<float>(n) + 1e-5f);
    for (h = 0; h < n; ++h) {
      const float scaled = (in[h] - mean) * inverse;
      y[h] = b.empty() ? scaled * w[h] : std::fmaf(scaled, w[h], b[h]);
    }
    return std::make_pair(mean, inverse);
  });
}

std::string layerNormModel(int64_t row, const at::Tensor& scale, const at::Tensor& bias) {
  OnnxBuilder b(17);
  b.input("x", kFloat, {-1, 49, row})
      .output("y", kFloat, {})
      .output("mean", kFloat, {})
      .output("inv", kFloat, {});
  b.initializer("scale", scale);
  std::vector<std::string> inputs{"x", "scale"};
  if (bias.defined()) {
    b.initializer("bias", bias);
    inputs.push_back("bias");
  }
  addIntAttribute(b.node("LayerNormalization", inputs, {"y", "mean", "inv"}), "axis", -1);
  const std::string path = makeTempDir("ort-ln") + "/model.onnx";
  b.save(path);
  return path;
}

void expectEqual(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  const at::Tensor g = got.reshape(-1), w = want.reshape(-1);
  EXPECT_TRUE(at::equal(g, w)) << what << ": " << g.ne(w).sum().item<int64_t>() << " of "
                               << g.numel() << " differ";
}

// Rows under 8 run the Welford loop, rows of 8 and more MLAS's kernel (12, 20 and 100 with a
// remainder after the registers).
TEST(OrtLayerNorm, LayerNormalizationEqualsOnnxRuntimeOnEveryOutput) {
  bool aten_differs = false;
  for (int64_t row : {3, 5, 8, 12, 20, 48, 100}) {
    for (bool with_bias : {true, false}) {
      const std::string what = std::to_string(row) + (with_bias ? " with bias" : " no bias");
      const at::Tensor x = rowsOfMixedMagnitude(row, row);
      const at::Tensor scale = at::randn({row});
      const at::Tensor bias = with_bias ? at::randn({row}) : at::Tensor();
      const std::string model = layerNormModel(row, scale, bias);
      const TensorMap expected = ort().run(model, {{"x", x}});
      Graph g = importOnnxFile(model);
      const TensorMap emulated = Executor(g, {}, ortEmulationRegistry()).run({{"x", x}});
      expectEqual(emulated.at("y"), expected.at("y"), what + ": Y");
      expectEqual(emulated.at("mean"), expected.at("mean"), what + ": Mean");
      expectEqual(emulated.at("inv"), expected.at("inv"), what + ": InvStdDev");

      const Expected closed =
          row < 8 ? welfordClosedForm(x, scale, bias) : mlasClosedForm(x, scale, bias);
      expectEqual(closed.y, expected.at("y"), what + ": closed-form Y");
      expectEqual(closed.inverse_std_dev, expected.at("inv"), what + ": closed-form InvStdDev");

      Graph plain = importOnnxFile(model);
      const at::Tensor builtin = Executor(plain).run({{"x", x}}).at("y");
      aten_differs = aten_differs || !at::equal(builtin, expected.at("y"));
    }
  }
  EXPECT_TRUE(aten_differs);
}

// A LayerNorm written out at opset 13: ORT fuses it into a LayerNormalization in the ONNX domain,
// an op that opset lacks, and the emulation runs ORT's graph as ORT does.
TEST(OrtLayerNorm, OrtsFusedLayerNormalizationRunsAtAnOpsetBefore17) {
  const int64_t row = 52;
  OnnxBuilder b;
  b.input("x", kFloat, {-1, 49, row}).output("y", kFloat, {-1, 49, row});
  b.initializer("two", at::scalar_tensor(2.0f));
  b.initializer("eps", at::scalar_tensor(1e-5f));
  at::manual_seed(3);
  const at::Tensor scale = at::randn({row}), bias = at::randn({row});
  b.initializer("w", scale);
  b.initializer("b", bias);
  addIntsAttribute(b.node("ReduceMean", {"x"}, {"mean"}), "axes", {-1});
  b.node("Sub", {"x", "mean"}, {"centred"});
  b.node("Pow", {"centred", "two"}, {"squares"});
  addIntsAttribute(b.node("ReduceMean", {"squares"}, {"variance"}), "axes", {-1});
  b.node("Add", {"variance", "eps"}, {"shifted"});
  b.node("Sqrt", {"shifted"}, {"deviation"});
  b.node("Div", {"centred", "deviation"}, {"normed"});
  b.node("Mul", {"normed", "w"}, {"scaled"});
  b.node("Add", {"scaled", "b"}, {"y"});
  const std::string model = makeTempDir("ort-ln13") + "/model.onnx";
  b.save(model);

  onnx::ModelProto optimized = ort().optimizedModel(model);
  ASSERT_EQ(optimized.graph().node_size(), 1);
  ASSERT_EQ(optimized.graph().node(0).op_type(), "LayerNormalization");
  const at::Tensor x = rowsOfMixedMagnitude(row, 11);
  const at::Tensor expected = ort().run(model, {{"x", x}}).at("y");
  Graph g = importOnnxModel(optimized, "");
  const at::Tensor emulated = Executor(g, {}, ortEmulationRegistry()).run({{"x", x}}).at("y");
  expectEqual(emulated, expected, "ORT's graph on the emulation");
  expectEqual(mlasClosedForm(x, scale, bias).y, expected, "closed form");
  // The built-in table has no LayerNormalization before opset 17.
  Graph builtin = importOnnxModel(optimized, "");
  EXPECT_THROW(Executor(builtin).run({{"x", x}}), Error);
}

std::string skipLayerNormModel(int64_t row, const std::vector<int64_t>& skip_shape,
                               const at::Tensor& gamma, const at::Tensor& beta,
                               const at::Tensor& bias) {
  OnnxBuilder b;
  b.model().add_opset_import()->set_domain("com.microsoft");
  b.model().mutable_opset_import(1)->set_version(1);
  b.input("x", kFloat, {-1, 49, row}).input("skip", kFloat, skip_shape);
  b.output("y", kFloat, {}).output("mean", kFloat, {}).output("inv", kFloat, {});
  b.output("sum", kFloat, {});
  b.initializer("gamma", gamma).initializer("beta", beta);
  std::vector<std::string> inputs{"x", "skip", "gamma", "beta"};
  if (bias.defined()) {
    b.initializer("bias", bias);
    inputs.push_back("bias");
  }
  onnx::NodeProto& node = b.node("SkipLayerNormalization", inputs, {"y", "mean", "inv", "sum"});
  node.set_domain("com.microsoft");
  addFloatAttribute(node, "epsilon", 1e-5f);
  const std::string path = makeTempDir("ort-skipln") + "/model.onnx";
  b.save(path);
  return path;
}

// Welford's loop at every row length, on input + skip (+ bias); the skip repeats over the batch
// when it has no batch axis.
TEST(OrtLayerNorm, SkipLayerNormalizationEqualsOnnxRuntimeOnEveryOutput) {
  for (int64_t row : {5, 48, 20}) {
    for (bool with_bias : {false, true}) {
      const std::vector<int64_t> skip_shape =
          row == 20 ? std::vector<int64_t>{49, row} : std::vector<int64_t>{3, 49, row};
      const std::string what = std::to_string(row) + (with_bias ? " with bias" : " no bias");
      const at::Tensor x = rowsOfMixedMagnitude(row, 100 + row);
      const at::Tensor skip = at::randn(skip_shape) * 3;
      const at::Tensor gamma = at::randn({row}), beta = at::randn({row});
      const at::Tensor bias = with_bias ? at::randn({row}) : at::Tensor();
      const std::string model = skipLayerNormModel(row, skip_shape, gamma, beta, bias);
      const TensorMap expected = ort().run(model, {{"x", x}, {"skip", skip}});
      Graph g = importOnnxFile(model);
      const TensorMap emulated =
          Executor(g, {}, ortEmulationRegistry()).run({{"x", x}, {"skip", skip}});
      for (const char* name : {"y", "mean", "inv", "sum"})
        expectEqual(emulated.at(name), expected.at(name), what + ": " + name);

      at::Tensor sum = x + skip;
      if (with_bias) sum = sum + bias;
      const Expected closed = welfordClosedForm(sum, gamma, beta);
      expectEqual(closed.y, expected.at("y"), what + ": closed-form Y");
      expectEqual(closed.mean, expected.at("mean"), what + ": closed-form mean");
      if (row >= 8) {  // LayerNormalization's kernel is not SkipLayerNormalization's
        EXPECT_FALSE(at::equal(mlasClosedForm(sum, gamma, beta).y, expected.at("y"))) << what;
      }
    }
  }
}

TEST(OrtLayerNorm, AScaleOfAnotherSizeFailsNamingTheInput) {
  const std::string model = layerNormModel(8, at::ones({7}), at::Tensor());
  Graph g = importOnnxFile(model);
  try {
    Executor(g, {}, ortEmulationRegistry()).run({{"x", at::ones({2, 49, 8})}});
    FAIL() << "a scale of 7 values normalized rows of 8";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input 1 must hold 8 float32 values"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace qforge::testing
