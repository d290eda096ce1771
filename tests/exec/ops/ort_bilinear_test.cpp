// The built-in bilinear Resize against ONNX Runtime itself, bit for bit: on plateaus of equal
// quantized levels (where the order of the blend shows in the last bit, and an Equal of a map
// with its MaxPool turns on it), at integral and fractional scales up and down, from sizes and
// from scales, in every coordinate mode ORT computes alike; the autograd path and channels-last
// images give the same bits, and the gradient sums to the number of outputs each input feeds.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "exec/executor.h"
#include "exec/ops/ort_bilinear.h"
#include "ir/onnx_import.h"
#include "support/onnx_builder.h"
#include "support/ort_dir.h"
#include "verify/ort_runner.h"

namespace qforge::testing {
namespace {

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

// Resize (opset 13, linear) of x [1, 3, h, w] to `sizes` or by `scales`.
std::string resizeModel(const std::string& mode, const at::Tensor& x,
                        const std::vector<int64_t>& sizes, const std::vector<float>& scales) {
  OnnxBuilder b;
  b.input("x", kFloat, x.sizes().vec()).output("y", kFloat, {});
  b.initializer("roi", at::empty({0}));
  if (!sizes.empty()) {
    b.initializer("scales", at::empty({0}));
    b.initializer("sizes", at::tensor(sizes, at::kLong));
  } else {
    b.initializer("scales", at::tensor(scales, at::kFloat));
  }
  onnx::NodeProto& n =
      b.node("Resize",
             sizes.empty() ? std::vector<std::string>{"x", "roi", "scales"}
                           : std::vector<std::string>{"x", "roi", "scales", "sizes"},
             {"y"});
  auto* a = n.add_attribute();
  a->set_name("mode");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s("linear");
  a = n.add_attribute();
  a->set_name("coordinate_transformation_mode");
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(mode);
  const std::string path = makeTempDir("ort-bilinear") + "/model.onnx";
  b.save(path);
  return path;
}

// Quantized levels held over 2x2 blocks: plateaus of exactly equal values.
at::Tensor plateaus(int64_t h, int64_t w) {
  at::manual_seed(7);
  const at::Tensor levels = at::round(at::randn({1, 3, h / 2, w / 2}) * 20) * 0.0731f;
  return levels.repeat_interleave(2, 2).repeat_interleave(2, 3).contiguous();
}

struct Case {
  std::string mode;
  std::vector<int64_t> sizes;
  std::vector<float> scales;
};

// ORT's output of the Resize `c` of x, once the built-in Resize is checked equal to it bit for bit.
at::Tensor expectOrtsBits(const Case& c, const at::Tensor& x) {
  verify::OrtRunnerOptions options;
  options.ort_dir = testOrtDir();
  const std::string model = resizeModel(c.mode, x, c.sizes, c.scales);
  const at::Tensor ort = verify::OrtRunner(options).run(model, {{"x", x}}).at("y");
  Graph g = importOnnxFile(model);
  const at::Tensor ours = Executor(g).run({{"x", x}}).at("y");
  EXPECT_EQ(ours.sizes(), ort.sizes()) << c.mode;
  if (ours.sizes() == ort.sizes()) {
    EXPECT_TRUE(at::equal(ours, ort)) << c.mode << " " << (ours - ort).abs().max().item<float>();
  }
  return ort;
}

TEST(OrtBilinear, EqualsOnnxRuntimeBitForBitInEveryCoordinateMode) {
  const at::Tensor x = plateaus(20, 24);
  const std::vector<Case> cases = {
      {"half_pixel", {1, 3, 40, 48}, {}},          {"half_pixel", {1, 3, 57, 31}, {}},
      {"half_pixel", {1, 3, 9, 13}, {}},           {"half_pixel", {}, {1, 1, 2.5f, 1.75f}},
      {"pytorch_half_pixel", {1, 3, 40, 61}, {}},  {"asymmetric", {}, {1, 1, 2, 3}},
      {"asymmetric", {1, 3, 33, 50}, {}},          {"align_corners", {1, 3, 39, 47}, {}},
      {"tf_half_pixel_for_nn", {1, 3, 40, 48}, {}}};
  int aten_differs = 0;
  for (const Case& c : cases) {
    const at::Tensor ort = expectOrtsBits(c, x);
    if (c.mode == "half_pixel" && !c.sizes.empty()) {
      const at::Tensor aten =
          at::upsample_bilinear2d(x, {ort.size(2), ort.size(3)}, false, c10::nullopt, c10::nullopt);
      aten_differs += !at::equal(aten, ort);
    }
  }
  // ATen's kernel differs from ORT on these plateaus: why the built-in Resize has its own.
  EXPECT_GT(aten_differs, 0);
}

// A channels-last image [1, h, w, 3] resized over its middle axes, as ORT's layout transformer
// hands Resize NHWC tensors beside its channels-last convolutions: ORT's NHWC kernel, same bits.
TEST(OrtBilinear, AChannelsLastImageResizedOverItsMiddleAxesEqualsOnnxRuntime) {
  const at::Tensor x = plateaus(20, 24).permute({0, 2, 3, 1}).contiguous();
  int aten_differs = 0;
  for (const Case& c : std::vector<Case>{{"half_pixel", {1, 40, 48, 3}, {}},
                                         {"half_pixel", {1, 57, 31, 3}, {}},
                                         {"asymmetric", {}, {1, 2, 3, 1}}}) {
    const at::Tensor ort = expectOrtsBits(c, x);
    // ATen's kernel on the NCHW view rounds otherwise.
    const at::Tensor aten =
        at::upsample_bilinear2d(x.permute({0, 3, 1, 2}), {ort.size(1), ort.size(2)}, false,
                                c10::nullopt, c10::nullopt)
            .permute({0, 2, 3, 1});
    aten_differs += c.mode == "half_pixel" && !at::equal(aten, ort);
  }
  EXPECT_GT(aten_differs, 0);
}

TEST(OrtBilinear, TheAutogradPathGivesTheSameBitsAndItsGradient) {
  const at::Tensor x = plateaus(8, 10);
  const at::Tensor plain = ops::ortBilinear(x, 19, 23, 19.0f / 8, 23.0f / 10, "half_pixel");
  const at::Tensor leaf = x.clone().requires_grad_(true);
  const at::Tensor traced = ops::ortBilinear(leaf, 19, 23, 19.0f / 8, 23.0f / 10, "half_pixel");
  EXPECT_TRUE(at::equal(traced.detach(), plain));
  // A channels-last image (as convolutions hand them over) gives the same bits, channels-last.
  const at::Tensor nhwc = ops::ortBilinear(x.contiguous(at::MemoryFormat::ChannelsLast), 19, 23,
                                           19.0f / 8, 23.0f / 10, "half_pixel");
  EXPECT_TRUE(nhwc.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(at::equal(nhwc, plain));
  // Each output's four weights sum to one (within rounding), so the gradient of the sum of all
  // outputs sums to their count.
  traced.sum().backward();
  EXPECT_NEAR(leaf.grad().sum().item<double>(), 3.0 * 19 * 23, 1e-2);
  EXPECT_TRUE((leaf.grad() >= 0).all().item<bool>());
}

}  // namespace
}  // namespace qforge::testing
