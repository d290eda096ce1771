#include "ir/dump.h"

#include <ATen/ATen.h>

#include <sstream>

#include "ir/text_syntax.h"

namespace qforge {

namespace {

// Attribute floats are float32 in ONNX; the '.' keeps 1.0 from reading back as the int 1.
std::string floatText(double v) {
  std::string s = text::shortestFloat(static_cast<float>(v));
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

template <typename T, typename Format>
std::string listText(const std::vector<T>& items, Format format) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i)
    out += (i ? "," : "") + format(items[i]);
  return out + "]";
}

// "{v,v,...}" in row-major order, each in the tensor's own precision; "" when the tensor has
// more than `max_values` elements or complex ones.
std::string tensorValues(const at::Tensor& t, size_t max_values) {
  if (static_cast<size_t>(t.numel()) > max_values || t.is_complex()) return "";
  const at::Tensor flat = t.detach().reshape({-1});
  std::vector<std::string> items;
  if (t.scalar_type() == at::kDouble) {
    const at::Tensor d = flat.contiguous();
    for (int64_t i = 0; i < d.numel(); ++i)
      items.push_back(text::shortestDouble(d.data_ptr<double>()[i]));
  } else if (at::isFloatingType(t.scalar_type())) {
    const at::Tensor f = flat.to(at::kFloat).contiguous();  // float16 and bfloat16 exactly
    for (int64_t i = 0; i < f.numel(); ++i)
      items.push_back(text::shortestFloat(f.data_ptr<float>()[i]));
  } else {
    const at::Tensor l = flat.to(at::kLong).contiguous();
    for (int64_t i = 0; i < l.numel(); ++i)
      items.push_back(std::to_string(l.data_ptr<int64_t>()[i]));
  }
  std::string out = listText(items, [](const std::string& s) { return s; });
  return "{" + out.substr(1, out.size() - 2) + "}";
}

std::string tensorLiteral(const at::Tensor& t, size_t max_values) {
  if (!t.defined()) return "tensor<undefined>";
  TensorType type;
  type.dtype = fromScalarType(t.scalar_type());
  type.shape = std::vector<Dim>{};
  for (int64_t s : t.sizes())
    type.shape->push_back(Dim::known(s));
  return "tensor<" + text::typeText(type) + ">" + tensorValues(t, max_values);
}

std::string attributeText(const Attribute& a, size_t max_values) {
  switch (a.kind) {
    case AttributeKind::Float:
      return floatText(a.f);
    case AttributeKind::Int:
      return std::to_string(a.i);
    case AttributeKind::String:
      return text::quote(a.s);
    case AttributeKind::Tensor:
      return tensorLiteral(a.t, max_values);
    case AttributeKind::Floats:
      return a.floats.empty() ? "floats[]" : listText(a.floats, floatText);
    case AttributeKind::Ints:
      return listText(a.ints, [](int64_t i) { return std::to_string(i); });
    case AttributeKind::Strings:
      return a.strings.empty() ? "strings[]" : listText(a.strings, text::quote);
    case AttributeKind::Tensors:
      return "tensors" +
             listText(a.tensors, [&](const at::Tensor& t) { return tensorLiteral(t, max_values); });
    case AttributeKind::Opaque:
      return "<opaque>";
  }
  return "?";
}

// "%name" or "%name: type".
std::string typedValue(const Value& v) {
  const std::string type = text::typeText(v.type);
  return "%" + text::valueName(v.name()) + (type.empty() ? "" : ": " + type);
}

void dumpNode(const Node& n, size_t max_values, std::ostringstream& out) {
  out << " ";
  for (size_t i = 0; i < n.outputs().size(); ++i)
    out << (i ? ", " : " ") << typedValue(*n.output(i));
  out << " = " << (n.domain().empty() ? "" : n.domain() + "::") << n.opType();
  if (!n.attributes.empty()) {
    out << "[";
    const auto& attrs = n.attributes.all();
    for (size_t i = 0; i < attrs.size(); ++i)
      out << (i ? ", " : "") << attrs[i].name << "=" << attributeText(attrs[i], max_values);
    out << "]";
  }
  out << "(";
  for (size_t i = 0; i < n.inputs().size(); ++i) {
    const Value* v = n.inputs()[i];
    out << (i ? ", " : "") << (v ? "%" + text::valueName(v->name()) : std::string("<none>"));
  }
  out << ")";
  if (!n.name().empty()) out << "  # " << text::trailingName(n.name());
  out << "\n";
}

}  // namespace

std::string dumpGraph(const Graph& graph, size_t max_values) {
  std::ostringstream out;
  const std::string& name = graph.model.graph_name;
  out << "graph" << (name.empty() ? "" : " " + text::trailingName(name)) << "\n";
  if (graph.model.opset_imports != ModelInfo().opset_imports) {
    for (const auto& [domain, version] : graph.model.opset_imports)
      out << "  opset " << text::quote(domain) << " " << version << "\n";
  }
  for (const Value* v : graph.inputs())
    out << "  input " << typedValue(*v) << "\n";
  for (const Value* v : graph.initializers()) {
    const std::string values = tensorValues(v->initializer(), max_values);
    out << "  init " << typedValue(*v) << (values.empty() ? "" : " = " + values) << "\n";
  }
  for (const Node* n : graph.topologicalOrder())
    dumpNode(*n, max_values, out);
  for (const Value* v : graph.outputs())
    out << "  output " << typedValue(*v) << "\n";
  return out.str();
}

}  // namespace qforge
