#include "verify/deployed_parameters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "deploy/qdq_match.h"
#include "deploy/qoperator_onnx.h"
#include "ir/onnx_import.h"
#include "passes/fake_quantize_node.h"

namespace qforge::verify {

namespace {

// The prepared zero point as stored in `written`: an 8-bit grid written in the other 8-bit type
// (deploy/ort_double_qdq_guard.h) keeps its levels 128 apart, so its zero point moves with them.
at::Tensor inContainer(const at::Tensor& zero_point, const quant::QScheme& scheme,
                       at::ScalarType written) {
  at::Tensor zp = zero_point.to(at::kLong).reshape({-1});
  if (scheme.bits != 8) return zp;
  if (written == at::kByte && !scheme.is_unsigned) return zp + 128;
  if (written == at::kChar && scheme.is_unsigned) return zp - 128;
  return zp;
}

}  // namespace

std::vector<std::string> parameterMismatches(passes::PreparedModel& model,
                                             const nlohmann::json& manifest,
                                             const std::string& path) {
  // Read them from the node producing the tensor (QuantizeLinear, or the output parameters of
  // an integer kernel) and compare with the prepared model.
  static const std::map<std::string, size_t> output_scale_slot = {
      {"QuantizeLinear", 1},     {"QLinearConv", 6},   {"QLinearMatMul", 6},
      {"QLinearAdd", 6},         {"QLinearMul", 6},    {"QLinearGlobalAveragePool", 3},
      {"QLinearAveragePool", 3}, {"QLinearConcat", 0}, {"QGemm", 7}};
  std::vector<std::string> mismatches;
  const Graph g = importOnnxFile(path);
  const std::string file = std::filesystem::path(path).filename().string();
  const nlohmann::json quantized = manifest.value("quantized_values", nlohmann::json::object());
  for (const auto& [name, tensor] : quantized.items()) {
    const Value* v = g.findValue(tensor.get<std::string>());
    quant::FakeQuantizer* q = model.quantizer(name);
    if (v == nullptr || v->producer() == nullptr || q == nullptr || !q->affine()) continue;
    const Node* n = v->producer();
    const auto slot = output_scale_slot.find(n->opType());
    if (slot == output_scale_slot.end()) continue;
    const Value* scale = n->input(slot->second);
    const Value* zero_point = n->input(slot->second + 1);
    if (scale == nullptr || !scale->isInitializer()) continue;
    const quant::QParams p = q->qparams();
    const at::Tensor written = scale->initializer().to(at::kFloat).reshape({-1});
    const at::Tensor expected = p.scale.to(at::kFloat).reshape({-1});
    const bool same_scale = written.numel() == expected.numel() && at::equal(written, expected);
    bool same_zero_point = true;
    if (zero_point != nullptr && zero_point->isInitializer()) {
      const at::Tensor written_zp = zero_point->initializer().to(at::kLong).reshape({-1});
      const at::Tensor expected_zp =
          inContainer(p.zero_point, q->scheme(), zero_point->initializer().scalar_type());
      same_zero_point =
          written_zp.numel() == expected_zp.numel() && at::equal(written_zp, expected_zp);
      if (!same_zero_point && same_scale) {
        mismatches.push_back(
            file + ": tensor '" + tensor.get<std::string>() + "' (quantizer '" + name +
            "') is written with zero point " + std::to_string(written_zp[0].item<int64_t>()) +
            ", the prepared model's is " + std::to_string(expected_zp[0].item<int64_t>()) +
            ": the file does not match the calibrated model");
        continue;
      }
    }
    if (!same_scale || !same_zero_point) {
      char buf[512];
      std::snprintf(buf, sizeof(buf),
                    "%s: tensor '%s' (quantizer '%s') is written with scale %.6g, the "
                    "prepared model's is %.6g: the file does not match the calibrated model",
                    file.c_str(), tensor.get<std::string>().c_str(), name.c_str(),
                    written[0].item<double>(), expected[0].item<double>());
      mismatches.push_back(buf);
    }
  }
  return mismatches;
}

TensorMap runtimeBiases(passes::PreparedModel& model, const nlohmann::json& manifest) {
  TensorMap out;
  if (!manifest.contains("qoperator")) return out;
  const Graph& g = model.graph();
  for (const auto& name : manifest["qoperator"].value("fused_nodes", nlohmann::json::array())) {
    const Node* n = g.findNode(name.get<std::string>());
    if (n == nullptr || n->inputs().size() < 3 || n->input(2) == nullptr ||
        !n->input(2)->isInitializer()) {
      continue;
    }
    const Node* fx = n->input(0)->producer();
    const Node* fw = n->input(1)->producer();
    if (fx == nullptr || fw == nullptr || !passes::isFakeQuantize(fx) ||
        !passes::isFakeQuantize(fw)) {
      continue;
    }
    const at::Tensor sx = model.quantizer(passes::quantizerOf(*fx))->qparams().scale;
    const at::Tensor sw = model.quantizer(passes::quantizerOf(*fw))->qparams().scale;
    const at::Tensor bias = n->input(2)->initializer();
    out[n->input(2)->name()] =
        (deploy::int32BiasLevels(bias, sx, sw).to(at::kFloat) * deploy::accumulatorScale(sx, sw))
            .to(bias.scalar_type());
  }
  return out;
}

namespace {

// ORT's IsNoBranchPathToQuantizeLinear: one reader after another, Relu or Clip, to a
// QuantizeLinear.
bool reachesQuantizeLinearWithoutBranching(const Node& n) {
  const Node* current = &n;
  while (true) {
    if (current->outputs().size() != 1) return false;
    const std::vector<Use>& uses = current->output(0)->uses();
    if (uses.size() != 1) return false;
    const Node* reader = uses[0].node;
    if (reader->opType() == "QuantizeLinear") return true;
    if (reader->opType() != "Relu" && reader->opType() != "Clip") return false;
    current = reader;
  }
}

// A float initializer read by one node alone.
bool ownFloatInitializer(const Value* v) {
  return v != nullptr && v->isInitializer() && v->initializer().scalar_type() == at::kFloat &&
         v->uses().size() == 1;
}

}  // namespace

TensorMap ortQuantizedWeights(const Graph& exported) {
  TensorMap out;
  for (const Node* n : exported.topologicalOrder()) {
    const std::string& op = n->opType();
    if (op != "Conv" && op != "ConvTranspose" && op != "Gemm") continue;
    const Value* x = n->input(0);
    const Value* w = n->input(1);
    const Value* b = n->input(2);
    const Node* dq = x != nullptr ? x->producer() : nullptr;
    if (dq == nullptr || dq->opType() != "DequantizeLinear" ||
        !deploy::isScalarInitializer(dq->input(1)))
      continue;
    if (!reachesQuantizeLinearWithoutBranching(*n)) continue;
    // A weight dequantized already keeps its integers (only a float bias is rounded, which
    // runtimeBiases covers); ORT skips the node when the bias is no 1-D initializer.
    if (!ownFloatInitializer(w)) continue;
    if (b != nullptr && (!b->isInitializer() || b->initializer().dim() != 1)) continue;

    // GetQuantizationParameter<int8_t>: the range widened to zero, over 255 levels.
    const at::Tensor weight = w->initializer();
    const float low = std::min(weight.min().item<float>(), 0.0f);
    const float high = std::max(weight.max().item<float>(), 0.0f);
    const float scale = high == low ? 1.0f : (high - low) / 255.0f;
    const float zero_point = std::nearbyint(std::clamp(-128.0f - low / scale, -128.0f, 127.0f));
    // QuantizeLinear then DequantizeLinear, as ORT folds them on load.
    const at::Tensor levels = weight.div(scale).round().add(zero_point).clamp(-128, 127);
    out[w->name()] = levels.sub(zero_point).mul(scale);
    if (b != nullptr && ownFloatInitializer(b)) {
      // Round(b / (s_x * s_w)) as int32, dequantized on that scale, all in float.
      const float bias_scale = dq->input(1)->initializer().to(at::kFloat).item<float>() * scale;
      out[b->name()] = b->initializer().div(bias_scale).round().mul(bias_scale);
    }
  }
  return out;
}

}  // namespace qforge::verify
