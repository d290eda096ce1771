// `qforge qat MODEL --backend NAME --data SOURCE --epochs E --out DIR`: quantization-aware
// training of a classifier. Prepares the model for the backend with BN kept, calibrates the
// quantizers (their starting point), trains (algos/qat.h) with a checkpoint after every epoch and
// on SIGINT/SIGTERM, merges BN, then saves and deploys the model as `qforge quantize` does.
// `--resume DIR` continues an interrupted run; `--world-size/--rank/--master` spread batches
// over processes (c10d, Gloo).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "algos/calibrate.h"
#include "algos/distributed.h"
#include "algos/qat.h"
#include "backends/backend_config.h"
#include "cli/commands.h"
#include "cli/eval_support.h"
#include "core/error.h"
#include "core/files.h"
#include "core/strings.h"
#include "deploy/deploy.h"
#include "ir/onnx_import.h"
#include "passes/prepare.h"
#include "passes/prepared_io.h"
#include "passes/quant_config.h"

namespace qforge::cli {

namespace {

struct QatOptions {
  std::string model;
  std::string backend;
  std::string data = "fashion-mnist:train";
  int64_t epochs = 1;
  std::string algo;  // empty: the backend's own fake quantizers
  std::string config;
  std::string optimizer = "sgd";
  double lr = 1e-3;
  double momentum = 0.9;
  double weight_decay = 0;
  std::string schedule = "cosine";
  int64_t step_epochs = 1;
  double step_gamma = 0.1;
  int64_t batch = 64;
  int64_t limit = 0;
  int64_t max_steps = 0;
  int64_t freeze_bn_epoch = -1;
  int64_t augment_shift = 0;
  bool augment_flip = false;
  double label_smoothing = 0;
  bool freeze_weights = false;
  double quantizer_lr_scale = 1.0;
  std::string calib;  // empty: --data
  int64_t calib_batches = 16;
  int64_t calib_batch = 64;
  std::string eval;
  int64_t eval_limit = 0;
  int64_t eval_batch = 200;
  uint64_t seed = 0;
  std::string out;
  std::string resume;
  std::string csv;
  int world_size = 1;
  int rank = 0;
  std::string master = "127.0.0.1:29500";
  double timeout = 300;
  bool no_deploy = false;
  bool json = false;
  bool quiet = false;
};

// The signal that asked the run to stop (0: none). A second one ends the process at once.
std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};

extern "C" void onStopSignal(int signal) {
  g_signal.store(signal);
  g_stop.store(true);
  std::signal(signal, SIG_DFL);
}

// Installs the handlers for the training loop and puts the previous ones back when it ends.
class StopSignals {
 public:
  StopSignals() {
    previous_int_ = std::signal(SIGINT, onStopSignal);
    previous_term_ = std::signal(SIGTERM, onStopSignal);
  }
  ~StopSignals() {
    std::signal(SIGINT, previous_int_);
    std::signal(SIGTERM, previous_term_);
  }

