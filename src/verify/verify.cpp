#include "verify/verify.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>

#include "algos/model_feeds.h"
#include "core/error.h"
#include "deploy/deploy.h"
#include "exec/executor.h"
#include "exec/ort_emulation.h"
#include "ir/onnx_import.h"
#include "verify/deployed_parameters.h"
#include "verify/ort_fused_groups.h"
#include "verify/runtime_kernels.h"

namespace qforge::verify {

const Comparison* exactEmulation(const std::vector<Comparison>& comparisons,
                                 const VerifyOptions& options, const std::string& model) {
  for (const Comparison& c : comparisons) {
    if (c.model != model || c.reference != "emulation" || c.outputs.empty()) continue;
    const bool exact = std::all_of(c.outputs.begin(), c.outputs.end(), [&](const auto& o) {
      return o.exact_fraction >= options.min_exact && o.max_steps <= options.max_emulation_steps;
    });
    return exact ? &c : nullptr;
  }
  return nullptr;
}

double accuracyGapThreshold(double max_gap, int64_t samples) {
  if (samples <= 0 || max_gap <= 0) return max_gap;
  const double n = static_cast<double>(samples);
  // The tolerance keeps a limit of exactly k samples at k (0.07 * 100 is 7.000000000000001).
  return std::ceil(max_gap * n - 1e-9) / n;
}

namespace {

const char kSimulation[] = "qforge simulation";
const char kSimulationRt[] = "qforge simulation, ONNX Runtime's arithmetic";
const char kEmulation[] = "qforge integer emulation";
const char kOrtQdq[] = "ONNX Runtime, QDQ model";
const char kOrtQop[] = "ONNX Runtime, QOperator model";

std::string fileIn(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / name).string();
}

// One comparison as it streams: per-output accumulators, and the worst samples when traced.
struct Stream {
  Comparison meta;
  std::vector<OutputAccumulator> outputs;
  std::unique_ptr<WorstSamples> worst;
};

class Verifier {
 public:
  Verifier(passes::PreparedModel& model, const std::string& dir, const VerifyOptions& options)
      : model_(model),
        dir_(dir),
        options_(options),
        fixed_(algos::fixedBatch(model.graph())),
        ort_(ortOptions(options, fixed_)) {
    // The emulation splits work over as many threads as ORT runs with (exec/ops/mlas_conv.h).
    setOrtIntraOpThreads(ort_.options().threads);
    manifest_ = deploy::readDeployManifest(dir);
    encodings_ = encodings(manifest_);
    for (const Value* v : model.graph().outputs())
      outputs_.push_back(v->name());
  }

  VerifyReport run(data::BatchLoader& loader) {
    VerifyReport report;
    report.fixed_batch = fixed_;
    report.whole_samples = loader.wholeSamples();
    const nlohmann::json& models = manifest_.at("models");
    require(!models.empty(), dir_ + "/deploy.json lists no ONNX model to verify (" +
                                 manifest_.value("notes", nlohmann::json::array()).dump() + ")");
    model_.setMode(quant::FakeQuantMode::Quantization);
    for (const auto& [kind, file] : models.items()) {
      for (std::string& m : parameterMismatches(model_, manifest_, fileIn(dir_, file)))
        report.parameter_mismatches.push_back(std::move(m));
    }
    // ONNX Runtime stores the float bias of every Conv/Gemm it fuses into an integer kernel as
    // int32 on the accumulator's grid; the backend (TensorRT, say) adds it in float. Compare ORT
    // with the simulation of what ORT computes, and show both accuracies.
    sim_overrides_ = runtimeBiases(model_, manifest_);
    if (!sim_overrides_.empty()) {
      report.notes.push_back(
          std::to_string(sim_overrides_.size()) +
          " float biases of Conv/Gemm that ONNX Runtime runs as integer kernels are rounded to "
          "int32 (scale s_input * s_weight) in the simulation ORT is compared with; the backend "
          "itself keeps them float");
    }
    // The QDQ model as ORT loads it, read once for the runtime's own arithmetic below.
    const std::optional<Graph> qdq =
        models.contains("qdq")
            ? std::optional<Graph>(importOnnxFile(fileIn(dir_, models["qdq"].get<std::string>())))
            : std::nullopt;
    if (qdq && options_.ort.optimization != OrtOptimization::Disabled) {
      // Float weights ORT quantizes itself to int8 (WeightBiasQuantization): what it computes.
      std::vector<std::string> requantized;
      for (auto& [name, value] : ortQuantizedWeights(*qdq)) {
        const Value* mine = model_.graph().findValue(name);
        if (mine == nullptr || !mine->isInitializer() ||
            mine->initializer().sizes() != value.sizes()) {
          continue;
        }
        sim_overrides_[name] = value;
        requantized.push_back(name);
      }
      if (!requantized.empty()) {
        report.notes.push_back(
            std::to_string(requantized.size()) +
            " float weights and biases of Conv/ConvTranspose/Gemm between quantized values are "
            "quantized by ONNX Runtime itself (int8 per tensor, its WeightBiasQuantization); the "
            "simulation ORT is compared with uses them, the backend keeps them float: " +
            describeOps(requantized));
      }
    }
    if (qdq) {
      runtime_kernels_ = std::make_unique<RuntimeKernels>(model_.graph(), *qdq);
      if (runtime_kernels_->empty()) {
        runtime_kernels_.reset();
      } else {
        const std::vector<std::string> names = runtime_kernels_->names();
        report.notes.push_back(
            std::to_string(names.size()) +
            " quantized Softmax ONNX Runtime fuses into QLinearSoftmax (its exp table and "
            "output multiplier floor(1 / y_scale)) run as that kernel in the simulation ORT is "
            "compared with: " +
            describeOps(names));
      }
    }
    openModels(models, report);
    max_abs_sim_.assign(outputs_.size(), 0.0);
    while (auto batch = loader.next()) {
      report.batch = std::max<int64_t>(report.batch, static_cast<int64_t>(batch->indices.size()));
      step(*batch);
      report.samples += static_cast<int64_t>(batch->indices.size());
    }
    require(report.samples > 0, "verify needs at least one input sample");
    for (const auto& [path, correct] : correct_)
      report.accuracy.emplace_back(path, static_cast<double>(correct) / report.samples);
    finish(report);
    judge(report);
    return report;
  }

