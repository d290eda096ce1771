#include "exec/ops/conv_epilogue.h"

#include <ATen/ATen.h>

#include <limits>
#include <optional>

#include "exec/ops/tail_operands.h"

namespace qforge::ops {

namespace {

bool isFloatVector(const at::Tensor& t, int64_t size) {
  return t.defined() && at::isFloatingType(t.scalar_type()) && t.dim() == 1 && t.size(0) == size;
}

// An inference BatchNormalization over the conv's output channels, as the BatchNormalization
// lowering computes it; nullopt for anything it would compute otherwise or refuse.
std::optional<ConvBatchNorm> batchNormOf(const OpContext& bn, int64_t out_channels) {
  if (bn.opset() >= 14 && bn.attrInt("training_mode", 0) != 0) return std::nullopt;
  if (bn.opset() < 9 && bn.attrInt("spatial", 1) == 0) return std::nullopt;
  // Named extra outputs are training statistics, which the lowering refuses or computes.
  for (size_t i = 1; i < bn.outputCount(); ++i) {
    if (!bn.node().output(i)->anonymous) return std::nullopt;
  }
  for (size_t i = 1; i <= 4; ++i) {
    if (!bn.hasInput(i) || !isFloatVector(bn.input(i), out_channels)) return std::nullopt;
  }
  return ConvBatchNorm{bn.input(1), bn.input(2), bn.input(3), bn.input(4),
                       bn.attrFloat("epsilon", 1e-5)};
}

// A Clip bound given as an input: absent, or a float32 scalar (what the Clip lowering accepts
// for a float32 input). False when it is neither.
bool clipBound(const OpContext& clip, size_t slot, float& bound) {
  if (!clip.hasInput(slot)) return true;
  const at::Tensor& t = clip.input(slot);
  if (t.numel() != 1 || t.scalar_type() != at::kFloat) return false;
  bound = static_cast<float>(scalarValue(t));
  return true;
}

std::optional<ConvActivation> activationOf(const OpContext& act) {
  using Kind = ConvActivation::Kind;
  const std::string& op = act.node().opType();
  if (op == "Relu") return ConvActivation{Kind::Relu, 0.f, 0.f};
  if (op == "LeakyRelu") {
    return ConvActivation{Kind::Relu, static_cast<float>(act.attrFloat("alpha", 0.01)), 0.f};
  }
  if (op == "Sigmoid") return ConvActivation{Kind::Sigmoid, 0.f, 0.f};
  if (op == "HardSwish") return ConvActivation{Kind::HardSwish, 0.f, 0.f};
  if (op == "HardSigmoid") {
    return ConvActivation{Kind::HardSigmoid, static_cast<float>(act.attrFloat("alpha", 0.2)),
                          static_cast<float>(act.attrFloat("beta", 0.5))};
  }
  if (op == "Clip") {
    float low = std::numeric_limits<float>::lowest(), high = std::numeric_limits<float>::max();
    if (act.opset() < 11) {
      low = static_cast<float>(act.attrFloat("min", low));
      high = static_cast<float>(act.attrFloat("max", high));
    } else if (!clipBound(act, 1, low) || !clipBound(act, 2, high)) {
      return std::nullopt;
    }
    return ConvActivation{Kind::Clip, low, high};
  }
  return std::nullopt;
}

// A gate written out on the value v before tail()[k]: gate(v), then a Mul of v by it (either
// order), which is all that reads the gate. SiLU is v * Sigmoid(v); HardSwish is
// v * HardSigmoid(v) with alpha = 1/6 and beta = 1/2 (how torch.onnx writes it below opset 14).
std::optional<ConvActivation> gatedActivationAt(const OpContext& ctx, size_t k) {
  using Kind = ConvActivation::Kind;
  const std::vector<OpContext>& tail = ctx.tail();
  if (k + 1 >= tail.size() || tail[k + 1].node().opType() != "Mul" || !ctx.followerReads(k, 0, k) ||
      tail[k + 1].inputCount() != 2 ||
      !((ctx.followerReads(k + 1, 0, k) && ctx.followerReads(k + 1, 1, k + 1)) ||
        (ctx.followerReads(k + 1, 1, k) && ctx.followerReads(k + 1, 0, k + 1)))) {
    return std::nullopt;
  }
  const OpContext& gate = tail[k];
  if (gate.node().opType() == "Sigmoid") return ConvActivation{Kind::Swish, 0.f, 0.f};
  // oneDNN's hardswish has these two constants built in.
  if (gate.node().opType() == "HardSigmoid" &&
      static_cast<float>(gate.attrFloat("alpha", 0.2)) == 1.f / 6.f &&
      static_cast<float>(gate.attrFloat("beta", 0.5)) == 0.5f) {
    return ConvActivation{Kind::HardSwish, 0.f, 0.f};
  }
  return std::nullopt;
}

}  // namespace

const std::vector<std::string>& convFusableFollowers() {
  static const std::vector<std::string> kOps = {
      "BatchNormalization", "Relu",      "LeakyRelu", "Clip", "Sigmoid",
      "HardSigmoid",        "HardSwish", "Mul"};
  return kOps;
}

ConvEpilogue absorbTail(const OpContext& ctx, int64_t out_channels) {
  ConvEpilogue epilogue;
  size_t count = 0;
  // Every follower the kernel computes reads the previous value as its data input, slot 0.
  const std::vector<OpContext>& tail = ctx.tail();
  auto next = [&]() -> const OpContext* {
    return count < tail.size() && ctx.followerReads(count, 0, count) ? &tail[count] : nullptr;
  };
  if (next() != nullptr && next()->node().opType() == "BatchNormalization") {
    epilogue.batch_norm = batchNormOf(*next(), out_channels);
    if (epilogue.batch_norm) ++count;
  }
  const size_t before_activation = count;
  if (const auto gated = gatedActivationAt(ctx, count)) {
    epilogue.activation = gated;
    count += 2;
  } else if (next() != nullptr) {
    epilogue.activation = activationOf(*next());
    if (epilogue.activation) ++count;
  }
  // Only where nothing computed inside is read by a node the kernel leaves out.
  if (!ctx.mayStopAfter(count)) {
    epilogue.activation.reset();
    count = before_activation;
  }
  if (!ctx.mayStopAfter(count)) {
    epilogue.batch_norm.reset();
    count = 0;
  }
  ctx.absorb(count);
  return epilogue;
}

}  // namespace qforge::ops
