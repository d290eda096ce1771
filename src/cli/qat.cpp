// `qforge qat MODEL --backend NAME --data SOURCE --epochs E --out DIR`: quantization-aware
// training of a classifier. Prepares the model for the backend with BN kept, calibrates the
// quantizers (their starting point), trains with a checkpoint after every epoch and on
// SIGINT/SIGTERM, merges BN, then saves and deploys the model as `qforge quantize` does.
// `--resume DIR` continues an interrupted run; `--world-size/--rank/--master` spread batches
// over processes (c10d, Gloo). The work is pipelines::runQatPipeline's; this file turns flags into
// its options, catches the stop signals while it trains, and prints its report.
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>

#include "algos/algo_passes.h"
#include "cli/commands.h"
#include "cli/eval_support.h"
#include "cli/json_report.h"
#include "core/strings.h"
#include "pipelines/qat_pipeline.h"

namespace qforge::cli {

namespace {

struct QatFlags {
  pipelines::QatPipelineOptions pipeline;
  std::string data = "fashion-mnist:train";
  std::string calib;  // empty: --data
  std::string eval;
  std::string optimizer = "sgd";
  std::string schedule = "cosine";
  bool freeze_weights = false;
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

// Installs the handlers for the training loop (start) and puts the previous ones back when it
// ends (stop).
class StopSignals {
 public:
  void start() {
    previous_int_ = std::signal(SIGINT, onStopSignal);
    previous_term_ = std::signal(SIGTERM, onStopSignal);
  }
  void stop() {
    std::signal(SIGINT, previous_int_);
    std::signal(SIGTERM, previous_term_);
  }

