#include "deploy/qdq_onnx.h"

#include <ATen/ATen.h>
#include <onnx/onnx_pb.h>

#include <cmath>

#include "core/error.h"
#include "deploy/ort_double_qdq_guard.h"
#include "deploy/ort_matmul_nbits_guard.h"
#include "exec/ops/ort_qlinear_softmax.h"
#include "ir/node_attributes.h"
#include "ir/onnx_export.h"
#include "ir/verifier.h"
#include "passes/deploy_opset.h"
#include "passes/fake_quantize_node.h"
#include "passes/upgrade_opset.h"
#include "quant/fake_quantizers/derived_bias.h"
#include "quant/fake_quantizers/nnie.h"

namespace qforge::deploy {

using passes::PointKind;
using passes::QuantPoint;

namespace {

class Lowerer {
 public:
  Lowerer(Graph& graph, passes::PreparedModel& model) : graph_(graph), model_(model) {}

  void lower(Node* fq) {
    const std::string name = passes::quantizerOf(*fq);
    quant::FakeQuantizer* q = model_.quantizer(name);
    require(q != nullptr, fq->describe() + ": no quantizer '" + name + "'");
    const QuantPoint* point = pointOf(name);
    Value* x = fq->input(0);
    Value* y = fq->output(0);
    if (auto* log_grid = dynamic_cast<quant::NnieFakeQuantizer*>(q)) {
      return lowerLogGrid(fq, x, y, *log_grid);
    }
    require(q->affine(), "quantizer '" + name + "' (" + q->kind() +
                             ") has no affine grid, which ONNX's QuantizeLinear cannot express; "
                             "deploy it with its backend's own writer");
    if (auto* bias = dynamic_cast<quant::DerivedBiasFakeQuantizer*>(q)) {
      return lowerDerivedBias(fq, x, y, *bias);
    }
    const quant::QParams params = q->qparams();
    const quant::QScheme& scheme = q->scheme();
    const bool baked = x->isInitializer() && point != nullptr &&
                       (point->kind == PointKind::Weight || point->kind == PointKind::Bias);
    if (baked) {
      // Bake the quantizer's own output in: exact for learned rounding, on the grid for Q/DQ.
      at::Tensor w = q->forward(x->initializer()).detach();
      Value* baked_value = graph_.addInitializer(graph_.uniqueName(x->name() + "_quantized"), w);
      graph_.setInput(fq, 0, baked_value);
      x = baked_value;
    }
    const int64_t rank = x->isInitializer() ? x->initializer().dim() : -1;
    const bool eight_bit = scheme.bits == 8 && scheme.rounding == quant::RoundingMode::HalfToEven;
    // A baked weight is on its grid, so QuantizeLinear returns its integers whatever the rounding
    // rule, and any grid of up to 8 bits fits an int8/uint8 container. Written as float
    // arithmetic instead, the weight is a constant expression: ONNX Runtime folds it and then
    // folds a following BatchNormalization into it (ConvBNFusion), which moves outputs by an ulp
    // and flips activations that sit on a rounding tie. Behind a DequantizeLinear it stays put.
    const bool integer_container =
        (eight_bit || (baked && scheme.bits <= 8)) && !overflowsOrtsQLinearSoftmax(x, params);
    const std::string base = graph_.uniqueName(name);
    Value* out;
    if (integer_container) {
      out = quantizeDequantize(x, params, scheme, base);
      quantized_[name] = out->producer()->input(0);  // the QuantizeLinear's integers
    } else {
      out = arithmetic(x, params, scheme, base, rank);
      quantized_[name] = levelsOf(out);
    }
    replace(fq, y, out);
  }

 private:
  const QuantPoint* pointOf(const std::string& quantizer) const {
    for (const QuantPoint& p : model_.points()) {
      if (p.quantizer == quantizer) return &p;
    }
    return nullptr;
  }

  // ONNX Runtime fuses DequantizeLinear -> Softmax -> QuantizeLinear into QLinearSoftmax, which
  // overflows for small output scales (exec/ops/ort_qlinear_softmax.h) and writes level 0 for the
  // largest probabilities. Written as arithmetic, the quantizer of such a Softmax's output leaves
  // nothing to fuse, and ORT computes what the graph says. With the row length unknown, any row
  // of two or more may overflow.
  bool overflowsOrtsQLinearSoftmax(const Value* x, const quant::QParams& p) const {
    const Node* softmax = x->producer();
    if (softmax == nullptr || softmax->opType() != "Softmax" || !isDefaultDomain(*softmax) ||
        p.scale.numel() != 1)
      return false;
    const int64_t d =
        ort_integer::softmaxRowLength(*softmax, ort_integer::softmaxOpset(graph_.model));
    return ort_integer::qlinearSoftmaxOverflows(p.scale.item<float>(), d > 0 ? d : 2);
  }

