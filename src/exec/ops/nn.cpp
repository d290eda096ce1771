// Lowerings of the dense neural-network ops: Conv, ConvTranspose, Gemm, MatMul and Einsum.
//
// The common cases call the same ATen entry points as PyTorch eager (at::convolution, at::addmm,
// at::matmul) with no extra copies, because the executor is benchmarked against eager. Only
// what ATen cannot express (asymmetric pads, ConvTranspose crops outside its padding rules) takes
// a slower path with an explicit pad or crop. Inference 2-D convolutions go to oneDNN in
// channels-last layout (exec/ops/dnnl_conv.h).
#include <ATen/ATen.h>
#include <dnnl.hpp>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "exec/op_info.h"
#include "exec/ops/common.h"
#include "exec/ops/conv_epilogue.h"
#include "exec/ops/conv_geometry.h"
#include "exec/ops/dnnl_conv.h"
#include "exec/ops/dnnl_matmul.h"
#include "exec/ops/tail_operands.h"

namespace qforge {

namespace {

using ops::kLatestOpset;
using ops::shapeString;

// Python-style floor division: ONNX's ConvTranspose pad split is written with `//`.
int64_t floorDiv(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && ((a < 0) != (b < 0)));
}

// Checks the parts of X, W and B shared by Conv and ConvTranspose; returns the spatial rank.
int64_t checkConvOperands(const OpContext& ctx, const at::Tensor& x, const at::Tensor& w,
                          int64_t group) {
  if (x.dim() < 3) {
    ctx.fail("input X must be (N, C, spatial...) of rank >= 3, got shape " +
             shapeString(x.sizes()));
  }
  if (w.dim() != x.dim()) {
    ctx.fail("weight W has rank " + std::to_string(w.dim()) + " but input X has rank " +
             std::to_string(x.dim()) + " (W must be rank " + std::to_string(x.dim()) + ")");
  }
  if (group <= 0) ctx.fail("group must be positive, got " + std::to_string(group));
  if (x.size(1) % group != 0) {
    ctx.fail("input channels C=" + std::to_string(x.size(1)) +
             " are not divisible by group=" + std::to_string(group));
  }
  const int64_t rank = x.dim() - 2;
  if (ctx.hasAttr("kernel_shape")) {
    const std::vector<int64_t> kernel = ctx.attrInts("kernel_shape", {});
    if (at::IntArrayRef(kernel) != w.sizes().slice(2)) {
      ctx.fail("kernel_shape " + shapeString(kernel) +
               " does not match the weight's spatial dims " + shapeString(w.sizes().slice(2)));
    }
  }
  return rank;
}

void checkBias(const OpContext& ctx, const at::Tensor& bias, int64_t out_channels) {
  if (bias.dim() != 1 || bias.size(0) != out_channels) {
    ctx.fail("bias B must be 1-D of size " + std::to_string(out_channels) + ", got shape " +
             shapeString(bias.sizes()));
  }
}

// at::convolution with ATen's own padding; asymmetric pads are padded explicitly first.
at::Tensor atenConv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias,
                    const ops::WindowGeometry& g, int64_t group) {
  const size_t rank = g.strides.size();
  const std::vector<int64_t> no_output_padding(rank, 0);
  if (g.symmetric()) {
    return at::convolution(x, w, bias, g.strides, g.pads_begin, g.dilations, /*transposed=*/false,
                           no_output_padding, group);
  }
  // ATen pads symmetrically: let it do the common part and pad only the excess explicitly.
  ops::WindowGeometry excess = g;
  std::vector<int64_t> common(rank);
  for (size_t i = 0; i < rank; ++i) {
    common[i] = std::min(g.pads_begin[i], g.pads_end[i]);
    excess.pads_begin[i] -= common[i];
    excess.pads_end[i] -= common[i];
  }
  return at::convolution(ops::padSpatial(x, excess, 0.0), w, bias, g.strides, common, g.dilations,
                         /*transposed=*/false, no_output_padding, group);
}

