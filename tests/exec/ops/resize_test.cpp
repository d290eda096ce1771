// Unit tests for Resize, Upsample and Pad (exec/ops/resize.cpp). Expected values are computed by
// hand from the ONNX coordinate formulas or from closed forms (linear interpolation reproduces a
// linear function exactly).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

// Resize-13 of `x` to `sizes` with the given attributes (roi and scales omitted).
at::Tensor resizeTo(const at::Tensor& x, std::vector<int64_t> sizes,
                    std::vector<Attribute> attributes) {
  return run1({"Resize", 13, {x, at::Tensor(), at::Tensor(), i64(sizes)}, attributes});
}

Attribute mode(const std::string& m) {
  return Attribute::makeString("mode", m);
}
Attribute coordinates(const std::string& m) {
  return Attribute::makeString("coordinate_transformation_mode", m);
}
Attribute nearest(const std::string& m) {
  return Attribute::makeString("nearest_mode", m);
}

// --- Resize: linear -----------------------------------------------------------------------------

TEST(ResizeTest, LinearAlignCorners2x2To3x3) {
  at::Tensor x = f32({1, 2, 3, 5}).reshape({1, 1, 2, 2});
  // align_corners samples at 0, 0.5, 1 on both axes: corners stay, midpoints average.
  at::Tensor expected = f32({1, 1.5, 2,     //
                             2, 2.75, 3.5,  //
                             3, 4, 5})
                            .reshape({1, 1, 3, 3});
  expectTensorNear(resizeTo(x, {1, 1, 3, 3}, {mode("linear"), coordinates("align_corners")}),
                   expected);
  // The same through scales 1.5 at opset 11, where roi and the unused input are empty tensors.
  at::Tensor empty = at::empty({0}, at::kFloat);
  expectTensorNear(run1({"Resize",
                         11,
                         {x, empty, f32({1, 1, 1.5, 1.5})},
                         {mode("linear"), coordinates("align_corners")}}),
                   expected);
  expectTensorNear(run1({"Resize",
                         11,
                         {x, empty, empty, i64({1, 1, 3, 3})},
                         {mode("linear"), coordinates("align_corners")}}),
                   expected);
}

TEST(ResizeTest, LinearHalfPixelClampsAtTheBorder) {
  // Coordinates (j + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25; outside [0, 1] they clamp.
  expectTensorNear(resizeTo(f32({0, 10}), {4}, {mode("linear")}), f32({0, 2.5, 7.5, 10}));
}

TEST(ResizeTest, PytorchHalfPixelMapsASingleOutputToZero) {
  at::Tensor x = f32({0, 10, 20});
  expectTensorNear(resizeTo(x, {1}, {mode("linear"), coordinates("pytorch_half_pixel")}), f32({0}));
  // half_pixel puts the single sample at the centre: (0 + 0.5) * 3 - 0.5 = 1.
  expectTensorNear(resizeTo(x, {1}, {mode("linear"), coordinates("half_pixel")}), f32({10}));
}

TEST(ResizeTest, LinearAnyRankReproducesALinearFunction) {
  // f(i, j, k) = i + 10 j + 100 k on a 2x3x2 grid, resized to 3x5x4 with align_corners: output
  // (a, b, c) samples f at (a / 2, 2 b / 4, c / 3), and n-linear interpolation of a linear
  // function is exact.
  auto grid = [](int64_t n, double step) { return at::arange(n, at::kDouble) * step; };
  auto f = [](const at::Tensor& i, const at::Tensor& j, const at::Tensor& k) {
    return i.reshape({-1, 1, 1}) + 10 * j.reshape({1, -1, 1}) + 100 * k.reshape({1, 1, -1});
  };
  at::Tensor x = f(grid(2, 1), grid(3, 1), grid(2, 1)).to(at::kFloat);
  at::Tensor expected = f(grid(3, 0.5), grid(5, 0.5), grid(4, 1.0 / 3)).to(at::kFloat);
  expectTensorNear(resizeTo(x, {3, 5, 4}, {mode("linear"), coordinates("align_corners")}),
                   expected);
}