  Value* constant(const std::string& name, const at::Tensor& t) {
    return graph_.addInitializer(graph_.uniqueName(name), t.contiguous());
  }

  Value* quantizeDequantize(Value* x, const quant::QParams& p, const quant::QScheme& s,
                            const std::string& base) {
    const bool per_channel = s.perChannel() && p.scale.numel() > 1;
    const at::ScalarType zp_type = s.is_unsigned ? at::kByte : at::kChar;
    Value* scale = constant(base + "_scale", per_channel ? p.scale : p.scale.reshape({}));
    at::Tensor zp_values = p.zero_point.to(zp_type);
    Value* zp = constant(base + "_zero_point", per_channel ? zp_values : zp_values.reshape({}));
    Node* q = op("QuantizeLinear", {x, scale, zp}, base);
    Node* dq = op("DequantizeLinear", {q->output(0), scale, zp}, base);
    if (per_channel) {
      q->attributes.set(Attribute::makeInt("axis", s.axis));
      dq->attributes.set(Attribute::makeInt("axis", s.axis));
    }
    return dq->output(0);
  }

  Node* op(const std::string& type, const std::vector<Value*>& inputs, const std::string& base) {
    return graph_.addNode(type, inputs, {graph_.uniqueName(base + "_" + type)},
                          passes::uniqueNodeName(graph_, base + "/" + type));
  }

  // x/s rounded per the scheme, shifted by the zero point, clipped to the grid, and back.
  Value* arithmetic(Value* x, const quant::QParams& p, const quant::QScheme& s,
                    const std::string& base, int64_t rank) {
    const bool per_channel = s.perChannel() && p.scale.numel() > 1;
    require(!per_channel || rank > 0,
            "quantizer '" + base + "': a per-channel activation cannot be lowered");
    // Scale and zero point broadcast along the channel axis, or as scalars.
    const auto shaped = [&](const at::Tensor& t) {
      return per_channel ? quant::alongAxis(t.to(at::kFloat), s.axis, rank)
                         : t.to(at::kFloat).reshape({});
    };
    Value* scale = constant(base + "_scale", shaped(p.scale));
    Value* zp = constant(base + "_zero_point", shaped(p.zero_point));
    Value* v = op("Div", {x, scale}, base)->output(0);
    switch (s.rounding) {
      case quant::RoundingMode::HalfToEven:
        v = op("Round", {v}, base)->output(0);
        break;
      case quant::RoundingMode::HalfUp:
        v = roundHalfUp(v, base);
        break;
      case quant::RoundingMode::Floor:
        v = op("Floor", {v}, base)->output(0);
        break;
      case quant::RoundingMode::HalfAwayFromZero: {
        Value* sign = op("Sign", {v}, base)->output(0);
        Value* magnitude = roundHalfUp(op("Abs", {v}, base)->output(0), base);
        v = op("Mul", {sign, magnitude}, base)->output(0);
        break;
      }
    }
    v = op("Add", {v, zp}, base)->output(0);
    Value* lo = constant(base + "_qmin", at::scalar_tensor(static_cast<float>(s.qmin())));
    Value* hi = constant(base + "_qmax", at::scalar_tensor(static_cast<float>(s.qmax())));
    v = op("Clip", {v, lo, hi}, base)->output(0);
    v = op("Sub", {v, zp}, base)->output(0);
    return op("Mul", {v, scale}, base)->output(0);
  }

  // The integers of a chain from arithmetic(), held in float: the Clip onto [qmin, qmax] before
  // the zero point is taken off and the scale put back (Sub, Mul).
  static const Value* levelsOf(const Value* out) {
    const Node* sub = out->producer()->input(0)->producer();
    return sub->input(0);
  }

  // floor(v) + 1 on exact ties, round(v) elsewhere. Floor(v + 0.5) would be shorter but is wrong
  // in float32 just below a tie: 0.5 - 2^-25 + 0.5 rounds up to 1.
  Value* roundHalfUp(Value* v, const std::string& base) {
    Value* floor = op("Floor", {v}, base)->output(0);
    Value* half = constant(base + "_half", at::scalar_tensor(0.5f));
    Value* one = constant(base + "_one", at::scalar_tensor(1.0f));
    Value* is_tie = op("Equal", {op("Sub", {v, floor}, base)->output(0), half}, base)->output(0);
    return op("Where",
              {is_tie, op("Add", {floor, one}, base)->output(0), op("Round", {v}, base)->output(0)},
              base)
        ->output(0);
  }

