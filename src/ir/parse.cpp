#include "ir/parse.h"

#include <cctype>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "ir/text_reader.h"
#include "ir/text_syntax.h"

namespace qforge {

namespace {

using text::failAt;
using text::LineReader;
using text::readInt;
using text::TypedName;

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
    outputs_.push_back(PendingOutput{text::readValue(r), r.line()});
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
  const TypedName v = text::readValue(r);
  r.expectEnd("after the input");
  define(v, r.line());
  Value* value = graph_.addValue(v.name);
  if (v.type) value->type = *v.type;
  graph_.addInput(value);
}

void Parser::readInit(LineReader& r) {
  const TypedName v = text::readValue(r);
  const std::string what = "init %" + text::valueName(v.name);
  if (!v.type) {
    failAt(r.line(), v.column,
           what + " needs a type with its shape, e.g. 'init %w: float32[2] = {1,2}'");
  }
  if (r.accept("=") && r.peek() != '{')
    r.fail("expected '{' and the values of " + what + ", found " + r.found());
  const at::Tensor tensor = text::readTensorValues(r, *v.type, v.type_column, what);
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
      outputs.push_back(text::readValue(r));
    } while (r.accept(","));
  }
  r.expect("=", "between a node's outputs and its op");
  const size_t op_column = r.column();
  const std::string op =
      r.run([](char c) { return text::isAttributeNameChar(c) || c == ':' || c == '-'; });
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
      Attribute a = text::readAttribute(r);
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
      const TypedName v = text::readValue(r);
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
