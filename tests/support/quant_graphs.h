// Tiny graphs and backends for the quantization pass tests.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "backends/backend_config.h"
#include "ir/graph.h"
#include "passes/prepare.h"
#include "passes/quant_units.h"

namespace qforge::testing {

// A backend document with 8-bit symmetric per-channel weights, 8-bit activations, MinMax
// observers and Fixed quantizers; `patch` is merged over it (objects key by key).
inline nlohmann::json tinyBackendDocument(const nlohmann::json& patch = nlohmann::json::object()) {
  nlohmann::json doc = {
      {"name", "Tiny"},
      {"weight",
       {{"bits", 8},
        {"symmetric", true},
        {"per_channel", true},
        {"observer", "MinMax"},
        {"fake_quantizer", "Fixed"}}},
      {"activation",
       {{"bits", 8},
        {"symmetric", false},
        {"unsigned", true},
        {"observer", "MinMax"},
        {"fake_quantizer", "Fixed"}}},
      {"ops",
       {{"Conv", "quantizable"},
        {"Gemm", "quantizable"},
        {"MaxPool", "shares_input"},
        {"Concat", "quantizable"},
        {"Add", "quantizable"},
        {"Sigmoid",
         {{"role", "fixed"}, {"scale", 1.0 / 256}, {"zero_point", 0}, {"unsigned", true}}}}},
      {"fusions", {{"Conv", "Relu?"}, {"Gemm"}}},
      {"placement", {{"unit_inputs", true}, {"unit_outputs", false}}}};
  doc.merge_patch(patch);
  return doc;
}

inline backends::BackendConfig tinyBackend(const nlohmann::json& patch = nlohmann::json::object()) {
  return backends::parseBackendConfig(tinyBackendDocument(patch), "test backend");
}

// A backend that quantizes every op's output (as QNN and SNPE do) and its graph inputs, with
// `ops` as its op roles and no fusions: the written-out-op tests place their patterns with it.
inline backends::BackendConfig outputQuantizingBackend(const nlohmann::json& ops) {
  return tinyBackend({{"ops", ops},
                      {"fusions", nlohmann::json::array()},
                      {"placement", {{"graph_inputs", true}, {"unit_outputs", true}}}});
}

// The nodes' names, in order.
inline std::vector<std::string> namesOf(const std::vector<Node*>& nodes) {
  std::vector<std::string> names;
  for (const Node* n : nodes)
    names.push_back(n->name());
  return names;
}

// x[N,3,6,6] -> Conv(w1[4,3,3,3], b1, pad 1) -> c -> activation(g, c) -> Conv(w2[2,4,1,1]) -> y,
// the weights drawn after at::manual_seed(seed): the graph the written-out-activation tests place.
// `opset` (when > 0) is the graph's default-domain opset.
inline Graph convActivationConv(uint64_t seed,
                                const std::function<Value*(Graph&, Value* c)>& activation,
                                int64_t opset = 0) {
  at::manual_seed(seed);
  Graph g;
  if (opset > 0) g.model.opset_imports[""] = opset;
  Value* x = g.addValue("x");
  x->type = TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(3),
                                                      Dim::known(6), Dim::known(6)}};
  g.addInput(x);
  Node* c1 = g.addNode("Conv",
                       {x, g.addInitializer("w1", at::randn({4, 3, 3, 3}) * 0.5),
                        g.addInitializer("b1", at::randn({4}) * 0.1)},
                       {"c"}, "conv1");
  c1->attributes.set(Attribute::makeInts("pads", {1, 1, 1, 1}));
  Value* h = activation(g, c1->output(0));
  Node* c2 =
      g.addNode("Conv", {h, g.addInitializer("w2", at::randn({2, 4, 1, 1}) * 0.5)}, {"y"}, "conv2");
  c2->output(0)->type = TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(2),
                                                                  Dim::known(6), Dim::known(6)}};
  g.addOutput(c2->output(0));
  return g;
}

// What convActivationConv's first Conv computes on `x` (its "c"), by ATen: the activation tests'
// reference input.
inline at::Tensor firstConvOf(const Graph& g, const at::Tensor& x) {
  return at::conv2d(x, g.value("w1")->initializer(), g.value("b1")->initializer(), 1, 1);
}

// Where a backend puts the units of `g` and which values get a quantizer: what the written-out-op
// tests compare between an op and its written-out form.
struct UnitPlacement {
  std::vector<std::string> units;      // each unit's ops ("Sigmoid+Mul"), in graph order
  std::vector<std::string> quantized;  // values with a quantizer, sorted, each once
};