std::vector<at::Tensor> conv(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const at::Tensor& w = ctx.input(1);
  const int64_t group = ctx.attrInt("group", 1);
  checkConvOperands(ctx, x, w, group);
  if (w.size(1) * group != x.size(1)) {
    ctx.fail("weight W has " + std::to_string(w.size(1)) + " input channels per group, but X has " +
             std::to_string(x.size(1)) + " channels in " + std::to_string(group) + " group(s)");
  }
  if (w.size(0) % group != 0) {
    ctx.fail("output channels M=" + std::to_string(w.size(0)) +
             " are not divisible by group=" + std::to_string(group));
  }
  at::Tensor bias;
  if (ctx.hasInput(2)) {
    bias = ctx.input(2);
    checkBias(ctx, bias, w.size(0));
  }
  const ops::WindowGeometry g =
      ops::resolveWindowGeometry(ctx, x.sizes().slice(2), w.sizes().slice(2));
  // A float inference 2-D convolution runs in oneDNN's channels-last layout, with what follows it
  // (ctx.tail()) inside the same kernel where it can; its output stays channels-last for the ops
  // after it (every ATen op reads any layout). ATen's NCHW path was several times slower on
  // MobileNet-style layers (bench/README.md, "executor_speed_table.py").
  if (ops::dnnlConvApplies(x, w, bias, g)) {
    const ops::ConvEpilogue epilogue = ops::absorbTail(ctx, w.size(0));
    try {
      return {ops::dnnlConv2d(ctx.nodeState(), x, w, bias, g, group, epilogue)};
    } catch (const dnnl::error&) {
      ctx.absorb(0);  // no oneDNN kernel for this case: ATen's, and the followers run themselves
    }
  }
  return {atenConv(x, w, bias, g, group)};
}

std::vector<int64_t> perDimAttr(const OpContext& ctx, const std::string& name, int64_t rank,
                                int64_t fallback) {
  std::vector<int64_t> v = ctx.attrInts(name, std::vector<int64_t>(rank, fallback));
  if (static_cast<int64_t>(v.size()) != rank) {
    ctx.fail(name + " must have one entry per spatial dim (" + std::to_string(rank) + "), has " +
             std::to_string(v.size()));
  }
  return v;
}

