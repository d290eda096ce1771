#include "verify/ort_observed_model.h"

#include <fstream>
#include <map>
#include <set>

#include "core/error.h"

namespace qforge::verify {

namespace {

OrtRunner withoutOptimization(const OrtRunner& ort) {
  OrtRunnerOptions options = ort.options();
  options.optimization = OrtOptimization::Disabled;
  return OrtRunner(options);
}

// The integer a one-element initializer holds (a zero point), nullopt for anything else.
std::optional<int64_t> scalarInteger(const onnx::TensorProto& t) {
  int64_t elements = 1;
  for (int64_t d : t.dims())
    elements *= d;
  if (elements != 1) return std::nullopt;
  if (t.int32_data_size() == 1) return t.int32_data(0);
  const std::string& raw = t.raw_data();
  switch (t.data_type()) {
    case onnx::TensorProto::INT8:
      if (raw.size() == 1) return static_cast<int8_t>(raw[0]);
      break;
    case onnx::TensorProto::UINT8:
      if (raw.size() == 1) return static_cast<uint8_t>(raw[0]);
      break;
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::UINT16:
      if (raw.size() == 2) {
        const uint16_t bits = static_cast<uint16_t>(static_cast<uint8_t>(raw[0]) |
                                                    (static_cast<uint8_t>(raw[1]) << 8));
        if (t.data_type() == onnx::TensorProto::UINT16) return bits;
        return static_cast<int16_t>(bits);
      }
      break;
    default:
      break;
  }
  return std::nullopt;
}

// The input holding the output zero point of a kernel ORT fuses a QuantizeLinear into.
std::optional<int> outputZeroPointInput(const std::string& op) {
  static const std::map<std::string, int> inputs = {{"QLinearConv", 7},
                                                    {"QLinearMatMul", 7},
                                                    {"QLinearAdd", 7},
                                                    {"QLinearMul", 7},
                                                    {"QGemm", 8},
                                                    {"QLinearWhere", 8},
                                                    {"QLinearGlobalAveragePool", 4},
                                                    {"QLinearAveragePool", 4},
                                                    {"QLinearLeakyRelu", 4},
                                                    {"QLinearSigmoid", 4},
                                                    {"QLinearSoftmax", 4},
                                                    {"QLinearReduceMean", 4},
                                                    {"QLinearConcat", 1}};
  const auto it = inputs.find(op);
  if (it == inputs.end()) return std::nullopt;
  return it->second;
}

// ORT's kernels that move levels without computing new ones, so that their output is on their
// input's grid: its channels-last MaxPool on uint8/int8 (QDQ propagation moves a MaxPool's
// QuantizeLinear before it, and the Conv before fuses into a QLinearConv), and the shape ops.
bool movesLevels(const std::string& op) {
  static const std::set<std::string> ops = {"NhwcMaxPool", "MaxPool",   "Transpose", "Reshape",
                                            "Squeeze",     "Unsqueeze", "Flatten",   "Identity"};
  return ops.count(op) > 0;
}

bool isChannelsLast(const onnx::NodeProto& n) {
  for (const onnx::AttributeProto& a : n.attribute()) {
    if (a.name() == "channels_last") return a.i() != 0;
  }
  return false;
}

}  // namespace

OrtObservedModel::OrtObservedModel(const OrtRunner& ort, const std::string& path)
    : dir_("ort-observed"), runner_(withoutOptimization(ort)) {
  exported_ = readModelProto(path);
  optimized_ = ort.optimizedModel(path);
  for (const onnx::NodeProto& n : exported_.graph().node()) {
    for (const std::string& input : n.input())
      exported_readers_[input].push_back(&n);
    for (const std::string& output : n.output())
      exported_writers_[output] = &n;
  }
  for (const onnx::NodeProto& n : optimized_.graph().node()) {
    if (!n.name().empty()) optimized_nodes_[n.name()] = &n;
    for (const std::string& output : n.output())
      optimized_writers_[output] = &n;
  }
  for (const onnx::TensorProto& t : exported_.graph().initializer())
    exported_initializers_[t.name()] = &t;
  for (const onnx::TensorProto& t : optimized_.graph().initializer())
    optimized_initializers_[t.name()] = &t;
  traceLayouts();
}

// ORT's layout transformer runs some kernels channels-last (channels_last = 1) between Transposes
// it inserts, and the elementwise kernels between them take the layout they are given. Walking
// ORT's graph in order, each tensor's permutation of the model's axes is that of its first input
// held in another layout, composed with a Transpose's perm, or NHWC's for a channels-last kernel.
// Layout-free tensors (the model's own) are not listed.
void OrtObservedModel::traceLayouts() {
  for (const onnx::NodeProto& n : optimized_.graph().node()) {
    if (n.output_size() == 0) continue;
    std::vector<int64_t> perm;
    // The first input ORT holds in another layout: Paddle's Mul(constant, x) has it second.
    auto in = layouts_.end();
    for (const std::string& input : n.input()) {
      in = layouts_.find(input);
      if (in != layouts_.end()) break;
    }
    if (n.op_type() == "Transpose") {
      std::vector<int64_t> given;
      for (const onnx::AttributeProto& a : n.attribute()) {
        if (a.name() == "perm") given.assign(a.ints().begin(), a.ints().end());
      }
      std::vector<int64_t> before(given.size());
      for (size_t i = 0; i < before.size(); ++i)
        before[i] = static_cast<int64_t>(i);
      if (in != layouts_.end() && in->second.size() == given.size()) before = in->second;
      perm.resize(given.size());
      for (size_t i = 0; i < given.size(); ++i)
        perm[i] = given[i] >= 0 && given[i] < static_cast<int64_t>(before.size())
                      ? before[static_cast<size_t>(given[i])]
                      : static_cast<int64_t>(i);
    } else if (n.op_type() == "ReorderInput") {
      // Into ORT's blocked NCHWc layout for its float convolutions; channels_last says how the
      // input is held, and the blocked tensors between are no model tensors.
    } else if (n.op_type() == "ReorderOutput") {
      if (isChannelsLast(n)) perm = {0, 2, 3, 1};  // else back in the model's NCHW
    } else if (isChannelsLast(n)) {
      perm = {0, 2, 3, 1};  // the 2-D kernels ORT runs channels-last
    } else if (in != layouts_.end()) {
      perm = in->second;
    }
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i)
      identity = identity && perm[i] == static_cast<int64_t>(i);
    if (!identity) layouts_[n.output(0)] = perm;
  }
}

