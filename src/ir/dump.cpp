#include "ir/dump.h"

#include <sstream>

namespace qforge {

namespace {

template <typename T>
std::string joinList(const std::vector<T>& items) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < items.size(); ++i)
    out << (i ? "," : "") << items[i];
  out << "]";
  return out.str();
}

std::string shapeOf(const at::Tensor& t) {
  return joinList(t.sizes().vec());
}

std::string attributeText(const Attribute& a) {
  switch (a.kind) {
    case AttributeKind::Float: {
      std::ostringstream out;
      out << a.f;
      return out.str();
    }
    case AttributeKind::Int:
      return std::to_string(a.i);
    case AttributeKind::String:
      return "\"" + a.s + "\"";
    case AttributeKind::Tensor:
      return "tensor<" + std::string(c10::toString(a.t.scalar_type())) + shapeOf(a.t) + ">";
    case AttributeKind::Floats:
      return joinList(a.floats);
    case AttributeKind::Ints:
      return joinList(a.ints);
    case AttributeKind::Strings:
      return joinList(a.strings);
    case AttributeKind::Tensors:
      return "tensors<" + std::to_string(a.tensors.size()) + ">";
    case AttributeKind::Opaque:
      return "<opaque>";
  }
  return "?";
}

}  // namespace

std::string dumpGraph(const Graph& graph) {
  std::ostringstream out;
  out << "graph " << graph.model.graph_name << "\n";
  for (const Value* v : graph.inputs())
    out << "  input %" << v->name() << ": " << v->type.str() << "\n";
  for (const Value* v : graph.initializers()) {
    out << "  init %" << v->name() << ": " << v->type.str() << "\n";
  }
  for (const Node* n : graph.topologicalOrder()) {
    out << "  ";
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      const Value* v = n->outputs()[i];
      out << (i ? ", " : "") << "%" << v->name() << ": " << v->type.str();
    }
    out << " = " << (n->domain().empty() ? "" : n->domain() + "::") << n->opType();
    if (!n->attributes.empty()) {
      out << "[";
      const auto& attrs = n->attributes.all();
      for (size_t i = 0; i < attrs.size(); ++i) {
        out << (i ? ", " : "") << attrs[i].name << "=" << attributeText(attrs[i]);
      }
      out << "]";
    }
    out << "(";
    for (size_t i = 0; i < n->inputs().size(); ++i) {
      const Value* v = n->inputs()[i];
      out << (i ? ", " : "") << (v ? "%" + v->name() : std::string("<none>"));
    }
    out << ")";
    if (!n->name().empty()) out << "  # " << n->name();
    out << "\n";
  }
  for (const Value* v : graph.outputs())
    out << "  output %" << v->name() << ": " << v->type.str() << "\n";
  return out.str();
}

}  // namespace qforge
