#include "verify/verify.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>

#include "algos/calibrate.h"
#include "core/error.h"
#include "core/files.h"
#include "deploy/deploy.h"
#include "deploy/qoperator_onnx.h"
#include "exec/executor.h"
#include "ir/onnx_export.h"
#include "ir/onnx_import.h"
#include "passes/fake_quantize_node.h"

namespace qforge::verify {

namespace {

std::string fileIn(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

at::Tensor runBatched(Executor& executor, const std::string& input, const std::string& output,
                      const at::Tensor& inputs, int64_t batch, TensorMap feeds = {}) {
  std::vector<at::Tensor> parts;
  for (int64_t start = 0; start < inputs.size(0); start += batch) {
    feeds[input] = inputs.slice(0, start, std::min(start + batch, inputs.size(0)));
    parts.push_back(executor.run(feeds, {output}).at(output));
  }
  return at::cat(parts, 0);
}

// The encoding deploy.json lists for a quantizer or a tensor.
struct Encoding {
  std::string quantizer;
  std::string tensor;
  std::string role;
  double scale = 0;
  int64_t zero_point = 0;
  bool per_tensor = false;
};

std::vector<Encoding> encodings(const nlohmann::json& manifest) {
  std::vector<Encoding> out;
  for (const auto& t : manifest.at("tensors")) {
    Encoding e;
    e.quantizer = t.at("quantizer").get<std::string>();
    e.tensor = t.at("tensor").get<std::string>();
    e.role = t.at("role").get<std::string>();
    if (t.value("affine", true) && t.at("scale").size() == 1) {
      e.per_tensor = true;
      e.scale = t.at("scale")[0].get<double>();
      e.zero_point = t.at("zero_point")[0].get<int64_t>();
    }
    out.push_back(e);
  }
  return out;
}

// |a - b| / step over every element: max, 99th percentile and the share that is exact.
void stepStatistics(const at::Tensor& a, const at::Tensor& b, double step, Comparison& c) {
  const at::Tensor d = ((a.to(at::kDouble) - b.to(at::kDouble)).abs() / step).reshape({-1});
  c.max_steps = d.max().item<double>();
  const at::Tensor sorted = std::get<0>(d.sort());
  const int64_t k = std::min<int64_t>(d.numel() - 1, static_cast<int64_t>(0.99 * d.numel()));
  c.p99_steps = sorted[k].item<double>();
  c.exact_fraction = (d < 1e-3).to(at::kDouble).mean().item<double>();
}

// The samples where two runs differ most, for tracing.
at::Tensor worstSamples(const at::Tensor& a, const at::Tensor& b, int64_t k) {
  const at::Tensor per_sample =
      (a.to(at::kDouble) - b.to(at::kDouble)).abs().reshape({a.size(0), -1}).amax(1);
  return std::get<1>(per_sample.topk(std::min<int64_t>(k, a.size(0))));
}

// ORT's values of `tensors` (integer tensors of the model at `path`) on `x`: a copy of the model
// that also outputs them.
TensorMap ortIntermediates(const OrtRunner& ort, const std::string& path, const std::string& input,
                           const at::Tensor& x, const std::vector<std::string>& tensors) {
  Graph g = importOnnxFile(path);
  for (const std::string& name : tensors) {
    Value* v = g.findValue(name);
    if (v != nullptr && !g.isGraphOutput(v)) g.addOutput(v);
  }
  TempDir scratch("verify");
  const std::string traced = scratch.file("traced.onnx");
  exportOnnxFile(g, traced);
  return ort.run(traced, {{input, x}}, tensors);
}

// Each of `pairs` (quantizer, tensor, reference levels, ORT levels; graph order) with its largest
// difference in levels.
std::vector<Divergence> tensorDifferences(
    const std::vector<std::tuple<std::string, std::string, at::Tensor, at::Tensor>>& pairs) {
  std::vector<Divergence> out;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& [quantizer, tensor, ref, got] = pairs[i];
    const at::Tensor diff = (ref.to(at::kDouble) - got.to(at::kDouble)).abs();
    out.push_back(Divergence{quantizer, tensor, diff.max().item<double>(), static_cast<int64_t>(i),
                             static_cast<int64_t>(pairs.size()),
                             (diff > 1.0).to(at::kDouble).mean().item<double>()});
  }
  return out;
}

// The first tensor that differs at all, the first beyond one level, and the one with the most
// elements beyond one level.
void summarize(const std::vector<Divergence>& tensors, Comparison& c) {
  for (const Divergence& d : tensors) {
    if (d.max_steps > 0 && !c.first_difference) c.first_difference = d;
    if (d.max_steps > 1.0 && !c.divergence) c.divergence = d;
    if (!c.largest || d.share_off > c.largest->share_off) c.largest = d;
  }
}

class Verifier {
 public:
  Verifier(passes::PreparedModel& model, const std::string& dir, const VerifyOptions& options)
      : model_(model), dir_(dir), options_(options), ort_(ortOptions(options)) {
    manifest_ = deploy::readDeployManifest(dir);
    encodings_ = encodings(manifest_);
    input_ = algos::dataInput(model.graph()).name();
    output_ = model.graph().outputs().front()->name();
  }

