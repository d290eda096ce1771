// Signal lowerings (exec/ops/signal.cpp): table facts, DFT's opset-20 axis input, inverse and
// length handling, a tiny STFT and the windows against closed-form values, and the errors for bad
// input. ONNX's node tests (tests/conformance) check the opset-17 numerics.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "exec/op_info.h"
#include "support/op_facts.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

at::Tensor scalarI64(int64_t v) {
  return at::scalar_tensor(v, at::kLong);
}

// The real signal [1, 2, 3, 4] as [4, 1]; its DFT is [10, -2 + 2j, -2, -2 - 2j].
at::Tensor ramp() {
  return f32({1, 2, 3, 4}, {4, 1});
}

TEST(SignalOpsTest, TableFacts) {
  for (const char* op : {"DFT", "STFT"}) {
    const NodeFacts f = factsOf(op, 17);
    EXPECT_TRUE(f.known) << op;
    EXPECT_TRUE(f.set.empty()) << op;
  }
  // Windows and filter banks are constants computed from scalars.
  for (const char* op : {"BlackmanWindow", "HammingWindow", "HannWindow", "MelWeightMatrix"})
    EXPECT_EQ(factsOf(op, 17).set, std::set<std::string>{"shape_computation"}) << op;
  EXPECT_FALSE(factsOf("DFT", 16).known);
  EXPECT_TRUE(factsOf("DFT", 20).known);
}

TEST(SignalOpsTest, DftForwardFullAndOnesided) {
  const at::Tensor batched = ramp().unsqueeze(0);  // [1, 4, 1], axis 1 by default before 20
  expectValuesNear(run1({"DFT", 17, {batched}}), {1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2});
  expectValuesNear(run1({"DFT", 17, {batched}, {Attribute::makeInt("onesided", 1)}}), {1, 3, 2},
                   {10, 0, -2, 2, -2, 0});
}

TEST(SignalOpsTest, DftOpset20TakesAxisAsInput) {
  // Default -2: the dimension before the real/imaginary one.
  expectValuesNear(run1({"DFT", 20, {ramp()}}), {4, 2}, {10, 0, -2, 2, -2, 0, -2, -2});
  // Axis 0 of [4, 1, 1] given explicitly; opset 20 ignores an `axis` attribute.
  expectValuesNear(run1({"DFT",
                         20,
                         {ramp().unsqueeze(1), at::Tensor(), scalarI64(0)},
                         {Attribute::makeInt("axis", 1)}}),
                   {4, 1, 2}, {10, 0, -2, 2, -2, 0, -2, -2});
}

TEST(SignalOpsTest, DftLengthCutsOrPads) {
  // Cut to [1, 2]: [3, -1].
  expectValuesNear(run1({"DFT", 20, {ramp(), scalarI64(2)}}), {2, 2}, {3, 0, -1, 0});
  // Padded to 8: bin 0 is the sum, bin 4 the alternating sum 1 - 2 + 3 - 4.
  const at::Tensor padded = run1({"DFT", 20, {ramp(), scalarI64(8)}});
  ASSERT_EQ(padded.sizes(), (std::vector<int64_t>{8, 2}));
  expectValuesNear(padded.select(0, 0), {2}, {10, 0});
  expectValuesNear(padded.select(0, 4), {2}, {-2, 0});
}

TEST(SignalOpsTest, DftInverse) {
  const at::Tensor spectrum = f32({10, 0, -2, 2, -2, 0, -2, -2}, {4, 2});
  expectValuesNear(run1({"DFT", 20, {spectrum}, {Attribute::makeInt("inverse", 1)}}), {4, 2},
                   {1, 0, 2, 0, 3, 0, 4, 0});
  // One-sided spectrum in, real signal of 2 * (3 - 1) samples out.
  expectValuesNear(run1({"DFT",
                         20,
                         {spectrum.narrow(0, 0, 3)},
                         {Attribute::makeInt("inverse", 1), Attribute::makeInt("onesided", 1)}}),
                   {4, 1}, {1, 2, 3, 4});
}

TEST(SignalOpsTest, DftOnFloat16AndDouble) {
  const at::Tensor half = run1({"DFT", 20, {ramp().to(at::kHalf)}});
  EXPECT_EQ(half.scalar_type(), at::kHalf);
  expectValuesNear(half, {4, 2}, {10, 0, -2, 2, -2, 0, -2, -2}, 1e-2);
  EXPECT_EQ(run1({"DFT", 20, {ramp().to(at::kDouble)}}).scalar_type(), at::kDouble);
}