 private:
  // An exported model emulated as ONNX Runtime runs it (openAsOrtRuns): ORT's optimized graph of
  // it on the emulation's kernels, or the QOperator model's emulation standing in.
  struct AsOrtRuns {
    enum class State { kStandIn, kOptimizedGraph, kStopped };
    AsOrtRuns(std::string model_name, std::string model_label)
        : model(std::move(model_name)), label(std::move(model_label)) {}
    std::string model;  // as comparisons name it: "qdq", "qoperator"
    std::string label;  // as notes name it: "QDQ", "QOperator"
    std::unique_ptr<Graph> graph;
    std::unique_ptr<Executor> executor;
    State state = State::kStandIn;
    int64_t steps = 0;    // batches compared with the optimized graph
    bool unused = false;  // it failed on the first step with nothing to stand in
  };

  static OrtRunnerOptions ortOptions(const VerifyOptions& o, int64_t fixed) {
    OrtRunnerOptions ort = o.ort;
    // A fixed batch dim: ORT runs that many rows at a time; else each step in one run.
    if (ort.batch == 0 && fixed > 0) ort.batch = fixed;
    // ORT runs with as many threads as the emulation assumes: how MLAS splits a batch of one
    // over them decides where it cuts K (exec/ops/mlas_conv.h).
    if (ort.threads == 0) ort.threads = ortIntraOpThreads();
    return ort;
  }

  // The emulator and the streams each exported model is compared in.
  void openModels(const nlohmann::json& models, VerifyReport& report) {
    // The QOperator model's emulation is also what ONNX Runtime computes for the QDQ model once
    // its QDQ transformer has fused the same groups into the same integer kernels.
    if (models.contains("qoperator")) qop_path_ = fileIn(dir_, models["qoperator"]);
    if (!qop_path_.empty() && options_.emulation != nullptr) {
      qop_graph_ = std::make_unique<Graph>(importOnnxFile(qop_path_));
      // ORT quantizes the float weights of the QOperator model's float Conv/Gemm between
      // quantized values too: the emulation computes with the same values.
      if (options_.ort.optimization != OrtOptimization::Disabled) {
        for (auto& [name, value] : ortQuantizedWeights(*qop_graph_))
          qop_graph_->findValue(name)->setInitializer(value);
        // And the float groups ORT fuses into kernels of other arithmetic, as it fused them.
        const std::vector<std::string> fused =
            fuseAsOrtDid(*qop_graph_, optimizedModelOf(qop_path_));
        if (!fused.empty()) {
          report.notes.push_back(std::to_string(fused.size()) +
                                 " float groups ONNX Runtime fuses into kernels that round "
                                 "otherwise are emulated as those kernels: " +
                                 describeOps(fused));
        }
      }
      emulator_ = std::make_unique<Executor>(*qop_graph_, ExecutorOptions{}, *options_.emulation);
    }
    const int64_t k = fixed_ > 0 ? std::max(fixed_, options_.debug_samples / fixed_ * fixed_)
                                 : options_.debug_samples;
    if (models.contains("qdq")) {
      qdq_path_ = fileIn(dir_, models["qdq"].get<std::string>());
      for (const std::string& name : outputs_) {
        quality_.emplace_back(name);
      }
      // Float and integer arithmetic put a few values on the other side of a rounding boundary;
      // a wrong scale or a misplaced quantizer moves whole tensors: trace every time.
      qdq_sim_ = addStream("qdq", "simulation", true, k);
      if (options_.emulation != nullptr && options_.ort.optimization != OrtOptimization::Disabled)
        openAsOrtRuns(qdq_path_, qdq_as_ort_, report);
      // Diagnostic: ONNX Runtime's own QDQ fusions need not pick exactly the groups ours do.
      if (emulator_ || qdq_as_ort_.executor) qdq_emu_ = addStream("qdq", "emulation", false, 0);
    }
    if (models.contains("qoperator")) {
      // The QOperator model is the artifact of ONNX_QNN-style backends; for the others it is a
      // by-product that locates differences, with float ops between its integer kernels.
      const std::string format = manifest_.value("deploy_format", "");
      const bool deployed = format == "onnx_qnn" || format == "qoperator";
      if (emulator_) {
        if (options_.ort.optimization != OrtOptimization::Disabled)
          openAsOrtRuns(qop_path_, qop_as_ort_, report);
        qop_emu_ = addStream("qoperator", "emulation", deployed, k);
      }
      qop_sim_ = addStream("qoperator", "simulation", deployed, 0);
    }
  }

