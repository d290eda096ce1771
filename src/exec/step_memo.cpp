#include "exec/step_memo.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_set>

namespace qforge {

namespace {

// Default-domain ops whose outputs are a function of their inputs and attributes alone (no random
// numbers, no state, no bodies reading outer values), and which shape subgraphs are made of.
bool isPureShapeOp(const std::string& op_type) {
  // clang-format off
  static const std::unordered_set<std::string> kPure = {
      "Abs", "Add", "And", "Cast", "CastLike", "Ceil", "Clip", "Concat", "Constant",
      "ConstantOfShape", "Div", "Equal", "Expand", "Flatten", "Floor", "Gather", "GatherElements",
      "Greater", "GreaterOrEqual", "Identity", "Less", "LessOrEqual", "Max", "Min", "Mod", "Mul",
      "Neg", "Not", "Or", "Range", "Reciprocal", "ReduceMax", "ReduceMin", "ReduceProd",
      "ReduceSum", "Reshape", "Round", "Sign", "Slice", "Split", "Sqrt", "Squeeze", "Sub", "Tile",
      "Transpose", "Unsqueeze", "Where", "Xor"};
  // clang-format on
  return kPure.count(op_type) > 0;
}

// A small view of a large tensor would keep all of it alive: the storage counts.
bool small(const at::Tensor& t) {
  return !t.defined() ||
         (t.numel() <= StepMemo::kMaxElements &&
          t.storage().nbytes() <= static_cast<size_t>(StepMemo::kMaxElements) * sizeof(int64_t));
}

// An input's bytes are read in one piece; a tensor autograd tracks (a trainable initializer)
// makes the step run every time.
bool comparableInput(const at::Tensor& t) {
  return !t.defined() || (small(t) && t.is_contiguous() && !t.requires_grad());
}

// An output's version counter is how a reader's in-place change shows; inference tensors have
// none.
bool trackableOutput(const at::Tensor& t) {
  return !t.defined() || (small(t) && !t.is_inference() && !t.requires_grad());
}

size_t byteCount(const at::Tensor& t) {
  return static_cast<size_t>(t.numel()) * t.element_size();
}

int64_t versionOf(const at::Tensor& t) {
  return t.defined() ? static_cast<int64_t>(t._version()) : 0;
}

}  // namespace

StepMemo::Key StepMemo::keyFor(const Node& node, const std::vector<bool>& stable_inputs) {
  if (!node.domain().empty()) return Key::None;
  const std::string& op = node.opType();
  if ((op == "Shape" || op == "Size") && node.inputs().size() == 1 && node.inputs()[0] != nullptr)
    return Key::InputSizes;
  if (!isPureShapeOp(op)) return Key::None;
  const bool all_stable =
      std::all_of(stable_inputs.begin(), stable_inputs.end(), [](bool stable) { return stable; });
  return all_stable ? Key::InputValues : Key::None;
}

const std::vector<at::Tensor>* StepMemo::lookup(const std::vector<at::Tensor>& inputs) const {
  if (!valid_) return nullptr;
  if (key_ == Key::InputSizes) {
    const at::Tensor& in = inputs[0];
    if (!in.defined() || !in.sizes().equals(sizes_)) return nullptr;
  } else {
    if (inputs.size() != inputs_.size()) return nullptr;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const at::Tensor& t = inputs[i];
      const InputValue& seen = inputs_[i];
      if (t.defined() != seen.defined) return nullptr;
      if (!t.defined()) continue;
      if (t.scalar_type() != seen.type || !t.sizes().equals(seen.sizes) || !t.is_contiguous() ||
          byteCount(t) != seen.bytes.size() ||
          (!seen.bytes.empty() &&
           std::memcmp(t.data_ptr(), seen.bytes.data(), seen.bytes.size()) != 0)) {
        return nullptr;
      }
    }
  }
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (versionOf(outputs_[i]) != output_versions_[i]) return nullptr;
  }
  return &outputs_;
}

bool StepMemo::rememberable(const std::vector<at::Tensor>& inputs,
                            const std::vector<at::Tensor>& outputs) const {
  if (key_ == Key::None) return false;
  if (key_ == Key::InputSizes && (inputs.empty() || !inputs[0].defined())) return false;
  if (key_ == Key::InputValues && !std::all_of(inputs.begin(), inputs.end(), comparableInput))
    return false;
  return std::all_of(outputs.begin(), outputs.end(), trackableOutput);
}

void StepMemo::remember(const std::vector<at::Tensor>& inputs,
                        const std::vector<at::Tensor>& outputs) {
  valid_ = rememberable(inputs, outputs);
  sizes_.clear();
  inputs_.clear();
  outputs_.clear();
  output_versions_.clear();
  if (!valid_) return;
  if (key_ == Key::InputSizes) {
    sizes_ = inputs[0].sizes().vec();
  } else {
    for (const at::Tensor& t : inputs) {
      InputValue seen;
      seen.defined = t.defined();
      if (t.defined()) {
        seen.type = t.scalar_type();
        seen.sizes = t.sizes().vec();
        if (byteCount(t) > 0)
          seen.bytes.assign(static_cast<const char*>(t.data_ptr()), byteCount(t));
      }
      inputs_.push_back(std::move(seen));
    }
  }
  outputs_ = outputs;
  for (const at::Tensor& t : outputs)
    output_versions_.push_back(versionOf(t));
}

}  // namespace qforge
