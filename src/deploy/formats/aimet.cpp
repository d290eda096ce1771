#include "deploy/formats/aimet.h"

#include <cmath>

#include "core/error.h"
#include "deploy/formats/format_support.h"

namespace qforge::deploy::formats {

namespace {

const char* const kFormat = "AIMET encodings";

bool isParam(const TensorEncoding& e) {
  return e.role != TensorRole::Activation;
}

int64_t aimetOffset(const TensorEncoding& e, size_t c) {
  return e.qmin - e.zero_point.at(c);
}

OrderedJson legacyEncoding(const TensorEncoding& e, size_t c) {
  OrderedJson enc;
  enc["bitwidth"] = e.bits;
  enc["dtype"] = "int";
  enc["is_symmetric"] = e.symmetric ? "True" : "False";
  enc["max"] = e.max(c);
  enc["min"] = e.min(c);
  enc["offset"] = aimetOffset(e, c);
  enc["scale"] = e.scale[c];
  return enc;
}

// One channel's numbers as read from a file, before they become a TensorEncoding.
struct Channel {
  double scale;
  int64_t offset;
  double max;  // NaN when the file has none
};

TensorEncoding fromChannels(const std::string& tensor, bool param, int bits, bool symmetric,
                            const std::vector<Channel>& channels) {
  TensorEncoding e;
  e.tensor = tensor;
  e.role = param ? TensorRole::Weight : TensorRole::Activation;
  e.bits = bits;
  e.symmetric = symmetric;
  e.axis = channels.size() > 1 ? 0 : -1;
  const int64_t levels_max = (int64_t{1} << bits) - 1;
  if (symmetric) {
    e.qmin = channels[0].offset;
    const double top = channels[0].max;
    // Without a max (1.0.0), a signed symmetric grid tops out at 2^(bw-1) - 1 whether its
    // bottom is -2^(bw-1) or the restricted -(2^(bw-1) - 1).
    const int64_t signed_top = (int64_t{1} << (bits - 1)) - 1;
    e.qmax = !std::isnan(top) ? static_cast<int64_t>(std::llround(top / channels[0].scale))
             : e.qmin < 0     ? signed_top
                              : levels_max;
  } else {
    e.qmin = 0;
    e.qmax = levels_max;
  }
  e.is_unsigned = e.qmin >= 0;
  for (const Channel& ch : channels) {
    e.scale.push_back(ch.scale);
    e.zero_point.push_back(symmetric ? 0 : -ch.offset);
  }
  return e;
}

bool readSymmetric(const OrderedJson& value, const std::string& where, const std::string& path) {
  if (value.is_boolean()) return value.get<bool>();
  const std::string s = stringAt(value, where, path);
  if (s == "True" || s == "true") return true;
  if (s == "False" || s == "false") return false;
  throw Error(where + ": key '" + path + "': expected \"True\" or \"False\", got \"" + s + "\"");
}

int readBits(const OrderedJson& value, const std::string& where, const std::string& path) {
  const int64_t bits = integerAt(value, where, path);
  if (bits < 2 || bits > 32) {
    throw Error(where + ": key '" + path + "': bit width " + std::to_string(bits) +
                " is outside 2..32");
  }
  return static_cast<int>(bits);
}

// Legacy entries: a list of per-channel dicts. Returns false for a float entry.
bool parseLegacyEntry(const std::string& name, const OrderedJson& list, bool param,
                      const std::string& where, const std::string& path, QuantTable& table) {
  arrayAt(list, where, path);
  if (list.empty()) throw Error(where + ": key '" + path + "': empty list of encodings");
  int bits = 0;
  bool symmetric = false;
  std::vector<Channel> channels;
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string p = path + "[" + std::to_string(i) + "]";
    const OrderedJson& enc = objectAt(list[i], where, p);
    if (enc.contains("dtype")) {
      const std::string dtype = stringAt(enc["dtype"], where, p + ".dtype");
      if (dtype == "float") return false;
      if (dtype != "int") {
        throw Error(where + ": key '" + p + ".dtype': expected \"int\" or \"float\", got \"" +
                    dtype + "\"");
      }
    }
    bits = readBits(member(enc, "bitwidth", where, p), where, p + ".bitwidth");
    symmetric = enc.contains("is_symmetric") &&
                readSymmetric(enc["is_symmetric"], where, p + ".is_symmetric");
    const double lo = numberAt(member(enc, "min", where, p), where, p + ".min");
    const double hi = numberAt(member(enc, "max", where, p), where, p + ".max");
    if (!(hi > lo)) throw Error(where + ": key '" + p + "': max must be greater than min");
    Channel ch;
    ch.max = hi;
    if (enc.contains("scale")) {
      ch.scale = numberAt(enc["scale"], where, p + ".scale");
      if (ch.scale <= 0.0) throw Error(where + ": key '" + p + ".scale': must be positive");
    } else {
      ch.scale = (hi - lo) / static_cast<double>((int64_t{1} << bits) - 1);
    }
    ch.offset = enc.contains("offset") ? integerAt(enc["offset"], where, p + ".offset")
                                       : static_cast<int64_t>(std::llround(lo / ch.scale));
    channels.push_back(ch);
  }
  table.tensors.push_back(fromChannels(name, param, bits, symmetric, channels));
  return true;
}

}  // namespace

