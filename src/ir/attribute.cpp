#include "ir/attribute.h"

#include <algorithm>
#include <utility>

namespace qforge {

std::string attributeKindName(AttributeKind kind) {
  switch (kind) {
    case AttributeKind::Float:
      return "float";
    case AttributeKind::Int:
      return "int";
    case AttributeKind::String:
      return "string";
    case AttributeKind::Tensor:
      return "tensor";
    case AttributeKind::Floats:
      return "floats";
    case AttributeKind::Ints:
      return "ints";
    case AttributeKind::Strings:
      return "strings";
    case AttributeKind::Tensors:
      return "tensors";
    case AttributeKind::Opaque:
      return "opaque";
  }
  return "unknown";
}

namespace {
Attribute named(std::string name, AttributeKind kind) {
  Attribute a;
  a.name = std::move(name);
  a.kind = kind;
  return a;
}
}  // namespace

Attribute Attribute::makeFloat(std::string name, double value) {
  Attribute a = named(std::move(name), AttributeKind::Float);
  a.f = value;
  return a;
}
Attribute Attribute::makeInt(std::string name, int64_t value) {
  Attribute a = named(std::move(name), AttributeKind::Int);
  a.i = value;
  return a;
}
Attribute Attribute::makeString(std::string name, std::string value) {
  Attribute a = named(std::move(name), AttributeKind::String);
  a.s = std::move(value);
  return a;
}
Attribute Attribute::makeTensor(std::string name, at::Tensor value) {
  Attribute a = named(std::move(name), AttributeKind::Tensor);
  a.t = std::move(value);
  return a;
}
Attribute Attribute::makeFloats(std::string name, std::vector<double> values) {
  Attribute a = named(std::move(name), AttributeKind::Floats);
  a.floats = std::move(values);
  return a;
}
Attribute Attribute::makeInts(std::string name, std::vector<int64_t> values) {
  Attribute a = named(std::move(name), AttributeKind::Ints);
  a.ints = std::move(values);
  return a;
}
Attribute Attribute::makeStrings(std::string name, std::vector<std::string> values) {
  Attribute a = named(std::move(name), AttributeKind::Strings);
  a.strings = std::move(values);
  return a;
}

const Attribute* Attributes::find(const std::string& name) const {
  auto it = std::find_if(items_.begin(), items_.end(),
                         [&](const Attribute& a) { return a.name == name; });
  return it == items_.end() ? nullptr : &*it;
}

void Attributes::set(Attribute attribute) {
  for (auto& existing : items_) {
    if (existing.name == attribute.name) {
      existing = std::move(attribute);
      return;
    }
  }
  items_.push_back(std::move(attribute));
}

bool Attributes::erase(const std::string& name) {
  auto it = std::find_if(items_.begin(), items_.end(),
                         [&](const Attribute& a) { return a.name == name; });
  if (it == items_.end()) return false;
  items_.erase(it);
  return true;
}

}  // namespace qforge
