// ReduceMean, ReduceSum, ReduceMax and ReduceMin.
#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "exec/op_info.h"
#include "exec/ops/common.h"
#include "exec/ops/layernorm_pattern.h"
#include "exec/ops/reduce_axes.h"

namespace qforge {

namespace {

using ops::kLatestOpset;
using ops::op;

enum class Reduction { Mean, Sum, Max, Min };

// Reduces `x` over `dims` (normalized, distinct, not empty unless x is 0-d).
at::Tensor reduce(Reduction kind, const at::Tensor& x, const std::vector<int64_t>& dims,
                  bool keepdims) {
  switch (kind) {
    case Reduction::Sum:
      // Keep the input type: ATen would widen integer sums to int64.
      return at::sum(x, dims, keepdims, x.scalar_type());
    case Reduction::Mean:
      if (at::isIntegralType(x.scalar_type(), /*includeBool=*/false)) {
        // at::mean has no integer form; ONNX's integer mean truncates like integer Div.
        int64_t count = 1;
        for (int64_t d : dims)
          count *= x.size(d);
        return at::div(at::sum(x, dims, keepdims, x.scalar_type()), count, "trunc");
      }
      return at::mean(x, dims, keepdims);
    case Reduction::Max:
      return at::amax(x, dims, keepdims);
    case Reduction::Min:
      return at::amin(x, dims, keepdims);
  }
  return {};
}

// The axes come from optional input 1 when `axes_from_input`, else from the attribute (see
// ops::reduceDims).
Lowering reduction(Reduction kind, bool axes_from_input) {
  return [kind, axes_from_input](const OpContext& ctx) -> std::vector<at::Tensor> {
    const at::Tensor& x = ctx.input(0);
    // A ReduceMean that starts LayerNorm written out computes the whole of it
    // (exec/ops/layernorm_pattern.h).
    if (kind == Reduction::Mean && !ctx.tail().empty()) {
      if (std::optional<at::Tensor> normalized = ops::layerNormOfTail(ctx, x)) return {*normalized};
    }
    const bool keepdims = ctx.attrInt("keepdims", 1) != 0;
    const std::optional<std::vector<int64_t>> reduced = ops::reduceDims(ctx, axes_from_input);
    if (!reduced) return {x};
    const std::vector<int64_t>& dims = *reduced;
    if (kind == Reduction::Max || kind == Reduction::Min) {
      for (int64_t d : dims) {
        if (x.size(d) == 0) {
          ctx.fail("cannot take the max/min over the empty axis " + std::to_string(d));
        }
      }
    }
    return {reduce(kind, x, dims, keepdims)};
  };
}

// Registers the attribute form up to `last_attr_opset` and the input form after it.
void addReduction(OpRegistry& registry, const std::string& name, Reduction kind,
                  int64_t last_attr_opset, bool moves_data_only) {
  OpInfo attr_form = op(name, 1, last_attr_opset, reduction(kind, false));
  OpInfo input_form = op(name, last_attr_opset + 1, kLatestOpset, reduction(kind, true));
  // Max/Min pick one of the input values: nothing is computed.
  attr_form.moves_data_only = input_form.moves_data_only = moves_data_only;
  if (kind == Reduction::Mean) {
    attr_form.fusable_followers = input_form.fusable_followers = ops::layerNormFollowers();
  }
  registry.add(std::move(attr_form));
  registry.add(std::move(input_form));
}

}  // namespace

void registerReductionOps(OpRegistry& registry) {
  addReduction(registry, "ReduceSum", Reduction::Sum, 12, false);
  addReduction(registry, "ReduceMean", Reduction::Mean, 17, false);
  addReduction(registry, "ReduceMax", Reduction::Max, 17, true);
  addReduction(registry, "ReduceMin", Reduction::Min, 17, true);
}

}  // namespace qforge
