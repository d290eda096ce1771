// Reading a follower offered in OpContext::tail() by the patterns that match one (GELU, LayerNorm).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

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

// The value of a one-element tensor (a pattern's constant: LayerNorm's exponent and epsilon,
// GELU's factors), read from its memory for the CPU types models use: item() goes through the
// dispatcher, a microsecond on every run of every matched pattern.
inline double scalarValue(const at::Tensor& t) {
  if (t.device().is_cpu()) {
    switch (t.scalar_type()) {
      case at::kFloat:
        return *static_cast<const float*>(t.data_ptr());
      case at::kDouble:
        return *static_cast<const double*>(t.data_ptr());
      case at::kLong:
        return static_cast<double>(*static_cast<const int64_t*>(t.data_ptr()));
      case at::kInt:
        return *static_cast<const int32_t*>(t.data_ptr());
      default:
        break;
    }
  }
  return t.item<double>();
}

}  // namespace qforge::ops
