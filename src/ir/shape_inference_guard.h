// Keeps ONNX's shape inference (Debian 12's libonnx 1.12) from reading out of bounds on models
// whose convolutions disagree with their inputs. For Conv, ConvTranspose, ConvInteger and
// QLinearConv without a kernel_shape attribute, ONNX takes the kernel from the weight's dims and
// indexes the input's spatial dims and the dilations with it, unchecked: a 4-D weight on a 2-D
// input made `qforge inspect` crash with SIGSEGV (found by fuzzing, issue #22). With the attribute
// present, ONNX checks its length against the input's rank and gives up cleanly instead. And it
// divides by a convolution's or pool's strides unchecked (SIGFPE on a stride of 0): a model with
// such a node is not shape-inferred at all (inference is advisory; the executor refuses the node),
// nor is one with a Scan, Loop or If missing a body, which ONNX's inference dereferences.
#pragma once

#include <onnx/onnx_pb.h>

#include <vector>

namespace qforge {

// While alive, every such node whose weight has a statically known shape (an initializer, or a
// graph input or value_info with known dims, in its graph or an enclosing one) carries the
// kernel_shape ONNX's spec says it implies (the weight's dims after the first two). The
// destructor removes exactly those attributes again, so the model is as read.
class ShapeInferenceGuard {
 public:
  explicit ShapeInferenceGuard(onnx::ModelProto& model);
  ~ShapeInferenceGuard();
  ShapeInferenceGuard(const ShapeInferenceGuard&) = delete;
  ShapeInferenceGuard& operator=(const ShapeInferenceGuard&) = delete;

  // False when ONNX's inference would crash on the model even with the added attributes.
  bool inferenceIsSafe() const { return safe_; }

 private:
  std::vector<onnx::NodeProto*> added_;  // nodes whose last attribute is one we added
  bool safe_ = true;
};

}  // namespace qforge
