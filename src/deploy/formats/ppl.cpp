#include "deploy/formats/ppl.h"

#include <cmath>

#include "core/error.h"
#include "deploy/formats/format_support.h"

namespace qforge::deploy::formats {

namespace {

// Scalars for a per-tensor encoding, lists for a per-channel one.
template <typename F>
OrderedJson perChannel(const TensorEncoding& e, F value) {
  if (!e.perChannel() && e.channels() == 1) return value(0);
  OrderedJson list = OrderedJson::array();
  for (size_t c = 0; c < e.channels(); ++c)
    list.push_back(value(c));
  return list;
}

std::vector<double> numbers(const OrderedJson& value, const std::string& where,
                            const std::string& path) {
  if (!value.is_array()) return {numberAt(value, where, path)};
  std::vector<double> out;
  for (size_t i = 0; i < value.size(); ++i)
    out.push_back(numberAt(value[i], where, path + "[" + std::to_string(i) + "]"));
  return out;
}

}  // namespace

std::string pplParams(const QuantTable& table) {
  OrderedJson params = OrderedJson::object();
  for (const TensorEncoding& e : table.tensors) {
    requireAffine(e, "PPL");
    OrderedJson entry;
    entry["step"] = perChannel(e, [&](size_t c) { return OrderedJson(e.scale[c]); });
    entry["zero_point"] = perChannel(e, [&](size_t c) { return OrderedJson(e.zero_point[c]); });
    entry["min"] = perChannel(e, [&](size_t c) { return OrderedJson(e.min(c)); });
    entry["max"] = perChannel(e, [&](size_t c) { return OrderedJson(e.max(c)); });
    entry["bit"] = e.bits;
    entry["type"] = "biased";
    params[e.tensor] = entry;
  }
  OrderedJson document;
  document["ppl"] = params;
  return dumpJson(document);
}

QuantTable parsePplParams(const std::string& text, const std::string& where) {
  const OrderedJson document = parseOrderedJson(text, where);
  const OrderedJson& params = objectAt(member(document, "ppl", where, ""), where, "ppl");
  QuantTable table;
  for (const auto& [name, entry] : params.items()) {
    const std::string path = "ppl." + name;
    objectAt(entry, where, path);
    const OrderedJson& step_json = member(entry, "step", where, path);
    const std::vector<double> steps = numbers(step_json, where, path + ".step");
    const std::vector<double> zps =
        numbers(member(entry, "zero_point", where, path), where, path + ".zero_point");
    const std::vector<double> mins =
        numbers(member(entry, "min", where, path), where, path + ".min");
    const std::vector<double> maxs =
        numbers(member(entry, "max", where, path), where, path + ".max");
    const int64_t bits = integerAt(member(entry, "bit", where, path), where, path + ".bit");
    const std::string type = stringAt(member(entry, "type", where, path), where, path + ".type");
    if (type != "biased") {
      throw Error(where + ": key '" + path + ".type': expected \"biased\", got \"" + type + "\"");
    }
    if (steps.empty() || zps.size() != steps.size() || mins.size() != steps.size() ||
        maxs.size() != steps.size()) {
      throw Error(where + ": key '" + path +
                  "': step, zero_point, min and max need the same number of channels");
    }
    if (bits < 2 || bits > 32) {
      throw Error(where + ": key '" + path + ".bit': " + std::to_string(bits) +
                  " is outside 2..32");
    }
    TensorEncoding e;
    e.tensor = name;
    e.bits = static_cast<int>(bits);
    if (step_json.is_array()) {
      e.role = TensorRole::Weight;
      e.axis = 0;
    }
    for (size_t c = 0; c < steps.size(); ++c) {
      if (steps[c] <= 0.0) throw Error(where + ": key '" + path + ".step': must be positive");
      if (zps[c] != std::floor(zps[c])) {
        throw Error(where + ": key '" + path + ".zero_point': expected integers");
      }
      e.scale.push_back(steps[c]);
      e.zero_point.push_back(static_cast<int64_t>(zps[c]));
    }
    e.qmin = std::llround(mins[0] / steps[0]) + e.zero_point[0];
    e.qmax = std::llround(maxs[0] / steps[0]) + e.zero_point[0];
    e.is_unsigned = e.qmin >= 0;
    e.symmetric = true;
    for (int64_t zp : e.zero_point)
      e.symmetric = e.symmetric && zp == 0;
    table.tensors.push_back(std::move(e));
  }
  return table;
}

std::string pplCudaClipRanges(const QuantTable& table) {
  std::string out;
  for (const TensorEncoding& e : table.tensors) {
    requireAffine(e, "PPL-CUDA");
    if (e.channels() != 1) continue;
    out += e.tensor + ": " + pythonFloat(e.absMax()) + "\n";
  }
  return out;
}

QuantTable parsePplCudaClipRanges(const std::string& text, const std::string& where) {
  QuantTable table;
  for (const TextLine& line : nonBlankLines(text, where)) {
    const size_t colon = line.text.rfind(": ");
    if (colon == std::string::npos || colon == 0) {
      failAtLine(where, line.number, "expected 'tensor: amax', got '" + line.text + "'");
    }
    const std::string name = line.text.substr(0, colon);
    const std::string number = line.text.substr(colon + 2);
    size_t used = 0;
    double amax = 0.0;
    try {
      amax = std::stod(number, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != number.size() || !std::isfinite(amax) || amax <= 0.0) {
      failAtLine(where, line.number,
                 "tensor '" + name + "': expected a positive number, got '" + number + "'");
    }
    table.tensors.push_back(symmetricInt8FromAmax(name, amax));
  }
  return table;
}

}  // namespace qforge::deploy::formats
