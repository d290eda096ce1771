// The emulation's com.microsoft QLinearSoftmax against ONNX Runtime itself on rows where the
// rounding of e * floor(1 / y_scale) / sum sits at a tie: one row of the zoo ViT's attention
// (levels, scales and zero point as its quantizers wrote them) in 64 orders, each order summing
// the table entries differently. ORT builds its exp table with ln(FLT_MAX / D) taken in float32;
// a closed form written here with that table equals ORT on every element, and the same closed form
// with the logarithm in float64 does not.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "exec/executor.h"
#include "exec/ort_emulation.h"
#include "ir/onnx_import.h"
#include "support/onnx_builder.h"
#include "support/ort_dir.h"
#include "verify/ort_runner.h"

namespace qforge::testing {
namespace {

constexpr float kXScale = 0.07542694f;
constexpr uint8_t kXZeroPoint = 161;
constexpr float kYScale = 0.0038232896f;

// Block 0's attention row whose last element ORT and a float64-ln table rounded differently.
const std::vector<uint8_t> kAttentionRow = {
    123, 131, 119, 146, 126, 144, 135, 124, 122, 142, 150, 133, 138, 140, 127, 115, 137,
    133, 127, 141, 143, 129, 100, 154, 150, 128, 139, 149, 141, 107, 165, 164, 139, 139,
    141, 126, 114, 120, 136, 129, 140, 127, 121, 136, 128, 134, 129, 145, 143};

std::string softmaxModel(int64_t row) {
  OnnxBuilder b;
  b.model().add_opset_import()->set_domain("com.microsoft");
  b.model().mutable_opset_import(1)->set_version(1);
  b.input("x", onnx::TensorProto::UINT8, {-1, row}).output("y", onnx::TensorProto::UINT8, {});
  b.initializer("xs", at::scalar_tensor(kXScale));
  b.initializer("xz", at::scalar_tensor(kXZeroPoint, at::kByte));
  b.initializer("ys", at::scalar_tensor(kYScale));
  b.initializer("yz", at::scalar_tensor(0, at::kByte));
  onnx::NodeProto& node = b.node("QLinearSoftmax", {"x", "xs", "xz", "ys", "yz"}, {"y"});
  node.set_domain("com.microsoft");
  addIntAttribute(node, "opset", 13);
  addIntAttribute(node, "axis", -1);
  const std::string path = makeTempDir("ort-qlsoftmax") + "/model.onnx";
  b.save(path);
  return path;
}

// ORT's kernel as its source states it: table entry i = exp((i - 255 + shift) * x_scale) with
// shift = max(0, ln(FLT_MAX / D) - 5) / x_scale, a float sum in row order, then
// nearbyint(e * floor(1 / y_scale) / sum). `float_log`: the logarithm of a float, as ORT takes it.
at::Tensor closedForm(const at::Tensor& x, bool float_log) {
  const int64_t d = x.size(1);
  const float share = std::numeric_limits<float>::max() / static_cast<float>(d);
  const double ln =
      float_log ? static_cast<double>(std::log(share)) : std::log(static_cast<double>(share));
  const double shift = std::max(0.0, ln - 5.0) / static_cast<double>(kXScale);
  float table[256];
  for (int i = 0; i < 256; ++i)
    table[i] = static_cast<float>(std::exp((i - 255.0 + shift) * static_cast<double>(kXScale)));
  const float multiplier = std::floor(1.0f / kYScale);
  at::Tensor y = at::empty_like(x);
  auto in = x.accessor<uint8_t, 2>();
  auto out = y.accessor<uint8_t, 2>();
  for (int64_t r = 0; r < x.size(0); ++r) {
    int largest = 0;
    for (int64_t k = 0; k < d; ++k)
      largest = std::max<int>(largest, in[r][k]);
    float sum = 0;
    for (int64_t k = 0; k < d; ++k)
      sum += table[255 - largest + in[r][k]];
    for (int64_t k = 0; k < d; ++k) {
      const float q = std::nearbyint(table[255 - largest + in[r][k]] * multiplier / sum);
      out[r][k] = static_cast<uint8_t>(std::min(q, 255.0f));
    }
  }
  return y;
}

TEST(OrtQLinearSoftmax, ARowAtATieEqualsOnnxRuntimeInEveryOrder) {
  const int64_t d = static_cast<int64_t>(kAttentionRow.size());
  const at::Tensor row =
      at::tensor(std::vector<int64_t>(kAttentionRow.begin(), kAttentionRow.end()));
  at::manual_seed(5);
  std::vector<at::Tensor> orders{row};
  for (int k = 1; k < 64; ++k)
    orders.push_back(row.index_select(0, at::randperm(d)));
  const at::Tensor x = at::stack(orders).to(at::kByte);

  const std::string model = softmaxModel(d);
  verify::OrtRunnerOptions options;
  options.ort_dir = testOrtDir();
  const at::Tensor expected = verify::OrtRunner(options).run(model, {{"x", x}}).at("y");
  Graph g = importOnnxFile(model);
  const at::Tensor emulated = Executor(g, {}, ortEmulationRegistry()).run({{"x", x}}).at("y");
  EXPECT_TRUE(at::equal(emulated, expected))
      << emulated.ne(expected).sum().item<int64_t>() << " of " << x.numel() << " differ";
  EXPECT_TRUE(at::equal(closedForm(x, true), expected));
  // The float64 logarithm puts some of these ties on the other side.
  EXPECT_GT(closedForm(x, false).ne(expected).sum().item<int64_t>(), 0);
}

}  // namespace
}  // namespace qforge::testing
