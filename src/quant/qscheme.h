// QScheme: the integer grid a tensor is quantized onto (bit width, signedness, symmetry,
// per-channel axis, power-of-two scales, rounding). Every observer and fake quantizer takes one.
#pragma once

#include <cstdint>
#include <string>

namespace qforge {
namespace quant {

// How a real value v = x / scale is rounded to the integer grid.
enum class RoundingMode {
  HalfToEven,        // ONNX QuantizeLinear, ATen fake_quantize_* (std::nearbyint)
  HalfAwayFromZero,  // std::round; C/C++ int conversion of biased values on many DSPs
  HalfUp,            // floor(v + 0.5) without its float cancellation error; NNIE, Vitis DPU
  Floor,             // truncation toward -inf; fixed-point shifts without rounding
};

// Whether x / scale is computed as a true division (ONNX QuantizeLinear, ONNX Runtime) or as a
// multiplication by the float reciprocal 1.0f / scale (ATen's fake_quantize kernels). The two
// differ in the last bit for some inputs, which flips a rounding decision at exact half-way points.
enum class ScaleDivision { Divide, MultiplyByReciprocal };

struct QScheme {
  int bits = 8;
  // Symmetric: zero point fixed (0 for signed grids, 0 for unsigned grids too), scale from max|x|.
  bool symmetric = true;
  // Signed symmetric grids only: [-(2^(b-1)-1), 2^(b-1)-1] (TensorRT's [-127, 127]) instead of the
  // full [-2^(b-1), 2^(b-1)-1].
  bool symmetric_range = false;
  // symmetric_range grids only: the scale still spans [-(2^(b-1)-1), 2^(b-1)-1] (amax / 127), but
  // values clamp to the full [-2^(b-1), 2^(b-1)-1], as an int8 QuantizeLinear does: TensorRT's
  // activations (clip to [-128, 127]) and Sophgo's TPU saturation.
  bool full_range_clamp = false;
  // Unsigned grid [0, 2^b - 1] (activations after ReLU, asymmetric uint8).
  bool is_unsigned = false;
  // Per-channel axis of the quantized tensor; -1 means one scale for the whole tensor.
  int64_t axis = -1;
  // Scales restricted to 2^k (shift-only hardware); the observers round log2(scale) to nearest.
  bool power_of_two_scale = false;
  RoundingMode rounding = RoundingMode::HalfToEven;
  ScaleDivision division = ScaleDivision::Divide;
  // Smallest scale an observer may produce: guards against division by zero on constant tensors.
  double eps = 1.1920928955078125e-07;  // FLT_EPSILON, PyTorch's default

  // The clamp: the lowest and highest level a value can take.
  int64_t qmin() const;
  int64_t qmax() const;
  // How many steps the scale spans: qmax() - qmin(), except on a full_range_clamp grid, whose
  // scale is that of the narrow range (254 steps for 8 bits).
  int64_t scaleSteps() const;
  bool perChannel() const { return axis >= 0; }

  // Throws qforge::Error with a one-line message when the combination is not meaningful.
  void validate() const;

  // "int8 symmetric [-127,127] per-channel(axis=0) half-to-even" style summary for messages.
  std::string str() const;

  // Convenience constructors for the common grids.
  static QScheme int8Symmetric(bool per_channel_axis0 = false);
  static QScheme uint8Asymmetric();
};

const char* toString(RoundingMode mode);

}  // namespace quant
}  // namespace qforge
