#include "pipelines/qat_pipeline.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <set>

#include "algos/algo_passes.h"
#include "algos/calibrate.h"
#include "algos/qat.h"
#include "algos/qat_distillation.h"
#include "backends/backend_config.h"
#include "core/error.h"
#include "core/files.h"
#include "core/output_dir.h"
#include "core/strings.h"
#include "deploy/deploy.h"
#include "ir/onnx_import.h"
#include "passes/activation_values.h"
#include "passes/prepared_io.h"
#include "pipelines/scoring.h"

namespace qforge::pipelines {

namespace {

Graph loadFloatModel(const QatPipelineOptions& o) {
  if (o.graph) return copyGraph(*o.graph);
  require(!o.model_path.empty(), "no model given: name an ONNX file or pass a graph");
  return importOnnxFile(o.model_path);
}

// Calls `training_ends` when training ends, however it ends.
class TrainingScope {
 public:
  explicit TrainingScope(const QatPipelineOptions& o) : ends_(o.training_ends) {
    if (o.training_starts) o.training_starts();
  }
  ~TrainingScope() {
    if (ends_) ends_();
  }
  TrainingScope(const TrainingScope&) = delete;
  TrainingScope& operator=(const TrainingScope&) = delete;

 private:
  const std::function<void()>& ends_;
};

// One run's state between the stages.
struct QatRun {
  QatRun(const QatPipelineOptions& options, const ProgressCallback& on_progress)
      : o(options), progress(on_progress) {}