// ConvTranspose's begin/end crop per spatial dim, from output_shape, auto_pad or pads (in that
// order of precedence, as ONNX specifies); fails when the output would be empty.
std::pair<std::vector<int64_t>, std::vector<int64_t>> convTransposePads(
    const OpContext& ctx, const at::Tensor& x, const at::Tensor& w,
    const std::vector<int64_t>& strides, const std::vector<int64_t>& dilations,
    const std::vector<int64_t>& output_padding, const std::string& auto_pad) {
  const int64_t rank = static_cast<int64_t>(strides.size());
  // Output size of the un-padded transposed convolution, per dim.
  std::vector<int64_t> full(rank);
  for (int64_t i = 0; i < rank; ++i) {
    full[i] = strides[i] * (x.size(2 + i) - 1) + (w.size(2 + i) - 1) * dilations[i] + 1;
  }
  std::vector<int64_t> pads_begin(rank, 0), pads_end(rank, 0);
  std::vector<int64_t> output_shape = ctx.attrInts("output_shape", {});
  if (static_cast<int64_t>(output_shape.size()) == rank + 2) {
    output_shape.erase(output_shape.begin(), output_shape.begin() + 2);  // (N, C, spatial...)
  }
  if (output_shape.empty() && (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER")) {
    for (int64_t i = 0; i < rank; ++i)
      output_shape.push_back(x.size(2 + i) * strides[i]);
  }
  if (!output_shape.empty()) {
    if (static_cast<int64_t>(output_shape.size()) != rank) {
      ctx.fail("output_shape must have " + std::to_string(rank) + " spatial entries, has " +
               std::to_string(output_shape.size()));
    }
    // ONNX: total padding split evenly, the odd one at the end for SAME_UPPER, else at the start.
    for (int64_t i = 0; i < rank; ++i) {
      const int64_t total = full[i] + output_padding[i] - output_shape[i];
      const int64_t half = floorDiv(total, 2);
      pads_begin[i] = auto_pad == "SAME_UPPER" ? half : total - half;
      pads_end[i] = total - pads_begin[i];
    }
  } else if (auto_pad == "NOTSET") {
    const std::vector<int64_t> pads = ctx.attrInts("pads", std::vector<int64_t>(2 * rank, 0));
    if (static_cast<int64_t>(pads.size()) != 2 * rank) {
      ctx.fail("pads must have 2 x " + std::to_string(rank) + " entries, has " +
               std::to_string(pads.size()));
    }
    for (int64_t i = 0; i < rank; ++i) {
      pads_begin[i] = pads[i];
      pads_end[i] = pads[rank + i];
      if (pads_begin[i] < 0 || pads_end[i] < 0) ctx.fail("pads must not be negative");
    }
  }
  for (int64_t i = 0; i < rank; ++i) {
    if (full[i] + output_padding[i] - pads_begin[i] - pads_end[i] <= 0) {
      ctx.fail("the output would be empty along spatial dim " + std::to_string(i));
    }
  }

  return {std::move(pads_begin), std::move(pads_end)};
}

std::vector<at::Tensor> convTranspose(const OpContext& ctx) {
  const at::Tensor& x = ctx.input(0);
  const at::Tensor& w = ctx.input(1);
  const int64_t group = ctx.attrInt("group", 1);
  const int64_t rank = checkConvOperands(ctx, x, w, group);
  // ConvTranspose's weight is (C, M/group, k...).
  if (w.size(0) != x.size(1)) {
    ctx.fail("weight W has " + std::to_string(w.size(0)) + " input channels (dim 0) but X has " +
             std::to_string(x.size(1)));
  }
  const int64_t out_channels = w.size(1) * group;
  at::Tensor bias;
  if (ctx.hasInput(2)) {
    bias = ctx.input(2);
    checkBias(ctx, bias, out_channels);
  }
  const std::vector<int64_t> strides = perDimAttr(ctx, "strides", rank, 1);
  const std::vector<int64_t> dilations = perDimAttr(ctx, "dilations", rank, 1);
  const std::vector<int64_t> output_padding = perDimAttr(ctx, "output_padding", rank, 0);
  for (int64_t i = 0; i < rank; ++i) {
    if (strides[i] <= 0 || dilations[i] <= 0) ctx.fail("strides and dilations must be positive");
    if (output_padding[i] < 0) ctx.fail("output_padding must not be negative");
  }
  const std::string auto_pad = ctx.attrString("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER") {
    ctx.fail("auto_pad '" + auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  }

  std::vector<int64_t> pads_begin, pads_end;
  std::tie(pads_begin, pads_end) =
      convTransposePads(ctx, x, w, strides, dilations, output_padding, auto_pad);

  // ATen crops `padding` from both ends and then appends `output_padding` (< stride or dilation)
  // at the end; the ONNX crop [begin, end - output_padding] maps onto that when it fits.
  std::vector<int64_t> aten_output_padding(rank);
  bool aten_can_crop = true;
  for (int64_t i = 0; i < rank; ++i) {
    aten_output_padding[i] = pads_begin[i] - pads_end[i] + output_padding[i];
    aten_can_crop = aten_can_crop && pads_begin[i] >= 0 && aten_output_padding[i] >= 0 &&
                    aten_output_padding[i] < std::max(strides[i], dilations[i]);
  }
  if (aten_can_crop) {
    return {at::convolution(x, w, bias, strides, pads_begin, dilations, /*transposed=*/true,
                            aten_output_padding, group)};
  }
  // General case: the full result, then crop (negative pad) or zero-extend each end; the bias
  // goes on afterwards so that zero-extended positions get it too.
  at::Tensor y =
      at::convolution(x, w, at::Tensor(), strides, std::vector<int64_t>(rank, 0), dilations,
                      /*transposed=*/true, std::vector<int64_t>(rank, 0), group);
  std::vector<int64_t> pad;
  for (int64_t i = rank; i-- > 0;) {
    pad.push_back(-pads_begin[i]);
    pad.push_back(output_padding[i] - pads_end[i]);
  }
  y = at::constant_pad_nd(y, pad, 0);
  if (bias.defined()) {
    std::vector<int64_t> bias_shape(rank + 2, 1);
    bias_shape[1] = out_channels;
    y = y + bias.reshape(bias_shape);
  }
  return {y};
}

// ATen rejects floating alpha/beta on integer tensors; ONNX's are floats that are whole numbers
// in any sensible integer Gemm.
at::Scalar gemmScalar(const OpContext& ctx, const at::Tensor& t, double value, const char* name) {
  if (at::isFloatingType(t.scalar_type())) return value;
  if (value != static_cast<double>(static_cast<int64_t>(value))) {
    ctx.fail(std::string(name) + "=" + std::to_string(value) +
             " is not a whole number, which an integer Gemm cannot apply");
  }
  return static_cast<int64_t>(value);
}

std::vector<at::Tensor> gemm(const OpContext& ctx) {
  const at::Tensor& a_in = ctx.input(0);
  const at::Tensor& b_in = ctx.input(1);
  if (a_in.dim() != 2 || b_in.dim() != 2) {
    ctx.fail("A and B must be 2-D, got shapes " + shapeString(a_in.sizes()) + " and " +
             shapeString(b_in.sizes()));
  }
  // Transposes are views: mm/addmm hand the strides to BLAS, as nn.Linear does with weight.t().
  const at::Tensor a = ctx.attrInt("transA", 0) ? a_in.t() : a_in;
  const at::Tensor b = ctx.attrInt("transB", 0) ? b_in.t() : b_in;
  if (a.size(1) != b.size(0)) {
    ctx.fail("A' is " + shapeString(a.sizes()) + " and B' is " + shapeString(b.sizes()) +
             "; their inner dimensions differ");
  }
  const double alpha = ctx.attrFloat("alpha", 1.0);
  const double beta = ctx.attrFloat("beta", 1.0);
  if (!ctx.hasInput(2)) {
    at::Tensor y = at::mm(a, b);
    return {alpha == 1.0 ? y : y * gemmScalar(ctx, y, alpha, "alpha")};
  }
  const at::Tensor& c = ctx.input(2);
  // C broadcasts unidirectionally to (M, N).
  const int64_t m = a.size(0), n = b.size(1);
  const bool broadcastable = c.dim() <= 2 && (c.dim() < 1 || c.size(-1) == 1 || c.size(-1) == n) &&
                             (c.dim() < 2 || c.size(0) == 1 || c.size(0) == m);
  if (!broadcastable) {
    ctx.fail("C of shape " + shapeString(c.sizes()) + " does not broadcast to (M, N) = (" +
             std::to_string(m) + ", " + std::to_string(n) + ")");
  }
  // A float inference layer runs on oneDNN's matmul with its weight kept packed, as MatMul does:
  // at batch 1, BLAS's gemm re-packed all of B on every call (a 1024x1000 classifier: 0.8 ms).
  if (alpha == 1.0 && beta == 1.0 && at::isFloatingType(c.scalar_type()) &&
      ops::dnnlMatMulApplies(a, b)) {
    try {
      const at::Tensor bias = ops::asColumnBias(c, n, 2);
      at::Tensor y = ops::dnnlMatMul(ctx.nodeState(), a, b, bias);
      if (!bias.defined()) y.add_(c.to(y.scalar_type()));
      return {y};
    } catch (const dnnl::error&) {
      // no oneDNN kernel for this case: ATen's
    }
  }
  // addmm is what at::linear runs for a 2-D input with bias.
  return {at::addmm(c, a, b, gemmScalar(ctx, c, beta, "beta"), gemmScalar(ctx, c, alpha, "alpha"))};
}

// A Linear layer as exporters write it, MatMul then Add: the Add's other operand when it is a
// bias oneDNN can add as it stores the product (exec/ops/dnnl_matmul.h), else undefined.
at::Tensor biasOfFollowingAdd(const OpContext& matmul, int64_t columns, int64_t rank) {
  if (matmul.tail().empty() || !matmul.mayStopAfter(1)) return {};
  const Node& add = matmul.tail()[0].node();
  if (add.opType() != "Add" || !add.domain().empty()) return {};
  const std::optional<at::Tensor> other = ops::operandBesidePrevious(matmul, 0);
  return other ? ops::asColumnBias(*other, columns, rank) : at::Tensor();
}

std::vector<at::Tensor> matmul(const OpContext& ctx) {
  const at::Tensor& a = ctx.input(0);
  const at::Tensor& b = ctx.input(1);
  if (a.dim() < 1 || b.dim() < 1) ctx.fail("MatMul operands must have rank >= 1, not scalars");
  const int64_t ka = a.size(-1);
  const int64_t kb = b.dim() == 1 ? b.size(0) : b.size(-2);
  if (ka != kb) {
    ctx.fail("shapes " + shapeString(a.sizes()) + " and " + shapeString(b.sizes()) +
             " cannot be multiplied (inner dimensions " + std::to_string(ka) + " and " +
             std::to_string(kb) + ")");
  }
  // Float inference products run on oneDNN's matmul (exec/ops/dnnl_matmul.h): attention's
  // batches of small matrices in one kernel, weights kept packed.
  if (ops::dnnlMatMulApplies(a, b)) {
    try {
      const at::Tensor bias =
          b.dim() == 2 ? biasOfFollowingAdd(ctx, b.size(1), a.dim()) : at::Tensor();
      at::Tensor y = ops::dnnlMatMul(ctx.nodeState(), a, b, bias);
      if (bias.defined()) ctx.absorb(1);
      return {y};
    } catch (const dnnl::error&) {
      // no oneDNN kernel for this case: ATen's
    }
  }
  return {at::matmul(a, b)};  // numpy matmul semantics, 1-D operands included
}

std::vector<at::Tensor> einsum(const OpContext& ctx) {
  std::string equation = ctx.attrString("equation", "");
  if (equation.empty()) ctx.fail("required attribute 'equation' is missing or empty");
  // ONNX allows spaces around terms ("...ii ->...i"); ATen's parser does not.
  equation.erase(std::remove_if(equation.begin(), equation.end(),
                                [](unsigned char ch) { return std::isspace(ch); }),
                 equation.end());
  const std::string lhs = equation.substr(0, equation.find("->"));
  const size_t terms = static_cast<size_t>(std::count(lhs.begin(), lhs.end(), ',')) + 1;
  if (terms != ctx.inputCount()) {
    ctx.fail("equation '" + equation + "' has " + std::to_string(terms) +
             " operand(s) but the node has " + std::to_string(ctx.inputCount()) + " input(s)");
  }
  std::vector<at::Tensor> operands;
  for (size_t i = 0; i < ctx.inputCount(); ++i)
    operands.push_back(ctx.input(i));
  return {at::einsum(equation, operands)};
}

// A layer whose weight is input 1 laid out as `layout`; `bias_input` -1 when it has none. With a
// bias slot, a following BatchNormalization folds into weight and bias.
OpInfo layer(OpInfo info, int bias_input, WeightLayout layout) {
  info = ops::withWeights(std::move(info), {1}, bias_input, layout);
  info.absorbs_batchnorm = bias_input >= 0;
  return info;
}

}  // namespace

void registerNnOps(OpRegistry& registry) {
  // Opsets 1 and 11 differ only in wording (auto_pad/pads defaults); one lowering serves both.
  OpInfo conv_info =
      layer(ops::op("Conv", 1, kLatestOpset, conv), /*bias_input=*/2, WeightLayout::OutputFirst);
  conv_info.fusable_followers = ops::convFusableFollowers();
  registry.add(std::move(conv_info));
  // The weight is (C_in, C_out/group, k...), so output channels sit on axis 1.
  registry.add(layer(ops::op("ConvTranspose", 1, kLatestOpset, convTranspose), /*bias_input=*/2,
                     WeightLayout::GroupedOutputSecond));
  // Output channels of B are on axis 0 when transB=1 and axis 1 otherwise (per node).
  // Opsets 1-6 (broadcast attribute, required C) run the same way: C broadcasting is a superset.
  registry.add(
      layer(ops::op("Gemm", 1, kLatestOpset, gemm), /*bias_input=*/2, WeightLayout::GemmB));
  // B's output channels are its last dim: axis 1 for the usual 2-D weight. Both operands may be
  // activations (attention's Q K^T).
  OpInfo matmul_info = ops::combinesActivations(
      layer(ops::op("MatMul", 1, kLatestOpset, matmul), /*bias_input=*/-1, WeightLayout::LastAxis));
  matmul_info.fusable_followers = {"Add"};  // its bias
  registry.add(std::move(matmul_info));
  registry.add(ops::combinesActivations(ops::op("Einsum", 12, kLatestOpset, einsum)));
}

}  // namespace qforge