// The zero point initializer `name` holds (0 for no name), nullopt when it is no scalar.
std::optional<int64_t> OrtObservedModel::zeroPointOf(const Initializers& initializers,
                                                     const std::string& name) {
  if (name.empty()) return 0;
  const auto it = initializers.find(name);
  if (it == initializers.end()) return std::nullopt;
  return scalarInteger(*it->second);
}

std::optional<int64_t> OrtObservedModel::exportedZeroPoint(const std::string& tensor) const {
  const auto it = exported_writers_.find(tensor);
  if (it == exported_writers_.end() || it->second->op_type() != "QuantizeLinear")
    return std::nullopt;
  const onnx::NodeProto& quantize = *it->second;
  return zeroPointOf(exported_initializers_, quantize.input_size() > 2 ? quantize.input(2) : "");
}

// In order: the tensor under its own name; else the input of the DequantizeLinear that read it
// (ORT keeps that node's name when it renames the tensor, as its int8 -> uint8 conversion does);
// else the output of the QuantizeLinear that wrote it; else the kernel ORT fused that
// QuantizeLinear into. Nullopt when none of them is in ORT's graph.
std::optional<OrtObservedModel::Location> OrtObservedModel::locate(
    const std::string& tensor) const {
  const auto with_layout = [this](Location where) {
    if (auto it = layouts_.find(where.name); it != layouts_.end()) where.perm = it->second;
    return where;
  };
  if (optimized_writers_.count(tensor)) return with_layout(Location{tensor, 0, {}});
  const auto zero_point = [](const onnx::NodeProto& n) {
    return n.input_size() > 2 ? n.input(2) : std::string();
  };
  std::vector<std::pair<const onnx::NodeProto*, bool>> candidates;  // (exported node, reads it)
  if (auto it = exported_readers_.find(tensor); it != exported_readers_.end()) {
    for (const onnx::NodeProto* n : it->second)
      candidates.emplace_back(n, true);
  }
  const onnx::NodeProto* quantize = nullptr;
  if (auto it = exported_writers_.find(tensor); it != exported_writers_.end()) {
    candidates.emplace_back(it->second, false);
    if (it->second->op_type() == "QuantizeLinear") quantize = it->second;
  }
  for (const auto& [mine, reads] : candidates) {
    const std::string op = reads ? "DequantizeLinear" : "QuantizeLinear";
    if (mine->op_type() != op || mine->name().empty()) continue;
    if (reads && mine->input(0) != tensor) continue;
    auto it = optimized_nodes_.find(mine->name());
    if (it == optimized_nodes_.end() || it->second->op_type() != op) continue;
    const onnx::NodeProto& theirs = *it->second;
    const std::optional<int64_t> from = zeroPointOf(exported_initializers_, zero_point(*mine));
    const std::optional<int64_t> to = zeroPointOf(optimized_initializers_, zero_point(theirs));
    if (!from || !to) continue;
    return with_layout(Location{reads ? theirs.input(0) : theirs.output(0), *from - *to, {}});
  }
  if (quantize != nullptr) {
    if (std::optional<Location> fused = locateFused(*quantize)) return with_layout(*fused);
  }
  return std::nullopt;
}