  // The graph ONNX Runtime's optimizations made of an exported model, read once per model.
  const onnx::ModelProto& optimizedModelOf(const std::string& path) {
    auto found = optimized_.find(path);
    if (found == optimized_.end())
      found = optimized_.emplace(path, ort_.optimizedModel(path)).first;
    return found->second;
  }

  // An exported model as ONNX Runtime runs it: the graph ORT's optimizations made of it (which
  // groups it fused into integer kernels, which it left as DequantizeLinear -> float op ->
  // QuantizeLinear, the float ops it fused with their activations and Adds), read from ORT
  // rather than predicted, and run with the emulation's kernels. Without it (an op of ORT's graph
  // the emulation has no kernel for), the model is compared with the QOperator model's
  // emulation, which ORT computes for either model once it fused the same groups.
  void openAsOrtRuns(const std::string& path, AsOrtRuns& as_ort, VerifyReport& report) {
    const std::string& model = as_ort.model;
    const std::string& label = as_ort.label;
    try {
      onnx::ModelProto optimized = optimizedModelOf(path);  // the import takes it apart
      auto graph = std::make_unique<Graph>(
          importOnnxModel(optimized, std::filesystem::path(path).parent_path().string()));
      auto executor = std::make_unique<Executor>(*graph, ExecutorOptions{}, *options_.emulation);
      std::map<std::string, int> ops;
      for (const Node* n : graph->nodes()) {
        if (n->opType() != "QuantizeLinear" && n->opType() != "DequantizeLinear")
          ++ops[n->opType()];
      }
      std::vector<std::string> listed;
      for (const auto& [op, count] : ops)
        listed.push_back(op + " x" + std::to_string(count));
      report.notes.push_back(model + " model vs emulation: the emulation runs the graph ONNX " +
                             "Runtime optimized the " + label + " model into (" +
                             describeOps(listed, 6) + ", between its quantizers)");
      as_ort.graph = std::move(graph);
      as_ort.executor = std::move(executor);
      as_ort.state = AsOrtRuns::State::kOptimizedGraph;
    } catch (const Error& e) {
      report.notes.push_back(model + " model vs emulation: compared with the QOperator model's " +
                             "emulation; the graph ONNX Runtime optimized the " + label +
                             " model into cannot be emulated: " + std::string(e.what()));
    }
  }

  Stream* addStream(const std::string& model, const std::string& reference, bool judged,
                    int64_t traced) {
    auto s = std::make_unique<Stream>();
    s->meta.model = model;
    s->meta.reference = reference;
    s->meta.judged = judged;
    for (const std::string& name : outputs_)
      s->outputs.emplace_back(name, options_.iou_threshold);
    if (traced > 0) {
      s->worst = std::make_unique<WorstSamples>(traced, algos::batchAxes(model_.graph()));
    }
    streams_.push_back(std::move(s));
    return streams_.back().get();
  }

  // One batch through every path, into the accuracies and the comparisons.
  void step(const data::Batch& batch) {
    const auto samples = static_cast<int64_t>(batch.indices.size());
    const TensorMap feeds = algos::feedsOf(batch, model_.graph());
    const TensorMap sim = algos::runInBatches(model_.executor(), feeds, outputs_, fixed_);
    for (size_t i = 0; i < outputs_.size(); ++i) {
      max_abs_sim_[i] = std::max(max_abs_sim_[i], sim.at(outputs_[i]).abs().max().item<double>());
    }
    addAccuracy(kSimulation, sim, batch.labels);
    TensorMap sim_rt = sim;
    if (!sim_overrides_.empty() || runtime_kernels_) {
      HookScope hooks(model_.executor());
      if (runtime_kernels_) runtime_kernels_->install(hooks);
      sim_rt = algos::runInBatches(model_.executor(), feeds, outputs_, fixed_, sim_overrides_);
      addAccuracy(kSimulationRt, sim_rt, batch.labels);
    }
    // The QOperator model's own emulation, run only when read: for the emulation's accuracy when
    // ORT's graph of that model is not emulated, or for a comparison it stands in for.
    std::optional<TensorMap> stand_in;
    const auto standIn = [&]() -> const TensorMap& {
      if (!stand_in) stand_in = algos::runInBatches(*emulator_, feeds, outputs_, fixed_);
      return *stand_in;
    };
    // ORT's outputs against a model's emulation as ORT runs it, or against the stand-in.
    const auto compareEmulated = [&](Stream* stream, const AsOrtRuns& as_ort,
                                     const std::optional<TensorMap>& emulated,
                                     const TensorMap& ort) {
      if (stream == nullptr) return;
      if (emulated) {
        compare(*stream, feeds, ort, *emulated, samples);
      } else if (emulator_ && as_ort.state == AsOrtRuns::State::kStandIn) {
        compare(*stream, feeds, ort, standIn(), samples);
      }
    };
    std::optional<TensorMap> qop_emulated;
    if (emulator_) {
      qop_emulated = runAsOrtRuns(qop_as_ort_, feeds);
      addAccuracy(kEmulation, qop_emulated ? *qop_emulated : standIn(), batch.labels);
    }
    if (!qdq_path_.empty()) {
      const TensorMap ort = ort_.run(qdq_path_, feeds, outputs_);
      addAccuracy(kOrtQdq, ort, batch.labels);
      compare(*qdq_sim_, feeds, ort, sim_rt, samples);
      // The quantization error each shows against the float model.
      model_.setMode(quant::FakeQuantMode::Float);
      const TensorMap flt = algos::runInBatches(model_.executor(), feeds, outputs_, fixed_);
      model_.setMode(quant::FakeQuantMode::Quantization);
      for (size_t i = 0; i < outputs_.size(); ++i) {
        quality_[i].add(ort.at(outputs_[i]), sim_rt.at(outputs_[i]), flt.at(outputs_[i]), samples);
      }
      compareEmulated(qdq_emu_, qdq_as_ort_, runAsOrtRuns(qdq_as_ort_, feeds), ort);
    }
    if (!qop_path_.empty()) {
      const TensorMap ort = ort_.run(qop_path_, feeds, outputs_);
      addAccuracy(kOrtQop, ort, batch.labels);
      compareEmulated(qop_emu_, qop_as_ort_, qop_emulated, ort);
      compare(*qop_sim_, feeds, ort, sim_rt, samples);
    }
  }

