#include "deploy/formats/vitis.h"

#include <cmath>

#include "core/error.h"
#include "deploy/formats/format_support.h"

namespace qforge::deploy::formats {

namespace {

const char* const kFormat = "Vitis";

bool isPowerOfTwo(double scale) {
  int exponent = 0;
  return std::frexp(scale, &exponent) == 0.5;
}

}  // namespace

std::string vitisScales(const QuantTable& table) {
  OrderedJson scales = OrderedJson::object();
  for (const TensorEncoding& e : table.tensors) {
    requireAffine(e, kFormat);
    requirePerTensor(e, kFormat);
    require(e.zero_point[0] == 0, "Vitis needs symmetric quantization but " + tensorLabel(e) +
                                      " has zero point " + std::to_string(e.zero_point[0]) +
                                      ": use a symmetric scheme");
    require(isPowerOfTwo(e.scale[0]), "Vitis needs power-of-two scales but " + tensorLabel(e) +
                                          " has scale " + pythonFloat(e.scale[0]) +
                                          ": quantize with power_of_two scales");
    scales[e.tensor] = OrderedJson{{"scale", e.scale[0]}};
  }
  OrderedJson document;
  document["vitis"] = scales;
  return dumpJson(document);
}

QuantTable parseVitisScales(const std::string& text, const std::string& where) {
  const OrderedJson document = parseOrderedJson(text, where);
  const OrderedJson& scales = objectAt(member(document, "vitis", where, ""), where, "vitis");
  QuantTable table;
  for (const auto& [name, entry] : scales.items()) {
    const std::string path = "vitis." + name;
    const double scale = numberAt(member(entry, "scale", where, path), where, path + ".scale");
    if (scale <= 0.0 || !isPowerOfTwo(scale)) {
      throw Error(where + ": key '" + path + ".scale': " + pythonFloat(scale) +
                  " is not a positive power of two");
    }
    TensorEncoding e = perTensorEncoding(name, TensorRole::Activation, 8, -128, 127, scale, 0);
    e.power_of_two = true;
    table.tensors.push_back(std::move(e));
  }
  return table;
}

}  // namespace qforge::deploy::formats