// ONNX's resize of the two spatial axes of (N, C, H, W), tap by tap in double precision: the
// reference for the common 2-D cases, which run through ATen's 2-D kernels.
at::Tensor onnxResize2d(const at::Tensor& input, int64_t oh, int64_t ow, double sh, double sw,
                        const std::string& mode, const std::string& coords) {
  const at::Tensor x = input.to(at::kDouble).contiguous();
  const int64_t n = x.size(0), c = x.size(1), ih = x.size(2), iw = x.size(3);
  auto original = [&](int64_t j, double scale, int64_t in, int64_t out) -> double {
    if (coords == "half_pixel") return (j + 0.5) / scale - 0.5;
    if (coords == "pytorch_half_pixel") return out > 1 ? (j + 0.5) / scale - 0.5 : 0.0;
    if (coords == "align_corners") return out == 1 ? 0.0 : j * double(in - 1) / double(out - 1);
    return j / scale;  // asymmetric
  };
  auto clampTo = [](int64_t i, int64_t in) {
    return std::min<int64_t>(std::max<int64_t>(i, 0), in - 1);
  };
  at::Tensor y = at::zeros({n, c, oh, ow}, at::kDouble);
  auto X = x.accessor<double, 4>();
  auto Y = y.accessor<double, 4>();
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = 0; b < c; ++b)
      for (int64_t r = 0; r < oh; ++r)
        for (int64_t q = 0; q < ow; ++q) {
          const double cr = original(r, sh, ih, oh), cq = original(q, sw, iw, ow);
          if (mode == "nearest") {
            Y[a][b][r][q] =
                X[a][b][clampTo(int64_t(std::floor(cr)), ih)][clampTo(int64_t(std::floor(cq)), iw)];
            continue;
          }
          const double fr = std::floor(cr), fq = std::floor(cq);
          const int64_t r0 = clampTo(int64_t(fr), ih), r1 = clampTo(int64_t(fr) + 1, ih);
          const int64_t q0 = clampTo(int64_t(fq), iw), q1 = clampTo(int64_t(fq) + 1, iw);
          const double wr = cr - fr, wq = cq - fq;
          Y[a][b][r][q] = (1 - wr) * ((1 - wq) * X[a][b][r0][q0] + wq * X[a][b][r0][q1]) +
                          wr * ((1 - wq) * X[a][b][r1][q0] + wq * X[a][b][r1][q1]);
        }
  return y.to(at::kFloat);
}

TEST(ResizeTest, SpatialResizesOf4dTensorsFollowTheOnnxFormula) {
  at::manual_seed(4);
  const at::Tensor x = at::randn({2, 3, 5, 7}).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor empty = at::empty({0}, at::kFloat);
  struct Case {
    const char* mode;
    const char* coords;
    std::vector<int64_t> sizes;  // or, when empty, scales
    std::vector<double> scales;
  };
  const std::vector<Case> cases = {
      {"linear", "half_pixel", {2, 3, 10, 14}, {}},
      {"linear", "half_pixel", {2, 3, 3, 4}, {}},
      {"linear", "half_pixel", {}, {1, 1, 2.5, 0.5}},
      {"linear", "pytorch_half_pixel", {2, 3, 9, 3}, {}},
      {"linear", "pytorch_half_pixel", {2, 3, 1, 3}, {}},
      {"linear", "align_corners", {2, 3, 9, 11}, {}},
      {"linear", "align_corners", {}, {1, 1, 2, 3}},
      {"linear", "asymmetric", {2, 3, 10, 14}, {}},
      {"nearest", "asymmetric", {}, {1, 1, 2, 4}},
      {"nearest", "asymmetric", {}, {1, 1, 0.5, 2}},
      {"nearest", "asymmetric", {}, {1, 1, 3, 1.5}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.mode) + " " + c.coords);
    std::vector<int64_t> out = c.sizes;
    double sh = 0, sw = 0;
    at::Tensor scales = empty, sizes = empty;
    if (out.empty()) {
      out = {2, 3, int64_t(std::floor(5 * c.scales[2])), int64_t(std::floor(7 * c.scales[3]))};
      sh = c.scales[2];
      sw = c.scales[3];
      scales = at::tensor(c.scales, at::kFloat);
    } else {
      sh = double(out[2]) / 5;
      sw = double(out[3]) / 7;
      sizes = i64(out);
    }
    const at::Tensor y = run1({"Resize",
                               13,
                               {x, empty, scales, sizes},
                               {mode(c.mode), coordinates(c.coords), nearest("floor")}});
    expectTensorNear(y, onnxResize2d(x, out[2], out[3], sh, sw, c.mode, c.coords), 1e-5, 1e-5);
  }
}