  VerifyReport run(const at::Tensor& inputs, const at::Tensor& labels) {
    VerifyReport report;
    report.samples = inputs.size(0);
    const nlohmann::json& models = manifest_.at("models");
    require(!models.empty(), dir_ + "/deploy.json lists no ONNX model to verify (" +
                                 manifest_.value("notes", nlohmann::json::array()).dump() + ")");
    model_.setMode(quant::FakeQuantMode::Quantization);
    for (const auto& [kind, file] : models.items())
      checkParameters(fileIn(dir_, file.get<std::string>()), report.parameter_mismatches);
    at::Tensor sim = runBatched(model_.executor(), input_, output_, inputs, options_.batch);
    outputStep(sim, report);
    addAccuracy(report, "qforge simulation", sim, labels);
    // ONNX Runtime stores the float bias of every Conv/Gemm it fuses into an integer kernel as
    // int32 on the accumulator's grid; the backend (TensorRT, say) adds it in float. Compare ORT
    // with the simulation of what ORT computes, and show both accuracies.
    sim_feeds_ = runtimeBiases();
    if (!sim_feeds_.empty()) {
      sim = runBatched(model_.executor(), input_, output_, inputs, options_.batch, sim_feeds_);
      addAccuracy(report, "qforge simulation, int32 biases as ONNX Runtime", sim, labels);
      report.notes.push_back(
          std::to_string(sim_feeds_.size()) +
          " float biases of Conv/Gemm that ONNX Runtime runs as integer kernels are rounded to "
          "int32 (scale s_input * s_weight) in the simulation ORT is compared with; the backend "
          "itself keeps them float");
    }

    // The QOperator model's emulation is also what ONNX Runtime computes for the QDQ model once
    // its QDQ transformer has fused the same groups into the same integer kernels.
    at::Tensor emu;
    std::unique_ptr<Graph> qop;
    std::unique_ptr<Executor> emulator;
    if (models.contains("qoperator") && options_.emulation != nullptr) {
      qop = std::make_unique<Graph>(importOnnxFile(fileIn(dir_, models["qoperator"])));
      emulator = std::make_unique<Executor>(*qop, ExecutorOptions{}, *options_.emulation);
      emu = runBatched(*emulator, input_, output_, inputs, options_.batch);
      addAccuracy(report, "qforge integer emulation", emu, labels);
    }
    if (models.contains("qdq")) {
      const std::string path = fileIn(dir_, models["qdq"].get<std::string>());
      const at::Tensor ort = ort_.run(path, {{input_, inputs}}, {output_}).at(output_);
      addAccuracy(report, "ONNX Runtime, QDQ model", ort, labels);
      Comparison c = compare("qdq", "simulation", ort, sim, report.step);
      // Float and integer arithmetic put a few values on the other side of a rounding boundary;
      // a wrong scale or a misplaced quantizer moves whole tensors: trace every time.
      summarize(traceQdq(path, inputs, worstSamples(ort, sim, options_.debug_samples)), c);
      report.comparisons.push_back(c);
      if (emu.defined()) {
        // Diagnostic: ONNX Runtime's own QDQ fusions need not pick exactly the groups ours do.
        report.comparisons.push_back(compare("qdq", "emulation", ort, emu, report.step));
        report.comparisons.back().judged = false;
      }
    }
    if (models.contains("qoperator")) {
      // The QOperator model is the artifact of ONNX_QNN-style backends; for the others it is a
      // by-product that locates differences, with float ops between its integer kernels.
      const std::string format = manifest_.value("deploy_format", "");
      const bool qoperator_deployed = format == "onnx_qnn" || format == "qoperator";
      const std::string path = fileIn(dir_, models["qoperator"].get<std::string>());
      const at::Tensor ort = ort_.run(path, {{input_, inputs}}, {output_}).at(output_);
      addAccuracy(report, "ONNX Runtime, QOperator model", ort, labels);
      if (emu.defined()) {
        Comparison c = compare("qoperator", "emulation", ort, emu, report.step);
        // The same integer arithmetic should give the same integers: when it does not, name the
        // first tensor beyond one step, or else the first that differs at all.
        if (disagrees(c) || c.exact_fraction < 1.0) {
          summarize(traceQOperator(path, *qop, *emulator, inputs,
                                   worstSamples(ort, emu, options_.debug_samples)),
                    c);
        }
        c.judged = qoperator_deployed;
        report.comparisons.push_back(c);
      }
      report.comparisons.push_back(compare("qoperator", "simulation", ort, sim, report.step));
      report.comparisons.back().judged = qoperator_deployed;
    }
    judge(report);
    return report;
  }

