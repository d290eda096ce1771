#include "ir/text_reader.h"

#include <ATen/ATen.h>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "ir/text_syntax.h"

namespace qforge::text {

[[noreturn]] void failAt(size_t line, size_t column, const std::string& what) {
  throw Error("graph text line " + std::to_string(line) + ", column " + std::to_string(column) +
              ": " + what);
}

namespace {

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool isNumberChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
}

bool isIntegerToken(const std::string& s) {
  const size_t start = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
  return s.size() > start && s.find_first_not_of("0123456789", start) == std::string::npos;
}

// A float32 (or, with `wide`, float64) number token: digits, '.', exponent, inf, nan.
double readReal(LineReader& r, const std::string& what, bool wide) {
  const size_t column = r.column();
  const std::string token = r.run(isNumberChar);
  char* end = nullptr;
  const double v = wide ? std::strtod(token.c_str(), &end) : std::strtof(token.c_str(), &end);
  if (token.empty() || end != token.c_str() + token.size()) {
    failAt(r.line(), column, "expected a number " + what + ", found '" + token + "'");
  }
  return v;
}

std::pair<int64_t, int64_t> integerRange(DType dtype) {
  switch (dtype) {
    case DType::Bool:
      return {0, 1};
    case DType::UInt8:
      return {0, 255};
    case DType::Int8:
      return {-128, 127};
    case DType::Int16:
      return {std::numeric_limits<int16_t>::min(), std::numeric_limits<int16_t>::max()};
    case DType::Int32:
      return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    default:
      return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  }
}

}  // namespace

std::string LineReader::quoted() {
  expect("\"", "to open a string");
  std::string out;
  while (pos_ < text_.size() && text_[pos_] != '"') {
    char c = text_[pos_++];
    if (c == '\\') {
      if (pos_ >= text_.size()) break;
      const char e = text_[pos_++];
      static const std::map<char, char> kSimple = {
          {'"', '"'}, {'\\', '\\'}, {'n', '\n'}, {'r', '\r'}, {'t', '\t'}};
      if (kSimple.count(e)) {
        c = kSimple.at(e);
      } else if (e == 'x' && pos_ + 1 < text_.size() && hexDigit(text_[pos_]) >= 0 &&
                 hexDigit(text_[pos_ + 1]) >= 0) {
        c = static_cast<char>(hexDigit(text_[pos_]) * 16 + hexDigit(text_[pos_ + 1]));
        pos_ += 2;
      } else {
        pos_ -= 2;  // at the backslash
        fail(std::string("unknown escape '\\") + e +
             "' in a string (use \\\" \\\\ \\n \\r \\t \\xHH)");
      }
    }
    out += c;
  }
  if (pos_ >= text_.size()) fail("a string is not closed: '\"' is missing");
  ++pos_;
  return out;
}

bool isAttributeNameChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
}

int64_t readInt(LineReader& r, const std::string& what) {
  const size_t column = r.column();
  const std::string token = r.run(isNumberChar);
  int64_t v = 0;
  const char* begin = token.data() + (token.size() > 1 && token[0] == '+' ? 1 : 0);
  const auto [end, ec] = std::from_chars(begin, token.data() + token.size(), v);
  if (token.empty() || ec != std::errc() || end != token.data() + token.size()) {
    failAt(r.line(), column, "expected an integer " + what + ", found '" + token + "'");
  }
  return v;
}

TensorType readType(LineReader& r) {
  const size_t column = r.column();
  const std::string name =
      r.run([](char c) { return std::isalnum(static_cast<unsigned char>(c)); });
  const auto dtype = dtypeByName(name);
  if (!dtype) {
    failAt(r.line(), column,
           "unknown element type '" + name + "' (float32, float16, int8, int64, bool, ...)");
  }
  TensorType type;
  type.dtype = *dtype;
  if (!r.accept("[")) return type;  // rank unknown
  type.shape = std::vector<Dim>{};
  if (r.accept("]")) return type;
  do {
    const char c = r.peek();
    if (r.accept("?")) {
      type.shape->push_back(Dim{});
    } else if (c == '"') {
      type.shape->push_back(Dim::symbolic(r.quoted()));
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      type.shape->push_back(Dim::known(readInt(r, "as a dimension")));
    } else {
      const std::string param = r.run([](char ch) {
        return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.';
      });
      if (!isIdentifier(param))
        r.fail("expected a dimension (a size, a name or ?), found " + r.found());
      type.shape->push_back(Dim::symbolic(param));
    }
  } while (r.accept(","));
  r.expect("]", "to close the shape");
  return type;
}

