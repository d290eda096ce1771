// One rule per ONNX Runtime integer kernel. A selector only reads the graph and returns why it
// refuses; its action is the only code that edits.
#include "deploy/qoperator_rules.h"

#include <ATen/ATen.h>

#include <cmath>

#include "exec/ops/ort_qlinear_softmax.h"

namespace qforge::deploy {

namespace {

constexpr const char* kMicrosoft = "com.microsoft";

const char* const kNotPerTensorInput =
    "an input is not a per-tensor DequantizeLinear with constant parameters";
const char* const kNoQuantizedOutput =
    "its output (or its Relu/Clip's) is not read by exactly one per-tensor QuantizeLinear";

// The output QuantizeLinear (and the activation before it) into `group`; false when there is none.
bool takeOutput(const Node& op, const QOperatorRewrite& rewrite, KernelGroup& group) {
  std::tie(group.quantize, group.activation) = rewrite.outputQuantize(&op);
  return group.quantize != nullptr;
}

bool sameContainer(const Dq& x, const Node* q) {
  return x.zero_point->initializer().scalar_type() == q->input(2)->initializer().scalar_type();
}

at::ScalarType containerOf(const Dq& d) {
  return d.zero_point != nullptr && d.zero_point->isInitializer()
             ? d.zero_point->initializer().scalar_type()
             : at::kByte;
}

// What ONNX Runtime's integer kernels take of an activation x, a weight w and the output's
// QuantizeLinear q (nullptr: float output), as the emulation in exec/ops/ort_integer.cpp checks
// it: x and the output in one 8-bit type, and an int8 weight under an int8 x. "" when they fit.
std::string ortTypesRefusal(const Dq& x, const Dq& w, const Node* q) {
  if (q != nullptr && !sameContainer(x, q)) {
    return "its input and output are stored in different 8-bit types (int8 and uint8), which "
           "ONNX Runtime's kernel does not mix";
  }
  if (containerOf(x) == at::kChar && containerOf(w) != at::kChar) {
    return "its input is int8 but its weight uint8, which ONNX Runtime's kernel does not take";
  }
  return "";
}

// The eight inputs QLinearConv, QLinearMatMul and the binary kernels start with.
std::vector<Value*> twoInputsAndOutput(const KernelGroup& group) {
  const Dq& a = group.inputs[0];
  const Dq& b = group.inputs[1];
  const Node* q = group.quantize;
  return {a.q, a.scale, a.zero_point, b.q, b.scale, b.zero_point, q->input(1), q->input(2)};
}

std::string selectConv(Node& op, const QOperatorRewrite& rewrite, KernelGroup& group) {
  auto x = perTensorDq(op.input(0));
  auto w = dqOf(op.input(1));
  if (!x || !w) return kNotPerTensorInput;
  if (!constantIntegers(*w)) return "its weight is not constant int8/uint8";
  if (!w->per_tensor && w->axis != 0) return "its weight is not quantized per output channel";
  if (!takeOutput(op, rewrite, group)) return kNoQuantizedOutput;
  if (!biasConvertible(op.input(2))) return "its bias is not a constant";
  if (std::string why = ortTypesRefusal(*x, *w, group.quantize); !why.empty()) return why;
  // ORT's QLinearConv runs one GEMM with a single weight offset for all channels.
  const at::Tensor w_zp = w->zero_point != nullptr && w->zero_point->isInitializer()
                              ? w->zero_point->initializer()
                              : at::Tensor();
  if (w_zp.defined() && w_zp.numel() > 1 && !w_zp.eq(w_zp.reshape({-1})[0]).all().item<bool>()) {
    return "its weight zero points differ between channels, and ONNX Runtime's QLinearConv "
           "takes one for all";
  }
  group.op = &op;
  group.inputs = {*x, *w};
  group.bias = op.input(2);
  return "";
}

void applyConv(const KernelGroup& group, QOperatorRewrite& rewrite) {
  std::vector<Value*> inputs = twoInputsAndOutput(group);
  if (Value* bias = rewrite.int32Bias(group.bias, group.inputs[0], group.inputs[1]))
    inputs.push_back(bias);
  Node* k = rewrite.addKernel("QLinearConv", inputs, group.op);
  k->attributes = group.op->attributes;
  rewrite.finish(k, group);
}

std::string selectMatMul(Node& op, const QOperatorRewrite& rewrite, KernelGroup& group) {
  auto a = perTensorDq(op.input(0));
  auto b = dqOf(op.input(1));
  if (!a || !b) return kNotPerTensorInput;
  // Per-column scales: only a constant 2-D B quantized along its last axis.
  if (!b->per_tensor && (!constantIntegers(*b) || b->q->initializer().dim() != 2 || b->axis != 1)) {
    return "B is per channel but not a constant 2-D matrix quantized per column";
  }
  if (!takeOutput(op, rewrite, group)) return kNoQuantizedOutput;
  if (std::string why = ortTypesRefusal(*a, *b, group.quantize); !why.empty()) return why;
  group.op = &op;
  group.inputs = {*a, *b};
  return "";
}

void applyMatMul(const KernelGroup& group, QOperatorRewrite& rewrite) {
  rewrite.finish(rewrite.addKernel("QLinearMatMul", twoInputsAndOutput(group), group.op), group);
}

std::string selectGemm(Node& op, const QOperatorRewrite& rewrite, KernelGroup& group) {
  auto a = perTensorDq(op.input(0));
  auto b = dqOf(op.input(1));
  if (!a || !b) return kNotPerTensorInput;
  if (!constantIntegers(*b)) return "B is not constant int8/uint8";
  if (intAttr(&op, "transA", 0) != 0 || floatAttr(&op, "alpha", 1.0) != 1.0) {
    return "QGemm takes neither transA nor alpha != 1";
  }
  if (op.input(2) != nullptr && floatAttr(&op, "beta", 1.0) != 1.0) {
    return "QGemm takes no beta != 1";
  }
  const int64_t trans_b = intAttr(&op, "transB", 0);
  if (!b->per_tensor && b->axis != (trans_b ? 0 : 1)) return "B is not quantized per column";
  if (!biasConvertible(op.input(2))) return "its bias is not a constant";
  takeOutput(op, rewrite, group);  // optional: QGemm may write float
  if (std::string why = ortTypesRefusal(*a, *b, group.quantize); !why.empty()) return why;
  group.op = &op;
  group.inputs = {*a, *b};
  group.bias = op.input(2);
  return "";
}

void applyGemm(const KernelGroup& group, QOperatorRewrite& rewrite) {
  const Dq& a = group.inputs[0];
  const Dq& b = group.inputs[1];
  std::vector<Value*> inputs = {
      a.q, a.scale, a.zero_point, b.q, b.scale, b.zero_point, rewrite.int32Bias(group.bias, a, b)};
  if (group.quantize != nullptr) {
    inputs.push_back(group.quantize->input(1));
    inputs.push_back(group.quantize->input(2));
  }
  Node* k = rewrite.addKernel("QGemm", inputs, group.op, kMicrosoft);
  k->attributes.set(Attribute::makeInt("transB", intAttr(group.op, "transB", 0)));
  if (group.quantize != nullptr) return rewrite.finish(k, group);
  rewrite.finishFloat(k, group);
}

std::string selectBinary(Node& op, const QOperatorRewrite& rewrite, KernelGroup& group) {
  auto a = perTensorDq(op.input(0));
  auto b = perTensorDq(op.input(1));
  if (!a || !b) return kNotPerTensorInput;
  if (!takeOutput(op, rewrite, group)) return kNoQuantizedOutput;
  if (!sameContainer(*a, group.quantize) || !sameContainer(*b, group.quantize)) {
    return "its inputs and output are not all int8 or all uint8";
  }
  group.op = &op;
  group.inputs = {*a, *b};
  return "";
}

void applyBinary(const KernelGroup& group, QOperatorRewrite& rewrite) {
  Node* k = rewrite.addKernel("QLinear" + group.op->opType(), twoInputsAndOutput(group), group.op,
                              kMicrosoft);
  rewrite.finish(k, group);
}

// One dequantized input, a quantized output (through a Relu/Clip the rewrite handles), one 8-bit
// type: the pools.
std::string selectPool(Node& op, const QOperatorRewrite& rewrite, KernelGroup& group) {
  auto x = perTensorDq(op.input(0));
  if (!x) return kNotPerTensorInput;
  if (!takeOutput(op, rewrite, group)) return kNoQuantizedOutput;
  if (!sameContainer(*x, group.quantize)) return "its input and output containers differ";
  group.op = &op;
  group.inputs = {*x};
  return "";
}

// DequantizeLinear -> op -> QuantizeLinear with nothing between: the groups ONNX Runtime's QDQ
// transformer turns into LeakyRelu's, Sigmoid's and Softmax's com.microsoft kernels.
std::string selectUnary(Node& op, const QOperatorRewrite& rewrite, KernelGroup& group) {
  if (std::string why = selectPool(op, rewrite, group); !why.empty()) return why;
  if (group.activation != nullptr) return "a Relu/Clip lies between it and its QuantizeLinear";
  if (op.opType() == "Softmax") {
    // ORT's kernel overflows for small output scales (exec/ops/ort_qlinear_softmax.h).
    const int64_t d =
        ort_integer::softmaxRowLength(op, ort_integer::softmaxOpset(rewrite.graph().model));
    const Value* y_scale = group.quantize->input(1);
    if (d == 0 || y_scale == nullptr || !y_scale->isInitializer()) {
      return "its row length or output scale is not known here, and ONNX Runtime's "
             "QLinearSoftmax overflows for small output scales";
    }
    const float scale = y_scale->initializer().to(at::kFloat).item<float>();
    if (ort_integer::qlinearSoftmaxOverflows(scale, d)) {
      return "ONNX Runtime's QLinearSoftmax would overflow: floor(1 / y_scale) = " +
             std::to_string(static_cast<int64_t>(std::floor(1.0f / scale))) + " >= e^5 x " +
             std::to_string(d) + " (row length)";
    }
  }
  return "";
}

void applyUnary(const KernelGroup& group, QOperatorRewrite& rewrite) {
  const Dq& x = group.inputs[0];
  const Node* q = group.quantize;
  Node* k = rewrite.addKernel("QLinear" + group.op->opType(),
                              {x.q, x.scale, x.zero_point, q->input(1), q->input(2)}, group.op,
                              kMicrosoft);
  k->attributes = group.op->attributes;
  const std::string& type = group.op->opType();
  if (type == "AveragePool" || type == "GlobalAveragePool") {
    k->attributes.set(Attribute::makeInt("channels_last", 0));
  } else if (type == "Softmax") {
    // QLinearSoftmax stands for the Softmax of one opset: below 13 it flattens from its axis
    // (default 1), from 13 it reduces that axis alone (default -1).
    const int64_t opset = ort_integer::softmaxOpset(rewrite.graph().model);
    k->attributes.set(Attribute::makeInt("opset", opset));
    k->attributes.set(Attribute::makeInt("axis", intAttr(group.op, "axis", opset < 13 ? 1 : -1)));
  }
  rewrite.finish(k, group);
}

std::string selectConcat(Node& op, const QOperatorRewrite& rewrite, KernelGroup& group) {
  if (!takeOutput(op, rewrite, group)) return kNoQuantizedOutput;
  for (Value* v : op.inputs()) {
    auto x = perTensorDq(v);
    if (!x) return kNotPerTensorInput;
    if (!sameContainer(*x, group.quantize)) return "its inputs and output containers differ";
    group.inputs.push_back(*x);
  }
  group.op = &op;
  return "";
}

void applyConcat(const KernelGroup& group, QOperatorRewrite& rewrite) {
  const Node* q = group.quantize;
  std::vector<Value*> inputs = {q->input(1), q->input(2)};
  for (const Dq& x : group.inputs)
    inputs.insert(inputs.end(), {x.q, x.scale, x.zero_point});
  Node* k = rewrite.addKernel("QLinearConcat", inputs, group.op, kMicrosoft);
  k->attributes.set(Attribute::makeInt("axis", intAttr(group.op, "axis", 0)));
  rewrite.finish(k, group);
}

const std::map<std::string, QOperatorRule>& rulesByOpType() {
  static const std::map<std::string, QOperatorRule> rules = {
      {"Conv", {"QLinearConv", selectConv, applyConv}},
      {"MatMul", {"QLinearMatMul", selectMatMul, applyMatMul}},
      {"Gemm", {"QGemm", selectGemm, applyGemm}},
      {"Add", {"QLinearAdd", selectBinary, applyBinary}},
      {"Mul", {"QLinearMul", selectBinary, applyBinary}},
      {"AveragePool", {"QLinearAveragePool", selectPool, applyUnary}},
      {"GlobalAveragePool", {"QLinearGlobalAveragePool", selectPool, applyUnary}},
      {"Concat", {"QLinearConcat", selectConcat, applyConcat}},
      {"LeakyRelu", {"QLinearLeakyRelu", selectUnary, applyUnary}},
      {"Sigmoid", {"QLinearSigmoid", selectUnary, applyUnary}},
      {"Softmax", {"QLinearSoftmax", selectUnary, applyUnary}},
  };
  return rules;
}

}  // namespace

const QOperatorRule* qoperatorRuleFor(const Node& op) {
  if (!op.domain().empty()) return nullptr;
  const auto& rules = rulesByOpType();
  auto it = rules.find(op.opType());
  return it == rules.end() ? nullptr : &it->second;
}

}  // namespace qforge::deploy
