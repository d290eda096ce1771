// Remembers what a step of a shape computation gave last time, so that a run at batch 1 does not
// pay for the same Shape -> Gather -> Unsqueeze -> Concat chain on every image. Exporters write
// such chains in front of every Reshape whose target depends on the batch (ShuffleNet's channel
// shuffle has 77 Shape nodes): hundreds of tiny nodes whose values change only when an input's
// shape does.
//
// A step is remembered only when its result is a function of what the memo checks:
// - Shape and Size read only their input's sizes, so the sizes are the key;
// - a pure op (the list in step_memo.cpp) whose every input is an initializer or a remembered
//   step's output is keyed by its inputs' values (type, sizes and bytes, compared with a copy).
//   Values, not identity or version counters: ATen kernels write some buffers through their data
//   pointer without counting a version (batch norm's running statistics), and those can feed a
//   small computation on initializers just like a shape's constants do.
// Inputs and outputs above kMaxElements (or views of a larger storage), non-contiguous inputs,
// and tensors that record gradients are never remembered: such a step simply runs. An output
// modified in place by a reader (its version counter moved) is not handed out again.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "exec/op_info.h"
#include "ir/graph.h"

namespace qforge {

class StepMemo {
 public:
  enum class Key { None, InputSizes, InputValues };

  // Larger values are activations, or constants whose lowering is already free.
  static constexpr int64_t kMaxElements = 4096;

  // How `node` may be remembered, given which of its inputs are stable (initializers or outputs
  // of remembered steps; a null entry for an omitted optional input counts as stable).
  static Key keyFor(const Node& node, const std::vector<bool>& stable_inputs);

  explicit StepMemo(Key key = Key::None) : key_(key) {}
  bool enabled() const { return key_ != Key::None; }

  // The outputs remembered for exactly these inputs, or nullptr.
  const std::vector<at::Tensor>* lookup(const std::vector<at::Tensor>& inputs) const;
  // Remembers `outputs` for `inputs` when both qualify; forgets the last entry otherwise.
  void remember(const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs);

 private:
  bool rememberable(const std::vector<at::Tensor>& inputs,
                    const std::vector<at::Tensor>& outputs) const;

  Key key_;
  bool valid_ = false;
  std::vector<int64_t> sizes_;  // Key::InputSizes: input 0's sizes
  // Key::InputValues: each input's type, sizes and bytes (an omitted optional input: undefined).
  struct InputValue {
    bool defined = false;
    at::ScalarType type = at::kFloat;
    std::vector<int64_t> sizes;
    std::string bytes;
  };
  std::vector<InputValue> inputs_;
  // The outputs and their version counters: a reader that modified one in place spoils it.
  std::vector<at::Tensor> outputs_;
  std::vector<int64_t> output_versions_;
};

}  // namespace qforge