 private:
  // Fills report.passed / failures from the options' criteria.
  void judge(VerifyReport& report) const {
    std::map<std::string, double> accuracy(report.accuracy.begin(), report.accuracy.end());
    const auto simulated = accuracy.count("qforge simulation, int32 biases as ONNX Runtime")
                               ? accuracy["qforge simulation, int32 biases as ONNX Runtime"]
                               : accuracy["qforge simulation"];
    char buf[512];
    for (const Comparison& c : report.comparisons) {
      if (!c.judged) continue;
      const double agreement = static_cast<double>(c.top1_agree) / c.samples;
      const std::string what = c.model + " model vs " + c.reference;
      if (c.reference == "simulation") {
        if (agreement < options_.min_agreement) {
          std::snprintf(buf, sizeof(buf), "%s: top-1 agreement %.2f%% < %.2f%%", what.c_str(),
                        100 * agreement, 100 * options_.min_agreement);
          report.failures.push_back(buf);
        }
        const std::string path =
            c.model == "qdq" ? "ONNX Runtime, QDQ model" : "ONNX Runtime, QOperator model";
        if (accuracy.count(path) && accuracy.count("qforge simulation") &&
            std::fabs(accuracy[path] - simulated) > options_.max_accuracy_gap + 1e-12) {
          std::snprintf(buf, sizeof(buf), "%s: accuracy differs by %.2f points > %.2f",
                        what.c_str(), 100 * std::fabs(accuracy[path] - simulated),
                        100 * options_.max_accuracy_gap);
          report.failures.push_back(buf);
        }
      } else {
        if (c.exact_fraction < options_.min_exact) {
          std::snprintf(buf, sizeof(buf), "%s: %.3f%% of output elements exact < %.3f%%",
                        what.c_str(), 100 * c.exact_fraction, 100 * options_.min_exact);
          report.failures.push_back(buf);
        }
        if (c.max_steps > options_.max_emulation_steps + 1e-6) {
          std::snprintf(buf, sizeof(buf), "%s: largest difference %.3g steps > %.3g", what.c_str(),
                        c.max_steps, options_.max_emulation_steps);
          report.failures.push_back(buf);
        }
      }
    }
    for (const std::string& m : report.parameter_mismatches)
      report.failures.push_back(m);
    report.passed = report.failures.empty();
  }

  static OrtRunnerOptions ortOptions(const VerifyOptions& o) {
    OrtRunnerOptions ort = o.ort;
    if (ort.batch == 0) ort.batch = o.batch;
    return ort;
  }

  // Bias initializers as ONNX Runtime rounds them: for each fused Conv/Gemm whose input and weight
  // are quantized and whose bias is a float initializer, round(b / (s_x * s_w)) * (s_x * s_w).
  TensorMap runtimeBiases() const {
    TensorMap out;
    if (!manifest_.contains("qoperator")) return out;
    const Graph& g = model_.graph();
    for (const auto& name : manifest_["qoperator"].value("fused_nodes", nlohmann::json::array())) {
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
      const at::Tensor sx = model_.quantizer(passes::quantizerOf(*fx))->qparams().scale;
      const at::Tensor sw = model_.quantizer(passes::quantizerOf(*fw))->qparams().scale;
      const at::Tensor bias = n->input(2)->initializer();
      out[n->input(2)->name()] =
          (deploy::int32BiasLevels(bias, sx, sw).to(at::kFloat) * deploy::accumulatorScale(sx, sw))
              .to(bias.scalar_type());
    }
    return out;
  }

