// Signal lowerings: DFT, STFT, the Blackman, Hamming and Hann windows and MelWeightMatrix. ONNX
// holds a complex signal as a real tensor whose last dimension is 2 (real, imaginary); a real
// signal has a last dimension of 1.
#include <ATen/ATen.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "exec/op_info.h"
#include "exec/ops/common.h"
#include "exec/ops/math_common.h"
#include "ir/dtype.h"

namespace qforge {

namespace {

using ops::floatInput;
using ops::kLatestOpset;
using ops::op;

// [..., 1] -> real [...]; [..., 2] -> complex [...]. Float32/64 only (the caller widens float16).
at::Tensor toComplex(const OpContext& ctx, const at::Tensor& x) {
  if (x.dim() < 2 || (x.size(-1) != 1 && x.size(-1) != 2)) {
    ctx.fail("signal must be [..., 1] (real) or [..., 2] (complex), got shape " +
             c10::str(x.sizes()));
  }
  if (x.size(-1) == 1) return x.squeeze(-1);
  return at::view_as_complex(x.contiguous());
}

// Complex [...] -> [..., 2]; real [...] -> [..., 1].
at::Tensor fromComplex(const at::Tensor& c) {
  return c.is_complex() ? at::view_as_real(c).contiguous() : c.unsqueeze(-1);
}

// DFT's axis: the `axis` attribute (default 1) before opset 20, optional input 2 (default -2)
// from 20; counted on the input's rank and never its last (real/imaginary) dimension.
int64_t dftAxis(const OpContext& ctx, int64_t rank) {
  int64_t axis = ctx.attrInt("axis", 1);
  if (ctx.opset() >= 20) axis = ctx.hasInput(2) ? ops::scalarIntInput(ctx, 2, "axis") : -2;
  const int64_t d = ops::normalizeAxis(ctx, axis, rank);
  if (d == rank - 1) {
    ctx.fail("axis " + std::to_string(axis) + " is the real/imaginary dimension; the DFT runs " +
             "over one of the dimensions before it");
  }
  return d;
}

// Forward: the full spectrum, or its first n/2 + 1 bins when onesided (a real signal's others are
// their conjugates). Inverse: the complex signal, or with onesided the real signal whose one-sided
// spectrum the input is (n defaults to 2 * (bins - 1)). n is dft_length (input 1) or the axis
// size; the signal is cut or zero-padded to n.
std::vector<at::Tensor> dft(const OpContext& ctx) {
  const at::Tensor& x = floatInput(ctx, 0);
  const int64_t axis = dftAxis(ctx, x.dim());
  const bool inverse = ctx.attrInt("inverse", 0) != 0;
  const bool onesided = ctx.attrInt("onesided", 0) != 0;
  int64_t length = inverse && onesided ? 2 * (x.size(axis) - 1) : x.size(axis);
  if (ctx.hasInput(1)) length = ops::scalarIntInput(ctx, 1, "dft_length");
  if (length < 1) ctx.fail("the DFT length must be >= 1, got " + std::to_string(length));
  return {ops::viaFloat32IfHalf(x, [&](const at::Tensor& t) {
    at::Tensor signal = toComplex(ctx, t);
    if (inverse && onesided) {
      if (!signal.is_complex()) signal = at::complex(signal, at::zeros_like(signal));
      return fromComplex(at::fft_irfft(signal, length, axis));
    }
    if (inverse) return fromComplex(at::fft_ifft(signal, length, axis));
    at::Tensor spectrum = at::fft_fft(signal, length, axis);
    if (onesided) spectrum = spectrum.narrow(axis, 0, length / 2 + 1);
    return fromComplex(spectrum);
  })};
}

// Frames of frame_length samples every frame_step samples of signal [batch, length, 1 | 2],
// weighted by the window (default all ones) and transformed: [batch, frames, bins, 2], bins being
// frame_length / 2 + 1 when onesided (default) else frame_length.
std::vector<at::Tensor> stft(const OpContext& ctx) {
  const at::Tensor& x = floatInput(ctx, 0);
  if (x.dim() != 3) ctx.fail("signal must be [batch, length, 1 or 2], got " + c10::str(x.sizes()));
  const int64_t step = ops::scalarIntInput(ctx, 1, "frame_step");
  if (step < 1) ctx.fail("frame_step must be >= 1, got " + std::to_string(step));
  const bool has_window = ctx.hasInput(2);
  if (has_window && ctx.input(2).dim() != 1) {
    ctx.fail("window must be 1-D, got shape " + c10::str(ctx.input(2).sizes()));
  }
  int64_t frame_length = has_window ? ctx.input(2).size(0) : x.size(1);
  if (ctx.hasInput(3)) {
    frame_length = ops::scalarIntInput(ctx, 3, "frame_length");
    if (has_window && ctx.input(2).size(0) != frame_length) {
      ctx.fail("window has " + std::to_string(ctx.input(2).size(0)) + " samples, frame_length is " +
               std::to_string(frame_length));
    }
  }
  if (frame_length < 1 || frame_length > x.size(1)) {
    ctx.fail("frame_length " + std::to_string(frame_length) + " must lie in [1, " +
             std::to_string(x.size(1)) + "], the signal's length");
  }
  const bool onesided = ctx.attrInt("onesided", 1) != 0;
  return {ops::viaFloat32IfHalf(x, [&](const at::Tensor& t) {
    // [batch, frames, frame_length]
    at::Tensor frames = toComplex(ctx, t).unfold(1, frame_length, step);
    if (has_window) frames = frames * ctx.input(2).to(t.scalar_type());
    at::Tensor spectrum = at::fft_fft(frames, frame_length, -1);
    if (onesided) spectrum = spectrum.narrow(-1, 0, frame_length / 2 + 1);
    return fromComplex(spectrum);
  })};
}

// The element type of `output_datatype` (default float32).
at::ScalarType outputType(const OpContext& ctx) {
  const DType dtype = static_cast<DType>(ctx.attrInt("output_datatype", 1));
  if (!hasScalarType(dtype)) {
    ctx.fail("output_datatype names " + dtypeName(dtype) + ", which qforge's runtime cannot hold");
  }
  return toScalarType(dtype);
}

// A window of `size` (input 0) samples: w(2 pi n / N), N = size when periodic (default), else
// size - 1. Computed in float64, then converted to output_datatype.
Lowering window(std::function<at::Tensor(const at::Tensor& phase)> w) {
  return [w](const OpContext& ctx) -> std::vector<at::Tensor> {
    const int64_t size = ops::scalarIntInput(ctx, 0, "size");
    if (size < 0) ctx.fail("size must be >= 0, got " + std::to_string(size));
    const bool periodic = ctx.attrInt("periodic", 1) != 0;
    const double period = static_cast<double>(periodic ? size : size - 1);
    const at::Tensor phase = at::arange(size, at::kDouble) * (2 * M_PI / period);
    return {w(phase).to(outputType(ctx))};
  };
}

// Triangular filters mapping the dft_length / 2 + 1 bins of a one-sided spectrum to num_mel_bins
// mel bands between the two edge frequencies: [bins, num_mel_bins]. Band edges and rounding follow
// ONNX's reference: num_mel_bins + 2 points evenly spaced in mel, each floored to a bin index.
std::vector<at::Tensor> melWeightMatrix(const OpContext& ctx) {
  const int64_t mel_bins = ops::scalarIntInput(ctx, 0, "num_mel_bins");
  const int64_t dft_length = ops::scalarIntInput(ctx, 1, "dft_length");
  const int64_t sample_rate = ops::scalarIntInput(ctx, 2, "sample_rate");
  const double lower_hz = ops::scalarInput(ctx, 3, "lower_edge_hertz");
  const double upper_hz = ops::scalarInput(ctx, 4, "upper_edge_hertz");
  if (mel_bins < 1 || dft_length < 1 || sample_rate < 1) {
    ctx.fail("num_mel_bins, dft_length and sample_rate must be >= 1");
  }
  const auto mel = [](double hz) { return 2595 * std::log10(1 + hz / 700); };
  const double low_mel = mel(lower_hz);
  const double mel_step = (mel(upper_hz) - low_mel) / static_cast<double>(mel_bins + 2);
  const at::Tensor points_mel = at::arange(mel_bins + 2, at::kDouble) * mel_step + low_mel;
  const at::Tensor points_hz = 700 * (at::pow(10.0, points_mel / 2595) - 1);
  const at::Tensor index =
      at::floor((dft_length + 1) * points_hz / static_cast<double>(sample_rate)).to(at::kLong);
  // Column j is a spectrum bin, row i a band: [1, mel_bins] edges against [bins, 1] bins.
  const at::Tensor low = index.narrow(0, 0, mel_bins).unsqueeze(0);
  const at::Tensor center = index.narrow(0, 1, mel_bins).unsqueeze(0);
  const at::Tensor high = index.narrow(0, 2, mel_bins).unsqueeze(0);
  const at::Tensor bin = at::arange(dft_length / 2 + 1, at::kLong).unsqueeze(1);
  const at::Tensor rising = at::where(center == low, at::ones({}, at::kDouble),
                                      (bin - low).to(at::kDouble) / at::clamp_min(center - low, 1));
  const at::Tensor falling = (high - bin).to(at::kDouble) / at::clamp_min(high - center, 1);
  const at::Tensor zero = at::zeros({}, at::kDouble);
  const at::Tensor weights = at::where((bin >= center) & (bin < high), falling,
                                       at::where((bin >= low) & (bin <= center), rising, zero));
  return {weights.to(outputType(ctx))};
}

}  // namespace

void registerSignalOps(OpRegistry& r) {
  r.add(op("DFT", 17, kLatestOpset, dft));
  r.add(op("STFT", 17, kLatestOpset, stft));
  r.add(
      ops::shapeComputation(op("BlackmanWindow", 17, kLatestOpset, window([](const at::Tensor& p) {
                                 return 0.42 - 0.5 * at::cos(p) + 0.08 * at::cos(2 * p);
                               }))));
  r.add(ops::shapeComputation(op("HammingWindow", 17, kLatestOpset, window([](const at::Tensor& p) {
                                   return 25.0 / 46.0 - (21.0 / 46.0) * at::cos(p);
                                 }))));
  r.add(ops::shapeComputation(op("HannWindow", 17, kLatestOpset, window([](const at::Tensor& p) {
                                   const at::Tensor half = at::sin(p / 2);
                                   return half * half;
                                 }))));
  r.add(ops::shapeComputation(op("MelWeightMatrix", 17, kLatestOpset, melWeightMatrix)));
}

}  // namespace qforge
