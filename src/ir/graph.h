// qforge's graph IR: Nodes connected by named Values. Initializers are ATen tensors held on their
// Values. Everything an ONNX model carries that qforge does not interpret is kept in ModelInfo so
// that import -> export is lossless.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/attribute.h"
#include "ir/dtype.h"

namespace qforge {

class Node;
class Graph;
class NodeNameIndex;

// One dimension: a known size, a named symbolic size ("batch"), or unknown.
struct Dim {
  int64_t value = -1;  // >= 0 when known
  std::string param;   // symbolic name when value is unknown; empty for an anonymous dim

  static Dim known(int64_t v) { return Dim{v, {}}; }
  static Dim symbolic(std::string p) { return Dim{-1, std::move(p)}; }
  bool isKnown() const { return value >= 0; }
  bool operator==(const Dim& o) const { return value == o.value && param == o.param; }
};

struct TensorType {
  DType dtype = DType::Undefined;
  std::optional<std::vector<Dim>> shape;  // nullopt: rank unknown

  bool operator==(const TensorType& o) const { return dtype == o.dtype && shape == o.shape; }
  std::string str() const;  // "float32[batch,3,224,224]"
};

struct Use {
  Node* node = nullptr;
  size_t index = 0;  // input slot of `node`
  bool operator==(const Use& o) const { return node == o.node && index == o.index; }
};

class Value {
 public:
  const std::string& name() const { return name_; }
  Node* producer() const { return producer_; }
  size_t producerOutputIndex() const { return producer_index_; }
  const std::vector<Use>& uses() const { return uses_; }

  bool isInitializer() const { return initializer_.defined(); }
  const at::Tensor& initializer() const { return initializer_; }
  // Replaces the stored tensor (its dtype and shape become the value's type).
  void setInitializer(at::Tensor tensor);

  TensorType type;
  std::string doc_string;
  // The name was generated for an optional output that the ONNX file left unnamed ("").
  bool anonymous = false;

 private:
  friend class Graph;
  explicit Value(std::string name) : name_(std::move(name)) {}

  std::string name_;
  Node* producer_ = nullptr;
  size_t producer_index_ = 0;
  std::vector<Use> uses_;
  at::Tensor initializer_;
};

class Node {
 public:
  const std::string& opType() const { return op_type_; }
  const std::string& domain() const { return domain_; }  // "" is the default ONNX domain
  const std::string& name() const { return name_; }
  // Also updates the owning graph's name index, so findNode() sees the new name at once.
  void setName(std::string name);

  // Missing optional inputs are nullptr (ONNX writes them as "").
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  Value* output(size_t i) const { return outputs_.at(i); }

  Attributes attributes;
  std::string doc_string;
  std::vector<std::pair<std::string, std::string>> metadata_props;

  // "node 'conv1' (Conv)" for error messages; unnamed nodes show their first output.
  std::string describe() const;

 private:
  friend class Graph;
  Node(std::string op_type, std::string domain, std::string name)
      : op_type_(std::move(op_type)), domain_(std::move(domain)), name_(std::move(name)) {}

  std::string op_type_;
  std::string domain_;
  std::string name_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  // The owning graph's index (heap-allocated, so it stays put when the Graph is moved) and the
  // node's place in insertion order, which decides findNode() among nodes sharing a name.
  NodeNameIndex* name_index_ = nullptr;
  uint64_t sequence_ = 0;
};

// Model-level fields that qforge keeps but does not interpret.
struct ModelInfo {
  int64_t ir_version = 8;
  std::map<std::string, int64_t> opset_imports{{"", 13}};  // domain -> version
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::string doc_string;
  std::vector<std::pair<std::string, std::string>> metadata_props;
  std::string graph_name = "qforge";
  std::string graph_doc_string;
  // Serialized onnx::ModelProto holding only the fields qforge does not model (functions,
  // training_info, sparse initializers, quantization annotations), merged back on export.
  std::string opaque_model_fields;

  // Opset version of `domain` ("" and "ai.onnx" are the same domain); 0 when not imported.
  int64_t opsetFor(const std::string& domain) const;
};

class Graph {
 public:
  Graph();
  ~Graph();
  // Copying is explicit (clone()): a copy of a large model is never made by accident.
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;

