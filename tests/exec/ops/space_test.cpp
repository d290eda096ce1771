// Unit tests for DepthToSpace, SpaceToDepth, MaxUnpool and GridSample (exec/ops/space.cpp):
// op-table facts, GridSample-20's 3-D and 5-D inputs (ONNX's node tests here cover opset 16
// only), and the errors. References are the ONNX definitions written out element by element,
// or closed forms: linear sampling of an affine function is exact.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "support/op_facts.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

TEST(SpaceOpsTest, BlockRearrangementsAreLayoutOnly) {
  for (const char* op : {"DepthToSpace", "SpaceToDepth"}) {
    // ONNX Runtime's 8-bit support for these is not established, so no moves_int8.
    EXPECT_EQ(trueFacts(op, 13), (std::set<std::string>{"moves_data_only", "layout_only"})) << op;
    EXPECT_EQ(signOf(op, 13), OutputSign::OfDataInput) << op;
  }
  EXPECT_EQ(trueFacts("MaxUnpool", 11), std::set<std::string>{});
  EXPECT_EQ(signOf("MaxUnpool", 11), OutputSign::OfDataInput);
  EXPECT_EQ(trueFacts("GridSample", 16), std::set<std::string>{});
  EXPECT_EQ(signOf("GridSample", 16), OutputSign::OfDataInput);
  EXPECT_EQ(signOf("GridSample", 16, {Attribute::makeString("mode", "bicubic")}),
            OutputSign::Unknown);
  EXPECT_EQ(signOf("GridSample", 20, {Attribute::makeString("mode", "cubic")}),
            OutputSign::Unknown);
}

TEST(SpaceOpsTest, DepthToSpaceModesMatchTheirDefinitions) {
  const int64_t b = 2, c = 2, h = 2, w = 3;
  const at::Tensor x = at::arange(1 * c * b * b * h * w, at::kFloat).reshape({1, c * b * b, h, w});
  at::Tensor dcr = at::zeros({1, c, h * b, w * b}), crd = at::zeros({1, c, h * b, w * b});
  // y[c, h*b + i, w*b + j] reads channel (i*b + j)*C + c (DCR) or c*b*b + i*b + j (CRD).
  for (int64_t ch = 0; ch < c; ++ch)
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < b; ++j)
        for (int64_t y = 0; y < h; ++y)
          for (int64_t z = 0; z < w; ++z) {
            dcr[0][ch][y * b + i][z * b + j] = x[0][(i * b + j) * c + ch][y][z];
            crd[0][ch][y * b + i][z * b + j] = x[0][ch * b * b + i * b + j][y][z];
          }
  const Attribute block = Attribute::makeInt("blocksize", b);
  expectTensorEqual(run1({"DepthToSpace", 1, {x}, {block}}), dcr);
  expectTensorEqual(run1({"DepthToSpace", 11, {x}, {block, Attribute::makeString("mode", "CRD")}}),
                    crd);
  // SpaceToDepth is DCR's inverse.
  expectTensorEqual(run1({"SpaceToDepth", 1, {dcr}, {block}}), x);
}

TEST(SpaceOpsTest, MaxUnpoolIndicesFlattenTheWholeOutput) {
  // Two images of one 1x1 pooled value each, unpooled to 2x2: flat indices run over N, C, H, W.
  const at::Tensor x = f32({5, 7}, {2, 1, 1, 1});
  const at::Tensor indices = i64({3, 5}).reshape({2, 1, 1, 1});
  const std::vector<Attribute> attrs{ints("kernel_shape", {2, 2}), ints("strides", {2, 2})};
  expectTensorEqual(run1({"MaxUnpool", 9, {x, indices}, attrs}),
                    f32({0, 0, 0, 5, 0, 7, 0, 0}, {2, 1, 2, 2}));
  // An explicit output shape (opset 11) pads that result at the end of each axis.
  expectTensorEqual(run1({"MaxUnpool", 11, {x, indices, i64({2, 1, 2, 3})}, attrs}),
                    f32({0, 0, 0, 0, 5, 0, 0, 7, 0, 0, 0, 0}, {2, 1, 2, 3}));
}

// f(d, h, w) = 1 + 2d + 3h + 5w on a [1, 1, D, H, W] grid of voxels.
at::Tensor affineVolume(int64_t d, int64_t h, int64_t w) {
  const at::Tensor z = at::arange(d, at::kDouble).reshape({d, 1, 1});
  const at::Tensor y = at::arange(h, at::kDouble).reshape({1, h, 1});
  const at::Tensor x = at::arange(w, at::kDouble).reshape({1, 1, w});
  return (1 + 2 * z + 3 * y + 5 * x).reshape({1, 1, d, h, w});
}

