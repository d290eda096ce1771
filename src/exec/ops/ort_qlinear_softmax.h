// ONNX Runtime's com.microsoft QLinearSoftmax (CPU), which its QDQ transformer also makes of
// DequantizeLinear -> Softmax -> QuantizeLinear: the levels it writes, bit for bit.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "ir/graph.h"

namespace qforge::ort_integer {

// `x` holds uint8 or int8 levels. The softmax runs over `axis` (opset >= 13) or over everything
// from `axis` on, flattened (`flatten_from_axis`, opset < 13). ORT's arithmetic, which differs
// from Softmax followed by QuantizeLinear:
// - exp comes from a 256-entry table, exp((x - max) * x_scale + shift) computed in double and
//   stored as float, with the shift keeping the row's float sum finite (x's zero point cancels);
// - the sum is float, added in row order;
// - the output level is nearbyint(e * floor(1 / y_scale) / sum) + y_zero_point: it scales by
//   the whole number floor(1 / y_scale), not by 1 / y_scale;
// - levels saturate at the top of the type (255, 127); none lies below the zero point.
// Whether ORT's kernel overflows for rows of `row_length`: its exp table tops out at
// FLT_MAX / (e^5 D), and from floor(1 / y_scale) >= e^5 D on, the float product of the largest
// entries is infinite and they come out as level 0.
bool qlinearSoftmaxOverflows(float y_scale, int64_t row_length);

// The default-domain opset a Softmax of `model` is read at (its axis default, and whether it
// flattens from that axis): 13 when the model imports none.
int64_t softmaxOpset(const ModelInfo& model);

// The row length D of `softmax` (a Softmax node of the default domain at `opset`) from its input's
// declared shape, or 0 when that shape does not give it.
int64_t softmaxRowLength(const Node& softmax, int64_t opset);

at::Tensor qlinearSoftmaxLevels(const at::Tensor& x, float x_scale, float y_scale,
                                int64_t y_zero_point, int64_t axis, bool flatten_from_axis);

}  // namespace qforge::ort_integer
