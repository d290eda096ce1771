#include "ir/parse.h"

#include <ATen/ATen.h>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "ir/text_syntax.h"

namespace qforge {

namespace {

[[noreturn]] void failAt(size_t line, size_t column, const std::string& what) {
  throw Error("graph text line " + std::to_string(line) + ", column " + std::to_string(column) +
              ": " + what);
}

// One line of the text being read; every error names the line and column.
class LineReader {
 public:
  LineReader(std::string text, size_t line) : text_(std::move(text)), line_(line) {}

  [[noreturn]] void fail(const std::string& what) const { failAt(line_, pos_ + 1, what); }
  size_t line() const { return line_; }
  // The column of the next token (spaces skipped).
  size_t column() {
    skipSpaces();
    return pos_ + 1;
  }

  char peek() {
    skipSpaces();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool done() { return peek() == '\0'; }

  bool accept(const std::string& token) {
    skipSpaces();
    if (text_.compare(pos_, token.size(), token) != 0) return false;
    pos_ += token.size();
    return true;
  }
  void expect(const std::string& token, const std::string& context) {
    if (!accept(token)) fail("expected '" + token + "' " + context + ", found " + found());
  }
  void expectEnd(const std::string& context) {
    if (!done()) fail("unexpected " + found() + " " + context);
  }

  // What is at the cursor, for error messages.
  std::string found() {
    if (done()) return "the end of the line";
    const std::string rest = text_.substr(pos_, 20);
    return "'" + rest + (pos_ + 20 < text_.size() ? "...'" : "'");
  }

  // The longest run of characters satisfying `keep` (possibly empty).
  template <typename Keep>
  std::string run(Keep keep) {
    skipSpaces();
    const size_t start = pos_;
    while (pos_ < text_.size() && keep(text_[pos_]))
      ++pos_;
    return text_.substr(start, pos_ - start);
  }

  std::string quoted();
  std::string restOfLine() {
    skipSpaces();
    std::string rest = text_.substr(pos_);
    pos_ = text_.size();
    while (!rest.empty() && rest.back() == ' ')
      rest.pop_back();
    return rest;
  }

 private:
  void skipSpaces() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t'))
      ++pos_;
  }

  std::string text_;
  size_t line_;
  size_t pos_ = 0;
};

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

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

bool isNumberChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '-' || c == '.';
}

bool isIntegerToken(const std::string& s) {
  const size_t start = !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0;
  return s.size() > start && s.find_first_not_of("0123456789", start) == std::string::npos;
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

TensorType readType(LineReader& r) {
  const size_t column = r.column();
  const std::string name =
      r.run([](char c) { return std::isalnum(static_cast<unsigned char>(c)); });
  const auto dtype = text::dtypeByName(name);
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
      if (!text::isIdentifier(param))
        r.fail("expected a dimension (a size, a name or ?), found " + r.found());
      type.shape->push_back(Dim::symbolic(param));
    }
  } while (r.accept(","));
  r.expect("]", "to close the shape");
  return type;
}

struct TypedName {
  std::string name;
  std::optional<TensorType> type;
  size_t column = 0;       // of the '%'
  size_t type_column = 0;  // of the type, when there is one
};

