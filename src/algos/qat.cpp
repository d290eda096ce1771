#include "algos/qat.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include "algos/adam.h"
#include "algos/calibrate.h"
#include "algos/distributed.h"
#include "algos/qat_checkpoint.h"
#include "algos/qat_data_parallel.h"
#include "algos/qat_schedule.h"
#include "algos/sgd.h"
#include "core/error.h"
#include "passes/fake_quantize_node.h"
#include "passes/qat_batchnorm.h"

namespace qforge::algos {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Epoch e reads the data shuffled with this seed, wherever a run was interrupted.
uint64_t epochShuffleSeed(uint64_t run_seed, int64_t epoch) {
  return run_seed * 1000003ULL + static_cast<uint64_t>(epoch);
}

}  // namespace

std::unique_ptr<passes::PreparedModel> prepareForQat(Graph graph,
                                                     const backends::BackendConfig& backend,
                                                     passes::PrepareOptions options) {
  options.fold_batchnorm = false;
  auto model = passes::prepare(std::move(graph), backend, options);
  passes::simulateBatchNormFolding(*model);
  return model;
}

at::Tensor crossEntropyLoss(const at::Tensor& output, const data::Batch& batch,
                            double label_smoothing) {
  requireLabelSmoothing(label_smoothing);
  require(batch.labels.defined(),
          "the default QAT loss (cross entropy) needs labelled data; the training data has no "
          "labels: give a loss function of your own");
  require(output.dim() == 2,
          "the default QAT loss (cross entropy) needs class scores [batch, "
          "classes]; the model output has shape " +
              c10::str(output.sizes()));
  return at::cross_entropy_loss(output, batch.labels, /*weight=*/{}, at::Reduction::Mean,
                                /*ignore_index=*/-100, label_smoothing);
}

QatTrainer::QatTrainer(passes::PreparedModel& model, QatConfig config, QatLoss loss,
                       ProcessGroup* group)
    : model_(model), config_(std::move(config)), loss_(std::move(loss)), group_(group) {
  validateQatConfig(config_, static_cast<bool>(loss_));
  if (!loss_) {
    const double smoothing = config_.label_smoothing;
    loss_ = [smoothing](const at::Tensor& output, const data::Batch& batch) {
      return crossEntropyLoss(output, batch, smoothing);
    };
  }
  requireCalibrated(model_, "quantization-aware training");
  // A BN the backend folds must have been rewritten before calibration: its weight quantizer
  // must have seen the folded weight.
  const std::vector<const Node*> unfolded = passes::batchNormsToSimulate(model_);
  if (!unfolded.empty()) {
    throw Error("BatchNormalization '" + unfolded.front()->name() + "' after '" +
                unfolded.front()->input(0)->producer()->name() +
                "' is still unfolded although the backend folds it: prepare the model with "
                "algos::prepareForQat (simulated BN folding) before calibrating it");
  }
  batchnorms_simulated_ = passes::countSimulatedBatchNorms(model_.graph());
  params_ = collectQatParameters(model_, config_.train_weights);
  model_.setMode(quant::FakeQuantMode::Quantization);

  bn_state_ = std::make_shared<passes::BatchNormTraining>();
  registry_ = std::make_unique<OpRegistry>(passes::registryWithFakeQuantize(
      [this](const std::string& name) { return model_.quantizer(name); }));
  passes::registerTrainingBatchNorm(*registry_, bn_state_);
  executor_ = std::make_unique<Executor>(model_.graph(), ExecutorOptions{true}, *registry_);

  std::vector<at::Tensor> shared = params_.tensors;
  for (const at::Tensor& t : batchNormStatistics())
    shared.push_back(t);
  broadcastFromRankZero(group_, shared);
  buildOptimizer();
}

QatTrainer::~QatTrainer() = default;

void QatTrainer::buildOptimizer() {
  if (config_.optimizer == QatOptimizer::Sgd) {
    optimizer_ = std::make_unique<Sgd>(params_.tensors, config_.lr, config_.momentum);
  } else {
    optimizer_ = std::make_unique<Adam>(params_.tensors, config_.lr);
  }
}

std::vector<at::Tensor> QatTrainer::batchNormStatistics() const {
  std::vector<at::Tensor> stats;
  for (const std::string& name : params_.bn_statistics)
    stats.push_back(model_.graph().value(name)->initializer());
  return stats;
}