// ORT names a fused kernel after the op it replaces ("conv", or "conv_token_4" when its layout
// transformer made it channels-last), and drops the Relu or Clip a QuantizeLinear's range already
// applies: the ops before `quantize`, back through those, are where to look. A kernel found there
// that only moves levels (NhwcMaxPool) holds them on the grid of the kernel before it.
std::optional<OrtObservedModel::Location> OrtObservedModel::locateFused(
    const onnx::NodeProto& quantize) const {
  const std::optional<int64_t> from =
      zeroPointOf(exported_initializers_, quantize.input_size() > 2 ? quantize.input(2) : "");
  if (!from || quantize.input_size() == 0) return std::nullopt;
  const onnx::NodeProto* op = nullptr;
  for (std::string value = quantize.input(0);;) {
    const auto it = exported_writers_.find(value);
    if (it == exported_writers_.end()) return std::nullopt;
    op = it->second;
    for (const auto& [name, theirs] : optimized_nodes_) {
      const bool named =
          !op->name().empty() && (name == op->name() || name.rfind(op->name() + "_token_", 0) == 0);
      if (!named || theirs->output_size() == 0) continue;
      if (const std::optional<int64_t> to = levelsZeroPoint(*theirs))
        return Location{theirs->output(0), *from - *to, {}};
    }
    if ((op->op_type() != "Relu" && op->op_type() != "Clip") || op->input_size() == 0)
      return std::nullopt;
    value = op->input(0);
  }
}

// The zero point of the levels `kernel` writes in ORT's graph: its output zero point input, or
// that of the kernel whose levels it moves; nullopt for a float op.
std::optional<int64_t> OrtObservedModel::levelsZeroPoint(const onnx::NodeProto& kernel) const {
  for (const onnx::NodeProto* n = &kernel;;) {
    if (n->op_type() == "QuantizeLinear")
      return zeroPointOf(optimized_initializers_, n->input_size() > 2 ? n->input(2) : "");
    if (const std::optional<int> zp_input = outputZeroPointInput(n->op_type())) {
      return zeroPointOf(optimized_initializers_,
                         n->input_size() > *zp_input ? n->input(*zp_input) : "");
    }
    if (!movesLevels(n->op_type()) || n->input_size() == 0) return std::nullopt;
    const auto before = optimized_writers_.find(n->input(0));
    if (before == optimized_writers_.end()) return std::nullopt;
    n = before->second;
  }
}

TensorMap OrtObservedModel::run(const TensorMap& feeds,
                                const std::vector<std::string>& tensors) const {
  onnx::ModelProto traced = optimized_;
  std::set<std::string> graph_outputs;
  for (const onnx::ValueInfoProto& v : traced.graph().output())
    graph_outputs.insert(v.name());
  std::vector<std::pair<std::string, Location>> found;
  std::vector<std::string> names;
  for (const std::string& tensor : tensors) {
    const std::optional<Location> where = locate(tensor);
    if (!where) continue;
    found.emplace_back(tensor, *where);
    if (!graph_outputs.count(where->name)) {
      // Untyped: ORT takes the type its node gives (the optimized graph carries few value_infos).
      traced.mutable_graph()->add_output()->set_name(where->name);
      graph_outputs.insert(where->name);
    }
    names.push_back(where->name);
  }
  if (found.empty()) return {};
  const std::string path = dir_.file("traced.onnx");
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    require(out && traced.SerializeToOstream(&out), "cannot write '" + path + "'");
  }
  TensorMap got = runner_.run(path, feeds, names);
  TensorMap result;
  for (const auto& [tensor, where] : found) {
    at::Tensor t = got.at(where.name);
    if (!where.perm.empty() && static_cast<int64_t>(where.perm.size()) == t.dim()) {
      std::vector<int64_t> back(where.perm.size());
      for (size_t i = 0; i < back.size(); ++i)
        back[static_cast<size_t>(where.perm[i])] = static_cast<int64_t>(i);
      t = t.permute(back).contiguous();
    }
    result[tensor] = where.shift == 0 ? t : t.to(at::kInt).add_(where.shift);
  }
  return result;
}

std::string OrtObservedModel::writer(const std::string& tensor) const {
  const std::optional<Location> where = locate(tensor);
  if (!where) return "";
  auto it = optimized_writers_.find(where->name);
  if (it == optimized_writers_.end()) return "";
  // ORT runs some integer kernels channels-last (QLinearConv on x86) and transposes back: the
  // kernel is what computed the levels.
  bool transposed = false;
  while (it->second->op_type() == "Transpose" && it->second->input_size() > 0) {
    const auto before = optimized_writers_.find(it->second->input(0));
    if (before == optimized_writers_.end()) break;
    it = before;
    transposed = true;
  }
  const onnx::NodeProto& n = *it->second;
  // ORT's DoubleQDQPairsRemover names the parameters it computes for the pair it keeps so.
  bool merged = false;
  for (const std::string& input : n.input())
    merged = merged || input.rfind("DoubleQDQRemoved_", 0) == 0;
  return n.op_type() + (n.name().empty() ? "" : " '" + n.name() + "'") +
         (transposed ? " (channels-last, transposed back)" : "") +
         (merged ? " (its quantization merged by DoubleQDQPairsRemover: one rounding where the "
                   "model has two in a row)"
                 : "");
}

}  // namespace qforge::verify
