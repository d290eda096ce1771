// verify's cause of a traced difference, decided from what the trace measured: the float gap of
// the values entering the quantizer, where differing levels lie, and the rerun on ORT's inputs.
#include <gtest/gtest.h>

#include "verify/trace.h"

namespace qforge::verify {
namespace {

Divergence traced(double max_steps, FloatGap gap) {
  Divergence d;
  d.quantizer = "q";
  d.tensor = "t";
  d.max_steps = max_steps;
  d.float_gap = gap;
  return d;
}

TEST(TraceCause, NothingMeasuredMeansNoCause) {
  Divergence d;
  d.max_steps = 3;
  EXPECT_FALSE(differenceCause(d).has_value());
  EXPECT_EQ(describeCause(d, true), "");
}

TEST(TraceCause, LevelsOneApartAtBoundariesWithinTheGapAreRoundingTies) {
  // Values 3e-5 steps apart, each differing level from a value 1e-5 from x.5.
  const Divergence d = traced(1.0, FloatGap{3e-5, 4, 1.0, 1e-5});
  EXPECT_EQ(differenceCause(d), "rounding_ties");
  EXPECT_NE(describeCause(d, true).find("float rounding noise"), std::string::npos);
}

TEST(TraceCause, LevelsThatDifferFarFromABoundaryAreTheQuantizers) {
  // The same small gap, but a differing level from a value 0.3 steps from any boundary.
  EXPECT_EQ(differenceCause(traced(1.0, FloatGap{3e-5, 4, 1.0, 0.3})), "quantizer_differs");
  // Two levels apart cannot be a tie either.
  EXPECT_EQ(differenceCause(traced(2.0, FloatGap{3e-5, 4, 2.0, 1e-5})), "quantizer_differs");
}

TEST(TraceCause, LevelsEqualUnfusedButNotFusedAreTheFusedKernels) {
  EXPECT_EQ(differenceCause(traced(2.0, FloatGap{1e-6, 0, 0.0, 0.0})), "fused_kernel_differs");
  // Ties unfused, but more than a level in the trace: also the fused kernel.
  EXPECT_EQ(differenceCause(traced(3.0, FloatGap{1e-4, 2, 1.0, 1e-5})), "fused_kernel_differs");
}

TEST(TraceCause, InputsHalfAStepApartNeedTheRerunToTellCarriedFromAnOp) {
  Divergence d = traced(4.0, FloatGap{2.5, 100, 4.0, 0.4});
  EXPECT_EQ(differenceCause(d), "float_inputs_differ");
  EXPECT_NE(describeCause(d, true).find("an op before it computes differently"), std::string::npos);
  EXPECT_NE(describeCause(d, false).find("carried from the differences before it, or an op"),
            std::string::npos);

  d.rerun = LocalRerun{1.0, 0.0, {"Conv 'c1'", "Relu 'r1'"}, 1};
  EXPECT_EQ(differenceCause(d), "carried");
  const std::string carried = describeCause(d, false);
  EXPECT_NE(carried.find("carried from the differences before it"), std::string::npos);
  EXPECT_NE(carried.find("the 1 quantized value they compute from"), std::string::npos);
  EXPECT_NE(carried.find("Conv 'c1', Relu 'r1'"), std::string::npos);

  d.rerun = LocalRerun{3.0, 0.2, {"A 'a'", "B 'b'", "C 'c'", "D 'd'", "E 'e'", "F 'f'"}, 2};
  EXPECT_EQ(differenceCause(d), "op_differs");
  const std::string op = describeCause(d, false);
  EXPECT_NE(op.find("still give levels up to 3 apart"), std::string::npos) << op;
  EXPECT_NE(op.find("A 'a', B 'b', C 'c', D 'd' and 2 more"), std::string::npos) << op;
  EXPECT_NE(op.find("the 2 quantized values they compute from"), std::string::npos) << op;
}

}  // namespace
}  // namespace qforge::verify