 private:
  void (*previous_int_)(int);
  void (*previous_term_)(int);
};

// What --algo puts on every weight and activation quantizer (unless the config names its own).
// Methods that only apply to one side (PACT clips activations, DoReFa normalises weights) leave
// LSQ on the other; DoReFa, TQT and PACT are per-tensor methods.
void applyAlgorithm(const std::string& algo, passes::QuantConfig& config) {
  if (algo.empty()) return;
  nlohmann::json weight, activation;
  if (algo == "lsq") {
    weight = {{"fake_quantizer", "LSQ"}};
    activation = {{"fake_quantizer", "LSQ"}};
  } else if (algo == "lsq+") {
    weight = {{"fake_quantizer", "LSQ"}};
    activation = {{"fake_quantizer", "LSQ+"}};
  } else if (algo == "pact") {
    weight = {{"fake_quantizer", "LSQ"}};
    activation = {{"fake_quantizer", "PACT"}};
  } else if (algo == "dsq") {
    weight = {{"fake_quantizer", "DSQ"}};
    activation = {{"fake_quantizer", "DSQ"}};
  } else if (algo == "dorefa") {
    weight = {{"fake_quantizer", "DoReFa"}, {"per_channel", false}, {"unsigned", false}};
    activation = {{"fake_quantizer", "LSQ"}};
  } else if (algo == "tqt") {
    weight = {{"fake_quantizer", "TQT"},
              {"per_channel", false},
              {"symmetric", true},
              {"unsigned", false}};
    activation = {{"fake_quantizer", "TQT"}, {"symmetric", true}};
  } else {
    throw Error("unknown QAT algorithm '" + algo + "'; known: lsq, lsq+, pact, dsq, dorefa, tqt");
  }
  // The config's own choices win: `--algo pact` with a config that sets weight bits keeps both.
  for (auto& [key, value] : weight.items()) {
    if (!config.weight.contains(key)) config.weight[key] = value;
  }
  for (auto& [key, value] : activation.items()) {
    if (!config.activation.contains(key)) config.activation[key] = value;
  }
  // DoReFa normalises weights by their own maximum: an observer (the config's, say) has nothing
  // to set.
  if (config.weight.value("fake_quantizer", "") == "DoReFa") {
    config.weight["observer"] = "none";
    config.weight.erase("observer_options");
  }
}

// Top-1 (percent) of `forward` over the whole loader, scored as `qforge eval` scores.
double top1Percent(data::BatchLoader& loader,
                   const std::function<at::Tensor(const at::Tensor&)>& forward) {
  Scores scores;
  scores.metric = "top1";
  loader.reset();
  while (auto batch = loader.next()) {
    const at::Tensor out = forward(batch->inputs);
    require(out.dim() == 2 && batch->labels.defined(),
            "--eval needs a classifier and labelled data (top-1)");
    scoreBatch(*batch, out, 1.0, loader.dataset().describe(), scores);
  }
  return scores.samples > 0 ? 100.0 * static_cast<double>(scores.top1) / scores.samples : -1;
}

// The forward of `executor` from the graph's data input to its first output.
std::function<at::Tensor(const at::Tensor&)> forwardOf(Executor& executor, const Graph& graph) {
  const std::string input = algos::dataInput(graph).name();
  const std::string output = graph.outputs().front()->name();
  return [&executor, input, output](const at::Tensor& x) {
    return executor.run({{input, x}}, {output}).at(output);
  };
}

nlohmann::json epochsJson(const std::vector<algos::QatEpochResult>& epochs) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& e : epochs) {
    list.push_back({{"epoch", e.epoch + 1},
                    {"loss", e.loss},
                    {"train_top1", e.train_top1 < 0 ? -1 : 100.0 * e.train_top1},
                    {"eval_top1", e.eval_metric},
                    {"lr", e.lr},
                    {"steps", e.steps},
                    {"bn_frozen", e.bn_frozen},
                    {"seconds", e.seconds}});
  }
  return list;
}

std::string epochsCsv(const std::vector<algos::QatEpochResult>& epochs) {
  std::ostringstream out;
  out << "epoch,loss,train_top1,eval_top1,lr,steps,bn_frozen,seconds\n";
  char line[256];
  for (const auto& e : epochs) {
    std::snprintf(line, sizeof(line), "%lld,%.6f,%.4f,%.4f,%.6g,%lld,%d,%.3f\n",
                  static_cast<long long>(e.epoch + 1), e.loss,
                  e.train_top1 < 0 ? -1 : 100.0 * e.train_top1, e.eval_metric, e.lr,
                  static_cast<long long>(e.steps), e.bn_frozen ? 1 : 0, e.seconds);
    out << line;
  }
  return out.str();
}

