#include "deploy/formats/format_support.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "core/json_reader.h"
#include "core/utf8.h"

namespace qforge::deploy::formats {

std::string pythonFloat(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0.0) return std::signbit(value) ? "-0.0" : "0.0";
  // Shortest round-trip digits, as "d.ddde+XX"; then laid out the way repr() does.
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string sci(buf, result.ptr);
  const bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  const size_t e_pos = sci.find('e');
  std::string digits = sci.substr(0, e_pos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exponent = std::atoi(sci.c_str() + e_pos + 1);
  std::string out;
  if (exponent >= -4 && exponent < 16) {
    // Fixed notation: repr keeps at least one digit after the point.
    const int point = exponent + 1;  // digits before the decimal point
    if (point <= 0) {
      out = "0." + std::string(static_cast<size_t>(-point), '0') + digits;
    } else if (static_cast<size_t>(point) >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(point) - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(point)) + "." +
            digits.substr(static_cast<size_t>(point));
    }
  } else {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    const int magnitude = std::abs(exponent);
    out += std::string(exponent < 0 ? "e-" : "e+") + (magnitude < 10 ? "0" : "") +
           std::to_string(magnitude);
  }
  return negative ? "-" + out : out;
}

std::string dumpJson(const OrderedJson& document) {
  return document.dump(4) + "\n";
}

OrderedJson parseOrderedJson(const std::string& text, const std::string& where) {
  try {
    return OrderedJson::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(where + ": not valid JSON at byte " + std::to_string(e.byte) +
                ": fix the file or regenerate it");
  } catch (const nlohmann::json::exception& e) {
    // "1e999" (out_of_range, not a parse_error; issue #22).
    throw Error(where + ": not valid JSON (" + jsonReason(e) + ")");
  }
}

namespace {

[[noreturn]] void failKey(const std::string& where, const std::string& path,
                          const std::string& message) {
  throw Error(where + ": key '" + path + "': " + message);
}

}  // namespace

const OrderedJson& member(const OrderedJson& object, const std::string& key,
                          const std::string& where, const std::string& path) {
  const std::string full = path.empty() ? key : path + "." + key;
  if (!object.is_object()) failKey(where, path, "expected an object");
  auto it = object.find(key);
  if (it == object.end()) failKey(where, full, "missing");
  return *it;
}

const OrderedJson& objectAt(const OrderedJson& value, const std::string& where,
                            const std::string& path) {
  if (!value.is_object()) failKey(where, path, "expected an object");
  return value;
}

const OrderedJson& arrayAt(const OrderedJson& value, const std::string& where,
                           const std::string& path) {
  if (!value.is_array()) failKey(where, path, "expected a list");
  return value;
}

double numberAt(const OrderedJson& value, const std::string& where, const std::string& path) {
  if (!value.is_number()) failKey(where, path, "expected a number");
  const double v = value.get<double>();
  if (!std::isfinite(v)) failKey(where, path, "not a finite number");
  return v;
}

int64_t integerAt(const OrderedJson& value, const std::string& where, const std::string& path) {
  // AIMET writes offsets as -128.0 as often as -128: both are integers.
  if (value.is_number_integer() && !value.is_number_unsigned()) return value.get<int64_t>();
  const double v = numberAt(value, where, path);
  if (v != std::floor(v)) failKey(where, path, "expected an integer, got " + pythonFloat(v));
  // Converting a double past int64_t is undefined (a fuzzed 3e114, issue #22).
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
    failKey(where, path, "integer " + pythonFloat(v) + " is out of range");
  return static_cast<int64_t>(v);
}

std::string stringAt(const OrderedJson& value, const std::string& where, const std::string& path) {
  if (!value.is_string()) failKey(where, path, "expected a string");
  return value.get<std::string>();
}

