#include "algos/qat.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <functional>
#include <set>

#include "algos/adam.h"
#include "algos/calibrate.h"
#include "algos/distributed.h"
#include "algos/qat_checkpoint.h"
#include "algos/sgd.h"
#include "core/error.h"
#include "core/strings.h"
#include "ir/node_attributes.h"
#include "passes/fake_quantize_node.h"
#include "passes/qat_batchnorm.h"

namespace qforge::algos {

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Normalisation ops whose scale and bias (slots 1 and 2) train.
bool isNormalization(const Node& node) {
  return isDefaultDomain(node) &&
         (node.opType() == "BatchNormalization" || node.opType() == "LayerNormalization" ||
          node.opType() == "InstanceNormalization");
}

void requireLabelSmoothing(double label_smoothing) {
  require(label_smoothing >= 0 && label_smoothing < 1,
          "label smoothing must be in [0, 1); got " + c10::str(label_smoothing));
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

QatOptimizer parseQatOptimizer(const std::string& name) {
  if (name == "sgd") return QatOptimizer::Sgd;
  if (name == "adam") return QatOptimizer::Adam;
  throw Error("unknown optimizer '" + name + "'; known: sgd, adam");
}

QatSchedule parseQatSchedule(const std::string& name) {
  if (name == "none" || name == "constant") return QatSchedule::Constant;
  if (name == "cosine") return QatSchedule::Cosine;
  if (name == "step") return QatSchedule::Step;
  throw Error("unknown learning-rate schedule '" + name + "'; known: cosine, step, none");
}

at::Tensor augmentImages(const at::Tensor& images, int64_t shift, bool flip, uint64_t seed) {
  require(images.dim() == 4,
          "augmentation shifts and flips images [N, C, H, W]; the batch has "
          "shape " +
              c10::str(images.sizes()));
  require(shift >= 0, "the augmentation shift must not be negative");
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const int64_t n = images.size(0), h = images.size(2), w = images.size(3);
  const at::Tensor padded = at::constant_pad_nd(images, {shift, shift, shift, shift}, 0);
  const at::Tensor dx = at::randint(0, 2 * shift + 1, {n}, generator, at::kLong);
  const at::Tensor dy = at::randint(0, 2 * shift + 1, {n}, generator, at::kLong);
  const at::Tensor flips = at::rand({n}, generator, at::kFloat) < 0.5;
  const auto x_offset = dx.accessor<int64_t, 1>();
  const auto y_offset = dy.accessor<int64_t, 1>();
  const auto flipped = flips.accessor<bool, 1>();
  at::Tensor out = at::empty_like(images);
  for (int64_t i = 0; i < n; ++i) {
    at::Tensor crop = padded[i].narrow(1, y_offset[i], h).narrow(2, x_offset[i], w);
    if (flip && flipped[i]) crop = crop.flip({2});
    out[i].copy_(crop);
  }
  return out;
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
  require(config_.epochs >= 1, "QAT needs at least one epoch");
  require(config_.batch_size >= 1, "the QAT batch size must be at least 1");
  require(config_.lr > 0, "the learning rate must be positive");
  require(config_.max_steps >= 0, "max_steps must not be negative");
  require(config_.step_epochs >= 1, "the step schedule's step must be at least one epoch");
  require(config_.quantizer_lr_scale > 0, "the quantizer learning-rate scale must be positive");
  require(config_.quantizer_lr_scale == 1.0 || config_.optimizer == QatOptimizer::Sgd,
          "a quantizer learning-rate scale needs SGD (Adam's steps do not follow the gradient's "
          "size)");
  requireLabelSmoothing(config_.label_smoothing);
  require(!loss_ || config_.label_smoothing == 0,
          "label smoothing belongs to the default loss; a loss of your own smooths (or not) "
          "itself: leave label_smoothing at 0");
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
  collectParameters();
  model_.setMode(quant::FakeQuantMode::Quantization);

  bn_state_ = std::make_shared<passes::BatchNormTraining>();
  registry_ = std::make_unique<OpRegistry>(passes::registryWithFakeQuantize(
      [this](const std::string& name) { return model_.quantizer(name); }));
  passes::registerTrainingBatchNorm(*registry_, bn_state_);
  executor_ = std::make_unique<Executor>(model_.graph(), ExecutorOptions{true}, *registry_);

  // Every rank starts from rank 0's values (they calibrated on the same data, but a user's C++
  // program may not have).
  if (group_ && group_->worldSize() > 1) {
    std::vector<at::Tensor> shared = params_;
    for (const std::string& name : bn_statistics_)
      shared.push_back(model_.graph().value(name)->initializer());
    at::NoGradGuard no_grad;
    group_->broadcast(shared, 0);
  }
  buildOptimizer();
}

QatTrainer::~QatTrainer() = default;

void QatTrainer::collectParameters() {
  Graph& graph = model_.graph();
  const int64_t opset = graph.model.opsetFor("");
  std::set<const Value*> seen;
  // The real readers of a value: FakeQuantize nodes and simulated BN folding's W * factor are
  // looked through (the weight of a Conv is still a weight when BN's factor scales it).
  std::function<void(const Value*, std::vector<Use>&)> collect = [&](const Value* v,
                                                                     std::vector<Use>& uses) {
    for (const Use& u : v->uses()) {
      const bool scales_weight =
          passes::isSimulatedBatchNormHelper(*u.node) && u.node->opType() == "Mul" && u.index == 0;
      if (passes::isFakeQuantize(u.node) || scales_weight) {
        collect(u.node->output(0), uses);
      } else {
        uses.push_back(u);
      }
    }
  };
  for (Value* v : graph.initializers()) {
    const at::Tensor& t = v->initializer();
    if (!t.is_floating_point() || t.numel() == 0) continue;
    bool trainable = false, weight = false, statistics = false;
    std::vector<Use> readers;
    collect(v, readers);
    for (const Use& u : readers) {
      const Node& node = *u.node;
      const OpInfo* info = OpRegistry::builtin().find(node.domain(), node.opType(), opset);
      const int slot = static_cast<int>(u.index);
      if (info && std::count(info->weight_inputs.begin(), info->weight_inputs.end(), slot)) {
        trainable = weight = true;
      } else if (info && info->bias_input == slot) {
        trainable = true;
      } else if (isNormalization(node)) {
        if (slot == 1 || slot == 2) trainable = true;
        if (slot >= 3) statistics = true;
      } else if (t.numel() > 1 && isDefaultDomain(node) &&
                 (node.opType() == "Add" || node.opType() == "Sub" || node.opType() == "Mul" ||
                  node.opType() == "Div")) {
        // Learned elementwise terms: positional embeddings, LayerNorm written as Mul/Add.
        trainable = true;
      }
    }
    if (statistics) {
      bn_statistics_.push_back(v->name());
    } else if (trainable && config_.train_weights && seen.insert(v).second) {
      params_.push_back(t);
      param_names_.push_back(v->name());
      decays_.push_back(weight);
      batch_scaled_grad_.push_back(false);
    }
  }
  initializer_params_ = params_.size();
  require(!params_.empty() || !config_.train_weights,
          "nothing to train: no float initializer feeds a weight, bias or "
          "normalisation of the prepared model");
  appendQuantizerParameters();
  require(!params_.empty(),
          "nothing to train: the weights are frozen and no quantizer has "
          "learnable parameters (use LSQ, PACT, DSQ or TQT)");
}

void QatTrainer::appendQuantizerParameters() {
  params_.resize(initializer_params_);
  param_names_.resize(initializer_params_);
  decays_.resize(initializer_params_);
  batch_scaled_grad_.resize(initializer_params_);
  std::map<std::string, passes::PointKind> kinds;
  for (const auto& p : model_.points())
    kinds[p.quantizer] = p.kind;
  for (quant::FakeQuantizer* q : model_.quantizers()) {
    // LSQ's gradient scale 1/sqrt(numel * qmax) counts the batch for activations; see
    // averageGradients.
    const bool batch_scaled = (q->kind() == "LSQ" || q->kind() == "LSQ+") &&
                              kinds[q->name()] == passes::PointKind::Activation;
    int index = 0;
    for (const at::Tensor& p : q->parameters()) {
      params_.push_back(p);
      param_names_.push_back(q->name() + "." + std::to_string(index++));
      decays_.push_back(false);
      batch_scaled_grad_.push_back(batch_scaled);
    }
  }
  at::NoGradGuard no_grad;
  for (at::Tensor& p : params_)
    p.requires_grad_(true);
}

void QatTrainer::buildOptimizer() {
  if (config_.optimizer == QatOptimizer::Sgd) {
    optimizer_ = std::make_unique<Sgd>(params_, config_.lr, config_.momentum);
  } else {
    optimizer_ = std::make_unique<Adam>(params_, config_.lr);
  }
}

double QatTrainer::learningRate(int64_t global_step, int64_t epoch, int64_t total_steps) const {
  switch (config_.schedule) {
    case QatSchedule::Constant:
      return config_.lr;
    case QatSchedule::Cosine:
      return config_.lr * 0.5 *
             (1.0 + std::cos(M_PI * static_cast<double>(global_step) /
                             static_cast<double>(std::max<int64_t>(total_steps, 1))));
    case QatSchedule::Step:
      return config_.lr *
             std::pow(config_.step_gamma, static_cast<double>(epoch / config_.step_epochs));
  }
  return config_.lr;
}

// Data parallel: every rank's gradients are averaged, which is the gradient of the loss averaged
// over the global batch. LSQ's activation gradient scale 1/sqrt(numel * qmax) is the exception:
// numel counts the rank's batch, not the global one, so those gradients come out sqrt(world)
// times larger than a single process with the whole batch would compute; they are scaled back,
// so that N ranks x batch B train exactly as 1 rank x batch N*B.
void QatTrainer::averageGradients() {
  if (!group_ || group_->worldSize() == 1) return;
  std::vector<at::Tensor> grads;
  for (at::Tensor& p : params_) {
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
    grads.push_back(p.grad());
  }
  group_->allReduceMean(grads);
  const double correction = 1.0 / std::sqrt(static_cast<double>(group_->worldSize()));
  for (size_t i = 0; i < params_.size(); ++i) {
    if (batch_scaled_grad_[i]) params_[i].mutable_grad().mul_(correction);
  }
}

void QatTrainer::stepOptimizer(double lr) {
  at::NoGradGuard no_grad;
  // With SGD, scaling a gradient scales that parameter's learning rate (momentum included).
  if (config_.quantizer_lr_scale != 1.0) {
    for (size_t i = initializer_params_; i < params_.size(); ++i) {
      if (params_[i].grad().defined()) params_[i].mutable_grad().mul_(config_.quantizer_lr_scale);
    }
  }
  if (config_.weight_decay != 0) {
    for (size_t i = 0; i < params_.size(); ++i) {
      if (decays_[i] && params_[i].grad().defined())
        params_[i].mutable_grad().add_(params_[i], config_.weight_decay);
    }
  }
  optimizer_->setLearningRate(lr);
  optimizer_->step();
}

// Ranks normalise with their own batches' statistics; the running averages are averaged after
// every epoch so that all ranks evaluate and save the same model.
void QatTrainer::synchronizeBatchNormStatistics() {
  if (!group_ || group_->worldSize() == 1 || bn_statistics_.empty()) return;
  std::vector<at::Tensor> stats;
  for (const std::string& name : bn_statistics_)
    stats.push_back(model_.graph().value(name)->initializer());
  at::NoGradGuard no_grad;
  group_->allReduceMean(stats);
}

std::string QatTrainer::settingsJson() const {
  nlohmann::json quantizers = nlohmann::json::object();
  for (quant::FakeQuantizer* q : model_.quantizers())
    quantizers[q->name()] = q->kind();
  nlohmann::json params = nlohmann::json::array();
  for (size_t i = 0; i < params_.size(); ++i)
    params.push_back(param_names_[i] + c10::str(params_[i].sizes()));
  const char* optimizer = config_.optimizer == QatOptimizer::Sgd ? "sgd" : "adam";
  const char* schedule = config_.schedule == QatSchedule::Cosine ? "cosine"
                         : config_.schedule == QatSchedule::Step ? "step"
                                                                 : "none";
  return nlohmann::json{{"backend", model_.backend().name},
                        {"quantizers", quantizers},
                        {"parameters", params},
                        {"epochs", config_.epochs},
                        {"batch_size", config_.batch_size},
                        {"world_size", group_ ? group_->worldSize() : 1},
                        {"optimizer", optimizer},
                        {"lr", config_.lr},
                        {"momentum", config_.momentum},
                        {"weight_decay", config_.weight_decay},
                        {"schedule", schedule},
                        {"step_epochs", config_.step_epochs},
                        {"step_gamma", config_.step_gamma},
                        {"freeze_bn_epoch", config_.freeze_bn_epoch},
                        {"augment_shift", config_.augment_shift},
                        {"augment_flip", config_.augment_flip},
                        {"label_smoothing", config_.label_smoothing},
                        {"train_weights", config_.train_weights},
                        {"quantizer_lr_scale", config_.quantizer_lr_scale},
                        {"seed", config_.seed}}
      .dump();
}

void QatTrainer::saveCheckpoint() {
  if (config_.checkpoint_path.empty() || (group_ && group_->rank() != 0)) return;
  QatCheckpoint c;
  c.settings = settingsJson();
  c.epoch = epoch_;
  c.step_in_epoch = step_in_epoch_;
  c.global_step = global_step_;
  c.epoch_sums =
      at::tensor(std::vector<double>(epoch_sums_.begin(), epoch_sums_.end()), at::kDouble);
  Graph& graph = model_.graph();
  for (size_t i = 0; i < initializer_params_; ++i)
    c.initializers[param_names_[i]] = params_[i];
  for (const std::string& name : bn_statistics_)
    c.initializers[name] = graph.value(name)->initializer();
  for (quant::FakeQuantizer* q : model_.quantizers())
    c.quantizers[q->name()] = q->state();
  c.optimizer = optimizer_->state();
  c.rng_state = at::detail::getDefaultCPUGenerator().get_state();
  nlohmann::json history = nlohmann::json::array();
  for (const QatEpochResult& e : history_) {
    history.push_back({{"epoch", e.epoch},
                       {"loss", e.loss},
                       {"train_top1", e.train_top1},
                       {"eval_metric", e.eval_metric},
                       {"lr", e.lr},
                       {"seconds", e.seconds},
                       {"steps", e.steps},
                       {"bn_frozen", e.bn_frozen}});
  }
  c.history = history.dump();
  saveQatCheckpoint(c, config_.checkpoint_path);
}

void QatTrainer::resume(const std::string& checkpoint_path) {
  const QatCheckpoint c = loadQatCheckpoint(checkpoint_path);
  const nlohmann::json saved = nlohmann::json::parse(c.settings);
  const nlohmann::json now = nlohmann::json::parse(settingsJson());
  std::vector<std::string> differences;
  for (const auto& [key, value] : now.items()) {
    if (!saved.contains(key) || saved[key] != value) {
      const std::string was = saved.contains(key) ? saved[key].dump() : "(missing)";
      differences.push_back(
          key + (value.is_primitive() ? " " + was + " -> " + value.dump() : " (differs)"));
    }
  }
  require(differences.empty(), "checkpoint " + checkpoint_path +
                                   " was written with other settings: " + join(differences, ", ") +
                                   "; resume with the model, backend and flags of that run");
  at::NoGradGuard no_grad;
  Graph& graph = model_.graph();
  for (const auto& [name, tensor] : c.initializers) {
    Value* v = graph.findValue(name);
    require(v && v->isInitializer() && v->initializer().sizes() == tensor.sizes(),
            "checkpoint " + checkpoint_path + ": tensor '" + name +
                "' does not match the model's initializers");
    v->initializer().copy_(tensor);
  }
  for (quant::FakeQuantizer* q : model_.quantizers()) {
    auto it = c.quantizers.find(q->name());
    require(it != c.quantizers.end(),
            "checkpoint " + checkpoint_path + " has no state for quantizer '" + q->name() + "'");
    q->loadState(it->second);
  }
  // Loading state may have replaced the quantizers' parameter tensors: collect them again.
  appendQuantizerParameters();
  buildOptimizer();
  optimizer_->loadState(c.optimizer);
  if (c.rng_state.numel() > 0) {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    generator.set_state(c.rng_state);
  };
  epoch_ = c.epoch;
  step_in_epoch_ = c.step_in_epoch;
  global_step_ = c.global_step;
  require(c.epoch_sums.numel() == static_cast<int64_t>(epoch_sums_.size()),
          "checkpoint " + checkpoint_path + ": epoch sums have the wrong size");
  for (size_t i = 0; i < epoch_sums_.size(); ++i)
    epoch_sums_[i] = c.epoch_sums[i].item<double>();
  history_.clear();
  for (const auto& e : nlohmann::json::parse(c.history)) {
    QatEpochResult r;
    r.epoch = e["epoch"];
    r.loss = e["loss"];
    r.train_top1 = e["train_top1"];
    r.eval_metric = e["eval_metric"];
    r.lr = e["lr"];
    r.seconds = e["seconds"];
    r.steps = e["steps"];
    r.bn_frozen = e["bn_frozen"];
    history_.push_back(r);
  }
  resumed_ = true;
}

QatReport QatTrainer::train(std::shared_ptr<data::Dataset> dataset, data::LoaderOptions loader,
                            const QatProgress& progress,
                            const std::function<double(QatTrainer&)>& evaluate) {
  require(!finished_, "this QAT trainer has finished (BN merged); create a new one to train");
  const int world = group_ ? group_->worldSize() : 1;
  const int rank = group_ ? group_->rank() : 0;
  const int64_t global_batch = config_.batch_size * world;
  loader.batch_size = global_batch;
  const std::string input = dataInput(model_.graph()).name();
  const std::string output = model_.graph().outputs().front()->name();

  QatReport report;
  report.resumed = resumed_;
  report.resumed_at_step = resumed_ ? global_step_ : 0;
  report.batchnorms_simulated = batchnorms_simulated_;
  for (size_t i = 0; i < params_.size(); ++i) {
    report.parameters += params_[i].numel();
    if (i >= initializer_params_) report.quantizer_parameters += params_[i].numel();
  }

  int64_t steps_per_epoch = -1;
  const auto start = Clock::now();
  Clock::time_point timed_start;
  int64_t timed_steps = 0;
  double eval_seconds = 0;
  bool stop_requested = false;
  while (epoch_ < config_.epochs && !stop_requested) {
    loader.shuffle_seed = config_.seed * 1000003ULL + static_cast<uint64_t>(epoch_);
    data::BatchLoader batches(dataset, loader);
    // Every step takes a whole global batch; the remainder of an epoch is left out.
    steps_per_epoch = batches.size() / global_batch;
    require(steps_per_epoch > 0,
            "the training data has " + std::to_string(batches.size()) +
                " samples, fewer than one batch of " + std::to_string(global_batch) +
                (world > 1 ? " (" + std::to_string(config_.batch_size) + " per rank x " +
                                 std::to_string(world) + " ranks)"
                           : std::string()) +
                "; use a smaller batch or more data");
    const int64_t total_steps = steps_per_epoch * config_.epochs;
    for (int64_t skipped = 0; skipped < step_in_epoch_; ++skipped)
      batches.next();
    bn_state_->use_batch_statistics =
        config_.freeze_bn_epoch < 0 || epoch_ < config_.freeze_bn_epoch;

    // Sums carried over from before an interruption (zero at an epoch's start).
    const auto epoch_start = Clock::now();
    const double seconds_before = epoch_sums_[4];
    double lr = learningRate(std::max<int64_t>(global_step_ - 1, 0), epoch_, total_steps);
    while (step_in_epoch_ < steps_per_epoch) {
      if (config_.max_steps > 0 && global_step_ >= config_.max_steps) break;
      std::optional<data::Batch> global = batches.next();
      if (!global) break;
      if (config_.augment_shift > 0 || config_.augment_flip) {
        global->inputs =
            augmentImages(global->inputs, config_.augment_shift, config_.augment_flip,
                          config_.seed * 1000003ULL + static_cast<uint64_t>(global_step_) + 1);
      }
      data::Batch batch;
      batch.inputs = global->inputs.narrow(0, rank * config_.batch_size, config_.batch_size);
      if (global->labels.defined())
        batch.labels = global->labels.narrow(0, rank * config_.batch_size, config_.batch_size);
      if (global->targets.defined())
        batch.targets = global->targets.narrow(0, rank * config_.batch_size, config_.batch_size);
      batch.indices.assign(global->indices.begin() + rank * config_.batch_size,
                           global->indices.begin() + (rank + 1) * config_.batch_size);

      lr = learningRate(global_step_, epoch_, total_steps);
      at::Tensor out = executor_->run({{input, batch.inputs}}, {output}).at(output);
      at::Tensor loss = loss_(out, batch);
      require(loss.numel() == 1,
              "the QAT loss must be a single value, got shape " + c10::str(loss.sizes()));
      loss.backward();
      averageGradients();
      stepOptimizer(lr);

      const double loss_value = loss.item<double>();
      require(std::isfinite(loss_value), "the training loss became " + std::to_string(loss_value) +
                                             " at step " + std::to_string(global_step_ + 1) +
                                             " (epoch " + std::to_string(epoch_ + 1) +
                                             "); lower --lr");
      epoch_sums_[0] += loss_value;
      if (batch.labels.defined() && out.dim() == 2) {
        epoch_sums_[1] +=
            static_cast<double>((out.detach().argmax(1) == batch.labels).sum().item<int64_t>());
        epoch_sums_[2] += static_cast<double>(batch.labels.size(0));
      }
      epoch_sums_[3] += 1;
      epoch_sums_[4] = seconds_before + secondsSince(epoch_start);
      ++step_in_epoch_;
      ++global_step_;
      ++report.steps_run;
      report.samples_run += config_.batch_size;
      if (report.steps_run == 5) timed_start = Clock::now();
      if (report.steps_run > 5) ++timed_steps;
      if (progress) {
        QatStepInfo info;
        info.epoch = epoch_;
        info.epochs = config_.epochs;
        info.step_in_epoch = step_in_epoch_;
        info.steps_per_epoch = steps_per_epoch;
        info.global_step = global_step_;
        info.total_steps =
            config_.max_steps > 0 ? std::min(total_steps, config_.max_steps) : total_steps;
        info.loss = loss_value;
        info.train_top1 = epoch_sums_[2] > 0 ? epoch_sums_[1] / epoch_sums_[2] : -1;
        info.lr = lr;
        info.seconds = secondsSince(start) - eval_seconds;
        info.steps_run = report.steps_run;
        progress(info);
      }
      bool stop = config_.stop && config_.stop->load();
      if (world > 1) stop = group_->allReduceMax(stop ? 1.0 : 0.0) > 0;
      if (stop) {
        stop_requested = true;
        break;
      }
    }
    if (stop_requested || step_in_epoch_ < steps_per_epoch) {
      // Interrupted or out of steps mid-epoch: the checkpoint keeps the position in the epoch.
      report.interrupted = stop_requested;
      break;
    }
    synchronizeBatchNormStatistics();
    QatEpochResult result;
    result.epoch = epoch_;
    std::vector<at::Tensor> sums = {
        at::tensor({epoch_sums_[0], epoch_sums_[1], epoch_sums_[2], epoch_sums_[3]}, at::kDouble)};
    if (world > 1) group_->allReduceSum(sums);
    const at::Tensor totals = sums[0];
    const double all_steps = totals[3].item<double>();
    result.loss = all_steps > 0 ? totals[0].item<double>() / all_steps : 0;
    result.train_top1 =
        totals[2].item<double>() > 0 ? totals[1].item<double>() / totals[2].item<double>() : -1;
    result.lr = lr;
    result.steps = static_cast<int64_t>(epoch_sums_[3]);
    result.bn_frozen = !bn_state_->use_batch_statistics;
    result.seconds = epoch_sums_[4];
    if (evaluate && rank == 0) {
      const auto eval_start = Clock::now();
      result.eval_metric = evaluate(*this);
      eval_seconds += secondsSince(eval_start);
    }
    history_.push_back(result);
    ++epoch_;
    step_in_epoch_ = 0;
    epoch_sums_.fill(0);
    saveCheckpoint();
  }
  if (report.interrupted || epoch_ < config_.epochs) saveCheckpoint();
  report.epochs = history_;
  report.global_step = global_step_;
  report.train_seconds = secondsSince(start) - eval_seconds;
  // The evaluations inside the timed span are not training.
  report.step_ms = timed_steps > 0 ? 1000.0 * (secondsSince(timed_start) - eval_seconds) /
                                         static_cast<double>(timed_steps)
                                   : 0;
  return report;
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
  synchronizeBatchNormStatistics();
  {
    at::NoGradGuard no_grad;
    for (at::Tensor& p : params_)
      p.requires_grad_(false);
  }
  executor_.reset();
  const int merged = passes::mergeSimulatedBatchNorm(model_);
  model_.graphEdited();
  finished_ = true;
  return merged;
}

}  // namespace qforge::algos