  // The scale and zero point each exported integer tensor is written with must be its
  // quantizer's: read them from the node producing the tensor (QuantizeLinear, or the output
  // parameters of an integer kernel) and compare with the prepared model.
  void checkParameters(const std::string& path, std::vector<std::string>& mismatches) const {
    static const std::map<std::string, size_t> output_scale_slot = {
        {"QuantizeLinear", 1},     {"QLinearConv", 6},   {"QLinearMatMul", 6},
        {"QLinearAdd", 6},         {"QLinearMul", 6},    {"QLinearGlobalAveragePool", 3},
        {"QLinearAveragePool", 3}, {"QLinearConcat", 0}, {"QGemm", 7}};
    const Graph g = importOnnxFile(path);
    const std::string file = std::filesystem::path(path).filename().string();
    const nlohmann::json quantized = manifest_.value("quantized_values", nlohmann::json::object());
    for (const auto& [name, tensor] : quantized.items()) {
      const Value* v = g.findValue(tensor.get<std::string>());
      quant::FakeQuantizer* q = model_.quantizer(name);
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
      bool same = written.numel() == expected.numel() && at::equal(written, expected);
      if (same && zero_point != nullptr && zero_point->isInitializer()) {
        same = at::equal(zero_point->initializer().to(at::kLong).reshape({-1}),
                         p.zero_point.to(at::kLong).reshape({-1}));
      }
      if (!same) {
        char buf[512];
        std::snprintf(buf, sizeof(buf),
                      "%s: tensor '%s' (quantizer '%s') is written with scale %.6g, the "
                      "prepared model's is %.6g: the file does not match the calibrated model",
                      file.c_str(), tensor.get<std::string>().c_str(), name.c_str(),
                      written[0].item<double>(), expected[0].item<double>());
        mismatches.push_back(buf);
      }
    }
  }

  static bool disagrees(const Comparison& c) {
    return c.top1_agree < c.samples || c.max_steps > 1.0 + 1e-6;
  }

  void outputStep(const at::Tensor& sim, VerifyReport& report) const {
    for (const Encoding& e : encodings_) {
      if (e.tensor == output_ && e.per_tensor && e.role == "activation") {
        report.step = e.scale;
        report.step_source = "output quantizer '" + e.quantizer + "'";
        return;
      }
    }
    report.step = std::max(sim.abs().max().item<double>(), 1e-12) / 127.0;
    report.step_source = "the output is float: int8 step of its range, max|y| / 127";
  }

  static void addAccuracy(VerifyReport& report, const std::string& path, const at::Tensor& y,
                          const at::Tensor& labels) {
    if (!labels.defined() || y.dim() != 2) return;
    const double top1 = y.argmax(1).eq(labels).to(at::kDouble).mean().item<double>();
    report.accuracy.emplace_back(path, top1);
  }

  static Comparison compare(const std::string& model, const std::string& reference,
                            const at::Tensor& ort, const at::Tensor& ref, double step) {
    Comparison c;
    c.model = model;
    c.reference = reference;
    c.samples = ort.size(0);
    if (ort.dim() == 2) c.top1_agree = ort.argmax(1).eq(ref.argmax(1)).sum().item<int64_t>();
    stepStatistics(ort, ref, step, c);
    return c;
  }

  // QDQ model vs simulation: each activation quantizer's integers, ORT's QuantizeLinear output
  // (or the Clip of a quantizer written as arithmetic: 4-bit, half-up) against the simulation's
  // fake-quantized value on the same grid.
  std::vector<Divergence> traceQdq(const std::string& path, const at::Tensor& inputs,
                                   const at::Tensor& samples) {
    const at::Tensor x = inputs.index_select(0, samples);
    const nlohmann::json quantized = manifest_.value("quantized_values", nlohmann::json::object());
    std::vector<std::tuple<std::string, std::string, const Encoding*>> wanted;  // fq, tensor, enc
    for (const Node* n : model_.graph().topologicalOrder()) {
      if (!passes::isFakeQuantize(n)) continue;
      const std::string fq_quantizer = passes::quantizerOf(*n);
      for (const Encoding& e : encodings_) {
        if (e.quantizer != fq_quantizer || e.role != "activation" || !e.per_tensor) continue;
        if (!quantized.contains(e.quantizer)) continue;
        wanted.emplace_back(n->output(0)->name(), quantized[e.quantizer].get<std::string>(), &e);
        break;
      }
    }
    std::vector<std::string> ort_names, sim_names;
    for (const auto& [fq_out, tensor, e] : wanted) {
      ort_names.push_back(tensor);
      sim_names.push_back(fq_out);
    }
    const TensorMap ort = ortIntermediates(ort_, path, input_, x, ort_names);
    TensorMap feeds = sim_feeds_;
    feeds[input_] = x;
    const TensorMap sim = model_.executor().run(feeds, sim_names);
    std::vector<std::tuple<std::string, std::string, at::Tensor, at::Tensor>> pairs;
    for (const auto& [fq_out, tensor, e] : wanted) {
      const at::Tensor levels = (sim.at(fq_out).to(at::kDouble) / e->scale).round() + e->zero_point;
      pairs.emplace_back(e->quantizer, tensor, levels, ort.at(tensor));
    }
    return tensorDifferences(pairs);
  }

