// The OpInfo table: for each ONNX op (by domain and opset range) its ATen lowering plus the facts
// later layers need (weight/bias slots and layout, BN folding, data movement, output sign). It
// is the one place those facts live: exec/op_traits.h asks it about a node.
#pragma once

#include <ATen/core/Tensor.h>

#include <any>
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
  // A slot the executor keeps for this node from run to run (a weight already in the layout the
  // kernel wants); null when the op runs outside an executor's plan. The lowering owns what it
  // puts there and must check it still matches its inputs.
  std::any* nodeState() const { return state_; }
  void setNodeState(std::any* state) { state_ = state; }
  // Number of declared outputs of the node (some ops, e.g. Split, produce that many).
  size_t outputCount() const { return node_.outputs().size(); }
  // The nodes after this one that the lowering may compute inside its own kernel
  // (OpInfo::fusable_followers): a Conv's BatchNormalization and activation, the rest of a
  // LayerNorm written out after its ReduceMean. Each reads at least one value computed by this
  // node or an earlier follower; those input slots are left undefined here (followerReads tells
  // which value a slot held). The executor offers them only up to the first value between them
  // that something can observe. Empty outside an executor's plan.
  const std::vector<OpContext>& tail() const { return tail_; }
  // True when input `slot` of follower `k` is output 0 of `source`: 0 for this node, j for
  // tail()[j - 1]. (k, slot, k) asks whether the follower reads the node right before it.
  bool followerReads(size_t k, size_t slot, size_t source) const;
  // closed[k]: the lowering may stop after tail()[k], no value computed before it being read
  // outside the nodes up to it (planned by the executor; see absorb()).
  void setTail(std::vector<OpContext> tail, std::vector<bool> closed) {
    tail_ = std::move(tail);
    tail_closed_ = std::move(closed);
  }
  // True when absorb(count) is allowed: count 0, or a point where the followers so far are closed.
  bool mayStopAfter(size_t count) const {
    return count == 0 ||
           (count <= tail_.size() && count <= tail_closed_.size() && tail_closed_[count - 1]);
  }
  // How many of tail() the lowering computed: its output 0 is then the last of those nodes'. The
  // count must be one mayStopAfter() allows (the executor checks it).
  size_t absorbed() const { return absorbed_; }
  void absorb(size_t count) const { absorbed_ = count; }

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
  std::any* state_ = nullptr;
  std::vector<OpContext> tail_;
  std::vector<bool> tail_closed_;
  mutable size_t absorbed_ = 0;
};

// Lowers one node: returns one tensor per output (an undefined tensor for an unused optional
// output is allowed).
using Lowering = std::function<std::vector<at::Tensor>(const OpContext&)>;

// How a weight's output channels lie in its tensor: the per-channel quantization axis, the
// channel count a new bias needs, and how a following BatchNormalization folds in.
enum class WeightLayout {
  None,                 // no output channels (PRelu's slope): per-tensor
  OutputFirst,          // [C_out, ...] (Conv, QLinearConv, ConvInteger): axis 0
  GroupedOutputSecond,  // [C_in, C_out / group, ...] (ConvTranspose): axis 1, group * size(1)
  GemmB,                // Gemm's B: [K, N] on axis 1, or [N, K] on axis 0 when transB=1
  LastAxis,             // MatMul's B [..., K, N]: the last axis
};

// What the sign of an op's output follows from; a signed grid is always safe, so Unknown is the
// conservative answer and ops get a stronger one only where a pass relies on it.
enum class OutputSign {
  Unknown,
  NonNegative,  // >= 0 whatever the input (Relu, Sigmoid, Softmax)
  OfDataInput,  // >= 0 wherever input 0 is (pooling, reshaping: values selected or averaged)
  OfAllInputs,  // >= 0 wherever every input is (Add)
};

// The newest ONNX opset whose default-domain ops the table was checked against. A later opset may
// redefine any op, so a model importing one is refused rather than run by an older definition.
inline constexpr int64_t kNewestOnnxOpset = 21;

struct OpInfo {
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  int64_t since_version = 1;
  int64_t until_version = 1 << 30;  // inclusive
  Lowering run;