  // ORT's optimized graph of an exported model on the emulation's kernels, or nothing when it is
  // not emulated (or no longer). A kernel that fails on ORT's graph is a limit of the emulation,
  // not of the model: on the first step the QOperator model's own emulation takes over (when
  // there is one), later the comparison stops there, and a note says so.
  std::optional<TensorMap> runAsOrtRuns(AsOrtRuns& as_ort, const TensorMap& feeds) {
    using State = AsOrtRuns::State;
    if (as_ort.state != State::kOptimizedGraph) return std::nullopt;
    try {
      TensorMap emulated = algos::runInBatches(*as_ort.executor, feeds, outputs_, fixed_);
      ++as_ort.steps;
      return emulated;
    } catch (const std::exception& e) {
      const bool first = as_ort.steps == 0;
      notes_.push_back(
          as_ort.model + " model vs emulation: ORT's optimized graph of the " + as_ort.label +
          " model failed in the emulation (" + oneLineOf(e.what()) + "); " +
          (first && emulator_
               ? "compared with the QOperator model's emulation"
               : "the comparison stops after " + std::to_string(as_ort.steps) + " steps"));
      as_ort.executor.reset();
      as_ort.state = first && emulator_ ? State::kStandIn : State::kStopped;
      as_ort.unused = first && !emulator_;
      return std::nullopt;
    }
  }

  static std::string oneLineOf(std::string text) {
    std::replace(text.begin(), text.end(), '\n', ' ');
    return text;
  }

  void compare(Stream& s, const TensorMap& feeds, const TensorMap& got, const TensorMap& ref,
               int64_t samples) {
    for (size_t i = 0; i < outputs_.size(); ++i)
      s.outputs[i].add(got.at(outputs_[i]), ref.at(outputs_[i]), samples);
    if (s.worst) s.worst->add(feeds, got, ref);
  }

  // Top-1 of the first output, when it is class scores and the data has labels.
  void addAccuracy(const std::string& path, const TensorMap& outputs, const at::Tensor& labels) {
    const at::Tensor& y = outputs.at(outputs_.front());
    if (!labels.defined() || !isClassifierOutput(y.sizes(), labels.size(0))) return;
    auto it = std::find_if(correct_.begin(), correct_.end(),
                           [&](const auto& p) { return p.first == path; });
    if (it == correct_.end()) it = correct_.insert(correct_.end(), {path, 0});
    it->second += y.argmax(1).eq(labels).sum().item<int64_t>();
  }

  // Each output's quantization step: its quantizer's, or the int8 step of the simulated range.
  std::pair<double, std::string> outputStep(size_t i) const {
    for (const Encoding& e : encodings_) {
      if (e.tensor == outputs_[i] && e.per_tensor && e.role == "activation") {
        return {e.scale, "output quantizer '" + e.quantizer + "'"};
      }
    }
    return {std::max(max_abs_sim_[i], 1e-12) / 127.0,
            "the output is float: int8 step of its range, max|y| / 127"};
  }

  void finish(VerifyReport& report) {
    std::tie(report.step, report.step_source) = outputStep(0);
    for (const QualityGap& q : quality_)
      report.quality.push_back(q.finish());
    const TraceContext context{ort_, fixed_, options_.trace_chunk_bytes};
    report.notes.insert(report.notes.end(), notes_.begin(), notes_.end());
    for (const auto& s : streams_) {
      // The QDQ model's emulation that failed on its first step, with nothing to stand in.
      if (s.get() == qdq_emu_ && qdq_as_ort_.unused) continue;
      Comparison c = s->meta;
      c.exact_fraction = 1;
      c.within_one_step_fraction = 1;
      bool agreement_set = false;
      for (size_t i = 0; i < outputs_.size(); ++i) {
        const auto [step, source] = outputStep(i);
        c.outputs.push_back(s->outputs[i].finish(step, source));
        const OutputComparison& o = c.outputs.back();
        c.samples = o.samples;
        if (o.classifier && !agreement_set) {
          c.top1_agree = o.top1_agree;
          agreement_set = true;
        }
        c.max_steps = std::max(c.max_steps, o.max_steps);
        c.p99_steps = std::max(c.p99_steps, o.p99_steps);
        c.exact_fraction = std::min(c.exact_fraction, o.exact_fraction);
        c.within_one_step_fraction =
            std::min(c.within_one_step_fraction, o.within_one_step_fraction);
      }
      if (s->worst && !s->worst->empty()) {
        // The trace only locates differences; ONNX Runtime failing on the traced copy (extra
        // graph outputs inside its fused groups) must not decide the verdict.
        try {
          trace(context, *s, c);
        } catch (const Error& e) {
          report.notes.push_back(c.model + " model vs " + c.reference +
                                 ": no tensor-by-tensor trace: " + e.what());
        }
      }
      report.comparisons.push_back(c);
    }
  }