 private:
  void (*previous_int_)(int) = SIG_DFL;
  void (*previous_term_)(int) = SIG_DFL;
};

std::string reportText(const pipelines::QatPipelineReport& r) {
  const algos::QatReport& t = r.training;
  std::ostringstream out;
  char buf[256];
  out << "model      " << r.model << "\n";
  out << "backend    " << r.backend << ", algorithm " << r.algorithm << ", loss " << r.loss << ", "
      << t.batchnorms_simulated << " Conv+BN trained with simulated folding\n";
  for (const algos::QatEpochResult& e : t.epochs) {
    const double train_top1 = e.train_top1 < 0 ? -1 : 100.0 * e.train_top1;
    std::snprintf(buf, sizeof(buf),
                  "epoch %lld  loss %.4f  train top-1 %.2f%%%s  lr %.3g  %.1f s%s\n",
                  static_cast<long long>(e.epoch + 1), e.loss, train_top1,
                  e.eval_metric >= 0
                      ? ("  eval top-1 " + std::to_string(e.eval_metric).substr(0, 5) + "%").c_str()
                      : "",
                  e.lr, e.seconds, e.bn_frozen ? "  (BN frozen)" : "");
    out << buf;
  }
  if (r.float_top1) {
    std::snprintf(buf, sizeof(buf),
                  "top-1      float %.2f%%, after calibration %.2f%%, after QAT %.2f%%\n",
                  *r.float_top1, r.ptq_top1.value_or(0), r.qat_top1.value_or(0));
    out << buf;
  }
  const double samples_per_second =
      t.train_seconds > 0 ? static_cast<double>(t.samples_run) / t.train_seconds : 0;
  std::snprintf(buf, sizeof(buf),
                "time       %lld steps in %.1f s, %.1f ms/step, %.0f samples/s, %d thread%s, %d "
                "rank%s\n",
                static_cast<long long>(t.steps_run), t.train_seconds, t.step_ms, samples_per_second,
                r.threads, r.threads == 1 ? "" : "s", r.world_size, r.world_size == 1 ? "" : "s");
  out << buf;
  if (!r.files.empty()) {
    out << "wrote     ";
    for (const std::string& f : r.files)
      out << " " << f;
    out << "\n";
  }
  return out.str();
}

int runQat(QatFlags& flags) {
  pipelines::QatPipelineOptions& o = flags.pipeline;
  o.data = flags.data;
  o.calib = flags.calib;
  o.eval = flags.eval;
  o.deploy = !flags.no_deploy;
  o.training.optimizer = algos::parseQatOptimizer(flags.optimizer);
  o.training.schedule = algos::parseQatSchedule(flags.schedule);
  o.training.train_weights = !flags.freeze_weights;
  o.training.stop = &g_stop;
  StopSignals signals;
  o.training_starts = [&signals] { signals.start(); };
  o.training_ends = [&signals] { signals.stop(); };
  const bool lead = o.distributed.rank == 0;
  StageProgress progress(lead && !flags.json && !flags.quiet && ::isatty(STDERR_FILENO));
  const pipelines::QatPipelineResult result = pipelines::runQatPipeline(o, progress.callback());
  const pipelines::QatPipelineReport& report = result.report;

  if (report.training.interrupted) {
    const int signal = g_signal.load();
    if (lead) {
      if (flags.json) {
        std::cout << jsonReportText(pipelines::qatReportJson(report));
      } else {
        std::cerr << "qforge: interrupted at step " << report.training.global_step << "; saved "
                  << report.checkpoint << "; continue with --resume "
                  << (o.out.empty() ? o.resume : o.out) << "\n";
      }
    }
    return 128 + (signal > 0 ? signal : SIGINT);
  }
  if (lead) {
    std::cout << (flags.json ? jsonReportText(pipelines::qatReportJson(report))
                             : reportText(report));
  }
  return 0;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> addQatCommand(CLI::App& app) {
  auto flags = std::make_shared<QatFlags>();
  pipelines::QatPipelineOptions* o = &flags->pipeline;
  algos::QatConfig* t = &o->training;
  CLI::App* sub = app.add_subcommand(
      "qat",
      "Quantization-aware training: prepare for a backend, calibrate, train with fake "
      "quantization (checkpoints, resume, data parallel), merge BN, save and deploy");
  sub->add_option("model", o->model_path, "ONNX model file (a classifier)")
      ->type_name(value_type::kFile)
      ->required();
  addBackendOption(sub, o->backend);
  sub->add_option("--data", flags->data, "Training data (same sources as eval --data)")
      ->type_name(value_type::kSource)
      ->capture_default_str();
  sub->add_option("--epochs", t->epochs, "Epochs")->capture_default_str();
  sub->add_option("--algo", o->algo,
                  "Fake quantizers to train: lsq, lsq+, pact, dsq, dorefa, tqt (default: the "
                  "backend's own)");
  sub->add_option("--config", o->config,
                  "Quantization config (.json, .yaml): bits, observers, overrides per node")
      ->type_name(value_type::kFile);
  sub->add_option("--loss", o->loss,
                  "Training loss: auto (cross entropy for labelled data and [batch, classes] "
                  "scores, else kl for a Softmax output, else mse), cross-entropy, or mse / kl: "
                  "distillation from the float model's output, no labels needed (kl and cross "
                  "entropy read the scores a final Softmax reads)")
      ->capture_default_str();
  sub->add_option("--distill-temperature", o->distill_temperature,
                  "Softening temperature of --loss kl")
      ->capture_default_str();
  sub->add_option_function<std::string>(
         "--distill-at",
         [o](const std::string& list) {
           std::stringstream names(list);
           for (std::string name; std::getline(names, name, ',');) {
             if (name.empty())
               throw CLI::ValidationError("--distill-at", "an empty value name in '" + list + "'");
             o->distill_at.push_back(name);
           }
         },
         "Also distil these intermediate values (names as in the ONNX file, comma-separated), "
         "with any --loss: each one's MSE against the float model over its power")
      ->type_name("VALUES");
  sub->add_option(
         "--distill-weight", o->distill_weight,
         "Weight of the distilled values' term (--distill-at, and a distilled model's other "
         "outputs) against the output's loss")
      ->capture_default_str();
  sub->add_option(
      "--passes", o->passes,
      "The prepare passes, comma-separated (default: " + passes::defaultPreparePasses(false) +
          "); a list of graph passes only gets the placement passes appended. Known: " +
          join(algos::builtinPasses().names()));
  sub->add_option("--optimizer", flags->optimizer, "sgd or adam")->capture_default_str();
  sub->add_option("--lr", t->lr, "Learning rate")->capture_default_str();
  sub->add_option("--momentum", t->momentum, "SGD momentum")->capture_default_str();
  sub->add_option("--weight-decay", t->weight_decay, "L2 weight decay on weights")
      ->capture_default_str();
  sub->add_option("--schedule", flags->schedule, "Learning-rate schedule: cosine, step, none")
      ->capture_default_str();
  sub->add_option("--step-epochs", t->step_epochs, "step schedule: epochs between decays")
      ->capture_default_str();
  sub->add_option("--step-gamma", t->step_gamma, "step schedule: factor per decay")
      ->capture_default_str();
  sub->add_option("--batch", t->batch_size, "Batch size per process")->capture_default_str();
  sub->add_option("--limit", o->limit, "Training samples per epoch (0: all)");
  sub->add_option("--max-steps", t->max_steps, "Stop after N optimizer steps (0: no limit)");
  sub->add_option("--freeze-bn-epoch", t->freeze_bn_epoch,
                  "From this epoch (0-based) BN uses and keeps its running statistics (-1: never; "
                  "default -1, or 0 with a distillation loss)")
      ->each([o](const std::string&) { o->freeze_bn_epoch_given = true; });
  sub->add_option("--augment-shift", t->augment_shift,
                  "Shift training images by up to N pixels at random (zero padded)");
  sub->add_flag("--augment-flip", t->augment_flip,
                "Flip training images horizontally at random (half of them)");
  sub->add_option("--label-smoothing", t->label_smoothing,
                  "Cross entropy against smoothed labels (PyTorch's label_smoothing): use what "
                  "the float model was trained with")
      ->capture_default_str();
  sub->add_flag("--freeze-weights", flags->freeze_weights,
                "Train only the quantizers' parameters (scales, clipping values); weights, biases "
                "and BN stay as calibrated");
  sub->add_option("--quantizer-lr-scale", t->quantizer_lr_scale,
                  "SGD: the quantizers' parameters learn at --lr times this")
      ->capture_default_str();
  sub->add_option("--calib", flags->calib, "Calibration data (default: --data)")
      ->type_name(value_type::kSource);
  sub->add_option("--calib-batches", o->calib_batches, "Calibration batches")
      ->capture_default_str();
  sub->add_option("--calib-batch", o->calib_batch, "Calibration batch size")->capture_default_str();
  sub->add_option("--eval", flags->eval,
                  "Evaluate float, calibrated and trained models on this data")
      ->type_name(value_type::kSource);
  sub->add_option("--eval-limit", o->eval_limit, "Evaluate only the first N samples");
  sub->add_option("--eval-batch", o->eval_batch, "Evaluation batch size")->capture_default_str();
  sub->add_option("--seed", t->seed, "Seed for the data order")->capture_default_str();
  sub->add_option("--out", o->out, "Output directory (checkpoint, prepared model, deploy files)")
      ->type_name(value_type::kDir);
  sub->add_option("--resume", o->resume,
                  "Continue the run whose --out directory this is, from its checkpoint")
      ->type_name(value_type::kDir);
  sub->add_option("--csv", o->csv, "Write per-epoch metrics to this CSV file")
      ->type_name(value_type::kFile);
  addDistributedOptions(sub, o->distributed, "training");
  sub->add_flag("--no-deploy", flags->no_deploy, "Save the prepared model only");
  sub->add_flag("--json", flags->json, "Print the report as JSON");
  sub->add_flag("--quiet,-q", flags->quiet, "No progress bar");
  return {sub, [flags] { return runQat(*flags); }};
}

}  // namespace qforge::cli
