// The QOperator rewrite per op type, as ONNX Runtime's QDQ transformer organises it: a selector
// that says whether DequantizeLinear -> op [-> Relu/Clip] -> QuantizeLinear can run as one
// integer kernel (and if not, why not), and an action that puts that kernel in the group's place.
// Adding an integer kernel is one rule here; the driver (qoperator_onnx.cpp) needs no change.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "deploy/qdq_match.h"
#include "deploy/qoperator_onnx.h"
#include "ir/graph.h"

namespace qforge::deploy {

// One group a selector accepted.
struct KernelGroup {
  Node* op = nullptr;
  std::vector<Dq> inputs;      // the dequantized inputs, in the kernel's order
  Value* bias = nullptr;       // op's bias input (float initializer or DequantizeLinear(int32))
  Node* quantize = nullptr;    // the output's QuantizeLinear; nullptr when the kernel writes float
  Node* activation = nullptr;  // a Relu or Clip between op and quantize, or nullptr
};

// The graph being rewritten and the edits every action shares.
class QOperatorRewrite {
 public:
  explicit QOperatorRewrite(Graph& g) : g_(g) {}

  Graph& graph() { return g_; }
  const Graph& graph() const { return g_; }
  QOperatorSummary& summary() { return summary_; }
  bool removed(const Node* n) const { return removed_.count(n) > 0; }

  // The op's output reaches one QuantizeLinear, directly or through one Relu / Clip: that
  // QuantizeLinear and the activation between (or nullptr), else {nullptr, nullptr}.
  std::pair<Node*, Node*> outputQuantize(const Node* op) const;

  Node* addDequantize(Value* q, Value* scale, Value* zp, const std::string& base);
  Node* addKernel(const std::string& type, const std::vector<Value*>& inputs, const Node* op,
                  const std::string& domain = "");
  // The int32 bias of a kernel whose accumulator has scale x_scale * w_scale: the stored
  // integers of a DequantizeLinear(int32), or a float bias quantized here; nullptr for none.
  Value* int32Bias(Value* bias, const Dq& x, const Dq& w);
  // Puts `kernel` (whose output carries the group's quantize parameters) in place of the group.
  void finish(Node* kernel, const KernelGroup& group);
  // Puts `kernel`, which writes float as `group.op` did, in its place (QGemm without a quantized
  // output).
  void finishFloat(Node* kernel, const KernelGroup& group);

 private:
  bool activationIsNoOp(const Node* act, const Node* q) const;
  void record(const Node* kernel, const Node* op);

  Graph& g_;
  std::set<const Node*> removed_;
  QOperatorSummary summary_;
};

struct QOperatorRule {
  const char* kernel;  // "QLinearConv"
  // "" when `op` heads a group the rule can rewrite (then `group` is filled), else why not.
  std::string (*select)(Node& op, const QOperatorRewrite& rewrite, KernelGroup& group);
  void (*apply)(const KernelGroup& group, QOperatorRewrite& rewrite);
};

// The rule for `op`, nullptr when ONNX Runtime has no integer kernel for its type.
const QOperatorRule* qoperatorRuleFor(const Node& op);

// Whether a float bias can be stored as int32 levels, or already is (DequantizeLinear(int32)).
bool biasConvertible(const Value* bias);

}  // namespace qforge::deploy