  // QOperator model vs its emulation: every integer tensor a kernel writes, and the integers of
  // quantizers written as arithmetic.
  std::vector<Divergence> traceQOperator(const std::string& path, const Graph& qop,
                                         Executor& emulator, const at::Tensor& inputs,
                                         const at::Tensor& samples) {
    const at::Tensor x = inputs.index_select(0, samples);
    std::map<std::string, std::string> quantizer_of;
    const nlohmann::json quantized = manifest_.value("quantized_values", nlohmann::json::object());
    for (const auto& [quantizer, tensor] : quantized.items()) {
      quantizer_of[tensor.get<std::string>()] = quantizer;
    }
    std::vector<std::string> names;
    for (const Node* n : qop.topologicalOrder()) {
      const std::string& op = n->opType();
      // A quantizer written as arithmetic stays float in this model; its Clip holds the integers.
      const bool arithmetic_levels = op == "Clip" && quantizer_of.count(n->output(0)->name());
      if (op == "QuantizeLinear" || op.rfind("QLinear", 0) == 0 ||
          (op == "QGemm" && n->inputs().size() > 7) || arithmetic_levels) {
        names.push_back(n->output(0)->name());
      }
    }
    const TensorMap ort = ortIntermediates(ort_, path, input_, x, names);
    const TensorMap emu = emulator.run({{input_, x}}, names);
    std::vector<std::tuple<std::string, std::string, at::Tensor, at::Tensor>> pairs;
    for (const std::string& name : names) {
      const auto it = quantizer_of.find(name);
      pairs.emplace_back(it == quantizer_of.end() ? "" : it->second, name, emu.at(name),
                         ort.at(name));
    }
    return tensorDifferences(pairs);
  }

  passes::PreparedModel& model_;
  std::string dir_;
  VerifyOptions options_;
  OrtRunner ort_;
  nlohmann::json manifest_;
  std::vector<Encoding> encodings_;
  std::string input_;
  std::string output_;
  TensorMap sim_feeds_;  // bias overrides for the runtime-faithful simulation
};

}  // namespace

VerifyReport verifyDeployment(passes::PreparedModel& model, const std::string& dir,
                              const at::Tensor& inputs, const at::Tensor& labels,
                              const VerifyOptions& options) {
  require(inputs.defined() && inputs.size(0) > 0, "verify needs at least one input sample");
  Verifier verifier(model, dir, options);
  return verifier.run(inputs, labels);
}

nlohmann::json toJson(const VerifyReport& r) {
  nlohmann::json j;
  j["samples"] = r.samples;
  j["step"] = r.step;
  j["step_source"] = r.step_source;
  j["accuracy"] = nlohmann::json::object();
  for (const auto& [path, top1] : r.accuracy)
    j["accuracy"][path] = top1;
  j["comparisons"] = nlohmann::json::array();
  for (const Comparison& c : r.comparisons) {
    nlohmann::json cj = {{"model", c.model},
                         {"reference", c.reference},
                         {"samples", c.samples},
                         {"top1_agree", c.top1_agree},
                         {"top1_agreement", static_cast<double>(c.top1_agree) / c.samples},
                         {"max_steps", c.max_steps},
                         {"p99_steps", c.p99_steps},
                         {"exact_fraction", c.exact_fraction},
                         {"judged", c.judged}};
    const auto divergenceJson = [](const Divergence& d) {
      return nlohmann::json{{"quantizer", d.quantizer}, {"tensor", d.tensor},
                            {"max_steps", d.max_steps}, {"index", d.index},
                            {"compared", d.compared},   {"share_off", d.share_off}};
    };
    if (c.divergence) cj["first_divergence"] = divergenceJson(*c.divergence);
    if (c.first_difference) cj["first_difference"] = divergenceJson(*c.first_difference);
    if (c.largest) cj["largest_tensor_difference"] = divergenceJson(*c.largest);
    j["comparisons"].push_back(cj);
  }
  j["notes"] = r.notes;
  j["passed"] = r.passed;
  j["failures"] = r.failures;
  j["parameter_mismatches"] = r.parameter_mismatches;
  return j;
}

}  // namespace qforge::verify