TEST(ResizeTest, TfCropAndResizeExtrapolates) {
  at::Tensor x = f32({0, 10, 20, 30});
  // roi [0.5, 1.5] of an axis of 4: samples at 1.5, 3.0, 4.5; 4.5 lies outside [0, 3].
  std::vector<Attribute> attrs{coordinates("tf_crop_and_resize"),
                               Attribute::makeFloat("extrapolation_value", -1)};
  attrs.push_back(mode("linear"));
  expectTensorNear(run1({"Resize", 13, {x, f32({0.5, 1.5}), at::Tensor(), i64({3})}, attrs}),
                   f32({15, 30, -1}));
  attrs.back() = mode("nearest");  // 1.5 rounds to 1 (round_prefer_floor)
  expectTensorNear(run1({"Resize", 13, {x, f32({0.5, 1.5}), at::Tensor(), i64({3})}, attrs}),
                   f32({10, 30, -1}));
  expectError({"Resize",
               13,
               {x, at::Tensor(), at::Tensor(), i64({3})},
               {coordinates("tf_crop_and_resize")}},
              {"node 'op' (Resize)", "roi"});
}

// --- Resize: nearest ----------------------------------------------------------------------------

TEST(ResizeTest, NearestModesRoundDifferently) {
  at::Tensor x = f32({10, 20, 30, 40});
  auto scaled = [&](const std::string& rounding) {
    // Asymmetric coordinates j / 0.75 = 0, 1.33, 2.67.
    return run1({"Resize",
                 13,
                 {x, at::Tensor(), f32({0.75})},
                 {coordinates("asymmetric"), nearest(rounding)}});
  };
  expectTensorNear(scaled("floor"), f32({10, 20, 30}));
  expectTensorNear(scaled("ceil"), f32({10, 30, 40}));
  expectTensorNear(scaled("round_prefer_floor"), f32({10, 20, 40}));
  // Ties (j / 2 = 0.5, 1.5, ...) separate the two round_prefer modes; ceil past the end clamps.
  expectTensorNear(resizeTo(x, {8}, {coordinates("asymmetric"), nearest("round_prefer_floor")}),
                   f32({10, 10, 20, 20, 30, 30, 40, 40}));
  expectTensorNear(resizeTo(x, {8}, {coordinates("asymmetric"), nearest("round_prefer_ceil")}),
                   f32({10, 20, 20, 30, 30, 40, 40, 40}));
}

TEST(ResizeTest, TfHalfPixelForNearestShiftsByHalfAPixel) {
  at::Tensor x = f32({10, 20, 30, 40});
  // (j + 0.5) / 0.5 = 1, 3 versus half_pixel's 0.5, 2.5 (rounded down on ties).
  expectTensorNear(resizeTo(x, {2}, {coordinates("tf_half_pixel_for_nn")}), f32({20, 40}));
  expectTensorNear(resizeTo(x, {2}, {}), f32({10, 30}));
}

TEST(ResizeTest, NearestKeepsIntegerTypes) {
  expectTensorNear(resizeTo(i64({1, 2}), {4}, {coordinates("asymmetric")}), i64({1, 1, 2, 2}));
}

TEST(ResizeTest, Opset10IsAsymmetricAndRoundsAsOnnxRuntimeDoes) {
  expectTensorNear(run1({"Resize", 10, {f32({10, 20, 30}), f32({2})}}),
                   f32({10, 10, 20, 20, 30, 30}));
  // Downscaling 5 -> 3: coordinates 0, 1.67, 3.33 round up to 0, 2, 4 (ONNX Runtime's rule
  // for a shrinking axis; growing ones floor, as above).
  expectTensorNear(run1({"Resize", 10, {f32({10, 20, 30, 40, 50}), f32({0.6})}}),
                   f32({10, 30, 50}));
  expectTensorNear(run1({"Resize", 10, {f32({0, 10}), f32({2})}, {mode("linear")}}),
                   f32({0, 5, 10, 10}));
}

// --- Resize: cubic ------------------------------------------------------------------------------