  void trace(const TraceContext& context, const Stream& s, Comparison& c) {
    TraceSummary summary;
    if (s.meta.model == "qdq") {
      HookScope hooks(model_.executor());
      if (runtime_kernels_) runtime_kernels_->install(hooks);
      summary = summarize(traceQdq(context, model_, manifest_, encodings_, qdq_path_,
                                   s.worst->feeds(), sim_overrides_));
    } else {
      // The same integer arithmetic should give the same integers: when it does not, name the
      // first tensor beyond one step, or else the first that differs at all.
      const bool disagrees = c.max_steps > 1.0 + 1e-6 || c.exact_fraction < 1.0 ||
                             (c.top1_agree < c.samples && hasClassifier(c));
      if (!disagrees) return;
      summary = summarize(
          traceQOperator(context, manifest_, qop_path_, *qop_graph_, *emulator_, s.worst->feeds()));
    }
    c.first_difference = summary.first_difference;
    c.divergence = summary.divergence;
    c.largest = summary.largest;
    c.rerun_tensors = summary.rerun;
    c.first_own_difference = summary.first_own_difference;
  }

  static bool hasClassifier(const Comparison& c) {
    return std::any_of(c.outputs.begin(), c.outputs.end(),
                       [](const OutputComparison& o) { return o.classifier; });
  }

  void judge(VerifyReport& report) const;