  // Facts the quantization layers ask about (exec/op_traits.h answers them for a node). Every
  // entry of an op (one per opset range) carries them.
  std::vector<int> weight_inputs;  // input slots that hold weights (e.g. Conv: {1})
  int bias_input = -1;             // input slot of the bias, -1 when none
  WeightLayout weight_layout = WeightLayout::None;  // of the weights in weight_inputs
  // A following inference-mode BatchNormalization folds into the weight (along weight_layout's
  // output channels) and the bias: Conv, ConvTranspose, Gemm.
  bool absorbs_batchnorm = false;
  // Every input that is not a constant, weight or bias is an activation to quantize (Add,
  // Concat, MatMul); otherwise only input 0 is.
  bool combines_activations = false;
  // The output's values are a selection of the inputs' values: nothing is computed (Reshape,
  // Gather, Concat, MaxPool, ReduceMax).
  bool moves_data_only = false;
  // The output is input 0's elements, each exactly once, in another shape or order (Reshape,
  // Transpose, Identity, inference Dropout): it keeps its input's quantization, and a rounded
  // weight can be written back through it. Backends default such ops to "shares_input".
  bool layout_only = false;
  // The QOperator export may run the op on int8/uint8 between DequantizeLinear and its reader:
  // ONNX accepts 8-bit data at this opset and the op only moves input 0's values, so it
  // commutes with per-tensor (de)quantization. Recorded for the ops that export relies on
  // (checked against ONNX Runtime): the layout-only ops but Dropout (float only), and MaxPool
  // from opset 12.
  bool moves_int8 = false;
  // Computes shapes, indices or constants rather than activations (Shape, Constant, Cast): the
  // report does not list it among the ops a backend leaves in float.
  bool shape_computation = false;
  // Default-domain op types that the lowering may compute inside its own kernel when they come
  // right after the node (OpContext::tail): Conv's oneDNN kernel folds an inference
  // BatchNormalization and applies an activation. Purely an execution matter: the graph, its
  // quantization and its exports keep every node.
  std::vector<std::string> fusable_followers;
  OutputSign output_sign = OutputSign::Unknown;
  // Refines output_sign from the node's attributes and constant inputs (Clip's lower bound,
  // Resize's cubic mode); empty when output_sign holds for every node.
  std::function<OutputSign(const Node&)> output_sign_of;
};

class OpRegistry {
 public:
  // Adds an entry; throws when it overlaps an existing entry's opset range for the same op.
  void add(OpInfo info);
  // Drops every entry of (domain, op_type), so that a variant table can register its own.
  void remove(const std::string& domain, const std::string& op_type);
  // Gives every entry of (domain, op_type) the lowering `run`, keeping its facts; throws when
  // the op has no entry.
  void replaceLowering(const std::string& domain, const std::string& op_type, const Lowering& run);
  // The entry covering `opset` for (domain, op_type), or nullptr.
  const OpInfo* find(const std::string& domain, const std::string& op_type, int64_t opset) const;
  // True when some entry exists for the op at any opset.
  bool knowsOp(const std::string& domain, const std::string& op_type) const;
  std::vector<std::string> opTypes() const;  // sorted, "domain::Op" for non-default domains
  const std::vector<OpInfo>& entries() const { return entries_; }  // in registration order

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
void registerMathOps(OpRegistry& registry);       // Sin, Mod, Sum, CumSum, Det, Trilu, Size...
void registerLogicOps(OpRegistry& registry);      // And, Or, Xor, Not, BitShift, IsInf, IsNaN
void registerMoreActivationOps(OpRegistry& registry);  // Selu, Celu, Softplus, Hardmax...
void registerMoreReductionOps(OpRegistry& registry);   // ReduceL1, ReduceProd..., LRN, MVN
void registerSignalOps(OpRegistry& registry);          // DFT, STFT, windows, MelWeightMatrix
void registerSelectionOps(OpRegistry& registry);       // ArgMax, TopK, NonZero, Unique, Compress
void registerScatterGatherOps(OpRegistry& registry);   // GatherElements/ND, Scatter*, OneHot...
void registerSpaceOps(OpRegistry& registry);  // DepthToSpace, SpaceToDepth, MaxUnpool, GridSample
void registerDetectionOps(OpRegistry& registry);  // NonMaxSuppression, RoiAlign
void registerLossOps(OpRegistry& registry);  // NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
void registerRecurrentOps(OpRegistry& registry);  // RNN, GRU, LSTM

}  // namespace qforge