// PyTorch's bicubic upsampling (align_corners=false) is Keys' cubic with A = -0.75, half-pixel
// coordinates and taps clamped to the border: ONNX's cubic defaults.
TEST(ResizeTest, CubicHalfPixelMatchesPyTorchBicubic) {
  // In double: float32 rounding differs between one 2-d pass and two 1-d passes.
  const at::Tensor x = at::randn({1, 2, 5, 7}, at::TensorOptions().dtype(at::kDouble));
  for (const std::vector<int64_t>& size : {std::vector<int64_t>{9, 12}, {3, 4}, {5, 14}}) {
    const at::Tensor expected = at::upsample_bicubic2d(x, size, false);
    expectTensorNear(resizeTo(x, {1, 2, size[0], size[1]}, {mode("cubic")}), expected);
  }
  // align_corners too.
  const at::Tensor corners = at::upsample_bicubic2d(x, {9, 12}, true);
  expectTensorNear(resizeTo(x, {1, 2, 9, 12}, {mode("cubic"), coordinates("align_corners")}),
                   corners);
}

// Keys' kernel by hand for one coordinate: sampling [0, 0, 8, 0, 0] at 2.5 with A = -0.5 weighs
// the taps 1..4 (distances 1.5, 0.5, 0.5, 1.5) by -0.0625, 0.5625, 0.5625, -0.0625.
TEST(ResizeTest, CubicCoefficientAndExcludeOutside) {
  const Attribute a = Attribute::makeFloat("cubic_coeff_a", -0.5);
  const at::Tensor x = f32({0, 0, 8, 0, 0});
  // asymmetric, scale 2: output 5 samples input coordinate 2.5.
  const at::Tensor y = run1(
      {"Resize", 13, {x, at::Tensor(), f32({2})}, {mode("cubic"), coordinates("asymmetric"), a}});
  EXPECT_NEAR(y[5].item<double>(), 8 * 0.5625, 1e-6);
  EXPECT_NEAR(y[4].item<double>(), 8.0, 1e-6);  // an integral coordinate reads the sample itself
  // At coordinate 0.5 the taps are -1, 0, 1, 2; -1 falls off the input. Clamped it reads x[0];
  // excluded its weight goes and the other three are renormalized.
  const at::Tensor edge = f32({4, 0, 0, 0});
  const at::Tensor clamped = run1({"Resize",
                                   13,
                                   {edge, at::Tensor(), f32({2})},
                                   {mode("cubic"), coordinates("asymmetric"), a}});
  EXPECT_NEAR(clamped[1].item<double>(), 4 * (-0.0625 + 0.5625), 1e-6);
  const Attribute exclude = Attribute::makeInt("exclude_outside", 1);
  const at::Tensor excluded = run1({"Resize",
                                    13,
                                    {edge, at::Tensor(), f32({2})},
                                    {mode("cubic"), coordinates("asymmetric"), a, exclude}});
  EXPECT_NEAR(excluded[1].item<double>(), 4 * 0.5625 / (1 + 0.0625), 1e-6);
}

TEST(ResizeTest, BadArgumentsNameTheNode) {
  at::Tensor x = f32({1, 2});
  expectError({"Resize", 13, {x, at::Tensor(), f32({2})}, {mode("bicubic")}},
              {"node 'op' (Resize), opset 13", "unknown mode 'bicubic'"});
  expectError({"Resize", 13, {x, at::Tensor(), f32({2}), i64({4})}}, {"exactly one"});
  expectError({"Resize", 13, {x}}, {"exactly one"});
  expectError({"Resize", 13, {x, at::Tensor(), f32({2, 2})}}, {"scales has 2 entries"});
  expectError({"Resize", 13, {x, at::Tensor(), f32({-1})}}, {"must be positive"});
  expectError({"Resize", 13, {x, at::Tensor(), f32({2})}, {coordinates("sideways")}},
              {"coordinate_transformation_mode 'sideways'"});
  expectError({"Resize", 13, {x, at::Tensor(), f32({2})}, {nearest("round_half_even")}},
              {"nearest_mode"});
}

// --- Upsample -----------------------------------------------------------------------------------