std::string aimetLegacyEncodings(const QuantTable& table) {
  OrderedJson activations = OrderedJson::object();
  OrderedJson params = OrderedJson::object();
  for (const TensorEncoding& e : table.tensors) {
    requireAffine(e, kFormat);
    OrderedJson list = OrderedJson::array();
    for (size_t c = 0; c < e.channels(); ++c)
      list.push_back(legacyEncoding(e, c));
    (isParam(e) ? params : activations)[e.tensor] = list;
  }
  OrderedJson document;
  document["activation_encodings"] = activations;
  document["param_encodings"] = params;
  return dumpJson(document);
}

std::string aimetV1Encodings(const QuantTable& table) {
  OrderedJson activations = OrderedJson::array();
  OrderedJson params = OrderedJson::array();
  for (const TensorEncoding& e : table.tensors) {
    requireAffine(e, kFormat);
    OrderedJson enc;
    enc["name"] = e.tensor;
    enc["dtype"] = "INT";
    enc["enc_type"] = e.channels() > 1 ? "PER_CHANNEL" : "PER_TENSOR";
    enc["is_sym"] = e.symmetric;
    enc["bw"] = e.bits;
    enc["scale"] = e.scale;
    OrderedJson offsets = OrderedJson::array();
    for (size_t c = 0; c < e.channels(); ++c)
      offsets.push_back(aimetOffset(e, c));
    enc["offset"] = offsets;
    (isParam(e) ? params : activations).push_back(enc);
  }
  OrderedJson document;
  document["version"] = "1.0.0";
  document["activation_encodings"] = activations;
  document["param_encodings"] = params;
  return dumpJson(document);
}

QuantTable parseAimetLegacyEncodings(const std::string& text, const std::string& where) {
  const OrderedJson document = parseOrderedJson(text, where);
  objectAt(document, where, "");
  QuantTable table;
  for (const char* section : {"activation_encodings", "param_encodings"}) {
    const bool param = std::string(section) == "param_encodings";
    // MQBench writes an empty param_encodings; AIMET may leave either out.
    if (!document.contains(section)) continue;
    const OrderedJson& entries = objectAt(document[section], where, section);
    for (const auto& [name, list] : entries.items())
      parseLegacyEntry(name, list, param, where, std::string(section) + "." + name, table);
  }
  return table;
}

QuantTable parseAimetV1Encodings(const std::string& text, const std::string& where) {
  const OrderedJson document = parseOrderedJson(text, where);
  const std::string version = stringAt(member(document, "version", where, ""), where, "version");
  if (version.rfind("1.", 0) != 0) {
    throw Error(where + ": key 'version': expected a 1.x.x layout, got \"" + version +
                "\" (read older files as the legacy layout)");
  }
  QuantTable table;
  for (const char* section : {"activation_encodings", "param_encodings"}) {
    const bool param = std::string(section) == "param_encodings";
    if (!document.contains(section)) continue;
    const OrderedJson& list = arrayAt(document[section], where, section);
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string p = std::string(section) + "[" + std::to_string(i) + "]";
      const OrderedJson& enc = objectAt(list[i], where, p);
      const std::string name = stringAt(member(enc, "name", where, p), where, p + ".name");
      const std::string dtype = stringAt(member(enc, "dtype", where, p), where, p + ".dtype");
      if (dtype == "FLOAT") continue;
      if (dtype != "INT") {
        throw Error(where + ": key '" + p + ".dtype': expected \"INT\" or \"FLOAT\", got \"" +
                    dtype + "\"");
      }
      const std::string enc_type =
          stringAt(member(enc, "enc_type", where, p), where, p + ".enc_type");
      if (enc_type != "PER_TENSOR" && enc_type != "PER_CHANNEL") {
        throw Error(where + ": key '" + p + ".enc_type': " + enc_type +
                    " is not supported (PER_TENSOR, PER_CHANNEL)");
      }
      const int bits = readBits(member(enc, "bw", where, p), where, p + ".bw");
      const bool symmetric = readSymmetric(member(enc, "is_sym", where, p), where, p + ".is_sym");
      const OrderedJson& scales = arrayAt(member(enc, "scale", where, p), where, p + ".scale");
      const OrderedJson& offsets = arrayAt(member(enc, "offset", where, p), where, p + ".offset");
      if (scales.empty() || scales.size() != offsets.size()) {
        throw Error(where + ": key '" + p + "': needs as many offsets as scales (at least one)");
      }
      if (enc_type == "PER_TENSOR" && scales.size() != 1) {
        throw Error(where + ": key '" + p + ".scale': PER_TENSOR needs exactly one scale");
      }
      std::vector<Channel> channels;
      for (size_t c = 0; c < scales.size(); ++c) {
        const std::string pc = "[" + std::to_string(c) + "]";
        Channel ch;
        ch.scale = numberAt(scales[c], where, p + ".scale" + pc);
        if (ch.scale <= 0.0)
          throw Error(where + ": key '" + p + ".scale" + pc + "': must be positive");
        ch.offset = integerAt(offsets[c], where, p + ".offset" + pc);
        ch.max = std::nan("");
        channels.push_back(ch);
      }
      TensorEncoding e = fromChannels(name, param, bits, symmetric, channels);
      if (enc_type == "PER_CHANNEL")
        e.axis = enc.contains("axis") ? integerAt(enc["axis"], where, p + ".axis") : 0;
      table.tensors.push_back(std::move(e));
    }
  }
  return table;
}

}  // namespace qforge::deploy::formats