void QatTrainer::saveCheckpoint() {
  if (config_.checkpoint_path.empty() || (group_ && group_->rank() != 0)) return;
  QatCheckpoint c;
  c.settings = qatSettingsJson(model_, params_, config_, group_ ? group_->worldSize() : 1);
  c.epoch = epoch_;
  c.step_in_epoch = step_in_epoch_;
  c.global_step = global_step_;
  c.epoch_sums =
      at::tensor(std::vector<double>(epoch_sums_.begin(), epoch_sums_.end()), at::kDouble);
  for (size_t i = 0; i < params_.initializer_count; ++i)
    c.initializers[params_.names[i]] = params_.tensors[i];
  for (const std::string& name : params_.bn_statistics)
    c.initializers[name] = model_.graph().value(name)->initializer();
  for (quant::FakeQuantizer* q : model_.quantizers())
    c.quantizers[q->name()] = q->state();
  c.optimizer = optimizer_->state();
  c.rng_state = at::detail::getDefaultCPUGenerator().get_state();
  c.history = qatHistoryJson(history_);
  saveQatCheckpoint(c, config_.checkpoint_path);
}

void QatTrainer::readLossFrom(const std::string& value) {
  require(model_.graph().findValue(value) != nullptr,
          "the QAT loss is to read value '" + value + "', which the model does not have");
  loss_value_ = value;
}

void QatTrainer::addLossTerm(std::vector<std::string> values, QatValuesTerm term) {
  require(!values.empty() && term, "a QAT loss term needs values to read and a function");
  for (const std::string& value : values) {
    require(model_.graph().findValue(value) != nullptr,
            "a QAT loss term is to read value '" + value + "', which the model does not have");
  }
  term_values_ = std::move(values);
  term_ = std::move(term);
}

void QatTrainer::resume(const std::string& checkpoint_path) {
  const QatCheckpoint c = loadQatCheckpoint(checkpoint_path);
  // The state comes from the file: libtorch refusing a piece of it (an RNG state of the wrong
  // size, a tensor of the wrong type) is a damaged checkpoint, said in one line rather than an
  // internal error (issue #22).
  try {
    requireSameQatSettings(
        c.settings, qatSettingsJson(model_, params_, config_, group_ ? group_->worldSize() : 1),
        checkpoint_path);
    at::NoGradGuard no_grad;
    restoreQatModelState(c, model_, checkpoint_path);
    // Loading state may have replaced the quantizers' parameter tensors: collect them again.
    refreshQuantizerParameters(model_, params_);
    buildOptimizer();
    optimizer_->loadState(c.optimizer);
    if (c.rng_state.numel() > 0) {
      at::Generator generator = at::detail::getDefaultCPUGenerator();
      generator.set_state(c.rng_state);
    }
    require(c.epoch >= 0 && c.step_in_epoch >= 0 && c.global_step >= 0,
            "checkpoint " + checkpoint_path + ": negative epoch or step");
    epoch_ = c.epoch;
    step_in_epoch_ = c.step_in_epoch;
    global_step_ = c.global_step;
    require(c.epoch_sums.numel() == static_cast<int64_t>(epoch_sums_.size()),
            "checkpoint " + checkpoint_path + ": epoch sums have the wrong size");
    for (size_t i = 0; i < epoch_sums_.size(); ++i)
      epoch_sums_[i] = c.epoch_sums[i].item<double>();
    try {
      history_ = parseQatHistory(c.history);
    } catch (const Error& e) {
      throw e.within("checkpoint " + checkpoint_path);
    }
    resumed_ = true;
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    const std::string what = e.what();
    throw Error("checkpoint " + checkpoint_path + " does not fit this run (" +
                what.substr(0, what.find('\n')) +
                "); it was not written by qforge qat, or is damaged");
  }
}

struct QatTrainer::Run {
  Run(std::shared_ptr<data::Dataset> data, data::LoaderOptions options, const QatProgress& on_step,
      const std::function<double(QatTrainer&)>& evaluate_model)
      : dataset(std::move(data)),
        loader(std::move(options)),
        progress(on_step),
        evaluate(evaluate_model) {}

  std::shared_ptr<data::Dataset> dataset;
  data::LoaderOptions loader;  // batch size: the global batch
  const QatProgress& progress;
  const std::function<double(QatTrainer&)>& evaluate;
  int world = 1, rank = 0;
  std::string input, output;
  QatReport report;
  Clock::time_point start = Clock::now();
  Clock::time_point timed_start{};  // after the fifth step
  int64_t timed_steps = 0;
  double eval_seconds = 0;
  bool stop_requested = false;
  int64_t steps_per_epoch = -1, total_steps = 0;
};