TEST(UpsampleTest, ScalesAttributeAtOpset7InputAtOpset9) {
  at::Tensor x = f32({1, 2}).reshape({1, 2});
  at::Tensor expected = f32({1, 1, 2, 2, 1, 1, 2, 2}).reshape({2, 4});
  expectTensorNear(run1({"Upsample", 7, {x}, {Attribute::makeFloats("scales", {2, 2})}}), expected);
  expectTensorNear(run1({"Upsample", 9, {x, f32({2, 2})}}), expected);
  // Linear upsampling samples at j / 2 = 0, 0.5, 1, 1.5 (clamped).
  expectTensorNear(run1({"Upsample", 9, {f32({0, 10}), f32({2})}, {mode("linear")}}),
                   f32({0, 5, 10, 10}));
  expectError({"Upsample", 9, {x, f32({2})}}, {"node 'op' (Upsample)", "scales has 1 entries"});
}

// --- Pad ----------------------------------------------------------------------------------------

TEST(PadTest, ConstantModeWithValueInput) {
  at::Tensor x = f32({1, 2, 3, 4}).reshape({2, 2});
  // pads [begin0, begin1, end0, end1] = one row before, one column after.
  at::Tensor y = run1({"Pad", 11, {x, i64({1, 0, 0, 1}), at::scalar_tensor(9.0, at::kFloat)}});
  expectTensorNear(y, f32({9, 9, 9, 1, 2, 9, 3, 4, 9}).reshape({3, 3}));
  expectTensorNear(run1({"Pad", 13, {f32({1, 2}), i64({1, 0})}}), f32({0, 1, 2}));
  expectTensorNear(run1({"Pad", 13, {i64({1, 2}), i64({1, 1}), i64({7})}}), i64({7, 1, 2, 7}));
}

TEST(PadTest, ReflectAndEdge) {
  at::Tensor x = f32({1, 2, 3});
  expectTensorNear(run1({"Pad", 13, {x, i64({2, 1})}, {mode("reflect")}}), f32({3, 2, 1, 2, 3, 2}));
  expectTensorNear(run1({"Pad", 13, {x, i64({2, 1})}, {mode("edge")}}), f32({1, 1, 1, 2, 3, 3}));
  at::Tensor m = f32({1, 2, 3, 4, 5, 6}).reshape({2, 3});
  expectTensorNear(run1({"Pad", 13, {m, i64({1, 1, 1, 1})}, {mode("reflect")}}),
                   f32({5, 4, 5, 6, 5,  //
                        2, 1, 2, 3, 2,  //
                        5, 4, 5, 6, 5,  //
                        2, 1, 2, 3, 2})
                       .reshape({4, 5}));
}

TEST(PadTest, NegativePadsCrop) {
  at::Tensor x = f32({1, 2, 3});
  expectTensorNear(run1({"Pad", 13, {x, i64({-1, 1})}}), f32({2, 3, 0}));
  expectTensorNear(run1({"Pad", 13, {x, i64({1, -2})}, {mode("edge")}}), f32({1, 1}));
  expectTensorNear(run1({"Pad", 13, {x, i64({-1, 1})}, {mode("reflect")}}), f32({2, 3, 2}));
}

TEST(PadTest, AttributeFormsBeforeOpset11) {
  at::Tensor x = f32({1, 2});
  expectTensorNear(
      run1(
          {"Pad", 2, {x}, {Attribute::makeInts("pads", {1, 2}), Attribute::makeFloat("value", 5)}}),
      f32({5, 1, 2, 5, 5}));
  expectTensorNear(run1({"Pad", 1, {x}, {Attribute::makeInts("paddings", {0, 1}), mode("edge")}}),
                   f32({1, 2, 2}));
}

TEST(PadTest, Opset18AxesInput) {
  at::Tensor x = f32({1, 2, 3, 4}).reshape({2, 2});
  expectTensorNear(run1({"Pad", 18, {x, i64({1, 1}), at::Tensor(), i64({-1})}}),
                   f32({0, 1, 2, 0, 0, 3, 4, 0}).reshape({2, 4}));
}

TEST(PadTest, BadArgumentsNameTheNode) {
  at::Tensor x = f32({1, 2, 3});
  expectError({"Pad", 13, {x, i64({1, 1, 1, 1})}}, {"node 'op' (Pad), opset 13", "2 * rank"});
  expectError({"Pad", 13, {x, i64({-2, -2})}}, {"remove more than"});
  expectError({"Pad", 13, {x, i64({1, 1})}, {mode("wrap")}}, {"unknown mode 'wrap'"});
  expectError({"Pad", 13, {at::empty({0}), i64({1, 1})}, {mode("edge")}}, {"empty axis"});
}

}  // namespace
}  // namespace qforge