std::vector<TextLine> nonBlankLines(const std::string& text, const std::string& where) {
  std::vector<TextLine> lines;
  size_t number = 0;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    ++number;
    std::string line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t bad = invalidUtf8Offset(line);
    if (bad != std::string::npos) {
      failAtLine(where, number,
                 "not UTF-8 text (byte " + std::to_string(bad + 1) + " of the line)");
    }
    if (line.find_first_not_of(" \t") != std::string::npos) lines.push_back({number, line});
    start = end + 1;
  }
  return lines;
}

void failAtLine(const std::string& where, size_t line, const std::string& message) {
  throw Error(where + ":" + std::to_string(line) + ": " + message);
}

std::string tensorLabel(const TensorEncoding& e) {
  return std::string(toString(e.role)) + " '" + e.tensor + "'";
}

void requireAffine(const TensorEncoding& e, const std::string& format) {
  require(e.affine, format + " cannot describe " + tensorLabel(e) +
                        ": its grid is not affine (no scale and zero point); use the backend's "
                        "own format (NNIE) or an affine quantizer");
  require(!e.scale.empty() && e.scale.size() == e.zero_point.size(),
          tensorLabel(e) + " has " + std::to_string(e.scale.size()) + " scales and " +
              std::to_string(e.zero_point.size()) + " zero points");
  for (double s : e.scale) {
    require(std::isfinite(s) && s > 0.0, tensorLabel(e) + " has scale " + pythonFloat(s) +
                                             ": calibrate the model before deploying it");
  }
}

void requirePerTensor(const TensorEncoding& e, const std::string& format) {
  require(e.scale.size() == 1, format + " holds one scale per tensor but " + tensorLabel(e) +
                                   " has " + std::to_string(e.scale.size()) +
                                   " (per channel): quantize it per tensor for this target");
}

TensorEncoding perTensorEncoding(const std::string& tensor, TensorRole role, int bits, int64_t qmin,
                                 int64_t qmax, double scale, int64_t zero_point) {
  TensorEncoding e;
  e.tensor = tensor;
  e.role = role;
  e.bits = bits;
  e.qmin = qmin;
  e.qmax = qmax;
  e.is_unsigned = qmin >= 0;
  e.symmetric = zero_point == 0 && (e.is_unsigned || qmin == -qmax || qmin == -qmax - 1);
  e.scale = {scale};
  e.zero_point = {zero_point};
  return e;
}

TensorEncoding symmetricInt8FromAmax(const std::string& tensor, double amax) {
  return perTensorEncoding(tensor, TensorRole::Activation, 8, -127, 127, amax / 127.0, 0);
}

namespace {

bool passesRangeThrough(const Node* node) {
  const std::string& op = node->opType();
  return node->domain().empty() && (op == "Flatten" || op == "Reshape" || op == "Resize");
}

// The first range found on the data input of `node` or of the first reader downstream.
const TensorEncoding* closestRange(const Node* node, const QuantTable& table) {
  for (int hops = 0; node != nullptr && hops < 64; ++hops) {
    const Value* in = node->input(0);
    if (in != nullptr) {
      if (const TensorEncoding* e = table.find(in->name())) {
        if (e->role == TensorRole::Activation) return e;
      }
    }
    if (!passesRangeThrough(node) || node->output(0)->uses().empty()) return nullptr;
    node = node->output(0)->uses().front().node;
  }
  return nullptr;
}

}  // namespace

QuantTable withReshapeInputRanges(const QuantTable& table, const Graph& graph) {
  QuantTable out = table;
  for (const Node* node : graph.topologicalOrder()) {
    if (!passesRangeThrough(node) || node->input(0) == nullptr) continue;
    const std::string& input = node->input(0)->name();
    if (out.find(input) != nullptr) continue;
    if (const TensorEncoding* found = closestRange(node, out)) {
      TensorEncoding copy = *found;
      copy.tensor = input;
      copy.quantizer.clear();
      out.tensors.push_back(std::move(copy));
    }
  }
  return out;
}

}  // namespace qforge::deploy::formats