  // A deep copy: nodes in the same insertion order, values with names, types, doc strings and
  // use lists in the same order, initializer and attribute tensors copied (detached: edits of
  // the copy never reach the original), graph inputs/outputs, ModelInfo with its opaque fields.
  Graph clone() const;

  ModelInfo model;

  // Changes with every edit of the graph's structure (nodes, their wiring, values and their
  // names, graph inputs and outputs), not with initializer data or attributes: what was built
  // over the structure (an executor's plan) is stale once it differs.
  uint64_t structureVersion() const { return structure_version_; }

  // --- values -------------------------------------------------------------------------------
  // Creates a value; throws qforge::Error when the name is taken or empty.
  Value* addValue(const std::string& name);
  Value* findValue(const std::string& name) const;
  Value* value(const std::string& name) const;  // throws when missing
  // A name not used by any value yet, derived from `base` ("conv1_out", "conv1_out_1", ...).
  std::string uniqueName(const std::string& base) const;
  Value* addInitializer(const std::string& name, at::Tensor tensor);
  // Gives `v` a new name (no longer anonymous); throws qforge::Error when the name is taken or
  // empty. Passes use it to hand a removed value's name (a graph output's, say) to its successor.
  void renameValue(Value* v, const std::string& name);
  std::vector<Value*> initializers() const;  // in import/creation order
  size_t valueCount() const { return values_.size(); }

  // --- graph inputs / outputs ---------------------------------------------------------------
  const std::vector<Value*>& inputs() const { return inputs_; }
  const std::vector<Value*>& outputs() const { return outputs_; }
  void addInput(Value* v);
  void addOutput(Value* v);
  void setOutputs(std::vector<Value*> outputs);
  bool isGraphOutput(const Value* v) const;
  bool isGraphInput(const Value* v) const;

  // --- nodes --------------------------------------------------------------------------------
  // Appends a node. `inputs` may hold nullptr for omitted optional inputs. Output values are
  // created with the given names (which must be new).
  Node* addNode(const std::string& op_type, const std::vector<Value*>& inputs,
                const std::vector<std::string>& output_names, const std::string& name = "",
                const std::string& domain = "");
  // Nodes in insertion order (not necessarily topological; see topologicalOrder()).
  std::vector<Node*> nodes() const;
  size_t nodeCount() const { return nodes_.size(); }
  // The first node (in insertion order) with this name, or nullptr; a hash lookup.
  Node* findNode(const std::string& name) const;

  // --- editing ------------------------------------------------------------------------------
  void setInput(Node* node, size_t index, Value* v);
  // Points every use of `from` (and graph outputs, if `include_graph_outputs`) at `to`.
  void replaceAllUsesWith(Value* from, Value* to, bool include_graph_outputs = true);
  // Inserts `op_type` on `v`: v -> new node -> new value, and moves the chosen consumers of `v`
  // (all when `only` is empty) onto the new value. Graph outputs stay on `v` unless
  // `move_graph_output`. Returns the new node; its single output is node->output(0).
  Node* insertOnValue(Value* v, const std::string& op_type, const std::vector<Use>& only = {},
                      const std::string& node_name = "", bool move_graph_output = false,
                      const std::string& domain = "");
  // Removes a node whose outputs have no uses and are not graph outputs (else throws); its
  // output values are removed too.
  void removeNode(Node* node);
  // Removes a value that has no producer and no uses and is not a graph input/output.
  void removeValue(Value* v);
  // Removes nodes whose outputs reach no graph output, then unused initializers. Returns the
  // number of nodes removed.
  size_t eliminateDeadCode();

  // Kahn's order, stable with respect to insertion order; throws qforge::Error on a cycle,
  // naming a node on it.
  std::vector<Node*> topologicalOrder() const;

 private:
  Node* appendNode(const std::string& op_type, const std::string& domain, const std::string& name);

  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<std::unique_ptr<Value>> values_;
  std::unordered_map<std::string, Value*> value_by_name_;
  std::unique_ptr<NodeNameIndex> node_index_;
  uint64_t next_node_sequence_ = 0;
  uint64_t structure_version_ = 0;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
};

}  // namespace qforge
