// ONNX 1.12's shape inference indexes past a Conv's input dims when the weight has more of them
// and no kernel_shape says otherwise (SIGSEGV on a fuzzed model, issue #22): the guard gives such
// nodes the kernel_shape the weight implies for the time of inference, and takes it back.
#include "ir/shape_inference_guard.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "ir/onnx_import.h"
#include "support/onnx_builder.h"

namespace qforge::testing {
namespace {

// x is [N, 3] (rank 2), the weight [4, 3, 3, 3]: a 2-D kernel for an input with no spatial dims.
OnnxBuilder convOnAMatrix() {
  OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {1, 3});
  b.initializer("w", at::ones({4, 3, 3, 3}));
  b.node("Conv", {"x", "w"}, {"y"}, "conv");
  b.output("y", onnx::TensorProto::FLOAT, {});
  return b;
}

TEST(ShapeInferenceGuardTest, AddsTheImpliedKernelShapeWhileAliveOnly) {
  OnnxBuilder b = convOnAMatrix();
  const std::string before = b.bytes();
  {
    const ShapeInferenceGuard guard(b.model());
    const onnx::NodeProto& conv = b.model().graph().node(0);
    ASSERT_EQ(conv.attribute_size(), 1);
    EXPECT_EQ(conv.attribute(0).name(), "kernel_shape");
    EXPECT_EQ(
        std::vector<int64_t>(conv.attribute(0).ints().begin(), conv.attribute(0).ints().end()),
        (std::vector<int64_t>{3, 3}));
  }
  EXPECT_EQ(b.bytes(), before);
}

TEST(ShapeInferenceGuardTest, LeavesAnExplicitKernelShapeAlone) {
  OnnxBuilder b = convOnAMatrix();
  addIntsAttribute(*b.model().mutable_graph()->mutable_node(0), "kernel_shape", {3, 3});
  const std::string before = b.bytes();
  const ShapeInferenceGuard guard(b.model());
  EXPECT_EQ(b.bytes(), before);
}

TEST(ShapeInferenceGuardTest, AStrideOfZeroIsNotInferred) {
  OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {1, 3, 4, 4});
  onnx::NodeProto& pool = b.node("MaxPool", {"x"}, {"y"}, "pool");
  addIntsAttribute(pool, "kernel_shape", {2, 2});
  addIntsAttribute(pool, "strides", {0, 2});  // ONNX 1.12 divides by it: SIGFPE
  b.output("y", onnx::TensorProto::FLOAT, {});
  EXPECT_FALSE(ShapeInferenceGuard(b.model()).inferenceIsSafe());
  const Graph g = importOnnxModel(b.model(), ".");
  EXPECT_EQ(g.nodes().size(), 1u);
  EXPECT_TRUE(ShapeInferenceGuard(convOnAMatrix().model()).inferenceIsSafe());
}

TEST(ShapeInferenceGuardTest, ImportOfTheFuzzedShapeDoesNotCrash) {
  OnnxBuilder b = convOnAMatrix();
  const Graph g = importOnnxModel(b.model(), ".");  // inference gives up; the model is as read
  ASSERT_EQ(g.nodes().size(), 1u);
  EXPECT_EQ(g.nodes()[0]->attributes.find("kernel_shape"), nullptr);
}

// ONNX 1.12's Scan and Loop inference run the body's inferencer without checking there is one
// (SIGSEGV on a fuzzed Scan without a body, issue #22).
TEST(ShapeInferenceGuardTest, ControlFlowWithoutItsBodyIsNotInferred) {
  for (const char* op : {"Scan", "Loop", "If"}) {
    OnnxBuilder b;
    b.input("x", onnx::TensorProto::FLOAT, {1, 3});
    onnx::NodeProto& node = b.node(op, {"x"}, {"y"}, "flow");
    addIntsAttribute(node, "body_not_here", {1});
    b.output("y", onnx::TensorProto::FLOAT, {});
    EXPECT_FALSE(ShapeInferenceGuard(b.model()).inferenceIsSafe()) << op;
    // Refused or imported, never a crash.
    try {
      (void)importOnnxModel(b.model(), ".");
    } catch (const Error&) {
    }
  }
  // An If with both branches is inferred.
  OnnxBuilder b;
  b.input("c", onnx::TensorProto::BOOL, {});
  onnx::NodeProto& node = b.node("If", {"c"}, {"y"}, "if");
  for (const char* branch : {"then_branch", "else_branch"}) {
    onnx::AttributeProto* a = node.add_attribute();
    a->set_name(branch);
    a->set_type(onnx::AttributeProto::GRAPH);
    a->mutable_g()->set_name(branch);
  }
  b.output("y", onnx::TensorProto::FLOAT, {});
  EXPECT_TRUE(ShapeInferenceGuard(b.model()).inferenceIsSafe());
}

}  // namespace
}  // namespace qforge::testing