  passes::PreparedModel& model_;
  std::string dir_;
  VerifyOptions options_;
  int64_t fixed_ = 0;
  OrtRunner ort_;
  nlohmann::json manifest_;
  std::vector<Encoding> encodings_;
  std::vector<std::string> outputs_;
  TensorMap sim_overrides_;  // bias overrides for the runtime-faithful simulation
  std::unique_ptr<RuntimeKernels> runtime_kernels_;  // and ORT's own kernels; nullptr: none
  // Per output, ORT's QDQ model and the simulation ORT is compared with, against the float model.
  std::vector<QualityGap> quality_;  // per output, ORT's and the simulation's against float
  std::unique_ptr<Graph> qop_graph_;
  std::unique_ptr<Executor> emulator_;
  std::map<std::string, onnx::ModelProto> optimized_;  // path -> ORT's optimized graph of it
  // What each exported model is compared with as its emulation.
  AsOrtRuns qdq_as_ort_{"qdq", "QDQ"}, qop_as_ort_{"qoperator", "QOperator"};
  std::vector<std::string> notes_;  // said while streaming, added to the report at the end
  std::string qdq_path_, qop_path_;
  std::vector<std::unique_ptr<Stream>> streams_;
  Stream *qdq_sim_ = nullptr, *qdq_emu_ = nullptr, *qop_emu_ = nullptr, *qop_sim_ = nullptr;
  std::vector<std::pair<std::string, int64_t>> correct_;  // path -> correct top-1, in order
  std::vector<double> max_abs_sim_;
};

// Appends the criterion, and a failure line when it does not hold. Differences in steps come from
// float values (a one-level difference at level 100 is 1 +- 6e-6 steps): they count to 1e-3.
void apply(VerifyReport& report, Criterion c, const std::string& failure_text) {
  const bool in_steps =
      c.metric.size() > 6 && c.metric.compare(c.metric.size() - 6, 6, "_steps") == 0;
  const double slack = in_steps ? 1e-3 : 1e-6;
  c.passed = c.at_least ? c.value >= c.threshold - 1e-9 : c.value <= c.threshold + slack;
  if (!c.passed) report.failures.push_back(failure_text);
  report.criteria.push_back(std::move(c));
}

namespace {

// The cause of `c`'s first difference when everything after it was carried from rounding at ties:
// every tensor rerun on ORT's inputs is within one step of it (what differs beyond was carried),
// and the first difference is itself rounding (float noise at ties, or the requantization of
// ORT's fused integer kernel, within a level), since a quantizer written differently also leaves
// every tensor within a step of its rerun. Only the QDQ model is traced against the simulation.
std::optional<std::string> carriedRoundingCause(const Comparison& c) {
  if (c.model != "qdq" || c.reference != "simulation" || c.rerun_tensors == 0 ||
      c.first_own_difference || !c.first_difference)
    return std::nullopt;
  std::optional<std::string> cause = differenceCause(*c.first_difference);
  if (cause != "rounding_ties" && cause != "fused_kernel_differs") return std::nullopt;
  return cause;
}

}  // namespace

// Fills report.criteria, passed and failures from the options' criteria.
void Verifier::judge(VerifyReport& report) const {
  std::map<std::string, double> accuracy(report.accuracy.begin(), report.accuracy.end());
  const double simulated =
      accuracy.count(kSimulationRt) ? accuracy[kSimulationRt] : accuracy[kSimulation];
  char buf[512];
  // When ONNX Runtime's QDQ model is exactly qforge's integer emulation, what the runtime computes
  // is known to the level; the float simulation then differs from that integer arithmetic by the
  // kernels' requantization rounding, which grows with depth. That comparison keeps its SQNR,
  // cosine and top-1 criteria, and its difference in steps is reported rather than judged.
  const Comparison* exact_emulation = exactEmulation(report.comparisons, options_, "qdq");
  const bool qdq_carried =
      std::any_of(report.comparisons.begin(), report.comparisons.end(),
                  [](const Comparison& c) { return carriedRoundingCause(c).has_value(); });
  const bool qop_exact = exactEmulation(report.comparisons, options_, "qoperator") != nullptr;
  for (Comparison& c : report.comparisons) {
    if (&c == exact_emulation) c.judged = true;
    if (!c.judged) continue;
    const bool requantized = exact_emulation != nullptr && c.model == "qdq";
    const std::string what = c.model + " model vs " + c.reference;
    // Carried rounding: the element-wise criteria are reported, and quality judged.
    const std::optional<std::string> first_cause = carriedRoundingCause(c);
    const bool carried = options_.waive_carried_rounding && first_cause && !report.quality.empty();
    // The QOperator model against the emulation: its integer kernels are emulated bit for bit
    // (golden cases against ORT), so with the QDQ trace finding only carried rounding, what is not
    // exact comes from ORT's float kernels and float fusions (LayerNormalization, FusedMatMul)
    // rounding otherwise than qforge's float ops. Exactness is then reported; the largest
    // difference stays judged.
    const bool float_rounding = options_.waive_carried_rounding && c.model == "qoperator" &&
                                c.reference == "emulation" && qdq_carried;
    // The QOperator model against the simulation, when that model is the integer emulation bit
    // for bit and the QDQ model's differences from the simulation are carried rounding: the
    // QOperator model computes what ORT computes for the QDQ model, so it differs from the
    // simulation as that does, which the QDQ model's quality criteria judge.
    const bool as_qdq = options_.waive_carried_rounding && c.model == "qoperator" &&
                        c.reference == "simulation" && qdq_carried && qop_exact;
    int64_t waived = 0;
    const auto apply = [&](VerifyReport& r, Criterion criterion, const std::string& text) {
      verify::apply(r, criterion, text);
      if (r.criteria.back().passed) return;
      const bool waivable = ((carried || as_qdq) && criterion.metric != "accuracy_gap" &&
                             criterion.metric != "shape_mismatches") ||
                            (float_rounding && criterion.metric == "exact_fraction");
      if (!waivable) return;
      r.failures.pop_back();
      r.criteria.back().waived = true;
      ++waived;
    };
    for (const OutputComparison& o : c.outputs) {
      const std::string where = what + (outputs_.size() > 1 ? " (output '" + o.output + "')" : "");
      const auto criterion = [&](const char* metric, double value, double threshold,
                                 bool at_least) {
        return Criterion{what, o.output, metric, value, threshold, at_least, false, false};
      };
      if (o.shape_mismatches > 0) {
        // Not rounding to waive: the runtime kept other elements than the simulation.
        verify::apply(report, criterion("shape_mismatches", o.shape_mismatches, 0, false),
                      where + ": the output's shape differs in " +
                          std::to_string(o.shape_mismatches) + " step(s) (" + o.shape_example +
                          "): its size depends on the data (a score threshold, NonZero, NMS) and "
                          "ONNX Runtime kept other elements than the simulation; those steps are "
                          "left out of the other figures");
        if (std::isnan(o.sqnr_db)) continue;  // no step had the same shape: nothing else to judge
      }
      if (c.reference == "emulation") {
        std::snprintf(buf, sizeof(buf), "%s: %.3f%% of output elements exact < %.3f%%",
                      where.c_str(), 100 * o.exact_fraction, 100 * options_.min_exact);
        apply(report, criterion("exact_fraction", o.exact_fraction, options_.min_exact, true), buf);
        std::snprintf(buf, sizeof(buf), "%s: largest difference %.3g steps > %.3g", where.c_str(),
                      o.max_steps, options_.max_emulation_steps);
        apply(report, criterion("max_steps", o.max_steps, options_.max_emulation_steps, false),
              buf);
        continue;
      }
      if (o.classifier) {
        const double agreement = static_cast<double>(o.top1_agree) / o.samples;
        std::snprintf(buf, sizeof(buf), "%s: top-1 agreement %.2f%% < %.2f%%", where.c_str(),
                      100 * agreement, 100 * options_.min_agreement);
        apply(report, criterion("top1_agreement", agreement, options_.min_agreement, true), buf);
        continue;
      }
      std::snprintf(buf, sizeof(buf), "%s: SQNR %.2f dB < %.2f dB", where.c_str(), o.sqnr_db,
                    options_.min_sqnr_db);
      apply(report, criterion("sqnr_db", o.sqnr_db, options_.min_sqnr_db, true), buf);
      std::snprintf(buf, sizeof(buf), "%s: cosine similarity %.6f < %.6f", where.c_str(), o.cosine,
                    options_.min_cosine);
      apply(report, criterion("cosine", o.cosine, options_.min_cosine, true), buf);
      if (requantized && o.p99_steps > options_.max_p99_steps) {
        const char* cause = qdq_as_ort_.state == AsOrtRuns::State::kOptimizedGraph
                                ? "ONNX Runtime's arithmetic (its kernels' summation order and "
                                  "requantization): ONNX Runtime equals qforge's emulation of the "
                                  "graph it optimized the QDQ model into"
                                : "the integer kernels' requantization: ONNX Runtime equals "
                                  "qforge's integer emulation, which `qforge run "
                                  "model.qoperator.onnx --arithmetic ort` runs";
        std::snprintf(buf, sizeof(buf), "%s: 99th-percentile difference %.3g steps, from %s",
                      where.c_str(), o.p99_steps, cause);
        report.notes.push_back(buf);
      } else {
        std::snprintf(buf, sizeof(buf), "%s: 99th-percentile difference %.3g steps > %.3g",
                      where.c_str(), o.p99_steps, options_.max_p99_steps);
        apply(report, criterion("p99_steps", o.p99_steps, options_.max_p99_steps, false), buf);
      }
      if (o.iou) {
        std::snprintf(buf, sizeof(buf), "%s: IoU of the maps above %g is %.4f < %.4f",
                      where.c_str(), *options_.iou_threshold, *o.iou, options_.min_iou);
        apply(report, criterion("iou", *o.iou, options_.min_iou, true), buf);
      }
    }
    if (waived > 0 && as_qdq) {
      report.notes.push_back(
          what + ": " + std::to_string(waived) +
          " element-wise criteria waived (marked above): the QOperator model equals qforge's "
          "integer emulation bit for bit, and the QDQ model's differences from the simulation are "
          "rounding carried through the graph, so this model differs from the simulation as the "
          "QDQ model does; judged by the QDQ model's quality criteria");
    } else if (waived > 0 && float_rounding) {
      report.notes.push_back(
          what +
          ": exactness waived (marked above): every integer kernel is emulated bit for bit, and "
          "the QDQ model's trace found only rounding carried through the graph, so the elements "
          "that differ come from ONNX Runtime's float kernels rounding otherwise; the largest "
          "difference is still judged");
    } else if (waived > 0) {
      report.notes.push_back(
          what + ": " + std::to_string(waived) +
          " element-wise criteria waived (marked above): the first difference is rounding (" +
          (*first_cause == "rounding_ties" ? "float noise at ties"
                                           : "the requantization of ORT's fused kernel") +
          "), and each of the " + std::to_string(c.rerun_tensors) +
          " tensors rerun on ONNX Runtime's inputs is within one step of it, so what differs "
          "more was carried through the graph; judged instead by each output's SQNR against the "
          "float model, ONNX Runtime's against the simulation's (quality_gap_db)");
    }
    // The gap is judged by what the samples show for sure: the part of it no redraw of them
    // removes (OutputQuality::supportedGapDb). A gap within their spread is reported, not judged.
    for (const OutputQuality& q :
         waived > 0 && carried ? report.quality : std::vector<OutputQuality>{}) {
      const double supported = q.supportedGapDb();
      std::snprintf(buf, sizeof(buf),
                    "%s, output '%s': SQNR against the float model %.2f dB in ONNX Runtime, "
                    "%.2f dB in the simulation: %.2f dB apart, and more than %.2f dB apart however "
                    "the %lld samples are drawn again (90%% interval %.2f to %.2f dB)",
                    what.c_str(), q.output.c_str(), q.ort_sqnr_db, q.simulation_sqnr_db,
                    std::fabs(q.gap_db), options_.max_quality_gap_db,
                    static_cast<long long>(q.samples), q.gap_low_db, q.gap_high_db);
      verify::apply(
          report,
          Criterion{what, q.output, "quality_gap_db", std::isnan(supported) ? 1e9 : supported,
                    options_.max_quality_gap_db, false, false, false},
          buf);
      if (report.criteria.back().passed && std::fabs(q.gap_db) > options_.max_quality_gap_db) {
        if (q.samples == 1) {
          std::snprintf(buf, sizeof(buf),
                        "%s, output '%s': the SQNRs against the float model are %.2f dB apart on "
                        "the one sample verified, which cannot show how far that moves between "
                        "samples; verify more samples (--limit) to judge it",
                        what.c_str(), q.output.c_str(), std::fabs(q.gap_db));
        } else {
          std::snprintf(buf, sizeof(buf),
                        "%s, output '%s': the SQNRs against the float model are %.2f dB apart, "
                        "within the spread the %lld samples verified allow (90%% interval %.2f "
                        "to %.2f dB): rounding carried through the graph moves single samples "
                        "either way; verify more samples (--limit) to narrow it",
                        what.c_str(), q.output.c_str(), std::fabs(q.gap_db),
                        static_cast<long long>(q.samples), q.gap_low_db, q.gap_high_db);
        }
        report.notes.push_back(buf);
      }
    }
    const std::string path = c.model == "qdq" ? kOrtQdq : kOrtQop;
    if (c.reference == "simulation" && accuracy.count(path) && accuracy.count(kSimulation)) {
      const double gap = std::fabs(accuracy[path] - simulated);
      const double limit = accuracyGapThreshold(options_.max_accuracy_gap, report.samples);
      std::snprintf(buf, sizeof(buf),
                    "%s: accuracy differs by %.2f points > %.2f (%.2f in whole samples of %lld)",
                    what.c_str(), 100 * gap, 100 * options_.max_accuracy_gap, 100 * limit,
                    static_cast<long long>(report.samples));
      apply(report,
            Criterion{what, outputs_.front(), "accuracy_gap", gap, limit, false, false, false},
            buf);
    }
  }
  for (const std::string& m : report.parameter_mismatches)
    report.failures.push_back(m);
  report.passed = report.failures.empty();
}

nlohmann::json number(double v) {
  // JSON has no infinity: an SQNR of identical outputs is written as null.
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

nlohmann::json outputJson(const OutputComparison& o) {
  nlohmann::json j = {{"output", o.output},
                      {"classifier", o.classifier},
                      {"samples", o.samples},
                      {"sqnr_db", number(o.sqnr_db)},
                      {"cosine", o.cosine},
                      {"step", o.step},
                      {"step_source", o.step_source},
                      {"max_steps", o.max_steps},
                      {"p99_steps", o.p99_steps},
                      {"exact_fraction", o.exact_fraction},
                      {"within_one_step_fraction", o.within_one_step_fraction}};
  if (o.classifier) {
    j["top1_agree"] = o.top1_agree;
    j["top1_agreement"] = static_cast<double>(o.top1_agree) / o.samples;
  }
  if (o.iou) j["iou"] = *o.iou;
  if (o.shape_mismatches > 0) {
    j["shape_mismatches"] = o.shape_mismatches;
    j["shape_example"] = o.shape_example;
  }
  return j;
}

nlohmann::json divergenceJson(const Divergence& d) {
  nlohmann::json j{{"quantizer", d.quantizer}, {"tensor", d.tensor}, {"ort_writer", d.ort_writer},
                   {"max_steps", d.max_steps}, {"index", d.index},   {"compared", d.compared},
                   {"share_off", d.share_off}};
  if (const std::optional<std::string> cause = differenceCause(d)) {
    j["cause"] = *cause;
    j["float_gap_steps"] = d.float_gap->gap;
    j["unfused_levels_differing"] = d.float_gap->differing;
    j["unfused_boundary_distance_steps"] = d.float_gap->boundary_distance;
  }
  if (d.rerun) {
    j["rerun_max_steps"] = d.rerun->max_levels;
    j["rerun_share_off"] = d.rerun->share_off;
    j["rerun_fed"] = d.rerun->fed;
    j["rerun_ops"] = d.rerun->ops;
  }
  return j;
}

}  // namespace

VerifyReport verifyDeployment(passes::PreparedModel& model, const std::string& dir,
                              data::BatchLoader& loader, const VerifyOptions& options) {
  Verifier verifier(model, dir, options);
  return verifier.run(loader);
}

nlohmann::json toJson(const VerifyReport& r) {
  nlohmann::json j;
  j["samples"] = r.samples;
  j["batch"] = r.batch;
  if (r.whole_samples) {
    j["one_sample_per_run"] = true;
  } else if (r.fixed_batch > 0) {
    j["fixed_batch"] = r.fixed_batch;
  }
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
                         {"within_one_step_fraction", c.within_one_step_fraction},
                         {"judged", c.judged},
                         {"outputs", nlohmann::json::array()}};
    for (const OutputComparison& o : c.outputs)
      cj["outputs"].push_back(outputJson(o));
    if (c.divergence) cj["first_divergence"] = divergenceJson(*c.divergence);
    if (c.first_difference) cj["first_difference"] = divergenceJson(*c.first_difference);
    if (c.largest) cj["largest_tensor_difference"] = divergenceJson(*c.largest);
    if (c.rerun_tensors > 0) {
      cj["rerun_tensors"] = c.rerun_tensors;
      if (c.first_own_difference)
        cj["first_own_difference"] = divergenceJson(*c.first_own_difference);
    }
    j["comparisons"].push_back(cj);
  }
  j["criteria"] = nlohmann::json::array();
  for (const Criterion& c : r.criteria) {
    j["criteria"].push_back({{"comparison", c.comparison},
                             {"output", c.output},
                             {"metric", c.metric},
                             {"value", number(c.value)},
                             {"threshold", c.threshold},
                             {"at_least", c.at_least},
                             {"passed", c.passed},
                             {"waived", c.waived}});
  }
  j["quality"] = nlohmann::json::array();
  for (const OutputQuality& q : r.quality) {
    j["quality"].push_back({{"output", q.output},
                            {"ort_sqnr_db", number(q.ort_sqnr_db)},
                            {"simulation_sqnr_db", number(q.simulation_sqnr_db)},
                            {"samples", q.samples},
                            {"gap_db", number(q.gap_db)},
                            {"gap_interval_db", {number(q.gap_low_db), number(q.gap_high_db)}}});
  }
  j["notes"] = r.notes;
  j["passed"] = r.passed;
  j["failures"] = r.failures;
  j["parameter_mismatches"] = r.parameter_mismatches;
  return j;
}

}  // namespace qforge::verify