std::string reportText(const nlohmann::json& r) {
  std::ostringstream out;
  char buf[256];
  out << "model      " << r["model"].get<std::string>() << "\n";
  out << "backend    " << r["backend"].get<std::string>() << ", algorithm "
      << r["algorithm"].get<std::string>() << ", " << r["batchnorms_simulated"].get<int>()
      << " Conv+BN trained with simulated folding\n";
  for (const auto& e : r["epochs"]) {
    std::snprintf(
        buf, sizeof(buf), "epoch %lld  loss %.4f  train top-1 %.2f%%%s  lr %.3g  %.1f s%s\n",
        static_cast<long long>(e["epoch"].get<int64_t>()), e["loss"].get<double>(),
        e["train_top1"].get<double>(),
        e["eval_top1"].get<double>() >= 0
            ? ("  eval top-1 " + std::to_string(e["eval_top1"].get<double>()).substr(0, 5) + "%")
                  .c_str()
            : "",
        e["lr"].get<double>(), e["seconds"].get<double>(),
        e["bn_frozen"].get<bool>() ? "  (BN frozen)" : "");
    out << buf;
  }
  if (r.contains("float_top1")) {
    std::snprintf(
        buf, sizeof(buf), "top-1      float %.2f%%, after calibration %.2f%%, after QAT %.2f%%\n",
        r["float_top1"].get<double>(), r["ptq_top1"].get<double>(), r["qat_top1"].get<double>());
    out << buf;
  }
  std::snprintf(buf, sizeof(buf),
                "time       %lld steps in %.1f s, %.1f ms/step, %.0f samples/s, %d thread%s, %d "
                "rank%s\n",
                static_cast<long long>(r["steps"].get<int64_t>()), r["train_seconds"].get<double>(),
                r["step_ms"].get<double>(), r["samples_per_second"].get<double>(),
                r["threads"].get<int>(), r["threads"].get<int>() == 1 ? "" : "s",
                r["world_size"].get<int>(), r["world_size"].get<int>() == 1 ? "" : "s");
  out << buf;
  if (r.contains("files")) {
    out << "wrote     ";
    for (const auto& f : r["files"])
      out << " " << f.get<std::string>();
    out << "\n";
  }
  return out.str();
}