  // NNIE's logarithmic grid (quant/fake_quantizers/nnie.h) as float arithmetic, so ONNX Runtime
  // runs what the chip computes: code = round(16 log2|x| - z) clamped to [0, 127] (positive) or
  // [1, 127] (negative), value +-2^((code + z) / 16), and 0 between -2^((z - 15) / 16) and
  // 2^((z - 16) / 16). A constant weight is baked: its grid values are stored as they are.
  void lowerLogGrid(Node* fq, Value* x, Value* y, quant::NnieFakeQuantizer& q) {
    if (x->isInitializer()) {
      Value* baked = constant(x->name() + "_log_quantized", q.forward(x->initializer()).detach());
      return replace(fq, y, baked);
    }
    const std::string base = graph_.uniqueName(q.name());
    const double z = quant::nnieGridOffset(q.dataMax());
    auto scalar = [&](const std::string& what, double v) {
      return constant(base + "_" + what, at::scalar_tensor(static_cast<float>(v)));
    };
    auto unary = [&](const std::string& type, Value* a) { return op(type, {a}, base)->output(0); };
    auto binary = [&](const std::string& type, Value* a, Value* b) {
      return op(type, {a, b}, base)->output(0);
    };
    // Constants both signs' branches share.
    Value* z_value = scalar("z", z);
    Value* sixteen = scalar("sixteen", 16);
    Value* two = scalar("two", 2);
    Value* code_max = scalar("code_max", 127);
    Value* log2 = binary("Div", unary("Log", unary("Abs", x)), scalar("ln2", std::log(2.0)));
    Value* code = unary("Round", binary("Sub", binary("Mul", log2, sixteen), z_value));
    auto magnitude = [&](double lowest) {
      Value* clipped = op("Clip", {code, scalar("code_min", lowest), code_max}, base)->output(0);
      return binary("Pow", two, binary("Div", binary("Add", clipped, z_value), sixteen));
    };
    Value* positive = magnitude(0);
    Value* negative = unary("Neg", magnitude(1));
    Value* is_positive =
        unary("Not", binary("Less", x, scalar("pos_zero", std::exp2((z - 16.0) / 16.0))));
    Value* is_negative = binary("Less", x, scalar("neg_zero", -std::exp2((z - 15.0) / 16.0)));
    Value* signed_part = op("Where", {is_negative, negative, scalar("zero", 0)}, base)->output(0);
    Value* grid_value = op("Where", {is_positive, positive, signed_part}, base)->output(0);
    quantized_[q.name()] = grid_value;  // the grid's values: verify's trace reads their codes
    replace(fq, y, grid_value);
  }

  void lowerDerivedBias(Node* fq, Value* x, Value* y, quant::DerivedBiasFakeQuantizer& q) {
    require(x->isInitializer(), "bias quantizer '" + q.name() + "' must read an initializer");
    const quant::QParams p = q.qparams();
    Value* stored = constant(x->name() + "_int32", q.levels(x->initializer()).to(at::kInt));
    Value* s = constant(x->name() + "_scale", p.scale.numel() > 1 ? p.scale : p.scale.reshape({}));
    Value* zp = constant(x->name() + "_zero_point", p.scale.numel() > 1
                                                        ? at::zeros({p.scale.numel()}, at::kInt)
                                                        : at::zeros({}, at::kInt));
    Node* dq = op("DequantizeLinear", {stored, s, zp}, q.name());
    if (p.scale.numel() > 1) dq->attributes.set(Attribute::makeInt("axis", 0));
    replace(fq, y, dq->output(0));
  }

  // Readers of the FakeQuantize node's output now read `out`; the node goes. A graph output keeps
  // its name.
  void replace(Node* fq, Value* y, Value* out) {
    const bool is_output = graph_.isGraphOutput(y);
    graph_.replaceAllUsesWith(y, out, true);
    const std::string name = y->name();
    out->type = y->type;  // a graph output must keep its declared type
    graph_.removeNode(fq);
    if (is_output) graph_.renameValue(out, name);
  }

  Graph& graph_;
  passes::PreparedModel& model_;

