#include "ir/graph.h"

#include <algorithm>
#include <deque>
#include <sstream>
#include <unordered_set>

#include "core/error.h"

namespace qforge {

// Nodes by name; each list is in insertion order, because node names need not be unique while a
// pass runs (the verifier demands it only of finished graphs) and findNode() returns the first.
class NodeNameIndex {
 public:
  void add(const std::string& name, Node* node, uint64_t sequence) {
    auto& list = by_name_[name];
    const Entry entry{sequence, node};
    list.insert(std::upper_bound(list.begin(), list.end(), entry,
                                 [](const Entry& a, const Entry& b) { return a.first < b.first; }),
                entry);
  }

  void remove(const std::string& name, const Node* node) {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) return;
    auto& list = it->second;
    list.erase(
        std::find_if(list.begin(), list.end(), [&](const Entry& e) { return e.second == node; }));
    if (list.empty()) by_name_.erase(it);
  }

  Node* first(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second.front().second;
  }

 private:
  using Entry = std::pair<uint64_t, Node*>;
  std::unordered_map<std::string, std::vector<Entry>> by_name_;
};

std::string TensorType::str() const {
  std::ostringstream out;
  out << dtypeName(dtype);
  if (!shape) return out.str() + "[?]";
  out << "[";
  for (size_t i = 0; i < shape->size(); ++i) {
    const Dim& d = (*shape)[i];
    if (i) out << ",";
    if (d.isKnown()) {
      out << d.value;
    } else {
      out << (d.param.empty() ? "?" : d.param);
    }
  }
  out << "]";
  return out.str();
}

void Value::setInitializer(at::Tensor tensor) {
  initializer_ = std::move(tensor);
  if (!initializer_.defined()) return;
  type.dtype = fromScalarType(initializer_.scalar_type());
  std::vector<Dim> dims;
  for (int64_t s : initializer_.sizes())
    dims.push_back(Dim::known(s));
  type.shape = std::move(dims);
}

void Node::setName(std::string name) {
  if (name == name_) return;
  if (name_index_ != nullptr) {
    name_index_->remove(name_, this);
    name_index_->add(name, this, sequence_);
  }
  name_ = std::move(name);
}

std::string Node::describe() const {
  std::string label = name_;
  if (label.empty() && !outputs_.empty() && outputs_[0] != nullptr) {
    label = "<unnamed, output " + outputs_[0]->name() + ">";
  }
  return "node '" + label + "' (" + (domain_.empty() ? "" : domain_ + "::") + op_type_ + ")";
}

int64_t ModelInfo::opsetFor(const std::string& d) const {
  const std::string key = d == "ai.onnx" ? "" : d;
  for (const auto& [domain_name, version] : opset_imports) {
    if ((domain_name == "ai.onnx" ? "" : domain_name) == key) return version;
  }
  return 0;
}

Graph::Graph() = default;
Graph::~Graph() = default;
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;

namespace {

at::Tensor deepCopy(const at::Tensor& t) {
  return t.defined() ? t.detach().clone() : t;
}

Attributes deepCopy(const Attributes& attributes) {
  Attributes copy;
  for (Attribute a : attributes.all()) {
    a.t = deepCopy(a.t);
    for (at::Tensor& t : a.tensors)
      t = deepCopy(t);
    copy.set(std::move(a));
  }
  return copy;
}

}  // namespace

Graph Graph::clone() const {
  Graph copy;
  copy.model = model;
  std::unordered_map<const Value*, Value*> value_of;
  for (const auto& v : values_) {
    Value* c = copy.addValue(v->name_);
    c->type = v->type;
    c->doc_string = v->doc_string;
    c->anonymous = v->anonymous;
    c->initializer_ = deepCopy(v->initializer_);
    value_of.emplace(v.get(), c);
  }
  auto copyOf = [&](const Value* v) { return v == nullptr ? nullptr : value_of.at(v); };
  std::unordered_map<const Node*, Node*> node_of;
  for (const auto& n : nodes_) {
    Node* c = copy.appendNode(n->op_type_, n->domain_, n->name_);
    c->attributes = deepCopy(n->attributes);
    c->doc_string = n->doc_string;
    c->metadata_props = n->metadata_props;
    for (const Value* in : n->inputs_)
      c->inputs_.push_back(copyOf(in));
    for (const Value* out : n->outputs_)
      c->outputs_.push_back(copyOf(out));
    node_of.emplace(n.get(), c);
  }
  // Use lists are copied, not rebuilt, so that passes walking them see the same order.
  for (const auto& v : values_) {
    Value* c = value_of.at(v.get());
    if (v->producer_ != nullptr) c->producer_ = node_of.at(v->producer_);
    c->producer_index_ = v->producer_index_;
    for (const Use& u : v->uses_)
      c->uses_.push_back(Use{node_of.at(u.node), u.index});
  }
  for (const Value* in : inputs_)
    copy.inputs_.push_back(copyOf(in));
  for (const Value* out : outputs_)
    copy.outputs_.push_back(copyOf(out));
  return copy;
}