TypedName readValue(LineReader& r) {
  TypedName v;
  v.column = r.column();
  r.expect("%", "before a value name");
  bool colon = false;
  if (r.peek() == '"') {
    v.name = r.quoted();
  } else {
    v.name = r.run(isBareValueChar);
    if (!v.name.empty() && v.name.back() == ':') {
      v.name.pop_back();  // "%y: float32": the colon separates the type
      colon = true;
    }
  }
  if (v.name.empty()) r.fail("a value needs a name after '%'");
  if (colon || r.accept(":")) {
    v.type_column = r.column();
    v.type = readType(r);
  }
  return v;
}

at::Tensor readTensorValues(LineReader& r, const TensorType& type, size_t type_column,
                            const std::string& what) {
  auto typeError = [&](const std::string& problem) {
    failAt(r.line(), type_column, what + problem);
  };
  if (!type.shape) typeError(" needs a shape, e.g. float32[2,3]");
  std::vector<int64_t> sizes;
  for (const Dim& d : *type.shape) {
    if (!d.isKnown()) typeError(" needs a known shape; '" + typeText(type) + "' is not");
    sizes.push_back(d.value);
  }
  if (!hasScalarType(type.dtype)) {
    typeError(": element type " + dtypeName(type.dtype) + " has no tensor type in qforge");
  }
  const at::ScalarType st = toScalarType(type.dtype);
  const size_t values_column = r.column();
  if (!r.accept("{")) return at::zeros(sizes, at::TensorOptions().dtype(st));
  if (at::isComplexType(st)) typeError(": complex values cannot be written; leave them out");
  const bool real = at::isFloatingType(st);
  std::vector<double> reals;
  std::vector<int64_t> ints;
  if (r.peek() != '}') {
    do {
      if (real) {
        reals.push_back(readReal(r, "in the values of " + what, st == at::kDouble));
      } else {
        const size_t column = r.column();
        const int64_t v = readInt(r, "in the values of " + what);
        const auto [lo, hi] = integerRange(type.dtype);
        if (v < lo || v > hi) {
          failAt(r.line(), column,
                 std::to_string(v) + " does not fit " + dtypeName(type.dtype) + " (" + what + ")");
        }
        ints.push_back(v);
      }
    } while (r.accept(","));
  }
  r.expect("}", "to close the values of " + what);
  int64_t numel = 1;
  for (int64_t s : sizes)
    numel *= s;
  const size_t count = real ? reals.size() : ints.size();
  if (static_cast<int64_t>(count) != numel) {
    failAt(r.line(), values_column,
           what + ": " + typeText(type) + " holds " + std::to_string(numel) +
               " values, the text gives " + std::to_string(count));
  }
  const at::Tensor flat = real ? at::tensor(reals, at::kDouble) : at::tensor(ints, at::kLong);
  return flat.to(st).reshape(sizes).contiguous();
}