 public:
  // quantizer -> its integer tensor: a QuantizeLinear output, or an arithmetic chain's Clip
  std::map<std::string, const Value*> quantized_;
};

// The opset the lowered ops need: the QDQ floor (passes/deploy_opset.h), 13 for QuantizeLinear's
// axis.
int64_t opsetNeeded(const Graph& graph) {
  int64_t opset = passes::kQdqOpsetFloor;
  for (const Node* n : graph.nodes()) {
    const bool qdq = n->opType() == "QuantizeLinear" || n->opType() == "DequantizeLinear";
    if (qdq && n->attributes.has("axis")) opset = 13;
  }
  return opset;
}

}  // namespace

Graph toQdqGraph(passes::PreparedModel& model, QdqDetails* details) {
  Graph graph = model.graph().clone();
  Lowerer lowerer(graph, model);
  for (Node* n : graph.topologicalOrder()) {
    if (passes::isFakeQuantize(n)) lowerer.lower(n);
  }
  graph.model.opset_imports.erase(passes::kQforgeDomain);
  // prepare() raised the model to the opset these ops need (passes/deploy_opset.h); a prepared
  // model saved before it did, or prepared with a pass list without upgrade-opset, is raised here.
  passes::upgradeOpset(graph, opsetNeeded(graph));
  // Names first: the guard below leaves some weights' QuantizeLinear dead, and they go.
  std::map<std::string, std::string> quantized_values;
  for (const auto& [quantizer, value] : lowerer.quantized_)
    quantized_values[quantizer] = value->name();
  std::vector<std::string> weights_in_float = storeWeightOnlyMatMulWeightsInFloat(graph);
  // TensorRT parses int8 QuantizeLinear only.
  std::vector<std::string> retyped_pairs;
  if (model.backend().deploy_format != "tensorrt") retyped_pairs = keepDoubleQdqPairsApart(graph);
  graph.eliminateDeadCode();
  verifyGraph(graph);  // what runtimes will load: refuse here rather than write it
  if (details != nullptr) {
    for (const auto& [quantizer, value] : quantized_values) {
      if (graph.findValue(value) != nullptr) details->quantized_values[quantizer] = value;
    }
    details->weights_in_float = std::move(weights_in_float);
    details->retyped_pairs = std::move(retyped_pairs);
  }
  return graph;
}

nlohmann::json quantizerTable(passes::PreparedModel& model) {
  nlohmann::json out = nlohmann::json::array();
  for (const QuantPoint& p : model.points()) {
    quant::FakeQuantizer* q = model.quantizer(p.quantizer);
    nlohmann::json entry = {{"name", p.quantizer},
                            {"kind", passes::toString(p.kind)},
                            {"value", p.value},
                            {"unit", p.unit},
                            {"nodes", p.nodes},
                            {"fake_quantizer", q->kind()},
                            {"observer", q->observer() ? q->observer()->kind() : ""}};
    if (auto* bias = dynamic_cast<quant::DerivedBiasFakeQuantizer*>(q)) {
      entry["scheme"] =
          "int" + std::to_string(bias->bits()) + " symmetric, scale = s_input * s_weight";
      entry["bits"] = bias->bits();
    } else {
      entry["scheme"] = q->scheme().str();
      entry["bits"] = q->scheme().bits;
      entry["axis"] = q->scheme().axis;
      entry["unsigned"] = q->scheme().is_unsigned;
      entry["symmetric"] = q->scheme().symmetric;
      entry["qmin"] = q->scheme().qmin();
      entry["qmax"] = q->scheme().qmax();
      entry["scale_steps"] = q->scheme().scaleSteps();
    }
    const auto values = [](const at::Tensor& t) {
      const at::Tensor d = t.to(at::kDouble).contiguous().reshape({-1});
      return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + d.numel());
    };
    if (q->affine()) {
      const quant::QParams params = q->qparams();
      entry["scale"] = values(params.scale);
      const at::Tensor zp = params.zero_point.to(at::kLong).contiguous();
      entry["zero_point"] =
          std::vector<int64_t>(zp.data_ptr<int64_t>(), zp.data_ptr<int64_t>() + zp.numel());
    } else {
      // No scale / zero point describes the grid: its state does (NNIE: data_max).
      entry["scale"] = nlohmann::json::array();
      entry["zero_point"] = nlohmann::json::array();
      nlohmann::json state = nlohmann::json::object();
      for (const auto& [key, tensor] : q->state())
        state[key] = values(tensor);
      entry["state"] = state;
    }
    out.push_back(entry);
  }
  return out;
}

}  // namespace qforge::deploy