QatReport QatTrainer::train(std::shared_ptr<data::Dataset> dataset, data::LoaderOptions loader,
                            const QatProgress& progress,
                            const std::function<double(QatTrainer&)>& evaluate) {
  require(!finished_, "this QAT trainer has finished (BN merged); create a new one to train");
  Run run(std::move(dataset), std::move(loader), progress, evaluate);
  run.world = group_ ? group_->worldSize() : 1;
  run.rank = group_ ? group_->rank() : 0;
  run.loader.batch_size = config_.batch_size * run.world;
  run.input = dataInput(model_.graph()).name();
  run.output = loss_value_.empty() ? model_.graph().outputs().front()->name() : loss_value_;
  QatReport& report = run.report;
  report.resumed = resumed_;
  report.resumed_at_step = resumed_ ? global_step_ : 0;
  report.batchnorms_simulated = batchnorms_simulated_;
  report.parameters = params_.numel();
  report.quantizer_parameters = params_.quantizerNumel();

  while (epoch_ < config_.epochs && !run.stop_requested) {
    if (!trainEpoch(run)) {
      // Interrupted or out of steps mid-epoch: the checkpoint keeps the position in the epoch.
      report.interrupted = run.stop_requested;
      break;
    }
  }
  if (report.interrupted || epoch_ < config_.epochs) saveCheckpoint();
  report.epochs = history_;
  report.global_step = global_step_;
  report.train_seconds = secondsSince(run.start) - run.eval_seconds;
  // The evaluations inside the timed span are not training.
  report.step_ms = run.timed_steps > 0
                       ? 1000.0 * (secondsSince(run.timed_start) - run.eval_seconds) /
                             static_cast<double>(run.timed_steps)
                       : 0;
  return report;
}

bool QatTrainer::trainEpoch(Run& run) {
  run.loader.shuffle_seed = epochShuffleSeed(config_.seed, epoch_);
  data::BatchLoader batches(run.dataset, run.loader);
  const int64_t global_batch = run.loader.batch_size;
  // Every step takes a whole global batch; the remainder of an epoch is left out.
  run.steps_per_epoch = batches.size() / global_batch;
  require(run.steps_per_epoch > 0,
          "the training data has " + std::to_string(batches.size()) +
              " samples, fewer than one batch of " + std::to_string(global_batch) +
              (run.world > 1 ? " (" + std::to_string(config_.batch_size) + " per rank x " +
                                   std::to_string(run.world) + " ranks)"
                             : std::string()) +
              "; use a smaller batch or more data");
  run.total_steps = run.steps_per_epoch * config_.epochs;
  for (int64_t skipped = 0; skipped < step_in_epoch_; ++skipped)
    batches.next();
  bn_state_->use_batch_statistics = qatBatchNormTrains(config_, epoch_);

  // Sums carried over from before an interruption (zero at an epoch's start).
  const auto epoch_start = Clock::now();
  const double seconds_before = epoch_sums_[4];
  double lr =
      qatLearningRate(config_, std::max<int64_t>(global_step_ - 1, 0), epoch_, run.total_steps);
  while (step_in_epoch_ < run.steps_per_epoch) {
    if (config_.max_steps > 0 && global_step_ >= config_.max_steps) break;
    std::optional<data::Batch> global = batches.next();
    if (!global) break;
    lr = qatLearningRate(config_, global_step_, epoch_, run.total_steps);
    const double loss = trainStep(run, std::move(*global), lr);
    epoch_sums_[3] += 1;
    epoch_sums_[4] = seconds_before + secondsSince(epoch_start);
    ++step_in_epoch_;
    ++global_step_;
    ++run.report.steps_run;
    run.report.samples_run += config_.batch_size;
    if (run.report.steps_run == 5) run.timed_start = Clock::now();
    if (run.report.steps_run > 5) ++run.timed_steps;
    reportStep(run, loss, lr);
    if (anyRankStops(group_, config_.stop && config_.stop->load())) {
      run.stop_requested = true;
      break;
    }
  }
  if (run.stop_requested || step_in_epoch_ < run.steps_per_epoch) return false;
  closeEpoch(run, lr);
  return true;
}