// %name or %"name", then ": type" when present.
TypedName readValue(LineReader& r) {
  TypedName v;
  v.column = r.column();
  r.expect("%", "before a value name");
  bool colon = false;
  if (r.peek() == '"') {
    v.name = r.quoted();
  } else {
    v.name = r.run(text::isBareValueChar);
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

// {v,v,...} as the tensor's element type, row-major; zeros when `r` holds no values here.
// Errors about the type point at `type_column`.
at::Tensor readTensorValues(LineReader& r, const TensorType& type, size_t type_column,
                            const std::string& what) {
  auto typeError = [&](const std::string& problem) {
    failAt(r.line(), type_column, what + problem);
  };
  if (!type.shape) typeError(" needs a shape, e.g. float32[2,3]");
  std::vector<int64_t> sizes;
  for (const Dim& d : *type.shape) {
    if (!d.isKnown()) typeError(" needs a known shape; '" + text::typeText(type) + "' is not");
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
           what + ": " + text::typeText(type) + " holds " + std::to_string(numel) +
               " values, the text gives " + std::to_string(count));
  }
  const at::Tensor flat = real ? at::tensor(reals, at::kDouble) : at::tensor(ints, at::kLong);
  return flat.to(st).reshape(sizes).contiguous();
}

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

Attribute readAttribute(LineReader& r) {
  const size_t column = r.column();
  const std::string name = r.run(isAttributeNameChar);
  if (!text::isIdentifier(name))
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

struct PendingInput {
  std::optional<std::string> name;  // nullopt: an omitted optional input (<none>)
  size_t column = 0;
};

struct PendingNode {
  Node* node = nullptr;
  size_t line = 0;
  std::vector<PendingInput> inputs;
};

struct PendingOutput {
  TypedName value;
  size_t line = 0;
};

// Reads line by line, creating values and nodes as they come; node inputs and graph outputs are
// wired at the end, so that the text may use a value before the line that defines it.
class Parser {
 public:
  Graph parse(const std::string& text);

 private:
  void readHeader(LineReader& r);
  void readLine(LineReader& r);
  void readOpset(LineReader& r);
  void readInput(LineReader& r);
  void readInit(LineReader& r);
  void readNode(LineReader& r);
  void readNodeInputs(LineReader& r, PendingNode& pending);
  void define(const TypedName& v, size_t line);
  void wire();

  Graph graph_;
  std::map<std::string, size_t> defined_on_;  // value name -> line
  bool opsets_seen_ = false;
  std::vector<PendingNode> nodes_;
  std::vector<PendingOutput> outputs_;
};

Graph Parser::parse(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  size_t number = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    LineReader r(line, number);
    if (r.done()) continue;
    if (header) {
      readLine(r);
    } else {
      readHeader(r);
      header = true;
    }
  }
  if (!header) failAt(number + 1, 1, "the text is empty; it starts with 'graph <name>'");
  wire();
  return std::move(graph_);
}

void Parser::readHeader(LineReader& r) {
  const std::string keyword =
      r.run([](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
  if (keyword != "graph") {
    failAt(r.line(), 1, "the text must start with 'graph <name>', found '" + keyword + "'");
  }
  if (r.peek() == '"') {
    graph_.model.graph_name = r.quoted();
    r.expectEnd("after the graph's name");
  } else {
    graph_.model.graph_name = r.restOfLine();
  }
}

void Parser::readLine(LineReader& r) {
  const char first = r.peek();
  if (first == '%' || first == '=') return readNode(r);
  const size_t column = r.column();
  const std::string keyword =
      r.run([](char c) { return std::isalpha(static_cast<unsigned char>(c)); });
  if (keyword == "opset") return readOpset(r);
  if (keyword == "input") return readInput(r);
  if (keyword == "init") return readInit(r);
  if (keyword == "output") {
    outputs_.push_back(PendingOutput{readValue(r), r.line()});
    return r.expectEnd("after the output");
  }
  failAt(r.line(), column,
         "expected 'input', 'init', 'output', 'opset' or a node ('%y = Relu(%x)'), found '" +
             (keyword.empty() ? r.found() : keyword) + "'");
}

void Parser::readOpset(LineReader& r) {
  if (!opsets_seen_) graph_.model.opset_imports.clear();  // the text lists all of them
  opsets_seen_ = true;
  const std::string domain = r.quoted();
  graph_.model.opset_imports[domain] = readInt(r, "as the opset version");
  r.expectEnd("after the opset version");
}

void Parser::define(const TypedName& v, size_t line) {
  auto [it, added] = defined_on_.emplace(v.name, line);
  if (!added) {
    failAt(line, v.column,
           "%" + text::valueName(v.name) + " is defined twice (first on line " +
               std::to_string(it->second) + "); value names must be unique");
  }
}

void Parser::readInput(LineReader& r) {
  const TypedName v = readValue(r);
  r.expectEnd("after the input");
  define(v, r.line());
  Value* value = graph_.addValue(v.name);
  if (v.type) value->type = *v.type;
  graph_.addInput(value);
}

void Parser::readInit(LineReader& r) {
  const TypedName v = readValue(r);
  const std::string what = "init %" + text::valueName(v.name);
  if (!v.type) {
    failAt(r.line(), v.column,
           what + " needs a type with its shape, e.g. 'init %w: float32[2] = {1,2}'");
  }
  if (r.accept("=") && r.peek() != '{')
    r.fail("expected '{' and the values of " + what + ", found " + r.found());
  const at::Tensor tensor = readTensorValues(r, *v.type, v.type_column, what);
  r.expectEnd("after the values of " + what);
  // An initializer that is also a graph input is listed twice: input first, then init.
  Value* value = graph_.findValue(v.name);
  if (value == nullptr || !graph_.isGraphInput(value) || value->isInitializer()) {
    define(v, r.line());
    value = graph_.addValue(v.name);
  }
  value->setInitializer(tensor);
}

void Parser::readNode(LineReader& r) {
  std::vector<TypedName> outputs;
  if (r.peek() == '%') {
    do {
      outputs.push_back(readValue(r));
    } while (r.accept(","));
  }
  r.expect("=", "between a node's outputs and its op");
  const size_t op_column = r.column();
  const std::string op =
      r.run([](char c) { return isAttributeNameChar(c) || c == ':' || c == '-'; });
  const size_t split = op.rfind("::");
  const std::string domain = split == std::string::npos ? "" : op.substr(0, split);
  const std::string op_type = split == std::string::npos ? op : op.substr(split + 2);
  if (!text::isIdentifier(op_type) || (split != std::string::npos && domain.empty())) {
    failAt(r.line(), op_column, "expected an op ('Relu' or 'domain::Op'), found '" + op + "'");
  }
  Attributes attributes;
  if (r.accept("[") && !r.accept("]")) {
    do {
      const size_t column = r.column();
      Attribute a = readAttribute(r);
      if (attributes.has(a.name))
        failAt(r.line(), column, "attribute '" + a.name + "' is given twice");
      attributes.set(std::move(a));
    } while (r.accept(","));
    r.expect("]", "to close the attributes of " + op_type);
  }
  PendingNode pending;
  pending.line = r.line();
  readNodeInputs(r, pending);
  std::string name;
  if (r.accept("#")) name = r.peek() == '"' ? r.quoted() : r.restOfLine();
  r.expectEnd("after the node");

  std::vector<std::string> output_names;
  for (const TypedName& v : outputs) {
    define(v, r.line());
    output_names.push_back(v.name);
  }
  pending.node = graph_.addNode(op_type, {}, output_names, name, domain);
  pending.node->attributes = std::move(attributes);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i].type) pending.node->output(i)->type = *outputs[i].type;
  }
  nodes_.push_back(std::move(pending));
}