Value* Graph::addValue(const std::string& name) {
  ++structure_version_;
  require(!name.empty(), "a value needs a non-empty name");
  require(value_by_name_.count(name) == 0,
          "value name '" + name + "' is defined more than once; names must be unique");
  values_.push_back(std::unique_ptr<Value>(new Value(name)));
  Value* v = values_.back().get();
  value_by_name_.emplace(name, v);
  return v;
}

Value* Graph::findValue(const std::string& name) const {
  auto it = value_by_name_.find(name);
  return it == value_by_name_.end() ? nullptr : it->second;
}

Value* Graph::value(const std::string& name) const {
  Value* v = findValue(name);
  require(v != nullptr, "no value named '" + name + "' in the graph");
  return v;
}

std::string Graph::uniqueName(const std::string& base) const {
  if (!base.empty() && value_by_name_.count(base) == 0) return base;
  for (size_t i = 1;; ++i) {
    std::string candidate = base + "_" + std::to_string(i);
    if (value_by_name_.count(candidate) == 0) return candidate;
  }
}

Value* Graph::addInitializer(const std::string& name, at::Tensor tensor) {
  Value* v = addValue(name);
  v->setInitializer(std::move(tensor));
  return v;
}

void Graph::renameValue(Value* v, const std::string& name) {
  ++structure_version_;
  if (v->name_ == name) return;
  require(!name.empty(), "a value needs a non-empty name");
  require(value_by_name_.count(name) == 0,
          "cannot rename '" + v->name_ + "' to '" + name + "': a value of that name exists");
  value_by_name_.erase(v->name_);
  v->name_ = name;
  v->anonymous = false;
  value_by_name_.emplace(name, v);
}

std::vector<Value*> Graph::initializers() const {
  std::vector<Value*> result;
  for (const auto& v : values_) {
    if (v->isInitializer()) result.push_back(v.get());
  }
  return result;
}

void Graph::addInput(Value* v) {
  ++structure_version_;
  inputs_.push_back(v);
}
void Graph::addOutput(Value* v) {
  ++structure_version_;
  outputs_.push_back(v);
}
void Graph::setOutputs(std::vector<Value*> outputs) {
  ++structure_version_;
  outputs_ = std::move(outputs);
}

bool Graph::isGraphOutput(const Value* v) const {
  return std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end();
}
bool Graph::isGraphInput(const Value* v) const {
  return std::find(inputs_.begin(), inputs_.end(), v) != inputs_.end();
}

Node* Graph::addNode(const std::string& op_type, const std::vector<Value*>& inputs,
                     const std::vector<std::string>& output_names, const std::string& name,
                     const std::string& domain) {
  // Create outputs first so a duplicate name fails before the graph is touched.
  for (const auto& out : output_names) {
    require(!out.empty(), "node '" + name + "' (" + op_type + ") has an output with no name");
    require(findValue(out) == nullptr,
            "value name '" + out + "' is defined more than once; " + "names must be unique");
  }
  Node* node = appendNode(op_type, domain, name);
  for (size_t i = 0; i < inputs.size(); ++i) {
    node->inputs_.push_back(inputs[i]);
    if (inputs[i] != nullptr) inputs[i]->uses_.push_back(Use{node, i});
  }
  for (size_t i = 0; i < output_names.size(); ++i) {
    Value* v = addValue(output_names[i]);
    v->producer_ = node;
    v->producer_index_ = i;
    node->outputs_.push_back(v);
  }
  return node;
}

Node* Graph::appendNode(const std::string& op_type, const std::string& domain,
                        const std::string& name) {
  ++structure_version_;
  // A moved-from graph has no index; it gets a fresh one if it is used again.
  if (node_index_ == nullptr) node_index_ = std::make_unique<NodeNameIndex>();
  nodes_.push_back(std::unique_ptr<Node>(new Node(op_type, domain, name)));
  Node* node = nodes_.back().get();
  node->name_index_ = node_index_.get();
  node->sequence_ = next_node_sequence_++;
  node_index_->add(name, node, node->sequence_);
  return node;
}

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> result;
  result.reserve(nodes_.size());
  for (const auto& n : nodes_)
    result.push_back(n.get());
  return result;
}

Node* Graph::findNode(const std::string& name) const {
  return node_index_ == nullptr ? nullptr : node_index_->first(name);
}

void Graph::setInput(Node* node, size_t index, Value* v) {
  ++structure_version_;
  require(index < node->inputs_.size() || index == node->inputs_.size(),
          node->describe() + ": input slot " + std::to_string(index) + " is out of range");
  if (index == node->inputs_.size()) node->inputs_.push_back(nullptr);
  Value* old = node->inputs_[index];
  if (old != nullptr) {
    auto& uses = old->uses_;
    uses.erase(std::find(uses.begin(), uses.end(), Use{node, index}));
  }
  node->inputs_[index] = v;
  if (v != nullptr) v->uses_.push_back(Use{node, index});
}

void Graph::replaceAllUsesWith(Value* from, Value* to, bool include_graph_outputs) {
  ++structure_version_;
  if (from == to) return;
  std::vector<Use> uses = from->uses_;
  for (const Use& u : uses)
    setInput(u.node, u.index, to);
  if (include_graph_outputs) {
    for (auto& out : outputs_) {
      if (out == from) out = to;
    }
  }
}

