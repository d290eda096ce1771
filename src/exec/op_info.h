// The OpInfo table: for each ONNX op (by domain and opset range) its ATen lowering plus the facts
// later layers need (weight/bias slots, output-channel axis, whether it only moves data).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace qforge {

// What a lowering sees of one node while it runs.
class OpContext {
 public:
  OpContext(const Node& node, int64_t opset, std::vector<at::Tensor> inputs)
      : node_(node), opset_(opset), inputs_(std::move(inputs)) {}

  const Node& node() const { return node_; }
  int64_t opset() const { return opset_; }

  size_t inputCount() const { return inputs_.size(); }
  // True when input `i` was given (not omitted and not past the end).
  bool hasInput(size_t i) const { return i < inputs_.size() && inputs_[i].defined(); }
  // Input `i`; throws qforge::Error naming the node when it is missing.
  const at::Tensor& input(size_t i) const;
  const std::vector<at::Tensor>& inputs() const { return inputs_; }
  // True when the lowering may write its result into input `i`'s memory: the executor sets this
  // only when nothing else can observe that tensor again (last reader, sole owner of its
  // storage, not an initializer, feed or requested output, no autograd). Eager PyTorch's
  // in-place activations save the same allocations.
  bool mayOverwriteInput(size_t i) const { return i < overwritable_.size() && overwritable_[i]; }
  void setOverwritable(std::vector<bool> flags) { overwritable_ = std::move(flags); }
  // Number of declared outputs of the node (some ops, e.g. Split, produce that many).
  size_t outputCount() const { return node_.outputs().size(); }

  bool hasAttr(const std::string& name) const { return node_.attributes.has(name); }
  int64_t attrInt(const std::string& name, int64_t fallback) const;
  int64_t attrInt(const std::string& name) const;  // required
  double attrFloat(const std::string& name, double fallback) const;
  std::string attrString(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> attrInts(const std::string& name,
                                const std::vector<int64_t>& fallback) const;
  std::vector<double> attrFloats(const std::string& name,
                                 const std::vector<double>& fallback) const;
  at::Tensor attrTensor(const std::string& name) const;  // required

  // Throws qforge::Error "node 'x' (Op, opset N): <message>".
  [[noreturn]] void fail(const std::string& message) const;

 private:
  const Attribute& attr(const std::string& name, AttributeKind kind) const;

  const Node& node_;
  int64_t opset_;
  std::vector<at::Tensor> inputs_;
  std::vector<bool> overwritable_;
};

// Lowers one node: returns one tensor per output (an undefined tensor for an unused optional
// output is allowed).
using Lowering = std::function<std::vector<at::Tensor>(const OpContext&)>;

struct OpInfo {
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  int64_t since_version = 1;
  int64_t until_version = 1 << 30;  // inclusive
  Lowering run;
  // Quantization facts.
  std::vector<int> weight_inputs;  // input slots that hold weights (e.g. Conv: {1})
  int bias_input = -1;             // input slot of the bias, -1 when none
  int weight_channel_axis = 0;     // output-channel axis of the weight (ConvTranspose: 1)
  bool moves_data_only = false;    // Reshape, Transpose, MaxPool...: values pass through
};

class OpRegistry {
 public:
  // Adds an entry; throws when it overlaps an existing entry's opset range for the same op.
  void add(OpInfo info);
  // Drops every entry of (domain, op_type), so that a variant table can register its own.
  void remove(const std::string& domain, const std::string& op_type);
  // The entry covering `opset` for (domain, op_type), or nullptr.
  const OpInfo* find(const std::string& domain, const std::string& op_type, int64_t opset) const;
  // True when some entry exists for the op at any opset.
  bool knowsOp(const std::string& domain, const std::string& op_type) const;
  std::vector<std::string> opTypes() const;  // sorted, "domain::Op" for non-default domains

  // The registry with every built-in lowering (built on first use by explicit registration).
  static const OpRegistry& builtin();

 private:
  std::vector<OpInfo> entries_;
};

// Explicit registration of the built-in op families (one file each under exec/ops/).
void registerElementwiseOps(OpRegistry& registry);
void registerActivationOps(OpRegistry& registry);
void registerReductionOps(OpRegistry& registry);
void registerNnOps(OpRegistry& registry);  // Conv, ConvTranspose, Gemm, MatMul, Einsum
void registerPoolingOps(OpRegistry& registry);
void registerNormalizationOps(OpRegistry& registry);
void registerShapeOps(OpRegistry& registry);      // Reshape, Transpose, Concat, Slice, Gather...
void registerResizeOps(OpRegistry& registry);     // Resize, Upsample, Pad
void registerQuantizedOps(OpRegistry& registry);  // QuantizeLinear, QLinearConv, ...
void registerOpenVinoOps(OpRegistry& registry);   // org.openvinotoolkit FakeQuantize

}  // namespace qforge
