#include "deploy/formats/tengine.h"

#include <ATen/ATen.h>

#include <sstream>

#include "core/error.h"
#include "deploy/formats/format_support.h"
#include "passes/pattern_match.h"

namespace qforge::deploy::formats {

namespace {

const char* const kFormat = "Tengine";

// Tengine fuses Conv + Relu and Conv + Relu6 (Clip 0..6): the Conv writes the activation.
const Value* fusedConvOutput(const Value& activation) {
  const Node* act = activation.producer();
  if (act == nullptr || !act->domain().empty()) return nullptr;
  const bool relu = act->opType() == "Relu";
  const bool relu6 = act->opType() == "Clip" && passes::clipBound(*act, 1, "min") == 0.0 &&
                     passes::clipBound(*act, 2, "max") == 6.0;
  if (!relu && !relu6) return nullptr;
  const Value* in = act->input(0);
  if (in == nullptr || in->producer() == nullptr || in->producer()->opType() != "Conv") {
    return nullptr;
  }
  return in;
}

}  // namespace

std::string tengineScales(const QuantTable& table, const Graph* graph) {
  QuantTable rows;
  for (const TensorEncoding& e : table.tensors) {
    if (e.role != TensorRole::Activation) continue;
    requireAffine(e, kFormat);
    requirePerTensor(e, kFormat);
    require(e.bits == 8 && e.qmax - e.qmin <= 255,
            "Tengine quantizes activations to uint8 but " + tensorLabel(e) + " is " +
                std::to_string(e.bits) + "-bit: quantize activations to 8 bits");
    // A signed grid [qmin, qmax] is the uint8 grid [0, qmax - qmin] with zero point zp - qmin.
    TensorEncoding row = e;
    row.zero_point[0] = e.zero_point[0] - e.qmin;
    row.qmax = e.qmax - e.qmin;
    row.qmin = 0;
    rows.tensors.push_back(row);
  }
  if (graph != nullptr) {
    for (size_t i = 0, n = rows.tensors.size(); i < n; ++i) {
      const Value* v = graph->findValue(rows.tensors[i].tensor);
      const Value* conv_out = v == nullptr ? nullptr : fusedConvOutput(*v);
      if (conv_out == nullptr) continue;
      TensorEncoding copy = rows.tensors[i];
      copy.tensor = conv_out->name();
      bool replaced = false;
      for (TensorEncoding& row : rows.tensors) {
        if (row.tensor == copy.tensor) {
          row = copy;
          replaced = true;
        }
      }
      if (!replaced) rows.tensors.push_back(copy);
    }
    rows = withReshapeInputRanges(rows, *graph);
  }
  std::string out;
  for (const TensorEncoding& e : rows.tensors)
    out += e.tensor + " " + pythonFloat(e.scale[0]) + " " + std::to_string(e.zero_point[0]) + "\n";
  return out;
}

QuantTable parseTengineScales(const std::string& text, const std::string& where) {
  QuantTable table;
  for (const TextLine& line : nonBlankLines(text, where)) {
    std::istringstream fields(line.text);
    std::string name, scale_text, zp_text, extra;
    fields >> name >> scale_text >> zp_text;
    if (zp_text.empty() || (fields >> extra)) {
      failAtLine(where, line.number, "expected 'tensor scale zero_point', got '" + line.text + "'");
    }
    size_t used_scale = 0, used_zp = 0;
    double scale = 0.0;
    long long zp = 0;
    try {
      scale = std::stod(scale_text, &used_scale);
      zp = std::stoll(zp_text, &used_zp);
    } catch (const std::exception&) {
      used_scale = 0;
    }
    if (used_scale != scale_text.size() || used_zp != zp_text.size() || !std::isfinite(scale) ||
        scale <= 0.0) {
      failAtLine(where, line.number,
                 "tensor '" + name +
                     "': expected a positive scale and an integer zero point, got '" + scale_text +
                     " " + zp_text + "'");
    }
    if (zp < 0 || zp > 255) {
      failAtLine(where, line.number,
                 "tensor '" + name + "': zero point " + std::to_string(zp) +
                     " is outside Tengine's uint8 range 0..255");
    }
    table.tensors.push_back(perTensorEncoding(name, TensorRole::Activation, 8, 0, 255, scale, zp));
  }
  return table;
}

}  // namespace qforge::deploy::formats
