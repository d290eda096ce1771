#include "exec/op_info.h"

#include <algorithm>
#include <set>

#include "core/error.h"
#include "exec/ops/control_flow.h"
#include "exec/ops/text.h"

namespace qforge {

namespace {
std::string normalDomain(const std::string& d) {
  return d == "ai.onnx" ? "" : d;
}
}  // namespace

void OpContext::fail(const std::string& message) const {
  throw Error(node_.describe() + ", opset " + std::to_string(opset_) + ": " + message);
}

bool OpContext::followerReads(size_t k, size_t slot, size_t source) const {
  if (k >= tail_.size() || source > k) return false;
  const Node& reader = tail_[k].node();
  const Node& producer = source == 0 ? node_ : tail_[source - 1].node();
  return slot < reader.inputs().size() && !producer.outputs().empty() &&
         reader.inputs()[slot] == producer.outputs()[0];
}

const at::Tensor& OpContext::input(size_t i) const {
  if (!hasInput(i)) fail("required input " + std::to_string(i) + " is missing");
  return inputs_[i];
}

const Attribute& OpContext::attr(const std::string& name, AttributeKind kind) const {
  const Attribute* a = node_.attributes.find(name);
  if (a == nullptr) fail("required attribute '" + name + "' is missing");
  if (a->kind != kind) {
    fail("attribute '" + name + "' is " + attributeKindName(a->kind) + ", expected " +
         attributeKindName(kind));
  }
  return *a;
}

int64_t OpContext::attrInt(const std::string& name, int64_t fallback) const {
  return hasAttr(name) ? attrInt(name) : fallback;
}
int64_t OpContext::attrInt(const std::string& name) const {
  return attr(name, AttributeKind::Int).i;
}
double OpContext::attrFloat(const std::string& name, double fallback) const {
  return hasAttr(name) ? attr(name, AttributeKind::Float).f : fallback;
}
std::string OpContext::attrString(const std::string& name, const std::string& fallback) const {
  return hasAttr(name) ? attr(name, AttributeKind::String).s : fallback;
}
std::vector<int64_t> OpContext::attrInts(const std::string& name,
                                         const std::vector<int64_t>& fallback) const {
  return hasAttr(name) ? attr(name, AttributeKind::Ints).ints : fallback;
}
std::vector<double> OpContext::attrFloats(const std::string& name,
                                          const std::vector<double>& fallback) const {
  return hasAttr(name) ? attr(name, AttributeKind::Floats).floats : fallback;
}
at::Tensor OpContext::attrTensor(const std::string& name) const {
  return attr(name, AttributeKind::Tensor).t;
}

void OpRegistry::add(OpInfo info) {
  info.domain = normalDomain(info.domain);
  for (const OpInfo& e : entries_) {
    bool same_op = e.op_type == info.op_type && e.domain == info.domain;
    bool overlaps = info.since_version <= e.until_version && e.since_version <= info.until_version;
    if (same_op && overlaps) {
      throw Error("internal: op " + info.op_type + " registered twice for overlapping opsets");
    }
  }
  entries_.push_back(std::move(info));
}

void OpRegistry::remove(const std::string& domain, const std::string& op_type) {
  const std::string d = normalDomain(domain);
  entries_.erase(
      std::remove_if(entries_.begin(), entries_.end(),
                     [&](const OpInfo& e) { return e.op_type == op_type && e.domain == d; }),
      entries_.end());
}

void OpRegistry::replaceLowering(const std::string& domain, const std::string& op_type,
                                 const Lowering& run) {
  const std::string d = normalDomain(domain);
  bool found = false;
  for (OpInfo& e : entries_) {
    if (e.op_type != op_type || e.domain != d) continue;
    e.run = run;
    found = true;
  }
  if (!found) throw Error("internal: no lowering of op " + op_type + " to replace");
}

const OpInfo* OpRegistry::find(const std::string& domain, const std::string& op_type,
                               int64_t opset) const {
  const std::string d = normalDomain(domain);
  if (d.empty() && opset > kNewestOnnxOpset) return nullptr;
  for (const OpInfo& e : entries_) {
    if (e.op_type == op_type && e.domain == d && e.since_version <= opset &&
        opset <= e.until_version) {
      return &e;
    }
  }
  return nullptr;
}

bool OpRegistry::knowsOp(const std::string& domain, const std::string& op_type) const {
  const std::string d = normalDomain(domain);
  return std::any_of(entries_.begin(), entries_.end(),
                     [&](const OpInfo& e) { return e.op_type == op_type && e.domain == d; });
}

std::vector<std::string> OpRegistry::opTypes() const {
  std::set<std::string> names;
  for (const OpInfo& e : entries_)
    names.insert(e.domain.empty() ? e.op_type : e.domain + "::" + e.op_type);
  return {names.begin(), names.end()};
}

const OpRegistry& OpRegistry::builtin() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    registerElementwiseOps(r);
    registerActivationOps(r);
    registerReductionOps(r);
    registerNnOps(r);
    registerPoolingOps(r);
    registerNormalizationOps(r);
    registerShapeOps(r);
    registerResizeOps(r);
    registerQuantizedOps(r);
    registerOpenVinoOps(r);
    registerMathOps(r);
    registerLogicOps(r);
    registerMoreActivationOps(r);
    registerMoreReductionOps(r);
    registerSignalOps(r);
    registerSelectionOps(r);
    registerScatterGatherOps(r);
    registerSpaceOps(r);
    registerDetectionOps(r);
    registerLossOps(r);
    registerRecurrentOps(r);
    registerControlFlowOps(r);
    registerTextOps(r);
    return r;
  }();
  return registry;
}

}  // namespace qforge