TEST(SpaceOpsTest, GridSample20TrilinearIsExactOnAnAffineVolume) {
  const at::Tensor volume = affineVolume(3, 4, 5);
  // Normalized (x, y, z) in [-1, 1]; with align_corners, pixel = (g + 1) / 2 * (size - 1).
  const at::Tensor grid =
      at::tensor({0.3, -0.2, 0.5, -0.9, 0.7, -0.1}, at::kDouble).reshape({1, 1, 1, 2, 3});
  const at::Tensor y =
      run1({"GridSample", 20, {volume, grid}, {Attribute::makeInt("align_corners", 1)}});
  auto pixel = [](double g, int64_t size) { return (g + 1) / 2 * static_cast<double>(size - 1); };
  std::vector<double> expected;
  for (const auto& [gx, gy, gz] : {std::tuple{0.3, -0.2, 0.5}, std::tuple{-0.9, 0.7, -0.1}}) {
    expected.push_back(1 + 2 * pixel(gz, 3) + 3 * pixel(gy, 4) + 5 * pixel(gx, 5));
  }
  expectValuesNear(y, {1, 1, 1, 1, 2}, expected, 1e-9);
  // Nearest (align_corners=0: pixel = ((g + 1) * size - 1) / 2) rounds to the closest voxel:
  // x 1.125 -> 1, y 2.1 -> 2, z 1.15 -> 1.
  const at::Tensor point = at::tensor({-0.35, 0.3, 0.1}, at::kDouble).reshape({1, 1, 1, 1, 3});
  const at::Tensor nearest =
      run1({"GridSample", 20, {volume, point}, {Attribute::makeString("mode", "nearest")}});
  expectValuesNear(nearest, {1, 1, 1, 1, 1}, {1 + 2 * 1 + 3 * 2 + 5 * 1}, 1e-9);
}

TEST(SpaceOpsTest, GridSample20OneSpatialAxis) {
  const at::Tensor signal = f32({1, 4, 2, 8}, {1, 1, 4});
  // align_corners=1: g = -1/3 is pixel 1, g = 0 is pixel 1.5.
  const at::Tensor grid = f32({-1.0f / 3, 0.0f}, {1, 2, 1});
  const Attribute align = Attribute::makeInt("align_corners", 1);
  expectValuesNear(run1({"GridSample", 20, {signal, grid}, {align}}), {1, 1, 2}, {4, 3}, 1e-5);
  // Cubic sampling on a pixel centre reads that pixel (g = 1/3 is pixel 2).
  const at::Tensor on_pixel = f32({1.0f / 3}, {1, 1, 1});
  expectValuesNear(
      run1({"GridSample", 20, {signal, on_pixel}, {align, Attribute::makeString("mode", "cubic")}}),
      {1, 1, 1}, {2}, 1e-5);
}

TEST(SpaceOpsTest, BadInputsNameTheNodeAndTheProblem) {
  const at::Tensor x = at::zeros({1, 3, 2, 2});
  const Attribute block = Attribute::makeInt("blocksize", 2);
  expectNodeError({"DepthToSpace", 13, {x}, {block}}, "not a multiple of blocksize^2 = 4");
  expectNodeError({"DepthToSpace", 13, {at::zeros({4, 2, 2})}, {block}}, "must be 4-D");
  expectNodeError(
      {"DepthToSpace", 13, {at::zeros({1, 4, 1, 1})}, {block, Attribute::makeString("mode", "X")}},
      "unknown mode 'X'");
  expectNodeError({"SpaceToDepth", 13, {at::zeros({1, 1, 3, 2})}, {block}},
                  "multiples of blocksize");
  expectNodeError({"MaxUnpool",
                   11,
                   {f32({1}, {1, 1, 1, 1}), i64({4}).reshape({1, 1, 1, 1})},
                   {ints("kernel_shape", {2, 2}), ints("strides", {2, 2})}},
                  "indices must lie in [0, 4)");
  expectNodeError({"MaxUnpool", 11, {f32({1}, {1, 1, 1, 1}), i64({0}).reshape({1, 1, 1, 1})}},
                  "kernel_shape");
  expectNodeError({"MaxUnpool",
                   11,
                   {f32({1}, {1, 1, 1, 1}), i64({0}).reshape({1, 1, 1, 1}), i64({1, 1, 1, 2})},
                   {ints("kernel_shape", {2, 2}), ints("strides", {2, 2})}},
                  "must keep N and C and not be smaller than [1, 1, 2, 2]");
  const at::Tensor volume = at::zeros({1, 1, 2, 2, 2}), grid = at::zeros({1, 1, 1, 1, 3});
  expectNodeError({"GridSample", 16, {volume, grid}}, "(4-D expected)");
  expectNodeError({"GridSample", 20, {volume, grid}, {Attribute::makeString("mode", "cubic")}},
                  "cubic mode is not supported on 5-D input");
  expectNodeError(
      {"GridSample", 16, {x, at::zeros({1, 2, 2, 2})}, {Attribute::makeString("mode", "linear")}},
      "unknown mode 'linear'");
  expectNodeError({"GridSample", 16, {x, at::zeros({1, 2, 2, 3})}}, "grid of shape [1, 2, 2, 3]");
  expectNodeError({"GridSample",
                   16,
                   {x, at::zeros({1, 2, 2, 2})},
                   {Attribute::makeString("padding_mode", "wrap")}},
                  "unknown padding_mode 'wrap'");
}

}  // namespace
}  // namespace qforge
