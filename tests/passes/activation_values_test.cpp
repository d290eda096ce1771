// Which values carry activations: float and derived from a runtime input's values, not from a
// shape query. Types come from the declared types, else from one sample run.
#include <gtest/gtest.h>

#include "ir/parse.h"
#include "passes/activation_values.h"
#include "support/quant_graphs.h"

namespace qforge::testing {
namespace {

using passes::ActivationValues;

TEST(ActivationValues, FloatValuesOfTheDataPathCarryActivations) {
  const Graph g = parseGraph(kShapeArithmeticGraph);
  const ActivationValues a(g);
  EXPECT_TRUE(a.carriesActivations(g.value("x")));
  EXPECT_TRUE(a.carriesActivations(g.value("y")));
  EXPECT_TRUE(a.carriesActivations(g.value("e")));  // an embedding looked up by token ids
  EXPECT_EQ(a.sampleRunFailure(), "");
}

TEST(ActivationValues, IntegersAndShapeDerivedFloatsDoNot) {
  const Graph g = parseGraph(kShapeArithmeticGraph);
  const ActivationValues a(g);
  for (const char* name : {"ids", "s", "n", "nf", "k", "yi", "zero", "half", "table"}) {
    EXPECT_FALSE(a.carriesActivations(g.value(name))) << name;
  }
  // The int64 Cast of an activation is found by the sample run, not declared.
  EXPECT_EQ(g.value("yi")->type.dtype, DType::Undefined);
  EXPECT_EQ(a.dtypeOf(g.value("yi")), DType::Int64);
  EXPECT_EQ(a.dtypeOf(g.value("y")), DType::Float);
}

TEST(ActivationValues, DeclaredTypesSufficeWhenTheGraphCannotRun) {
  // An op no lowering knows: no sample run, so only declared types and the data flow decide.
  const Graph g = parseGraph(R"(
    graph g
    opset "" 13
    opset "custom" 1
    input %x: float32[2,2]
    %c: int64[2,2] = custom::ToIndex(%x)
    %u = custom::Mystery(%x)
    output %c
    output %u
  )");
  const ActivationValues a(g);
  EXPECT_FALSE(a.carriesActivations(g.value("c")));  // declared int64
  EXPECT_TRUE(a.carriesActivations(g.value("u")));   // unknown type: judged by its source
  EXPECT_EQ(a.dtypeOf(g.value("u")), DType::Undefined);
  EXPECT_NE(a.sampleRunFailure().find("cannot run custom::"), std::string::npos)
      << a.sampleRunFailure();
}

TEST(ActivationValues, FloatTypesAreTheFourFloatingOnes) {
  for (DType t : {DType::Float, DType::Float16, DType::Double, DType::BFloat16}) {
    EXPECT_TRUE(passes::isFloatType(t)) << dtypeName(t);
  }
  for (DType t : {DType::Int64, DType::Int32, DType::UInt8, DType::Bool, DType::Undefined}) {
    EXPECT_FALSE(passes::isFloatType(t)) << dtypeName(t);
  }
}

}  // namespace
}  // namespace qforge::testing
