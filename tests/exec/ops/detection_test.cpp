// Unit tests for NonMaxSuppression and RoiAlign (exec/ops/detection.cpp): op-table facts, the
// cases ONNX's node tests (tests/conformance) lack (RoiAlign's max mode and opset 10, NMS's
// opset 10 and score threshold), and the errors. RoiAlign's averages are checked on an affine
// image, where bilinear sampling is exact and a bin's mean is the value at its samples' centre.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>

#include "support/op_facts.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

TEST(DetectionOpsTest, NmsOutputsIndicesRoiAlignKeepsTheSign) {
  EXPECT_EQ(trueFacts("NonMaxSuppression", 11), std::set<std::string>{"shape_computation"});
  EXPECT_EQ(trueFacts("RoiAlign", 16), std::set<std::string>{});
  EXPECT_EQ(signOf("RoiAlign", 16), OutputSign::OfDataInput);
}

// f(h, w) = 1 + 2h + 3w on a [1, 1, 4, 4] image.
at::Tensor affineImage() {
  const at::Tensor h = at::arange(4, at::kFloat).reshape({4, 1});
  const at::Tensor w = at::arange(4, at::kFloat).reshape({1, 4});
  return (1 + 2 * h + 3 * w).reshape({1, 1, 4, 4});
}

TEST(DetectionOpsTest, RoiAlignAveragesAreExactOnAnAffineImage) {
  const at::Tensor image = affineImage();
  const at::Tensor batch = i64({0});
  // half_pixel: RoI [1, 3] starts at 0.5, 2 samples per bin at 1.0 and 2.0; mean at 1.5.
  expectValuesNear(run1({"RoiAlign", 16, {image, f32({1, 1, 3, 3}, {1, 4}), batch}}), {1, 1, 1, 1},
                   {1 + 2 * 1.5 + 3 * 1.5});
  // spatial_scale maps the RoI first: [2, 6] * 0.5 is the same RoI.
  expectValuesNear(run1({"RoiAlign",
                         16,
                         {image, f32({2, 2, 6, 6}, {1, 4}), batch},
                         {Attribute::makeFloat("spatial_scale", 0.5f)}}),
                   {1, 1, 1, 1}, {1 + 2 * 1.5 + 3 * 1.5});
  // A 2x2 output over the whole image: bin samples at pixels {0, 1} and {2, 3} (clamped at the
  // last row and column), so bin centres 0.5 and 2.5.
  expectValuesNear(
      run1({"RoiAlign",
            16,
            {image, f32({0, 0, 4, 4}, {1, 4}), batch},
            {Attribute::makeInt("output_height", 2), Attribute::makeInt("output_width", 2),
             Attribute::makeInt("sampling_ratio", 2)}}),
      {1, 1, 2, 2}, {3.5, 9.5, 7.5, 13.5});
  // Samples beyond one pixel outside the image weigh nothing.
  expectValuesNear(run1({"RoiAlign", 16, {image, f32({-10, -10, -6, -6}, {1, 4}), batch}}),
                   {1, 1, 1, 1}, {0});
}

TEST(DetectionOpsTest, RoiAlignMaxModeTakesTheLargestWeightedTap) {
  const at::Tensor image = f32({1, 2, 3, 4}, {1, 1, 2, 2});
  const at::Tensor roi = f32({0, 0, 1, 1}, {1, 4});
  // output_half_pixel: one sample at (0.5, 0.5), each of the four pixels weighing 0.25.
  const Attribute legacy =
      Attribute::makeString("coordinate_transformation_mode", "output_half_pixel");
  const Attribute one_sample = Attribute::makeInt("sampling_ratio", 1);
  expectValuesNear(run1({"RoiAlign", 16, {image, roi, i64({0})}, {legacy, one_sample}}),
                   {1, 1, 1, 1}, {2.5});
  expectValuesNear(run1({"RoiAlign",
                         16,
                         {image, roi, i64({0})},
                         {legacy, one_sample, Attribute::makeString("mode", "max")}}),
                   {1, 1, 1, 1}, {0.25 * 4});
  // Opset 10 has only the legacy mapping.
  expectValuesNear(run1({"RoiAlign", 10, {image, roi, i64({0})}, {one_sample}}), {1, 1, 1, 1},
                   {2.5});
}

