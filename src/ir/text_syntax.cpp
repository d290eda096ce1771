#include "ir/text_syntax.h"

#include <cctype>
#include <charconv>
#include <cstring>

namespace qforge::text {

namespace {

bool isControl(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f;
}

template <typename T>
std::string shortest(T v) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), v);
  return std::string(buffer, result.ptr);
}

}  // namespace

std::string quote(const std::string& s) {
  static const char* const kHex = "0123456789abcdef";
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (isControl(c)) {
          const auto u = static_cast<unsigned char>(c);
          out += std::string("\\x") + kHex[u >> 4] + kHex[u & 15];
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

bool isBareValueChar(char c) {
  return c != ' ' && !isControl(c) && std::strchr(",()[]{}<>\"=#%", c) == nullptr;
}

std::string valueName(const std::string& name) {
  bool bare = !name.empty() && name.back() != ':';
  for (char c : name)
    bare = bare && isBareValueChar(c);
  return bare ? name : quote(name);
}

std::string trailingName(const std::string& name) {
  bool bare = !name.empty() && name.front() != '"' && name.front() != ' ' && name.back() != ' ';
  for (char c : name)
    bare = bare && !isControl(c);
  return bare ? name : quote(name);
}

bool isIdentifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) return false;
  }
  return true;
}

std::string dimParam(const std::string& param) {
  return isIdentifier(param) ? param : quote(param);
}

std::string typeText(const TensorType& type) {
  if (!type.shape) return type.dtype == DType::Undefined ? "" : dtypeName(type.dtype);
  std::string out = dtypeName(type.dtype) + "[";
  for (size_t i = 0; i < type.shape->size(); ++i) {
    const Dim& d = (*type.shape)[i];
    if (i) out += ",";
    if (d.isKnown()) {
      out += std::to_string(d.value);
    } else {
      out += d.param.empty() ? "?" : dimParam(d.param);
    }
  }
  return out + "]";
}

std::string shortestFloat(float v) {
  return shortest(v);
}

std::string shortestDouble(double v) {
  return shortest(v);
}

std::optional<DType> dtypeByName(const std::string& name) {
  for (int code = 0; code <= static_cast<int>(DType::BFloat16); ++code) {
    const auto dtype = static_cast<DType>(code);
    if (dtypeName(dtype) == name) return dtype;
  }
  return std::nullopt;
}

}  // namespace qforge::text