void Parser::readNodeInputs(LineReader& r, PendingNode& pending) {
  r.expect("(", "before the node's inputs");
  if (r.accept(")")) return;
  do {
    PendingInput in;
    in.column = r.column();
    if (!r.accept("<none>")) {
      const TypedName v = readValue(r);
      if (v.type)
        failAt(r.line(), v.column, "a node input takes no type; types go where values are defined");
      in.name = v.name;
    }
    pending.inputs.push_back(in);
  } while (r.accept(","));
  r.expect(")", "to close the node's inputs");
}

void Parser::wire() {
  auto lookup = [&](const std::string& name, size_t line, size_t column) {
    Value* v = graph_.findValue(name);
    if (v == nullptr) {
      failAt(line, column,
             "%" + text::valueName(name) +
                 " is never defined: no input, init or node output has this name");
    }
    return v;
  };
  for (const PendingNode& n : nodes_) {
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const PendingInput& in = n.inputs[i];
      graph_.setInput(n.node, i, in.name ? lookup(*in.name, n.line, in.column) : nullptr);
    }
  }
  for (const PendingOutput& out : outputs_) {
    Value* v = lookup(out.value.name, out.line, out.value.column);
    if (out.value.type && !(*out.value.type == v->type)) {
      if (!(v->type == TensorType{})) {
        failAt(out.line, out.value.column,
               "output %" + text::valueName(v->name()) + " is declared " +
                   text::typeText(*out.value.type) + " here but " + text::typeText(v->type) +
                   " where it is defined");
      }
      v->type = *out.value.type;
    }
    graph_.addOutput(v);
  }
}

}  // namespace

Graph parseGraph(const std::string& text) {
  return Parser().parse(text);
}

}  // namespace qforge
