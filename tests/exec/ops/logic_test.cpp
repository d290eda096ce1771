// Logic and bit lowerings (exec/ops/logic.cpp): table facts and opset ranges, BitShift and IsInf's
// flags against closed-form values, and the errors for wrong element types. ONNX's node tests
// (tests/conformance) check the main numerics.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <string>

#include "exec/op_info.h"
#include "support/op_facts.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using namespace testing;

at::Tensor bools(std::vector<bool> values) {
  at::Tensor t = at::empty({static_cast<int64_t>(values.size())}, at::kBool);
  for (size_t i = 0; i < values.size(); ++i)
    t[static_cast<int64_t>(i)] = static_cast<bool>(values[i]);
  return t;
}

TEST(LogicOpsTest, MasksAndBitPatternsAreShapeComputations) {
  for (const char* op : {"And", "Or", "Xor", "Not", "BitShift", "IsInf", "IsNaN"}) {
    const NodeFacts f = factsOf(op, 13);
    EXPECT_TRUE(f.known) << op;
    EXPECT_EQ(f.set, std::set<std::string>{"shape_computation"}) << op;
    EXPECT_EQ(f.sign, OutputSign::Unknown) << op;
  }
}

TEST(LogicOpsTest, OpsetRanges) {
  const OpRegistry& registry = OpRegistry::builtin();
  // And/Or/Xor 1-6 broadcast the legacy way and are not registered.
  for (const char* op : {"And", "Or", "Xor"}) {
    EXPECT_EQ(registry.find("", op, 6), nullptr) << op;
    EXPECT_NE(registry.find("", op, 7), nullptr) << op;
  }
  EXPECT_NE(registry.find("", "Not", 1), nullptr);
  EXPECT_EQ(registry.find("", "BitShift", 10), nullptr);
  EXPECT_EQ(registry.find("", "IsInf", 9), nullptr);
  EXPECT_NE(registry.find("", "IsNaN", 20), nullptr);
}

TEST(LogicOpsTest, BooleanOpsBroadcast) {
  const at::Tensor a = bools({true, false}).reshape({2, 1}), b = bools({true, false, true});
  expectTensorEqual(run1({"And", 7, {a, b}}),
                    bools({true, false, true, false, false, false}).reshape({2, 3}));
  expectTensorEqual(run1({"Or", 7, {a, b}}),
                    bools({true, true, true, true, false, true}).reshape({2, 3}));
  expectTensorEqual(run1({"Xor", 7, {a, b}}),
                    bools({false, true, false, true, false, true}).reshape({2, 3}));
  expectTensorEqual(run1({"Not", 1, {b}}), bools({false, true, false}));
}

TEST(LogicOpsTest, BooleanOpsRejectOtherTypes) {
  expectNodeError({"And", 7, {bools({true}), i64({1})}}, "input 1 must be Bool");
  expectNodeError({"Not", 1, {f32({1.f})}}, "input 0 must be Bool");
}

TEST(LogicOpsTest, BitShiftOnUint8) {
  const at::Tensor x = u8({1, 3, 200, 255}, {4}), amount = u8({2, 1, 1, 8}, {4});
  // 200 << 1 = 400 keeps its low 8 bits: 144; shifting by the width gives 0.
  expectTensorEqual(
      run1({"BitShift", 11, {x, amount}, {Attribute::makeString("direction", "LEFT")}}),
      u8({4, 6, 144, 0}, {4}));
  expectTensorEqual(
      run1({"BitShift", 11, {x, amount}, {Attribute::makeString("direction", "RIGHT")}}),
      u8({0, 1, 100, 0}, {4}));
}

TEST(LogicOpsTest, BitShiftErrors) {
  const at::Tensor x = u8({1}, {1});
  expectNodeError({"BitShift", 11, {x, x}, {Attribute::makeString("direction", "UP")}},
                  "must be \"LEFT\" or \"RIGHT\"");
  expectNodeError({"BitShift", 11, {x, x}}, "attribute 'direction'");
  expectNodeError(
      {"BitShift", 11, {i32({1}, {1}), x}, {Attribute::makeString("direction", "LEFT")}},
      "input 0 must be Byte");
}

TEST(LogicOpsTest, IsInfFlags) {
  const float inf = std::numeric_limits<float>::infinity();
  const at::Tensor x = f32({-inf, 1.f, inf, std::nanf("")}).to(at::kHalf);
  expectTensorEqual(run1({"IsInf", 10, {x}}), bools({true, false, true, false}));
  expectTensorEqual(run1({"IsInf", 10, {x}, {Attribute::makeInt("detect_positive", 0)}}),
                    bools({true, false, false, false}));
  expectTensorEqual(run1({"IsInf", 10, {x}, {Attribute::makeInt("detect_negative", 0)}}),
                    bools({false, false, true, false}));
  expectTensorEqual(
      run1({"IsInf",
            10,
            {x},
            {Attribute::makeInt("detect_negative", 0), Attribute::makeInt("detect_positive", 0)}}),
      bools({false, false, false, false}));
  expectTensorEqual(run1({"IsNaN", 13, {x}}), bools({false, false, false, true}));
}

TEST(LogicOpsTest, IsInfAndIsNaNRejectIntegers) {
  expectNodeError({"IsInf", 10, {i64({1})}}, "must be a floating-point tensor");
  expectNodeError({"IsNaN", 13, {i64({1})}}, "must be a floating-point tensor");
}

}  // namespace
}  // namespace qforge