TEST(DetectionOpsTest, RoiAlignReadsEachRoisBatch) {
  const at::Tensor images = at::cat({affineImage(), affineImage() + 100});
  const at::Tensor rois = f32({1, 1, 3, 3, 1, 1, 3, 3}, {2, 4});
  expectValuesNear(run1({"RoiAlign", 16, {images, rois, i64({1, 0})}}), {2, 1, 1, 1}, {108.5, 8.5});
}

TEST(DetectionOpsTest, NmsKeepsTheBestOfOverlappingBoxes) {
  // Box 1 overlaps box 0 with IoU 0.9 / 1.1; box 2 is apart.
  const at::Tensor boxes = f32({0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 2, 1, 3}, {1, 3, 4});
  const at::Tensor scores = f32({0.9f, 0.8f, 0.7f}, {1, 1, 3});
  const at::Tensor limit = i64({10}), iou = f32({0.5f});
  expectTensorEqual(run1({"NonMaxSuppression", 10, {boxes, scores, limit, iou}}),
                    i64({0, 0, 0, 0, 0, 2}).reshape({2, 3}));
  // The score threshold is strict: 0.7 drops box 2.
  expectTensorEqual(run1({"NonMaxSuppression", 11, {boxes, scores, limit, iou, f32({0.7f})}}),
                    i64({0, 0, 0}).reshape({1, 3}));
  // IoU 0.818 does not exceed 0.85: both kept, in score order.
  expectTensorEqual(run1({"NonMaxSuppression", 11, {boxes, scores, i64({2}), f32({0.85f})}}),
                    i64({0, 0, 0, 0, 0, 1}).reshape({2, 3}));
  // INT64_MAX, torch.onnx's "no limit" (torchvision's batched NMS), keeps every free box.
  expectTensorEqual(run1({"NonMaxSuppression",
                          11,
                          {boxes, scores, i64({std::numeric_limits<int64_t>::max()}), iou}}),
                    i64({0, 0, 0, 0, 0, 2}).reshape({2, 3}));
  // Without max_output_boxes_per_class nothing is selected.
  expectTensorEqual(run1({"NonMaxSuppression", 11, {boxes, scores}}), i64({}).reshape({0, 3}));
}

TEST(DetectionOpsTest, BadInputsNameTheNodeAndTheProblem) {
  const at::Tensor boxes = at::zeros({1, 3, 4}), scores = at::zeros({1, 1, 3});
  expectNodeError({"NonMaxSuppression", 11, {at::zeros({1, 3, 3}), scores}}, "boxes must be");
  expectNodeError({"NonMaxSuppression", 11, {boxes, at::zeros({1, 1, 2})}},
                  "must be [batches, classes, boxes]");
  expectNodeError(
      {"NonMaxSuppression", 11, {boxes, scores}, {Attribute::makeInt("center_point_box", 2)}},
      "center_point_box must be 0 or 1");
  expectNodeError({"NonMaxSuppression", 11, {boxes, scores, i64({1, 2})}},
                  "max_output_boxes_per_class must hold one value");
  const at::Tensor image = at::zeros({1, 1, 2, 2});
  expectNodeError({"RoiAlign", 16, {image, at::zeros({1, 4}), i64({1})}},
                  "batch index 1 is outside [0, 1)");
  expectNodeError({"RoiAlign", 16, {image, at::zeros({1, 3}), i64({0})}}, "must be [num_rois, 4]");
  expectNodeError({"RoiAlign", 16, {at::zeros({1, 2, 2}), at::zeros({1, 4}), i64({0})}}, "4-D");
  expectNodeError({"RoiAlign",
                   16,
                   {image, at::zeros({1, 4}), i64({0})},
                   {Attribute::makeString("mode", "min")}},
                  "unknown mode 'min'");
  expectNodeError({"RoiAlign",
                   16,
                   {image, at::zeros({1, 4}), i64({0})},
                   {Attribute::makeString("coordinate_transformation_mode", "asymmetric")}},
                  "unknown coordinate_transformation_mode");
}

}  // namespace
}  // namespace qforge
