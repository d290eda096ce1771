#include "passes/upgrade_opset_rewrites.h"

#include <ATen/ATen.h>

#include <limits>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "core/error.h"

namespace qforge::passes::upgrade {

namespace {

[[noreturn]] void refuse(const Node& node, int64_t since, const std::string& why) {
  throw Error(node.describe() + ": cannot carry " + node.opType() + " over to opset " +
              std::to_string(since) + ": " + why);
}

std::string baseName(const Node& node) {
  return node.name().empty() ? node.outputs().front()->name() : node.name();
}

Value* constant(Graph& graph, const Node& node, const std::string& what, at::Tensor t) {
  return graph.addInitializer(graph.uniqueName(baseName(node) + "_" + what), std::move(t));
}

at::Tensor int64s(const std::vector<int64_t>& values) {
  at::Tensor t = at::empty({static_cast<int64_t>(values.size())}, at::kLong);
  for (size_t i = 0; i < values.size(); ++i)
    t[static_cast<int64_t>(i)] = values[i];
  return t;
}

// The element type of the node's data input, for bounds and fill values that must match it.
at::ScalarType dataType(const Node& node) {
  const DType t = node.input(0) != nullptr ? node.input(0)->type.dtype : DType::Undefined;
  return t != DType::Undefined && hasScalarType(t) ? toScalarType(t) : at::kFloat;
}

// Sets input `slot`, giving the optional inputs before it as omitted.
void setInputAt(Graph& graph, Node* node, size_t slot, Value* v) {
  while (node->inputs().size() < slot)
    graph.setInput(node, node->inputs().size(), nullptr);
  graph.setInput(node, slot, v);
}

// An ints attribute becomes an int64 input at `slot`; nothing when the attribute is absent.
void intsToInput(const Context& c, Node* node, const std::string& attr, size_t slot) {
  const Attribute* a = node->attributes.find(attr);
  if (a == nullptr) return;
  const at::Tensor values = int64s(a->ints);
  node->attributes.erase(attr);
  setInputAt(c.graph, node, slot, constant(c.graph, *node, attr, values));
}

// A node of `op_type` with the old one's inputs, attributes and first `outputs` outputs (under
// their names); the old node goes. Its other outputs must be unused.
Node* rebuild(Graph& graph, Node* old, const std::string& op_type, size_t outputs) {
  std::vector<std::string> names, fresh;
  for (size_t i = 0; i < outputs; ++i) {
    names.push_back(old->output(i)->name());
    fresh.push_back(graph.uniqueName(names.back() + "_upgraded"));
  }
  Node* node = graph.addNode(op_type, old->inputs(), fresh, old->name());
  node->attributes = old->attributes;
  node->doc_string = old->doc_string;
  node->metadata_props = old->metadata_props;
  for (size_t i = 0; i < outputs; ++i) {
    node->output(i)->type = old->output(i)->type;
    node->output(i)->doc_string = old->output(i)->doc_string;
    graph.replaceAllUsesWith(old->output(i), node->output(i), /*include_graph_outputs=*/true);
  }
  graph.removeNode(old);
  for (size_t i = 0; i < outputs; ++i)
    graph.renameValue(node->output(i), names[i]);
  return node;
}

// Outputs from `first` on must be unused (and not graph outputs) for the rewrite to drop them.
void checkUnusedFrom(const Context& c, const Node& node, size_t first, int64_t since,
                     const std::string& why) {
  for (size_t i = first; i < node.outputs().size(); ++i) {
    const Value* out = node.output(i);
    if (!out->uses().empty() || c.graph.isGraphOutput(out)) refuse(node, since, why);
  }
}

void noCheck(const Context&, const Node&) {}

Node* dropOutputsAfterFirst(const Context& c, Node* node) {
  return node->outputs().size() > 1 ? rebuild(c.graph, node, node->opType(), 1) : node;
}

// --- the rewrites, in opset order ----------------------------------------------------------

void checkBatchNormSpatial(const Context&, const Node& node) {
  const Attribute* a = node.attributes.find("spatial");
  if (a != nullptr && a->kind == AttributeKind::Int && a->i != 1) {
    refuse(node, 9, "spatial=0 (per-element statistics) has no form in opset 9");
  }
}
Node* batchNormSpatial(const Context&, Node* node) {
  node->attributes.erase("spatial");
  return node;
}

Node* upsampleScalesToInput(const Context& c, Node* node) {
  const Attribute* a = node->attributes.find("scales");
  if (a == nullptr) return node;
  const at::Tensor scales = at::tensor(at::ArrayRef<double>(a->floats), at::kDouble).to(at::kFloat);
  node->attributes.erase("scales");
  setInputAt(c.graph, node, 1, constant(c.graph, *node, "scales", scales));
  return node;
}

Node* upsampleToResize(const Context& c, Node* node) {
  Node* resize = rebuild(c.graph, node, "Resize", 1);
  const Attribute* mode = resize->attributes.find("mode");
  if (mode != nullptr && mode->s == "bilinear") {
    resize->attributes.set(Attribute::makeString("mode", "linear"));
  }
  return resize;
}

Node* sliceAttributesToInputs(const Context& c, Node* node) {
  intsToInput(c, node, "starts", 1);
  intsToInput(c, node, "ends", 2);
  intsToInput(c, node, "axes", 3);
  return node;
}

Node* topkToInput(const Context& c, Node* node) {
  const Attribute* k = node->attributes.find("k");
  if (k == nullptr) return node;
  const at::Tensor value = int64s({k->i});
  node->attributes.erase("k");
  setInputAt(c.graph, node, 1, constant(c.graph, *node, "k", value));
  return node;
}

void checkDropoutMask(const Context& c, const Node& node) {
  checkUnusedFrom(c, node, 1, 10, "its mask output, which is read, turns boolean at opset 10");
}

Node* clipBoundsToInputs(const Context& c, Node* node) {
  const at::ScalarType type = dataType(*node);
  const Attribute* lo = node->attributes.find("min");
  const Attribute* hi = node->attributes.find("max");
  Value* lo_value = lo ? constant(c.graph, *node, "min", at::scalar_tensor(lo->f, type)) : nullptr;
  Value* hi_value = hi ? constant(c.graph, *node, "max", at::scalar_tensor(hi->f, type)) : nullptr;
  node->attributes.erase("min");
  node->attributes.erase("max");
  if (lo_value != nullptr) setInputAt(c.graph, node, 1, lo_value);
  if (hi_value != nullptr) setInputAt(c.graph, node, 2, hi_value);
  return node;
}

Node* padAttributesToInputs(const Context& c, Node* node) {
  const Attribute* value = node->attributes.find("value");
  const double fill = value != nullptr ? value->f : 0.0;
  intsToInput(c, node, "pads", 1);
  node->attributes.erase("value");
  if (fill != 0.0) {
    setInputAt(c.graph, node, 2,
               constant(c.graph, *node, "value", at::scalar_tensor(fill, dataType(*node))));
  }
  return node;
}

// The nearest rounding that equals ONNX Runtime's Resize-10 on an axis scaled by `scale`: floor
// where it grows, ceiling where it shrinks (axes left at 1 sample whole coordinates: either).
std::string resize10Rounding(double scale) {
  return scale < 1 ? "ceil" : "floor";
}

void checkResize10Scales(const Context&, const Node& node) {
  if (node.opType() == "Upsample") return;  // scales >= 1: it only grows, so it floors
  const Attribute* mode = node.attributes.find("mode");
  if (mode != nullptr && mode->s != "nearest") return;
  const Value* scales = node.input(1);
  if (scales == nullptr || !scales->isInitializer()) {
    refuse(node, 11,
           "its nearest rounding depends on whether each axis grows or shrinks, and its scales "
           "are computed at run time; give the model a fixed input size so they fold to "
           "constants");
  }
}

// Resize-10 maps output to input coordinates as x_out / scale: opset 11's "asymmetric". Nearest
// rounding follows ONNX Runtime (see resize10Rounding); an axis that grows next to one that
// shrinks needs two rounding modes, so those become two Resizes, shrinking first (nearest
// sampling is separable, and each axis keeps its output size floor(in * scale)).
Node* resizeWithRoi(const Context& c, Node* node) {
  Graph& g = c.graph;
  Value* scales = node->input(1);
  Value* roi = constant(g, *node, "roi", at::empty({0}, at::kFloat));
  setInputAt(g, node, 1, roi);
  setInputAt(g, node, 2, scales);
  node->attributes.set(Attribute::makeString("coordinate_transformation_mode", "asymmetric"));
  const Attribute* mode = node->attributes.find("mode");
  if (mode != nullptr && mode->s != "nearest") return node;

  if (scales == nullptr || !scales->isInitializer()) {  // a former Upsample (see the check)
    node->attributes.set(Attribute::makeString("nearest_mode", "floor"));
    return node;
  }
  const at::Tensor s = scales->initializer().to(at::kDouble).contiguous();
  const bool grows = (s > 1).any().item<bool>(), shrinks = (s < 1).any().item<bool>();
  if (!(grows && shrinks)) {
    node->attributes.set(Attribute::makeString("nearest_mode", shrinks ? "ceil" : "floor"));
    return node;
  }
  const at::Tensor shrink_scales = at::where(s < 1, s, at::ones_like(s)).to(at::kFloat);
  const at::Tensor grow_scales = at::where(s > 1, s, at::ones_like(s)).to(at::kFloat);
  Node* shrink =
      g.addNode("Resize", {node->input(0), roi, constant(g, *node, "shrink_scales", shrink_scales)},
                {g.uniqueName(node->input(0)->name() + "_shrunk")}, baseName(*node) + "/shrink");
  shrink->attributes = node->attributes;
  shrink->attributes.set(Attribute::makeString("nearest_mode", resize10Rounding(0.5)));
  g.setInput(node, 0, shrink->output(0));
  setInputAt(g, node, 2, constant(g, *node, "grow_scales", grow_scales));
  node->attributes.set(Attribute::makeString("nearest_mode", resize10Rounding(2.0)));
  if (scales->uses().empty() && !g.isGraphOutput(scales) && !g.isGraphInput(scales)) {
    g.removeValue(scales);
  }
  return node;
}

Node* scatterToScatterElements(const Context& c, Node* node) {
  return rebuild(c.graph, node, "ScatterElements", 1);
}

Node* dropoutRatioToInput(const Context& c, Node* node) {
  const Attribute* ratio = node->attributes.find("ratio");
  if (ratio == nullptr) return node;
  const at::Tensor value = at::scalar_tensor(ratio->f, at::kFloat);
  node->attributes.erase("ratio");
  setInputAt(c.graph, node, 1, constant(c.graph, *node, "ratio", value));
  return node;
}

void checkSoftmaxRank(const Context& c, const Node& node) {
  if (!c.rank(node.input(0))) {
    refuse(node, 13,
           "its axis means one axis from opset 13 and the rewrite needs the input's rank, which "
           "neither the model's shapes nor a sample run gave");
  }
}

// Opset 13 normalises along one axis; before, over every axis from `axis` on (input coerced to
// 2-D). The same result: Flatten at that axis, the op on axis 1, and back to the input's shape.
Node* softmaxOnOneAxis(const Context& c, Node* node) {
  Graph& g = c.graph;
  const int64_t rank = *c.rank(node->input(0));
  const Attribute* a = node->attributes.find("axis");
  int64_t axis = a != nullptr ? a->i : 1;
  if (axis < 0) axis += rank;
  if (axis == rank - 1) {
    node->attributes.set(Attribute::makeInt("axis", axis));
    return node;
  }
  Value* x = node->input(0);
  const std::string base = baseName(*node);
  Node* flatten = g.addNode("Flatten", {x}, {g.uniqueName(x->name() + "_2d")}, base + "/flatten");
  flatten->attributes.set(Attribute::makeInt("axis", axis));
  Node* shape = g.addNode("Shape", {x}, {g.uniqueName(x->name() + "_shape")}, base + "/shape");
  g.setInput(node, 0, flatten->output(0));
  node->attributes.set(Attribute::makeInt("axis", 1));
  Value* y = node->output(0);
  const std::string name = y->name();
  const TensorType type = y->type;
  Node* reshape = g.insertOnValue(y, "Reshape", {}, base + "/reshape", /*move_graph_output=*/true);
  g.setInput(reshape, 1, shape->output(0));
  g.renameValue(y, g.uniqueName(name + "_2d"));
  y->type = TensorType{type.dtype, std::nullopt};
  g.renameValue(reshape->output(0), name);
  reshape->output(0)->type = type;
  return node;
}

Node* splitToInput(const Context& c, Node* node) {
  intsToInput(c, node, "split", 1);
  return node;
}

Node* axesToInput(const Context& c, Node* node) {
  intsToInput(c, node, "axes", 1);
  return node;
}

void checkResizeCoordinates(const Context&, const Node& node) {
  const Attribute* a = node.attributes.find("coordinate_transformation_mode");
  if (a != nullptr && a->s == "tf_half_pixel_for_nn") {
    refuse(node, 13, "coordinate_transformation_mode tf_half_pixel_for_nn does not exist there");
  }
}

// Opsets 7-13 tell training from inference by the output count alone (ONNX Runtime then
// normalizes with the batch's statistics), so any output past Y is a refusal, read or not.
void checkBatchNormOutputs(const Context&, const Node& node) {
  for (size_t i = 1; i < node.outputs().size(); ++i) {
    if (!node.output(i)->anonymous) {
      refuse(node, 14,
             "it has training-mode outputs (mean, var, saved_mean, saved_var), so it normalizes "
             "with each batch's statistics; export the model in inference (eval) mode");
    }
  }
}

using Key = std::pair<std::string, int64_t>;

const std::map<Key, Rewrite>& rewrites() {
  static const std::map<Key, Rewrite> table = {
      {{"BatchNormalization", 9}, {checkBatchNormSpatial, batchNormSpatial, ""}},
      {{"Upsample", 9}, {noCheck, upsampleScalesToInput, ""}},
      {{"Upsample", 10}, {noCheck, upsampleToResize, "Resize"}},
      {{"Slice", 10}, {noCheck, sliceAttributesToInputs, ""}},
      {{"TopK", 10}, {noCheck, topkToInput, ""}},
      {{"Dropout", 10}, {checkDropoutMask, dropOutputsAfterFirst, ""}},
      {{"Clip", 11}, {noCheck, clipBoundsToInputs, ""}},
      {{"Pad", 11}, {noCheck, padAttributesToInputs, ""}},
      {{"Resize", 11}, {checkResize10Scales, resizeWithRoi, ""}},
      {{"Scatter", 11}, {noCheck, scatterToScatterElements, "ScatterElements"}},
      {{"Dropout", 12}, {noCheck, dropoutRatioToInput, ""}},
      {{"Softmax", 13}, {checkSoftmaxRank, softmaxOnOneAxis, ""}},
      {{"LogSoftmax", 13}, {checkSoftmaxRank, softmaxOnOneAxis, ""}},
      {{"Hardmax", 13}, {checkSoftmaxRank, softmaxOnOneAxis, ""}},
      {{"Split", 13}, {noCheck, splitToInput, ""}},
      {{"Squeeze", 13}, {noCheck, axesToInput, ""}},
      {{"Unsqueeze", 13}, {noCheck, axesToInput, ""}},
      {{"ReduceSum", 13}, {noCheck, axesToInput, ""}},
      {{"Resize", 13}, {checkResizeCoordinates, [](const Context&, Node* n) { return n; }, ""}},
      {{"BatchNormalization", 14}, {checkBatchNormOutputs, dropOutputsAfterFirst, ""}},
  };
  return table;
}

}  // namespace

const Rewrite* rewriteFor(const std::string& op_type, int64_t since) {
  auto it = rewrites().find({op_type, since});
  return it == rewrites().end() ? nullptr : &it->second;
}

bool needsInputRank(const std::string& op_type, int64_t since) {
  return since == 13 && (op_type == "Softmax" || op_type == "LogSoftmax" || op_type == "Hardmax");
}

bool isCompatibleChange(const std::string& op_type, int64_t since) {
  // Reviewed against ONNX's operator changelog for opsets 8-17: new element types, new
  // attributes or optional inputs whose defaults keep the old behaviour, wider broadcasting.
  static const std::map<std::string, std::set<int64_t>> compatible = {
      {"Abs", {13}},
      {"Add", {13, 14}},
      {"ArgMax", {11, 12, 13}},
      {"ArgMin", {11, 12, 13}},
      {"AveragePool", {10, 11}},
      {"BatchNormalization", {15}},
      {"Cast", {9, 13}},
      {"Ceil", {13}},
      {"Clip", {12, 13}},
      {"Compress", {11}},
      {"Concat", {11, 13}},
      {"Constant", {9, 11, 12, 13}},
      {"Conv", {11}},
      {"ConvTranspose", {11}},
      {"CumSum", {14}},
      {"DepthToSpace", {11, 13}},
      {"DequantizeLinear", {13}},
      {"Div", {13, 14}},
      {"Dropout", {13}},
      {"Equal", {11, 13}},
      {"Erf", {13}},
      {"Exp", {13}},
      {"Expand", {13}},
      {"Flatten", {9, 11, 13}},
      {"Floor", {13}},
      {"GRU", {14}},
      {"Gather", {11, 13}},
      {"GatherElements", {13}},
      {"GatherND", {12, 13}},
      {"Gemm", {9, 11, 13}},
      {"Greater", {9, 13}},
      {"GreaterOrEqual", {16}},
      // If and Loop: outputs whose shapes vary (11), sequence (13) and optional (16) values.
      {"If", {11, 13, 16}},
      {"Hardmax", {11}},
      {"Identity", {13, 14, 16}},
      {"IsNaN", {13}},
      {"LRN", {13}},
      {"LSTM", {14}},
      {"LeakyRelu", {16}},
      {"Less", {9, 13}},
      {"LessOrEqual", {16}},
      {"Log", {13}},
      {"LogSoftmax", {11}},
      {"Loop", {11, 13, 16}},
      {"LpPool", {11}},
      {"MatMul", {9, 13}},
      {"Max", {8, 12, 13}},
      {"MaxPool", {8, 10, 11, 12}},
      {"MaxUnpool", {11}},
      {"Mean", {8, 13}},
      {"MeanVarianceNormalization", {13}},
      {"Min", {8, 12, 13}},
      {"Mod", {13}},
      {"Mul", {13, 14}},
      {"Neg", {13}},
      {"NegativeLogLikelihoodLoss", {13}},
      {"NonMaxSuppression", {11}},
      {"NonZero", {13}},
      {"OneHot", {11}},
      {"PRelu", {9, 16}},
      {"Pad", {13}},
      {"Pow", {12, 13, 15}},
      {"QuantizeLinear", {13}},
      {"RNN", {14}},
      {"Reciprocal", {13}},
      {"ReduceL1", {11, 13}},
      {"ReduceL2", {11, 13}},
      {"ReduceLogSum", {11, 13}},
      {"ReduceLogSumExp", {11, 13}},
      {"ReduceMax", {11, 12, 13}},
      {"ReduceMean", {11, 13}},
      {"ReduceMin", {11, 12, 13}},
      {"ReduceProd", {11, 13}},
      {"ReduceSum", {11}},
      {"ReduceSumSquare", {11, 13}},
      {"Relu", {13, 14}},
      {"Reshape", {13, 14}},
      // Scan 9 dropped the batch axis and sequence_lens: no rewrite, Scan-8 is refused.
      {"Scan", {11, 16}},
      {"ScatterElements", {13, 16}},
      {"ScatterND", {13, 16}},
      {"Shape", {13, 15}},
      {"Sigmoid", {13}},
      {"Sign", {13}},
      {"Size", {13}},
      {"Slice", {11, 13}},
      {"Softmax", {11}},
      {"SoftmaxCrossEntropyLoss", {13}},
      {"SpaceToDepth", {13}},
      {"Split", {11}},
      {"Sqrt", {13}},
      {"Squeeze", {11}},
      {"Sub", {13, 14}},
      {"Sum", {8, 13}},
      {"Tanh", {13}},
      {"Tile", {13}},
      {"TopK", {11}},
      {"Transpose", {13}},
      {"Unsqueeze", {11}},
      {"Where", {16}}};
  auto it = compatible.find(op_type);
  return it != compatible.end() && it->second.count(since) > 0;
}

}  // namespace qforge::passes::upgrade
