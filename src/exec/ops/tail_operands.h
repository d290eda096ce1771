// Reading a follower offered in OpContext::tail() by the patterns that match one (GELU, LayerNorm).
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>

#include "exec/op_info.h"

namespace qforge::ops {

// Follower k's other input when it has exactly two and one of them is the value of the node right
// before it (left undefined by the executor); nullopt otherwise.
inline std::optional<at::Tensor> operandBesidePrevious(const OpContext& head, size_t k) {
  const OpContext& node = head.tail()[k];
  if (node.inputCount() != 2) return std::nullopt;
  if (head.followerReads(k, 0, k) && node.hasInput(1)) return node.input(1);
  if (head.followerReads(k, 1, k) && node.hasInput(0)) return node.input(0);
  return std::nullopt;
}

}  // namespace qforge::ops