  const QatPipelineOptions& o;
  const ProgressCallback& progress;
  Clock::time_point start = Clock::now();
  std::string out;
  std::string resume_checkpoint;  // "" : a fresh run
  algos::QatConfig config;
  std::unique_ptr<algos::ProcessGroup> own_group;
  algos::ProcessGroup* group = nullptr;
  int rank = 0, world_size = 1;
  bool lead = true;                        // rank 0 evaluates and writes
  std::optional<OutputDirectory> out_dir;  // rank 0's, locked from the start
  backends::BackendConfig backend;
  passes::PrepareOptions prepare_options;
  std::optional<Graph> float_graph;
  std::optional<data::BatchLoader> eval_loader;
  std::shared_ptr<data::Dataset> train_data;
  // Set by chooseLoss: whether the loss distils the float model's output, the value of the
  // prepared model it reads ("" : the first output), and the term of the other outputs and the
  // intermediate values it distils.
  bool distilling = false;
  std::string loss_value;
  std::vector<std::string> intermediate_values;
  algos::QatValuesTerm intermediate_term;
  QatPipelineResult result;
};

// The checks and settings that come before any work.
void settle(QatRun& run) {
  const QatPipelineOptions& o = run.o;
  run.out = o.out.empty() ? o.resume : o.out;
  require(!run.out.empty(), "give --out DIR (or --resume DIR to continue a run there)");
  require(o.calib_batches > 0 && o.calib_batch > 0,
          "--calib-batches and --calib-batch must be at least 1");
  require(o.loss == "auto" || o.loss == "cross-entropy" || o.loss == "mse" || o.loss == "kl",
          "--loss: unknown loss '" + o.loss + "'; known: auto, cross-entropy, mse, kl");
  require(o.distill_weight >= 0,
          "--distill-weight must be at least 0; got " + c10::str(o.distill_weight));
  const double smoothing = o.training.label_smoothing;
  require(smoothing >= 0 && smoothing < 1,
          "--label-smoothing must be in [0, 1); got " + c10::str(smoothing));
  run.config = o.training;
  run.config.checkpoint_path = (std::filesystem::path(run.out) / "checkpoint.pt").string();
  if (!o.resume.empty()) {
    run.resume_checkpoint = (std::filesystem::path(o.resume) / "checkpoint.pt").string();
    require(std::filesystem::exists(run.resume_checkpoint),
            "--resume " + o.resume +
                ": no checkpoint.pt there; give the --out directory of an "
                "earlier qforge qat run");
  }
  run.group = o.group;
  if (!run.group && (o.distributed.world_size != 1 || o.distributed.rank != 0)) {
    run.own_group = std::make_unique<algos::ProcessGroup>(o.distributed);
    run.group = run.own_group.get();
  }
  run.rank = run.group ? run.group->rank() : o.distributed.rank;
  run.world_size = run.group ? run.group->worldSize() : o.distributed.world_size;
  run.lead = run.rank == 0;
  // The checkpoint is written in place during training (whole each time, for --resume); every
  // other file goes into the staging directory and appears with the others at the end.
  if (run.lead) {
    run.out_dir.emplace(
        run.out, OutputDirectory::kModelRole,
        std::set<std::string>{OutputDirectory::kModelRole, OutputDirectory::kDeployRole});
  }
  run.backend = backends::loadBackend(o.backend);
  run.prepare_options.passes = o.passes;
  run.prepare_options.pass_registry = &algos::builtinPasses();
  try {
    passes::PrepareOptions as_trained = run.prepare_options;
    as_trained.fold_batchnorm = false;    // what prepareForQat runs
    passes::preparePipeline(as_trained);  // a bad list is refused before any work
  } catch (const Error& e) {
    throw e.within("--passes");
  }
  if (!o.config.empty()) run.prepare_options.config = passes::loadQuantConfig(o.config);
  applyQatAlgorithm(o.algo, run.prepare_options.config);
}

// A model the backend or its format cannot take (4-bit activations for TensorRT, say) is refused
// now, not after training: prepared as PTQ prepares it and calibrated on one batch, it is deployed
// once into a scratch directory.
void checkDeployable(QatRun& run, const std::shared_ptr<data::Dataset>& calib_data) {
  if (!run.o.deploy || !run.lead) return;
  auto probe = passes::prepare(loadFloatModel(run.o), run.backend, run.prepare_options);
  data::BatchLoader one_batch(
      calib_data, loaderOptionsFor(*run.float_graph, run.o.calib_batch, run.o.calib_batch));
  algos::calibrate(*probe, one_batch, 1);
  TempDir dry_run("qat-deploy-check");
  deploy::writeDeployFiles(*probe, dry_run.path());
}

// Every intermediate value to distil is in the float model and still in the prepared one (which
// folds constants and may rename what it rewrites), checked before calibrating.
void requireDistillableValues(const std::vector<std::string>& values, const Graph& float_graph,
                              const Graph& prepared) {
  for (const std::string& value : values) {
    require(float_graph.findValue(value) != nullptr,
            "--distill-at: the model has no value '" + value +
                "'; name values as the ONNX file does (`qforge inspect MODEL --dump` shows them)");
    require(prepared.findValue(value) != nullptr,
            "--distill-at: value '" + value +
                "' is folded or renamed in the prepared model; name another value, such as the "
                "output of a Conv, Add or activation after it");
  }
}

// Prepared with simulated BN folding and calibrated on the first batches of the calibration data
// in order, the same on every rank; then float and calibrated top-1 (rank 0, fresh runs).
void prepareAndCalibrate(QatRun& run) {
  const QatPipelineOptions& o = run.o;
  run.float_graph.emplace(loadFloatModel(o));
  const Graph& float_graph = *run.float_graph;
  auto calib_data = openSource(o.calib.empty() ? o.data : o.calib, float_graph);
  checkDeployable(run, calib_data);
  run.result.model = algos::prepareForQat(loadFloatModel(o), run.backend, run.prepare_options);
  passes::PreparedModel& model = *run.result.model;
  requireDistillableValues(o.distill_at, float_graph, model.graph());
  data::BatchLoader calib_loader(
      calib_data, loaderOptionsFor(float_graph, o.calib_batch, o.calib_batch * o.calib_batches));
  const algos::CalibrationResult calibration =
      algos::calibrate(model, calib_loader, o.calib_batches);
  QatPipelineReport& report = run.result.report;
  report.model = o.model_path;
  report.backend = run.backend.name;
  report.algorithm = o.algo.empty() ? "backend default" : o.algo;
  report.calibration = {calib_data->describe(), calibration.batches, calibration.samples,
                        o.calib_batch,          std::nullopt,        calibration.seconds};
  if (o.eval.empty() || !run.lead) return;
  auto eval_data = openSource(o.eval, float_graph);
  run.eval_loader.emplace(eval_data, loaderOptionsFor(float_graph, o.eval_batch, o.eval_limit));
  report.eval_data = eval_data->describe();
  if (!run.resume_checkpoint.empty()) return;
  Executor float_executor(float_graph);
  report.float_top1 = top1Percent(*run.eval_loader, forwardOf(float_executor, float_graph));
  report.ptq_top1 = top1Percent(*run.eval_loader, forwardOf(model.executor(), model.graph()));
}

// The status line of a training step.
ProgressEvent trainingEvent(const algos::QatStepInfo& s) {
  ProgressEvent e;
  e.stage = "train";
  e.unit = "step";
  e.total = s.total_steps - (s.global_step - s.steps_run);
  e.done = s.steps_run;
  e.seconds = s.seconds;
  char note[160];
  std::snprintf(note, sizeof(note),
                "epoch %lld/%lld  step %lld/%lld  loss %.4f  train top-1 %.1f%%  lr %.3g",
                static_cast<long long>(s.epoch + 1), static_cast<long long>(s.epochs),
                static_cast<long long>(s.step_in_epoch), static_cast<long long>(s.steps_per_epoch),
                s.loss, 100.0 * s.train_top1, s.lr);
  e.note = note;
  return e;
}

void train(QatRun& run, algos::QatTrainer& trainer) {
  const QatPipelineOptions& o = run.o;
  const ProgressCallback& progress = run.progress;
  const auto pause = [&progress] {
    if (!progress) return;
    ProgressEvent e;
    e.stage = "train";
    e.last = true;
    progress(e);
  };
  const auto on_step = [&progress](const algos::QatStepInfo& s) {
    if (progress) progress(trainingEvent(s));
  };
  const auto evaluate = [&](algos::QatTrainer& t) -> double {
    if (!run.eval_loader) return -1;
    pause();
    return top1Percent(*run.eval_loader, [&t](const at::Tensor& x) { return t.infer(x); });
  };
  data::LoaderOptions train_options =
      loaderOptionsFor(*run.float_graph, run.config.batch_size, o.limit);
  {
    TrainingScope scope(o);
    run.result.report.training = trainer.train(run.train_data, train_options, on_step, evaluate);
  }
  pause();
}

// The float model writes class scores [batch, classes] (as far as its declared output says).
bool writesClassScores(const Graph& g) {
  const Value* out = g.outputs().front();
  return !out->type.shape.has_value() || out->type.shape->size() == 2;
}

// Whether the model's first output is a Softmax or LogSoftmax: then the losses that compare
// class distributions read the scores before it.
bool endsInSoftmax(const Graph& g) {
  return algos::distillationTarget(g, algos::DistillationKind::Kl).before_softmax;
}

// The values the intermediate term distils, and how the report names them: when the output is
// distilled, every other float output (a distilled model keeps all its outputs), then
// --distill-at's values.
void termValues(const QatRun& run, bool output_distilled, std::vector<std::string>& values,
                std::vector<std::string>& shown) {
  const std::vector<Value*>& outputs = run.float_graph->outputs();
  for (size_t i = 1; output_distilled && i < outputs.size(); ++i) {
    const DType dtype = outputs[i]->type.dtype;
    if (dtype != DType::Undefined && !passes::isFloatType(dtype)) continue;
    values.push_back(outputs[i]->name());
    shown.push_back("output " + outputs[i]->name());
  }
  for (const std::string& value : run.o.distill_at) {
    if (std::find(values.begin(), values.end(), value) != values.end()) continue;
    values.push_back(value);
    shown.push_back(value);
  }
}

// The loss --loss names; "auto" picks cross entropy only where it can work, and without labels
// KL for a Softmax output (its scores), else MSE. Empty: the trainer's default (cross entropy
// with the config's label smoothing). Sets run.intermediate_term: the other float outputs when the
// output is distilled, and --distill-at's values.
algos::QatLoss chooseLoss(QatRun& run) {
  const QatPipelineOptions& o = run.o;
  algos::QatLoss output_loss;
  std::optional<algos::DistillationKind> kind;
  const bool softmax = endsInSoftmax(*run.float_graph);
  std::string loss = o.custom_loss ? "custom" : o.loss;
  if (loss == "auto") {
    loss = run.train_data->hasLabels() && writesClassScores(*run.float_graph) ? "cross-entropy"
           : softmax                                                          ? "kl"
                                                                              : "mse";
  }
  if (loss == "custom") {
    run.result.report.loss = o.custom_loss_name;
    output_loss = o.custom_loss;
  } else if (loss == "cross-entropy") {
    if (softmax)
      run.loss_value =
          algos::distillationTarget(run.result.model->graph(), algos::DistillationKind::Kl).value;
    run.result.report.loss =
        softmax ? "cross entropy, on the scores the output's Softmax reads" : "cross entropy";
  } else {
    kind = algos::parseDistillationKind(loss);  // settle() checked
    run.distilling = true;
    run.loss_value = algos::distillationTarget(run.result.model->graph(), *kind).value;
    run.result.report.loss = std::string("distillation (") + algos::toString(*kind) +
                             (*kind == algos::DistillationKind::Kl && softmax
                                  ? ", on the scores the output's Softmax reads)"
                                  : ")");
  }
  std::vector<std::string> values, shown;
  termValues(run, kind.has_value(), values, shown);
  if (!kind && values.empty()) return output_loss;
  algos::DistillationLosses losses = algos::distillationLosses(
      *run.float_graph, kind, o.distill_temperature, values, o.distill_weight);
  if (!values.empty()) {
    run.intermediate_values = values;
    run.intermediate_term = std::move(losses.values);
    run.result.report.loss +=
        " + " + c10::str(o.distill_weight) + " x relative MSE of " + join(shown);
  }
  return kind ? std::move(losses.output) : output_loss;
}

// Distillation fine-tunes a trained model on a few unlabelled batches: BN statistics of such
// small batches are not the population's (PaddleOCR rec, 8 text lines a batch: a KL of 1.96 on
// the first batch instead of 0.52), so BN keeps its running statistics from the start unless
// the caller chose an epoch.
void settleBatchNorm(QatRun& run) {
  if (run.distilling && !run.o.freeze_bn_epoch_given && run.config.freeze_bn_epoch < 0)
    run.config.freeze_bn_epoch = 0;
}

// After training: BN merged, top-1 of the trained model, and on rank 0 the deploy files, the
// prepared model and report.json.
void finish(QatRun& run, algos::QatTrainer& trainer) {
  const QatPipelineOptions& o = run.o;
  QatPipelineReport& report = run.result.report;
  passes::PreparedModel& model = *run.result.model;
  report.batchnorms_merged = trainer.finish();
  if (run.eval_loader)
    report.qat_top1 = top1Percent(*run.eval_loader, forwardOf(model.executor(), model.graph()));
  if (!run.lead) return;
  OutputDirectory& out = *run.out_dir;
  std::vector<std::string> written;
  if (o.deploy) {
    const deploy::DeployResult deployed = deploy::writeDeployFiles(model, out.staging());
    for (const std::string& f : deployed.files) {
      out.setRole(std::filesystem::path(f).filename().string(), OutputDirectory::kDeployRole);
      written.push_back(out.finalPath(f));
    }
    report.deploy_notes = deployed.notes;
  }
  for (const std::string& f :
       passes::savePreparedModel(model, backends::resolveBackendDocument(o.backend), out.staging()))
    written.push_back(out.finalPath(f));
  out.keepWrittenInPlace(std::filesystem::path(run.config.checkpoint_path).filename().string(),
                         OutputDirectory::kModelRole);
  written.push_back(run.config.checkpoint_path);
  if (!o.csv.empty()) written.push_back(o.csv);
  const std::string report_path = (std::filesystem::path(out.staging()) / "report.json").string();
  written.push_back(out.finalPath(report_path));
  report.files = written;
  report.total_seconds = secondsSince(run.start);
  writeFileAtomically(report_path, qatReportJson(report).dump(2) + "\n");
  out.commit();
}

}  // namespace

QatPipelineResult runQatPipeline(const QatPipelineOptions& o, const ProgressCallback& progress) {
  QatRun run(o, progress);
  settle(run);
  prepareAndCalibrate(run);
  run.train_data = openSource(o.data, *run.float_graph);
  algos::QatLoss loss = chooseLoss(run);
  settleBatchNorm(run);
  algos::QatTrainer trainer(*run.result.model, run.config, std::move(loss), run.group);
  if (!run.loss_value.empty()) trainer.readLossFrom(run.loss_value);
  if (run.intermediate_term) trainer.addLossTerm(run.intermediate_values, run.intermediate_term);
  if (!run.resume_checkpoint.empty()) trainer.resume(run.resume_checkpoint);
  train(run, trainer);

  QatPipelineReport& report = run.result.report;
  report.batch_size = run.config.batch_size;
  report.world_size = run.world_size;
  report.rank = run.rank;
  report.threads = at::get_num_threads();
  report.checkpoint = run.config.checkpoint_path;
  if (!o.csv.empty() && run.lead) writeFileAtomically(o.csv, qatEpochsCsv(report.training.epochs));
  if (report.training.interrupted) return std::move(run.result);

  finish(run, trainer);
  if (run.group) run.group->barrier();
  return std::move(run.result);
}

void applyQatAlgorithm(const std::string& algo, passes::QuantConfig& config) {
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

}  // namespace qforge::pipelines