Node* Graph::insertOnValue(Value* v, const std::string& op_type, const std::vector<Use>& only,
                           const std::string& node_name, bool move_graph_output,
                           const std::string& domain) {
  std::vector<Use> targets = only.empty() ? v->uses_ : only;
  for (const Use& u : targets) {
    require(std::find(v->uses_.begin(), v->uses_.end(), u) != v->uses_.end(),
            "cannot insert " + op_type + " on '" + v->name() + "': " + u.node->describe() +
                " does not consume it at input " + std::to_string(u.index));
  }
  std::string base = node_name.empty() ? v->name() + "_" + op_type : node_name;
  Node* node = addNode(op_type, {v}, {uniqueName(base + "_out")}, base, domain);
  Value* out = node->outputs_[0];
  out->type = v->type;
  for (const Use& u : targets)
    setInput(u.node, u.index, out);
  if (move_graph_output) {
    for (auto& o : outputs_) {
      if (o == v) o = out;
    }
  }
  return node;
}

void Graph::removeValue(Value* v) {
  ++structure_version_;
  require(v->producer_ == nullptr && v->uses_.empty() && !isGraphInput(v) && !isGraphOutput(v),
          "cannot remove value '" + v->name() + "': it is still produced, used or a graph I/O");
  value_by_name_.erase(v->name_);
  values_.erase(std::find_if(values_.begin(), values_.end(),
                             [&](const std::unique_ptr<Value>& p) { return p.get() == v; }));
}

void Graph::removeNode(Node* node) {
  ++structure_version_;
  for (Value* out : node->outputs_) {
    require(
        out->uses_.empty() && !isGraphOutput(out),
        "cannot remove " + node->describe() + ": its output '" + out->name() + "' is still used");
  }
  for (size_t i = 0; i < node->inputs_.size(); ++i)
    setInput(node, i, nullptr);
  std::vector<Value*> outs = node->outputs_;
  for (Value* out : outs)
    out->producer_ = nullptr;
  for (Value* out : outs)
    removeValue(out);
  node_index_->remove(node->name_, node);
  nodes_.erase(std::find_if(nodes_.begin(), nodes_.end(),
                            [&](const std::unique_ptr<Node>& p) { return p.get() == node; }));
}

size_t Graph::eliminateDeadCode() {
  std::unordered_set<const Node*> live;
  std::deque<const Value*> work(outputs_.begin(), outputs_.end());
  while (!work.empty()) {
    const Value* v = work.front();
    work.pop_front();
    const Node* p = v->producer_;
    if (p == nullptr || !live.insert(p).second) continue;
    for (const Value* in : p->inputs_) {
      if (in != nullptr) work.push_back(in);
    }
  }
  size_t removed = 0;
  // Remove in reverse topological order so each node's outputs are unused when it goes.
  std::vector<Node*> order = topologicalOrder();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (live.count(*it)) continue;
    removeNode(*it);
    ++removed;
  }
  std::vector<Value*> dead_initializers;
  for (const auto& v : values_) {
    if (v->isInitializer() && v->uses_.empty() && !isGraphInput(v.get()) &&
        !isGraphOutput(v.get())) {
      dead_initializers.push_back(v.get());
    }
  }
  for (Value* v : dead_initializers)
    removeValue(v);
  return removed;
}

std::vector<Node*> Graph::topologicalOrder() const {
  std::unordered_map<const Node*, size_t> pending;
  std::unordered_map<const Node*, size_t> position;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const Node* n = nodes_[i].get();
    position[n] = i;
    size_t count = 0;
    for (const Value* in : n->inputs_) {
      if (in != nullptr && in->producer_ != nullptr) ++count;
    }
    pending[n] = count;
  }
  // Ready nodes are taken in insertion order, so an already-sorted graph keeps its order.
  auto later = [&](const Node* a, const Node* b) { return position[a] > position[b]; };
  std::vector<const Node*> ready;
  for (const auto& n : nodes_) {
    if (pending[n.get()] == 0) ready.push_back(n.get());
  }
  std::make_heap(ready.begin(), ready.end(), later);
  std::vector<Node*> order;
  order.reserve(nodes_.size());
  while (!ready.empty()) {
    std::pop_heap(ready.begin(), ready.end(), later);
    const Node* n = ready.back();
    ready.pop_back();
    order.push_back(const_cast<Node*>(n));
    for (const Value* out : n->outputs_) {
      for (const Use& u : out->uses_) {
        if (--pending[u.node] == 0) {
          ready.push_back(u.node);
          std::push_heap(ready.begin(), ready.end(), later);
        }
      }
    }
  }
  if (order.size() != nodes_.size()) {
    for (const auto& n : nodes_) {
      if (pending[n.get()] != 0) {
        throw Error("the graph has a cycle through " + n->describe() +
                    "; ONNX graphs must be acyclic");
      }
    }
  }
  return order;
}

}  // namespace qforge