namespace {

at::Tensor readTensorLiteral(LineReader& r, const std::string& what) {
  r.expect("tensor<", "to start a tensor");
  const size_t type_column = r.column();
  const TensorType type = readType(r);
  r.expect(">", "after the tensor's type");
  return readTensorValues(r, type, type_column, what);
}

// A scalar attribute: an integer token is an int, any other number (1.0, 1e-05, inf) a float32.
Attribute numberAttribute(LineReader& r, const std::string& name) {
  const size_t column = r.column();
  const std::string token = r.run(isNumberChar);
  const std::string what = "for attribute '" + name + "'";
  if (token.empty()) {
    r.fail("expected a value " + what + " (a number, \"string\", [list] or tensor<...>), found " +
           r.found());
  }
  LineReader again(token, r.line());
  if (isIntegerToken(token)) return Attribute::makeInt(name, readInt(again, what));
  char* end = nullptr;
  const float v = std::strtof(token.c_str(), &end);
  if (end != token.c_str() + token.size()) {
    failAt(r.line(), column, "expected a number " + what + ", found '" + token + "'");
  }
  return Attribute::makeFloat(name, v);
}

// The items of [ ... ] after the '[' (which is at `start`); `forced` comes from a floats[] /
// ints[] / strings[] prefix.
Attribute listAttribute(LineReader& r, const std::string& name, size_t start,
                        std::optional<AttributeKind> forced) {
  const std::string what = "in the list of attribute '" + name + "'";
  std::vector<std::string> strings;
  std::vector<std::pair<std::string, size_t>> numbers;  // token, column
  if (!r.accept("]")) {
    do {
      if (r.peek() == '"') {
        strings.push_back(r.quoted());
      } else {
        const size_t column = r.column();
        const std::string token = r.run(isNumberChar);
        if (token.empty())
          r.fail("expected a number or a \"string\" " + what + ", found " + r.found());
        numbers.emplace_back(token, column);
      }
    } while (r.accept(","));
    r.expect("]", "to close the list of attribute '" + name + "'");
  }
  bool all_integers = true;
  for (const auto& n : numbers)
    all_integers = all_integers && isIntegerToken(n.first);
  const AttributeKind kind = forced             ? *forced
                             : !strings.empty() ? AttributeKind::Strings
                             : all_integers     ? AttributeKind::Ints
                                                : AttributeKind::Floats;
  if (!strings.empty() && !numbers.empty()) {
    failAt(r.line(), start, "a list mixes strings and numbers " + what);
  }
  if (kind == AttributeKind::Strings) {
    if (!numbers.empty()) failAt(r.line(), numbers[0].second, "a strings[] list holds a number");
    return Attribute::makeStrings(name, strings);
  }
  if (!strings.empty()) failAt(r.line(), start, "a numeric list holds a string " + what);
  std::vector<int64_t> ints;
  std::vector<double> reals;
  for (const auto& [token, column] : numbers) {
    LineReader item(token, r.line());
    if (kind == AttributeKind::Ints && !isIntegerToken(token)) {
      failAt(r.line(), column, "'" + token + "' is not an integer " + what);
    }
    try {
      if (kind == AttributeKind::Ints) {
        ints.push_back(readInt(item, what));
      } else {
        reals.push_back(readReal(item, what, false));
      }
    } catch (const Error&) {
      failAt(r.line(), column, "expected a number " + what + ", found '" + token + "'");
    }
  }
  return kind == AttributeKind::Ints ? Attribute::makeInts(name, ints)
                                     : Attribute::makeFloats(name, reals);
}

}  // namespace

Attribute readAttribute(LineReader& r) {
  const size_t column = r.column();
  const std::string name = r.run(isAttributeNameChar);
  if (!isIdentifier(name))
    failAt(r.line(), column, "expected an attribute name, found " + r.found());
  r.expect("=", "after attribute '" + name + "'");
  const std::string what = "attribute '" + name + "'";
  const size_t start = r.column();
  if (r.peek() == '"') return Attribute::makeString(name, r.quoted());
  if (r.accept("[")) return listAttribute(r, name, start, std::nullopt);
  if (r.accept("ints[")) return listAttribute(r, name, start, AttributeKind::Ints);
  if (r.accept("floats[")) return listAttribute(r, name, start, AttributeKind::Floats);
  if (r.accept("strings[")) return listAttribute(r, name, start, AttributeKind::Strings);
  if (r.accept("tensors[")) {
    Attribute a;
    a.name = name;
    a.kind = AttributeKind::Tensors;
    if (r.accept("]")) return a;
    do {
      a.tensors.push_back(readTensorLiteral(r, what));
    } while (r.accept(","));
    r.expect("]", "to close the tensors of " + what);
    return a;
  }
  if (r.peek() == 't') return Attribute::makeTensor(name, readTensorLiteral(r, what));
  if (r.accept("<opaque>")) {
    failAt(r.line(), column,
           what +
               " is opaque (a subgraph or sparse tensor), which the text form cannot carry; "
               "add that node in code");
  }
  return numberAttribute(r, name);
}

}  // namespace qforge::text