double QatTrainer::trainStep(Run& run, data::Batch global, double lr) {
  if (config_.augment_shift > 0 || config_.augment_flip) {
    global.inputs = augmentImages(global.inputs, config_.augment_shift, config_.augment_flip,
                                  augmentationSeed(config_.seed, global_step_));
  }
  const data::Batch batch = rankShard(global, run.rank, config_.batch_size);
  std::vector<std::string> wanted{run.output};
  wanted.insert(wanted.end(), term_values_.begin(), term_values_.end());
  std::unordered_map<std::string, at::Tensor> values =
      executor_->run({{run.input, batch.inputs}}, wanted);
  const at::Tensor out = values.at(run.output);
  at::Tensor loss = loss_(out, batch);
  if (term_) {
    std::vector<at::Tensor> read;
    for (const std::string& value : term_values_)
      read.push_back(values.at(value));
    values.clear();  // the graph's other intermediates are not needed past here
    loss = loss + term_(read, batch);
  }
  require(loss.numel() == 1,
          "the QAT loss must be a single value, got shape " + c10::str(loss.sizes()));
  loss.backward();
  averageGradients(group_, params_);
  {
    at::NoGradGuard no_grad;
    adjustGradients(params_, config_.quantizer_lr_scale, config_.weight_decay);
    optimizer_->setLearningRate(lr);
    optimizer_->step();
  }

  const double loss_value = loss.item<double>();
  require(std::isfinite(loss_value), "the training loss became " + std::to_string(loss_value) +
                                         " at step " + std::to_string(global_step_ + 1) +
                                         " (epoch " + std::to_string(epoch_ + 1) + "); lower --lr");
  epoch_sums_[0] += loss_value;
  if (batch.labels.defined() && out.dim() == 2) {
    epoch_sums_[1] +=
        static_cast<double>((out.detach().argmax(1) == batch.labels).sum().item<int64_t>());
    epoch_sums_[2] += static_cast<double>(batch.labels.size(0));
  }
  return loss_value;
}

void QatTrainer::reportStep(Run& run, double loss, double lr) const {
  if (!run.progress) return;
  QatStepInfo info;
  info.epoch = epoch_;
  info.epochs = config_.epochs;
  info.step_in_epoch = step_in_epoch_;
  info.steps_per_epoch = run.steps_per_epoch;
  info.global_step = global_step_;
  info.total_steps =
      config_.max_steps > 0 ? std::min(run.total_steps, config_.max_steps) : run.total_steps;
  info.loss = loss;
  info.train_top1 = epoch_sums_[2] > 0 ? epoch_sums_[1] / epoch_sums_[2] : -1;
  info.lr = lr;
  info.seconds = secondsSince(run.start) - run.eval_seconds;
  info.steps_run = run.report.steps_run;
  run.progress(info);
}

void QatTrainer::closeEpoch(Run& run, double lr) {
  averageBatchNormStatistics(group_, batchNormStatistics());
  QatEpochResult result;
  result.epoch = epoch_;
  const at::Tensor totals = sumOverRanks(
      group_,
      at::tensor({epoch_sums_[0], epoch_sums_[1], epoch_sums_[2], epoch_sums_[3]}, at::kDouble));
  const double all_steps = totals[3].item<double>();
  result.loss = all_steps > 0 ? totals[0].item<double>() / all_steps : 0;
  result.train_top1 =
      totals[2].item<double>() > 0 ? totals[1].item<double>() / totals[2].item<double>() : -1;
  result.lr = lr;
  result.steps = static_cast<int64_t>(epoch_sums_[3]);
  result.bn_frozen = !bn_state_->use_batch_statistics;
  result.seconds = epoch_sums_[4];
  if (run.evaluate && run.rank == 0) {
    const auto eval_start = Clock::now();
    result.eval_metric = run.evaluate(*this);
    run.eval_seconds += secondsSince(eval_start);
  }
  history_.push_back(result);
  ++epoch_;
  step_in_epoch_ = 0;
  epoch_sums_.fill(0);
  saveCheckpoint();
}

at::Tensor QatTrainer::infer(const at::Tensor& inputs) {
  const std::string input = dataInput(model_.graph()).name();
  const std::string output = model_.graph().outputs().front()->name();
  if (finished_) return model_.executor().run({{input, inputs}}, {output}).at(output);
  // BN on running statistics and no autograd for this call only, however it ends.
  struct InferenceMode {
    passes::BatchNormTraining& bn;
    Executor& executor;
    const bool batch_statistics = bn.use_batch_statistics;
    InferenceMode(passes::BatchNormTraining& b, Executor& e) : bn(b), executor(e) {
      bn.use_batch_statistics = false;
      executor.setGradEnabled(false);
    }
    ~InferenceMode() {
      bn.use_batch_statistics = batch_statistics;
      executor.setGradEnabled(true);
    }
  } mode(*bn_state_, *executor_);
  return executor_->run({{input, inputs}}, {output}).at(output);
}

int QatTrainer::finish() {
  if (finished_) return 0;
  averageBatchNormStatistics(group_, batchNormStatistics());
  {
    at::NoGradGuard no_grad;
    for (at::Tensor& p : params_.tensors)
      p.requires_grad_(false);
  }
  executor_.reset();
  const int merged = passes::mergeSimulatedBatchNorm(model_);
  finished_ = true;
  return merged;
}

}  // namespace qforge::algos
