// Small models with control flow, built as ONNX protos (the text form cannot hold a body): the
// IR tests check how bodies' outer reads are wired, the op tests what the bodies compute.
#pragma once

#include <ATen/ATen.h>
#include <onnx/onnx_pb.h>

#include "support/onnx_builder.h"

namespace qforge::testing {

// cond (bool scalar), x [N,3] -> rx = Relu(x) -> If(cond):
//   then: rx * two   (two: an outer initializer, 2)
//   else: rx - one   (one: the branch's own initializer, 1)
// -> y. rx is read only inside the branches.
inline onnx::ModelProto ifModel(int64_t opset = 13) {
  constexpr int32_t kFloat = onnx::TensorProto::FLOAT;
  OnnxBuilder then_branch(opset);
  then_branch.output("then_out", kFloat, {-1, 3});
  then_branch.node("Mul", {"rx", "two"}, {"then_out"}, "then_mul");
  OnnxBuilder else_branch(opset);
  else_branch.output("else_out", kFloat, {-1, 3});
  else_branch.initializer("one", at::scalar_tensor(1.f));
  else_branch.node("Sub", {"rx", "one"}, {"else_out"}, "else_sub");

  OnnxBuilder b(opset);
  b.input("cond", onnx::TensorProto::BOOL, {}).input("x", kFloat, {-1, 3});
  b.output("y", kFloat, {-1, 3});
  b.initializer("two", at::scalar_tensor(2.f));
  b.node("Relu", {"x"}, {"rx"}, "relu");
  onnx::NodeProto& node = b.node("If", {"cond"}, {"y"}, "if");
  addGraphAttribute(node, "then_branch", then_branch.model().graph());
  addGraphAttribute(node, "else_branch", else_branch.model().graph());
  return b.model();
}

}  // namespace qforge::testing