TEST(SignalOpsTest, DftErrors) {
  expectNodeError({"DFT", 20, {ramp(), at::Tensor(), scalarI64(-1)}}, "real/imaginary dimension");
  expectNodeError({"DFT", 17, {ramp().unsqueeze(0)}, {Attribute::makeInt("axis", 2)}},
                  "real/imaginary dimension");
  expectNodeError({"DFT", 20, {f32({1, 2, 3}, {1, 3})}}, "[..., 1] (real) or [..., 2] (complex)");
  expectNodeError({"DFT", 20, {ramp(), scalarI64(0)}}, "DFT length must be >= 1");
  expectNodeError({"DFT", 20, {i64({1, 2}).reshape({2, 1})}}, "must be a floating-point tensor");
}

TEST(SignalOpsTest, StftOfTwoFrames) {
  // Frames [1, 2] and [3, 4], each transformed: [3, -1] and [7, -1].
  const at::Tensor signal = ramp().unsqueeze(0);
  expectValuesNear(run1({"STFT", 17, {signal, scalarI64(2), at::Tensor(), scalarI64(2)}}),
                   {1, 2, 2, 2}, {3, 0, -1, 0, 7, 0, -1, 0});
  // A window weights each frame: [1, 0] keeps the first sample.
  expectValuesNear(run1({"STFT", 17, {signal, scalarI64(2), f32({1, 0})}}), {1, 2, 2, 2},
                   {1, 0, 1, 0, 3, 0, 3, 0});
}

TEST(SignalOpsTest, StftErrors) {
  const at::Tensor signal = ramp().unsqueeze(0);
  expectNodeError({"STFT", 17, {signal, scalarI64(0)}}, "frame_step must be >= 1");
  expectNodeError({"STFT", 17, {signal, scalarI64(1), f32({1, 1}), scalarI64(3)}},
                  "window has 2 samples, frame_length is 3");
  expectNodeError({"STFT", 17, {signal, scalarI64(1), at::Tensor(), scalarI64(5)}},
                  "frame_length 5 must lie in [1, 4]");
  expectNodeError({"STFT", 17, {ramp(), scalarI64(1)}}, "signal must be [batch, length, 1 or 2]");
}

TEST(SignalOpsTest, WindowsMatchClosedForm) {
  expectValuesNear(run1({"HannWindow", 17, {scalarI64(4)}}), {4}, {0, 0.5, 1, 0.5});
  expectValuesNear(run1({"HannWindow", 17, {scalarI64(3)}, {Attribute::makeInt("periodic", 0)}}),
                   {3}, {0, 1, 0});
  expectValuesNear(run1({"HammingWindow", 17, {scalarI64(4)}}), {4},
                   {4.0 / 46, 25.0 / 46, 1, 25.0 / 46});
  // output_datatype 11 = DOUBLE.
  const at::Tensor blackman =
      run1({"BlackmanWindow", 17, {scalarI64(4)}, {Attribute::makeInt("output_datatype", 11)}});
  EXPECT_EQ(blackman.scalar_type(), at::kDouble);
  expectValuesNear(blackman, {4}, {0, 0.34, 1, 0.34}, 1e-12);
  EXPECT_EQ(run1({"HannWindow", 17, {at::scalar_tensor(0, at::kInt)}}).numel(), 0);
}

TEST(SignalOpsTest, WindowErrors) {
  expectNodeError({"HannWindow", 17, {scalarI64(-1)}}, "size must be >= 0");
  expectNodeError({"HammingWindow", 17, {scalarF32(4)}}, "size (input 0) must be an integer");
  expectNodeError(
      {"BlackmanWindow", 17, {scalarI64(4)}, {Attribute::makeInt("output_datatype", 8)}},
      "output_datatype");
}

TEST(SignalOpsTest, MelWeightMatrixShapeAndErrors) {
  const at::Tensor m =
      run1({"MelWeightMatrix",
            17,
            {scalarI64(4), scalarI64(16), scalarI64(8000), scalarF32(0), scalarF32(4000)}});
  ASSERT_EQ(m.sizes(), (std::vector<int64_t>{9, 4}));
  EXPECT_EQ(m.scalar_type(), at::kFloat);
  // Triangles: weights in [0, 1], each band peaking at exactly 1.
  EXPECT_TRUE((m >= 0).all().item<bool>() && (m <= 1).all().item<bool>());
  expectValuesNear(std::get<0>(m.max(0)), {4}, {1, 1, 1, 1});
  expectNodeError({"MelWeightMatrix",
                   17,
                   {scalarI64(4), scalarI64(16), scalarI64(0), scalarF32(0), scalarF32(4000)}},
                  "must be >= 1");
}

}  // namespace
}  // namespace qforge
