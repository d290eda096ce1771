// Node attributes. The common kinds are typed; kinds qforge never interprets (subgraphs, sparse
// tensors, type protos) are kept as the serialized ONNX AttributeProto so export stays lossless.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace qforge {

enum class AttributeKind {
  Float,
  Int,
  String,
  Tensor,
  Floats,
  Ints,
  Strings,
  Tensors,
  Opaque,  // GRAPH(S), SPARSE_TENSOR(S), TYPE_PROTO(S): carried, not interpreted
};

std::string attributeKindName(AttributeKind kind);

struct Attribute {
  std::string name;
  AttributeKind kind = AttributeKind::Int;
  double f = 0.0;
  int64_t i = 0;
  std::string s;
  at::Tensor t;
  std::vector<double> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<at::Tensor> tensors;
  std::string opaque_proto;  // serialized onnx::AttributeProto, for AttributeKind::Opaque
  std::string doc_string;
  std::string ref_attr_name;  // set inside function bodies only

  static Attribute makeFloat(std::string name, double value);
  static Attribute makeInt(std::string name, int64_t value);
  static Attribute makeString(std::string name, std::string value);
  static Attribute makeTensor(std::string name, at::Tensor value);
  static Attribute makeFloats(std::string name, std::vector<double> values);
  static Attribute makeInts(std::string name, std::vector<int64_t> values);
  static Attribute makeStrings(std::string name, std::vector<std::string> values);
};

// Ordered attribute list (ONNX keeps declaration order; so do we).
class Attributes {
 public:
  const Attribute* find(const std::string& name) const;
  bool has(const std::string& name) const { return find(name) != nullptr; }
  // Adds or replaces the attribute with the same name.
  void set(Attribute attribute);
  bool erase(const std::string& name);
  const std::vector<Attribute>& all() const { return items_; }
  bool empty() const { return items_.empty(); }

 private:
  std::vector<Attribute> items_;
};

}  // namespace qforge