inline UnitPlacement placementOf(const Graph& g, const backends::BackendConfig& backend) {
  UnitPlacement p;
  for (const passes::QuantUnit& u : passes::findQuantUnits(g, backend)) {
    p.units.push_back(u.ops());
    for (const Use& in : u.activation_inputs)
      p.quantized.push_back(in.node->input(in.index)->name());
    if (backend.placement.unit_outputs && u.output_carries_activations)
      p.quantized.push_back(u.output->name());
  }
  // One quantizer per value, however many readers ask for it.
  std::sort(p.quantized.begin(), p.quantized.end());
  p.quantized.erase(std::unique(p.quantized.begin(), p.quantized.end()), p.quantized.end());
  return p;
}

// x[2,2,5,5] -> Conv(w1[3,2,3,3], b1, pad 1) -> Relu -> Conv(w2[2,3,1,1]) -> y
inline Graph convReluConv(uint64_t seed = 1) {
  at::manual_seed(seed);
  Graph g;
  Value* x = g.addValue("x");
  x->type = TensorType{
      DType::Float, std::vector<Dim>{Dim::known(2), Dim::known(2), Dim::known(5), Dim::known(5)}};
  g.addInput(x);
  Value* w1 = g.addInitializer("w1", at::randn({3, 2, 3, 3}));
  Value* b1 = g.addInitializer("b1", at::randn({3}) * 0.1);
  Value* w2 = g.addInitializer("w2", at::randn({2, 3, 1, 1}));
  Node* c1 = g.addNode("Conv", {x, w1, b1}, {"c1"}, "conv1");
  c1->attributes.set(Attribute::makeInts("pads", {1, 1, 1, 1}));
  Node* r = g.addNode("Relu", {c1->output(0)}, {"r"}, "relu");
  Node* c2 = g.addNode("Conv", {r->output(0), w2}, {"y"}, "conv2");
  // ONNX needs a graph output's type and rank.
  c2->output(0)->type = TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(2),
                                                                  Dim::known(5), Dim::known(5)}};
  g.addOutput(c2->output(0));
  return g;
}

// Runs one calibration batch, then switches to quantization.
inline void calibrateOn(passes::PreparedModel& m, const at::Tensor& x) {
  m.setMode(quant::FakeQuantMode::Calibration);
  m.executor().run({{"x", x}});
  m.setMode(quant::FakeQuantMode::Quantization);
}

// MinMax closed forms, as PyTorch's observers compute them (range widened to include 0).
inline double asymmetricScale(const at::Tensor& t, int64_t qmax = 255) {
  const double lo = std::min(0.0, t.min().item<double>());
  const double hi = std::max(0.0, t.max().item<double>());
  return (hi - lo) / qmax;
}
inline int64_t asymmetricZeroPoint(const at::Tensor& t, double scale) {
  const double lo = std::min(0.0, t.min().item<double>());
  return std::clamp<int64_t>(static_cast<int64_t>(std::nearbyint(-lo / scale)), 0, 255);
}
// t fake-quantized to unsigned 8 bits with the MinMax range of `range` (the closed form of an
// asymmetric MinMax quantizer that observed `range`).
inline at::Tensor asymmetricFakeQuant(const at::Tensor& t, const at::Tensor& range) {
  const double s = asymmetricScale(range);
  return at::fake_quantize_per_tensor_affine(t, static_cast<float>(s),
                                             asymmetricZeroPoint(range, s), 0, 255);
}
inline at::Tensor symmetricScalesPerChannel(const at::Tensor& w, int64_t levels_half = 255) {
  // max|w| per output channel / ((qmax - qmin) / 2) with the full [-128, 127] grid.
  return w.abs().reshape({w.size(0), -1}).amax(1).to(at::kDouble) / (levels_half / 2.0);
}

// A shape computation beside the data path, token ids as a graph input, and an int64 Cast of an
// activation; no intermediate types are declared. Backends that quantize op outputs (SNPE's
// placement) once put quantizers on the int64 Cast and the shape arithmetic and stopped at the
// first batch ("received a Long tensor"). Graph text (ir/parse.h).
inline constexpr const char* kShapeArithmeticGraph = R"(
  graph g
  input %x: float32[N,2]
  input %ids: int64[N]
  init %zero: int64[] = {0}
  init %half: float32[] = {0.5}
  init %table: float32[4,2]
  %s = Shape(%x)
  %n = Gather[axis=0](%s, %zero)
  %nf = Cast[to=1](%n)
  %k = Mul(%nf, %half)  # shape_mul
  %y = Mul(%x, %k)  # data_mul
  %yi = Cast[to=7](%y)  # to_int
  %e = Gather[axis=0](%table, %ids)
  output %y
  output %yi
  output %e
)";

}  // namespace qforge::testing
