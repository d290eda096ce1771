#include "deploy/formats/tensorrt.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "deploy/formats/format_support.h"

namespace qforge::deploy::formats {

namespace {

const char* const kFormat = "TensorRT";

}  // namespace

void checkTensorrtActivations(const QuantTable& table) {
  for (const TensorEncoding& e : table.tensors) {
    if (e.role != TensorRole::Activation) continue;
    requireAffine(e, kFormat);
    requirePerTensor(e, kFormat);
    const std::string grid = "[" + std::to_string(e.qmin) + ", " + std::to_string(e.qmax) + "]";
    require(e.bits == 8 && e.qmax - e.qmin <= 255,
            "TensorRT needs 8-bit activations but " + tensorLabel(e) + " is " +
                std::to_string(e.bits) + "-bit on " + grid + ": quantize activations to int8");
    // A uint8 grid with zero point 128 is the int8 grid with zero point 0.
    const int64_t signed_zero_point = e.zero_point[0] - (e.qmin >= 0 ? 128 : 0);
    require(signed_zero_point == 0,
            "TensorRT needs symmetric activations (zero point 0 on int8) but " + tensorLabel(e) +
                " has zero point " + std::to_string(e.zero_point[0]) + " on " + grid +
                ": quantize activations symmetrically for TensorRT");
  }
}

std::string tensorrtClipRanges(const QuantTable& table) {
  checkTensorrtActivations(table);
  OrderedJson ranges = OrderedJson::object();
  for (const TensorEncoding& e : table.tensors) {
    if (e.role == TensorRole::Activation) ranges[e.tensor] = 127.0 * e.scale[0];
  }
  OrderedJson document;
  document["tensorrt"]["blob_range"] = ranges;
  return dumpJson(document);
}

QuantTable parseTensorrtClipRanges(const std::string& text, const std::string& where) {
  const OrderedJson document = parseOrderedJson(text, where);
  const OrderedJson& trt = objectAt(member(document, "tensorrt", where, ""), where, "tensorrt");
  const OrderedJson& ranges =
      objectAt(member(trt, "blob_range", where, "tensorrt"), where, "tensorrt.blob_range");
  QuantTable table;
  for (const auto& [name, value] : ranges.items()) {
    const std::string path = "tensorrt.blob_range." + name;
    const double amax = numberAt(value, where, path);
    if (amax <= 0.0) throw Error(where + ": key '" + path + "': amax must be positive");
    table.tensors.push_back(symmetricInt8FromAmax(name, amax));
  }
  return table;
}

std::string float32Hex(double scale) {
  const float f = static_cast<float>(scale);
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof(bits));
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%08x", bits);
  return buf;
}

std::string tensorrtCalibrationCache(const QuantTable& table, int version) {
  require(version > 0, "TensorRT version must be positive (e.g. 8601 for 8.6.1)");
  checkTensorrtActivations(table);
  std::string out = "TRT-" + std::to_string(version) + "-EntropyCalibration2\n";
  for (const TensorEncoding& e : table.tensors) {
    // TensorRT's calibration scale is amax / 127, which is the grid's scale here.
    if (e.role == TensorRole::Activation) out += e.tensor + ": " + float32Hex(e.scale[0]) + "\n";
  }
  return out;
}

QuantTable parseTensorrtCalibrationCache(const std::string& text, const std::string& where) {
  const std::vector<TextLine> lines = nonBlankLines(text, where);
  if (lines.empty()) failAtLine(where, 1, "empty calibration cache");
  const std::string& header = lines[0].text;
  const size_t dash = header.find('-', 4);
  const bool header_ok = header.rfind("TRT-", 0) == 0 && dash != std::string::npos && dash > 4 &&
                         dash + 1 < header.size() &&
                         header.find_first_not_of("0123456789", 4) == dash;
  if (!header_ok) {
    failAtLine(where, lines[0].number,
               "expected a header like 'TRT-8601-EntropyCalibration2', got '" + header + "'");
  }
  QuantTable table;
  for (size_t i = 1; i < lines.size(); ++i) {
    const TextLine& line = lines[i];
    // Tensor names may contain ": " themselves; the value follows the last one.
    const size_t colon = line.text.rfind(": ");
    if (colon == std::string::npos || colon == 0) {
      failAtLine(where, line.number, "expected 'tensor: <8 hex digits>', got '" + line.text + "'");
    }
    const std::string name = line.text.substr(0, colon);
    const std::string hex = line.text.substr(colon + 2);
    const bool hex_ok = !hex.empty() && hex.size() <= 8 &&
                        hex.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
    if (!hex_ok) {
      failAtLine(where, line.number,
                 "tensor '" + name + "': expected up to 8 hex digits, got '" + hex + "'");
    }
    const uint32_t bits = static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
    float scale = 0.0f;
    std::memcpy(&scale, &bits, sizeof(scale));
    if (!std::isfinite(scale) || scale <= 0.0f) {
      failAtLine(where, line.number,
                 "tensor '" + name + "': scale " + hex + " is not a positive finite float");
    }
    table.tensors.push_back(symmetricInt8FromAmax(name, 127.0 * static_cast<double>(scale)));
    table.tensors.back().scale = {static_cast<double>(scale)};
  }
  return table;
}

}  // namespace qforge::deploy::formats
