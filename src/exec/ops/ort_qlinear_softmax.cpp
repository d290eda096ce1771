#include "exec/ops/ort_qlinear_softmax.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>

#include "core/error.h"
#include "ir/node_attributes.h"

namespace qforge::ort_integer {

namespace {

// Entry i is exp((i - 255 + shift) * x_scale): i = 255 is a row's largest level, so an element
// `d` levels below the row's largest reads entry 255 - d. The shift (ln of FLT_MAX / D, less 5,
// in levels) lifts the values so that sums stay finite and small ones stay representable. ORT
// takes that logarithm of a float, so in float32 (C++'s log(float)); the float64 one moves every
// entry by about 70 float steps, which cancels in e / sum except at ties (one element of ViT's
// attention in 7.2 million).
std::array<float, 256> expTable(float x_scale, int64_t reduce_len) {
  const float largest_share = std::numeric_limits<float>::max() / static_cast<float>(reduce_len);
  double shift = static_cast<double>(std::log(largest_share));
  shift = std::max(0.0, shift - 5.0) / static_cast<double>(x_scale);
  std::array<float, 256> table{};
  for (int i = 0; i < 256; ++i) {
    const double v =
        std::exp((static_cast<double>(i) - 255.0 + shift) * static_cast<double>(x_scale));
    table[static_cast<size_t>(i)] = static_cast<float>(v);
  }
  return table;
}

// One row of D levels, as ORT's per-row loop: the largest level, the float sum of the table
// entries in row order, then each entry scaled by the whole number `y_multiplier` and divided.
template <typename T>
void softmaxRow(const T* x, T* y, int64_t d, const std::array<float, 256>& table,
                float y_multiplier, int64_t y_zero_point) {
  const int32_t largest = *std::max_element(x, x + d);
  float sum = 0.0f;
  for (int64_t k = 0; k < d; ++k)
    sum += table[static_cast<size_t>(255 - (largest - static_cast<int32_t>(x[k])))];
  for (int64_t k = 0; k < d; ++k) {
    const float e = table[static_cast<size_t>(255 - (largest - static_cast<int32_t>(x[k])))];
    const float rounded = std::nearbyintf((e * y_multiplier) / sum);
    if constexpr (std::is_same_v<T, uint8_t>) {
      const uint32_t q = static_cast<uint32_t>(rounded) + static_cast<uint32_t>(y_zero_point);
      y[k] = q > 255 ? uint8_t{255} : static_cast<uint8_t>(q);
    } else {
      // Only the top needs a clamp: e / sum >= 0, so q >= y_zero_point.
      const int32_t q = static_cast<int32_t>(rounded) + static_cast<int32_t>(y_zero_point);
      y[k] = static_cast<int8_t>(std::min<int32_t>(q, 127));
    }
  }
}

}  // namespace

bool qlinearSoftmaxOverflows(float y_scale, int64_t row_length) {
  return std::floor(1.0f / y_scale) >= std::exp(5.0) * static_cast<double>(row_length);
}

int64_t softmaxOpset(const ModelInfo& model) {
  const int64_t version = model.opsetFor("");
  return version > 0 ? version : 13;
}

int64_t softmaxRowLength(const Node& softmax, int64_t opset) {
  const TensorType& t = softmax.input(0)->type;
  if (!t.shape) return 0;
  const int64_t rank = static_cast<int64_t>(t.shape->size());
  int64_t axis = intAttr(softmax, "axis", opset < 13 ? 1 : -1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return 0;
  int64_t d = 1;
  for (int64_t i = axis; i < (opset < 13 ? rank : axis + 1); ++i) {
    const Dim& dim = (*t.shape)[static_cast<size_t>(i)];
    if (!dim.isKnown()) return 0;
    d *= dim.value;
  }
  return d;
}

at::Tensor qlinearSoftmaxLevels(const at::Tensor& x, float x_scale, float y_scale,
                                int64_t y_zero_point, int64_t axis, bool flatten_from_axis) {
  require(x.scalar_type() == at::kByte || x.scalar_type() == at::kChar,
          "QLinearSoftmax takes uint8 or int8 levels");
  const int64_t rank = x.dim();
  require(rank > 0, "QLinearSoftmax needs an input of rank 1 or more");
  if (axis < 0) axis += rank;
  require(axis >= 0 && axis < rank, "QLinearSoftmax's axis is out of range");
  // Rows of D contiguous levels: everything from `axis` flattened, or `axis` moved last (ORT
  // transposes it there and back).
  at::Tensor rows = flatten_from_axis ? x.contiguous() : x.movedim(axis, -1).contiguous();
  int64_t reduce_len = 1;
  if (flatten_from_axis) {
    for (int64_t i = axis; i < rank; ++i)
      reduce_len *= x.size(i);
  } else {
    reduce_len = x.size(axis);
  }
  at::Tensor out = at::empty_like(rows);
  if (rows.numel() == 0 || reduce_len == 0) return flatten_from_axis ? out : out.movedim(-1, axis);
  const std::array<float, 256> table = expTable(x_scale, reduce_len);
  const float y_multiplier = std::floor(1.0f / y_scale);
  const int64_t n = rows.numel() / reduce_len;
  const auto each_row = [&](const auto* src, auto* dst) {
    at::parallel_for(0, n, 1, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r)
        softmaxRow(src + r * reduce_len, dst + r * reduce_len, reduce_len, table, y_multiplier,
                   y_zero_point);
    });
  };
  if (x.scalar_type() == at::kByte) {
    each_row(rows.data_ptr<uint8_t>(), out.data_ptr<uint8_t>());
  } else {
    each_row(rows.data_ptr<int8_t>(), out.data_ptr<int8_t>());
  }
  return flatten_from_axis ? out : out.movedim(-1, axis).contiguous();
}

}  // namespace qforge::ort_integer