int runQat(QatOptions o) {
  const auto start = Clock::now();
  if (o.out.empty()) o.out = o.resume;
  require(!o.out.empty(), "give --out DIR (or --resume DIR to continue a run there)");
  require(o.calib_batches > 0 && o.calib_batch > 0,
          "--calib-batches and --calib-batch must be at least 1");
  require(o.label_smoothing >= 0 && o.label_smoothing < 1,
          "--label-smoothing must be in [0, 1); got " + c10::str(o.label_smoothing));
  algos::QatConfig config;
  config.epochs = o.epochs;
  config.batch_size = o.batch;
  config.max_steps = o.max_steps;
  config.optimizer = algos::parseQatOptimizer(o.optimizer);
  config.lr = o.lr;
  config.momentum = o.momentum;
  config.weight_decay = o.weight_decay;
  config.schedule = algos::parseQatSchedule(o.schedule);
  config.step_epochs = o.step_epochs;
  config.step_gamma = o.step_gamma;
  config.freeze_bn_epoch = o.freeze_bn_epoch;
  config.augment_shift = o.augment_shift;
  config.augment_flip = o.augment_flip;
  config.label_smoothing = o.label_smoothing;
  config.train_weights = !o.freeze_weights;
  config.quantizer_lr_scale = o.quantizer_lr_scale;
  config.seed = o.seed;
  config.checkpoint_path = (std::filesystem::path(o.out) / "checkpoint.pt").string();
  config.stop = &g_stop;
  const std::string resume_path =
      o.resume.empty() ? "" : (std::filesystem::path(o.resume) / "checkpoint.pt").string();
  if (!resume_path.empty()) {
    require(std::filesystem::exists(resume_path),
            "--resume " + o.resume +
                ": no checkpoint.pt there; give the --out directory of an "
                "earlier qforge qat run");
  }

  algos::DistributedOptions dist;
  dist.world_size = o.world_size;
  dist.rank = o.rank;
  dist.master = o.master;
  dist.timeout_seconds = o.timeout;
  std::unique_ptr<algos::ProcessGroup> group;
  if (o.world_size != 1 || o.rank != 0) group = std::make_unique<algos::ProcessGroup>(dist);
  const bool lead = o.rank == 0;
  const bool tty = lead && !o.json && !o.quiet && ::isatty(STDERR_FILENO);

  const backends::BackendConfig backend = backends::loadBackend(o.backend);
  passes::PrepareOptions prepare_options;
  if (!o.config.empty()) prepare_options.config = passes::loadQuantConfig(o.config);
  applyAlgorithm(o.algo, prepare_options.config);
  Graph float_graph = importOnnxFile(o.model);
  auto calib_data = openFor(o.calib.empty() ? o.data : o.calib, float_graph);
  // A model the backend or its format cannot take (4-bit activations for TensorRT, say) is
  // refused now, not after training: prepared as PTQ prepares it and calibrated on one batch, it
  // is deployed once into a scratch directory.
  if (!o.no_deploy && lead) {
    auto probe = passes::prepare(importOnnxFile(o.model), backend, prepare_options);
    data::BatchLoader one_batch(calib_data,
                                loaderOptions(float_graph, o.calib_batch, o.calib_batch));
    algos::calibrate(*probe, one_batch, 1);
    TempDir dry_run("qat-deploy-check");
    deploy::deployPreparedModel(*probe, dry_run.path());
  }
  auto model = algos::prepareForQat(importOnnxFile(o.model), backend, prepare_options);

  // Calibration: the first batches of the calibration data in order, the same on every rank.
  data::BatchLoader calib_loader(
      calib_data, loaderOptions(float_graph, o.calib_batch, o.calib_batch * o.calib_batches));
  const algos::CalibrationResult calibration =
      algos::calibrate(*model, calib_loader, o.calib_batches);
  nlohmann::json report;
  report["model"] = o.model;
  report["backend"] = backend.name;
  report["algorithm"] = o.algo.empty() ? "backend default" : o.algo;
  report["calibration"] = {{"data", calib_data->describe()},
                           {"batches", calibration.batches},
                           {"samples", calibration.samples}};
  std::optional<data::BatchLoader> eval_loader;
  if (!o.eval.empty() && lead) {
    auto eval_data = openFor(o.eval, float_graph);
    eval_loader.emplace(eval_data, loaderOptions(float_graph, o.eval_batch, o.eval_limit));
    report["eval_data"] = eval_data->describe();
    if (resume_path.empty()) {
      Executor float_executor(float_graph);
      report["float_top1"] = top1Percent(*eval_loader, forwardOf(float_executor, float_graph));
      report["ptq_top1"] = top1Percent(*eval_loader, forwardOf(model->executor(), model->graph()));
    }
  }

  algos::QatTrainer trainer(*model, config, {}, group.get());
  if (!resume_path.empty()) trainer.resume(resume_path);

  auto train_data = openFor(o.data, float_graph);
  data::LoaderOptions train_options = loaderOptions(float_graph, o.batch, o.limit);
  std::unique_ptr<ProgressBar> bar;
  char note[160];
  const auto progress = [&](const algos::QatStepInfo& s) {
    if (!tty) return;
    if (!bar)
      bar = std::make_unique<ProgressBar>(s.total_steps - (s.global_step - s.steps_run), true,
                                          "step");
    std::snprintf(note, sizeof(note),
                  "epoch %lld/%lld  step %lld/%lld  loss %.4f  train top-1 %.1f%%  lr %.3g",
                  static_cast<long long>(s.epoch + 1), static_cast<long long>(s.epochs),
                  static_cast<long long>(s.step_in_epoch),
                  static_cast<long long>(s.steps_per_epoch), s.loss, 100.0 * s.train_top1, s.lr);
    bar->update(s.steps_run, s.seconds, note);
  };
  const auto evaluate = [&](algos::QatTrainer& t) -> double {
    if (!eval_loader) return -1;
    if (bar) bar->clear();
    return top1Percent(*eval_loader, [&t](const at::Tensor& x) { return t.infer(x); });
  };
  algos::QatReport result;
  {
    StopSignals signals;
    result = trainer.train(train_data, train_options, progress, evaluate);
  }
  if (bar) bar->clear();

  report["epochs"] = epochsJson(result.epochs);
  report["steps"] = result.steps_run;
  report["global_step"] = result.global_step;
  report["train_seconds"] = result.train_seconds;
  report["step_ms"] = result.step_ms;
  report["samples_per_second"] =
      result.train_seconds > 0 ? static_cast<double>(result.samples_run) / result.train_seconds : 0;
  report["batch_size"] = o.batch;
  report["world_size"] = o.world_size;
  report["rank"] = o.rank;
  report["threads"] = at::get_num_threads();
  report["batchnorms_simulated"] = result.batchnorms_simulated;
  report["parameters"] = result.parameters;
  report["quantizer_parameters"] = result.quantizer_parameters;
  report["resumed"] = result.resumed;
  report["resumed_at_step"] = result.resumed_at_step;
  report["interrupted"] = result.interrupted;
  report["checkpoint"] = config.checkpoint_path;
  if (!o.csv.empty() && lead) writeFileAtomically(o.csv, epochsCsv(result.epochs));

  if (result.interrupted) {
    const int signal = g_signal.load();
    if (lead) {
      if (o.json) {
        std::cout << report.dump(2) << "\n";
      } else {
        std::cerr << "qforge: interrupted at step " << result.global_step << "; saved "
                  << config.checkpoint_path << "; continue with --resume " << o.out << "\n";
      }
    }
    return 128 + (signal > 0 ? signal : SIGINT);
  }

  report["batchnorms_merged"] = trainer.finish();
  if (eval_loader)
    report["qat_top1"] = top1Percent(*eval_loader, forwardOf(model->executor(), model->graph()));
  if (lead) {
    std::vector<std::string> written;
    if (!o.no_deploy) {
      const deploy::DeployResult deployed = deploy::deployPreparedModel(*model, o.out);
      written = deployed.files;
      if (!deployed.notes.empty()) report["deploy_note"] = join(deployed.notes, "; ");
    }
    for (const std::string& f :
         passes::savePreparedModel(*model, backends::resolveBackendDocument(o.backend), o.out))
      written.push_back(f);
    written.push_back(config.checkpoint_path);
    if (!o.csv.empty()) written.push_back(o.csv);
    const std::string report_path = (std::filesystem::path(o.out) / "report.json").string();
    written.push_back(report_path);
    report["files"] = written;
    report["seconds_total"] = secondsSince(start);
    writeFileAtomically(report_path, report.dump(2) + "\n");
    std::cout << (o.json ? report.dump(2) + "\n" : reportText(report));
  }
  if (group) group->barrier();
  return 0;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> addQatCommand(CLI::App& app) {
  auto o = std::make_shared<QatOptions>();
  CLI::App* sub = app.add_subcommand(
      "qat",
      "Quantization-aware training: prepare for a backend, calibrate, train with fake "
      "quantization (checkpoints, resume, data parallel), merge BN, save and deploy");
  sub->add_option("model", o->model, "ONNX model file (a classifier)")->required();
  addBackendOption(sub, o->backend);
  sub->add_option("--data", o->data, "Training data (same sources as eval --data)")
      ->capture_default_str();
  sub->add_option("--epochs", o->epochs, "Epochs")->capture_default_str();
  sub->add_option("--algo", o->algo,
                  "Fake quantizers to train: lsq, lsq+, pact, dsq, dorefa, tqt (default: the "
                  "backend's own)");
  sub->add_option("--config", o->config,
                  "Quantization config (.json, .yaml): bits, observers, overrides per node");
  sub->add_option("--optimizer", o->optimizer, "sgd or adam")->capture_default_str();
  sub->add_option("--lr", o->lr, "Learning rate")->capture_default_str();
  sub->add_option("--momentum", o->momentum, "SGD momentum")->capture_default_str();
  sub->add_option("--weight-decay", o->weight_decay, "L2 weight decay on weights")
      ->capture_default_str();
  sub->add_option("--schedule", o->schedule, "Learning-rate schedule: cosine, step, none")
      ->capture_default_str();
  sub->add_option("--step-epochs", o->step_epochs, "step schedule: epochs between decays")
      ->capture_default_str();
  sub->add_option("--step-gamma", o->step_gamma, "step schedule: factor per decay")
      ->capture_default_str();
  sub->add_option("--batch", o->batch, "Batch size per process")->capture_default_str();
  sub->add_option("--limit", o->limit, "Training samples per epoch (0: all)");
  sub->add_option("--max-steps", o->max_steps, "Stop after N optimizer steps (0: no limit)");
  sub->add_option("--freeze-bn-epoch", o->freeze_bn_epoch,
                  "From this epoch (0-based) BN uses and keeps its running statistics (-1: never)")
      ->capture_default_str();
  sub->add_option("--augment-shift", o->augment_shift,
                  "Shift training images by up to N pixels at random (zero padded)");
  sub->add_flag("--augment-flip", o->augment_flip,
                "Flip training images horizontally at random (half of them)");
  sub->add_option("--label-smoothing", o->label_smoothing,
                  "Cross entropy against smoothed labels (PyTorch's label_smoothing): use what "
                  "the float model was trained with")
      ->capture_default_str();
  sub->add_flag("--freeze-weights", o->freeze_weights,
                "Train only the quantizers' parameters (scales, clipping values); weights, biases "
                "and BN stay as calibrated");
  sub->add_option("--quantizer-lr-scale", o->quantizer_lr_scale,
                  "SGD: the quantizers' parameters learn at --lr times this")
      ->capture_default_str();
  sub->add_option("--calib", o->calib, "Calibration data (default: --data)");
  sub->add_option("--calib-batches", o->calib_batches, "Calibration batches")
      ->capture_default_str();
  sub->add_option("--calib-batch", o->calib_batch, "Calibration batch size")->capture_default_str();
  sub->add_option("--eval", o->eval, "Evaluate float, calibrated and trained models on this data");
  sub->add_option("--eval-limit", o->eval_limit, "Evaluate only the first N samples");
  sub->add_option("--eval-batch", o->eval_batch, "Evaluation batch size")->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed for the data order")->capture_default_str();
  sub->add_option("--out", o->out, "Output directory (checkpoint, prepared model, deploy files)");
  sub->add_option("--resume", o->resume,
                  "Continue the run whose --out directory this is, from its checkpoint");
  sub->add_option("--csv", o->csv, "Write per-epoch metrics to this CSV file");
  sub->add_option("--world-size", o->world_size, "Processes training together")
      ->capture_default_str();
  sub->add_option("--rank", o->rank, "This process's rank (0 .. world size - 1)")
      ->capture_default_str();
  sub->add_option("--master", o->master, "ADDR:PORT where rank 0 listens")->capture_default_str();
  sub->add_option("--timeout", o->timeout, "Seconds to wait for the other ranks")
      ->capture_default_str();
  sub->add_flag("--no-deploy", o->no_deploy, "Save the prepared model only");
  sub->add_flag("--json", o->json, "Print the report as JSON");
  sub->add_flag("--quiet,-q", o->quiet, "No progress bar");
  return {sub, [o] { return runQat(*o); }};
}

}  // namespace qforge::cli
