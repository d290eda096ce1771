#include "algos/reconstruction.h"

#include <ATen/CPUGeneratorImpl.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <set>

#include "algos/adam.h"
#include "algos/calibrate.h"
#include "algos/distributed.h"
#include "algos/recon_data.h"
#include "core/error.h"
#include "exec/op_traits.h"
#include "passes/fake_quantize_node.h"
#include "quant/fake_quantizers/adaround.h"
#include "quant/fake_quantizers/fixed.h"
#include "quant/fake_quantizers/lsq.h"

namespace qforge::algos {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A weight of the unit with its AdaRound rounding.
struct RoundedWeight {
  std::string name;       // the value its quantizer reads: an initializer, or a constant computed
                          // from one by data movement (a transposed MatMul weight)
  std::string quantized;  // the quantizer node's output, fed with the soft-rounded weight
  at::Tensor value;       // its float value
  std::unique_ptr<quant::AdaRoundFakeQuantizer> rounding;
};

// The initializer `v` is computed from through layout-only ops (exec/op_info.h: each element
// moved once, nothing computed, so a rounded value can be written back); throws naming the node
// when some other op (or a second weight) is on the way.
Value* sourceInitializer(const Graph& graph, const Value* v) {
  while (!v->isInitializer()) {
    const Node* n = v->producer();
    if (n == nullptr || !isLayoutOnly(graph, *n) || n->input(0) == nullptr) {
      throw Error(
          "AdaRound rounds weights stored in initializers: '" + v->name() + "' is " +
          (n ? "computed by " + n->describe() + ", which does more than reshape or reorder it"
             : "not a constant"));
    }
    v = n->input(0);
  }
  return const_cast<Value*>(v);
}

// Writes `rounded` (the value of constant `name`) back into the initializer it is computed
// from: the data-movement chain is run on element indices to find where each element came from.
void writeBack(Graph& graph, Executor& executor, const std::string& name,
               const at::Tensor& rounded) {
  Value* v = graph.value(name);
  if (v->isInitializer()) {
    v->setInitializer(rounded);
    return;
  }
  Value* source = sourceInitializer(graph, v);
  require(source->uses().size() == 1, "weight '" + source->name() +
                                          "' is shared by several nodes; AdaRound cannot round it "
                                          "for one of them");
  const at::Tensor& original = source->initializer();
  const at::Tensor positions =
      executor
          .run({{source->name(), at::arange(original.numel(), at::kLong).view(original.sizes())}},
               {name})
          .at(name)
          .reshape({-1});
  require(positions.numel() == original.numel(),
          "weight '" + name + "' does not hold every element of '" + source->name() + "' once");
  at::Tensor updated = original.clone().reshape({-1});
  updated.index_put_({positions}, rounded.reshape({-1}).to(original.scalar_type()));
  source->setInitializer(updated.view(original.sizes()));
}

// An activation quantizer of the unit whose scale is learned here.
struct LearnedScale {
  quant::FixedFakeQuantizer* target;
  std::unique_ptr<quant::LsqFakeQuantizer> lsq;
};

// beta of the rounding regulariser at iteration `it` (MQBench's LinearTempDecay).
double betaAt(const ReconstructionConfig& c, int64_t it) {
  const double start = c.warm_up * static_cast<double>(c.max_count);
  if (it < start) return c.b_start;
  const double rel = (it - start) / std::max(1.0, c.max_count - start);
  return c.b_end + (c.b_start - c.b_end) * std::max(0.0, 1.0 - rel);
}

void checkConfig(const ReconstructionConfig& c) {
  require(c.max_count > 0, "reconstruction needs max_count > 0 iterations");
  require(c.batch > 0, "reconstruction batch must be positive");
  require(c.prob > 0.0 && c.prob <= 1.0, "prob must be in (0, 1]");
  require(c.warm_up >= 0.0 && c.warm_up < 1.0, "warm_up must be in [0, 1)");
  require(c.weight >= 0.0 && c.scale_lr >= 0.0 && c.lr > 0.0,
          "weight and scale_lr must be >= 0, lr > 0");
  require(c.b_start >= c.b_end && c.b_end > 0, "b_range must run down from high to low (> 0)");
  require(c.cache_limit >= 0, "cache_limit must be >= 0 bytes");
}

// Everything one unit trains, wired into `executor` by hooks on its quantizers' outputs.
class UnitTraining {
 public:
  UnitTraining(passes::PreparedModel& model, Executor& plain, Executor& executor,
               const ReconUnit& unit, const ReconstructionConfig& config,
               std::set<std::string>& learned_scales, at::Generator generator)
      : plain_(plain), executor_(executor), prob_(config.prob), generator_(generator) {
    for (const Node* n : unit.weight_quantizers)
      addWeight(model, *n);
    for (const Node* n : unit.act_quantizers)
      addActivation(model, *n, config.scale_lr > 0, learned_scales);
  }
  ~UnitTraining() {
    for (int64_t id : hooks_)
      executor_.removeHook(id);
  }
  UnitTraining(const UnitTraining&) = delete;
  UnitTraining& operator=(const UnitTraining&) = delete;

  std::vector<at::Tensor> roundingVariables() const {
    std::vector<at::Tensor> v;
    for (const RoundedWeight& w : weights_)
      v.push_back(w.rounding->roundingVariable());
    return v;
  }
  std::vector<at::Tensor> scales() const {
    std::vector<at::Tensor> s;
    for (const auto& [name, l] : scales_) {
      for (const at::Tensor& p : l.lsq->parameters())
        s.push_back(p);
    }
    return s;
  }
  // The soft-rounded weights as feeds for the quantizer nodes' outputs (so those nodes do not
  // run), and AdaRound's regulariser sum(1 - |2h - 1|^beta) on the same h(V) when beta > 0.
  at::Tensor softWeights(TensorMap& feeds, double beta) const {
    at::Tensor regulariser = at::zeros({});
    for (const RoundedWeight& w : weights_) {
      const at::Tensor h = w.rounding->softOffsets();
      feeds[w.quantized] = w.rounding->roundWith(w.value, h);
      if (beta > 0) regulariser = regulariser + quant::AdaRoundFakeQuantizer::regularizer(h, beta);
    }
    return regulariser;
  }

  // Hard rounding: the rounded weights into `rounded`, the learned scales into the model's
  // quantizers. Returns the share of weights rounded otherwise than to nearest.
  double finish(std::map<std::string, at::Tensor>& rounded, std::set<std::string>& learned) {
    at::NoGradGuard no_grad;
    int64_t flipped = 0, total = 0;
    for (RoundedWeight& w : weights_) {
      const at::Tensor& original = w.value;
      w.rounding->setRounding(quant::AdaRoundFakeQuantizer::Rounding::Nearest);
      const at::Tensor nearest = w.rounding->forward(original);
      w.rounding->setRounding(quant::AdaRoundFakeQuantizer::Rounding::Hard);
      const at::Tensor hard = w.rounding->forward(original).detach().clone();
      flipped += hard.ne(nearest).sum().item<int64_t>();
      total += hard.numel();
      rounded[w.name] = hard;
    }
    for (auto& [name, l] : scales_) {
      l.target->setQParams(l.lsq->qparams());
      learned.insert(name);
    }
    return total == 0 ? 0.0 : static_cast<double>(flipped) / static_cast<double>(total);
  }

 private:
  void addWeight(passes::PreparedModel& model, const Node& node) {
    quant::FakeQuantizer* q = model.quantizer(passes::quantizerOf(node));
    require(q != nullptr, node.describe() + " runs an unknown quantizer");
    const Value* weight = node.input(0);
    sourceInitializer(model.graph(), weight);  // refuses weights that cannot be written back
    const at::Tensor value = weight->isInitializer()
                                 ? weight->initializer()
                                 : plain_.run({}, {weight->name()}).at(weight->name());
    if (!q->affine()) {
      throw Error("AdaRound needs an affine weight grid: quantizer '" + q->name() + "' (" +
                  q->kind() + ") has none");
    }
    auto rounding = std::make_unique<quant::AdaRoundFakeQuantizer>(q->name(), q->scheme(), nullptr);
    rounding->setQParams(q->qparams());
    rounding->initRounding(value);
    weights_.push_back(
        RoundedWeight{weight->name(), node.output(0)->name(), value, std::move(rounding)});
  }

  void addActivation(passes::PreparedModel& model, const Node& node, bool learn_scale,
                     const std::set<std::string>& learned) {
    const std::string name = passes::quantizerOf(node);
    quant::FakeQuantizer* q = model.quantizer(name);
    require(q != nullptr, node.describe() + " runs an unknown quantizer");
    auto* fixed = dynamic_cast<quant::FixedFakeQuantizer*>(q);
    LearnedScale* scale = nullptr;
    if (learn_scale && fixed != nullptr && !q->scheme().power_of_two_scale &&
        !learned.count(name)) {
      auto it = scales_.find(name);
      if (it == scales_.end()) {
        auto lsq = std::make_unique<quant::LsqFakeQuantizer>(name, q->scheme(), nullptr);
        lsq->setQParams(q->qparams());
        it = scales_.emplace(name, LearnedScale{fixed, std::move(lsq)}).first;
      }
      scale = &it->second;
    }
    if (scale == nullptr && prob_ >= 1.0) return;  // the model's own quantizer does it all
    // The quantizer's input, kept for the replacement and for QDrop's float values.
    const std::string in = node.input(0)->name();
    auto kept = std::make_shared<at::Tensor>();
    hooks_.push_back(executor_.addHook(in, [kept](const Value&, const at::Tensor& t) {
      *kept = t;
      return t;
    }));
    quant::LsqFakeQuantizer* lsq = scale ? scale->lsq.get() : nullptr;
    const double prob = prob_;
    at::Generator generator = generator_;
    hooks_.push_back(executor_.addHook(
        node.output(0)->name(), [kept, lsq, prob, generator](const Value&, const at::Tensor& t) {
          at::Tensor y = lsq ? lsq->forward(*kept) : t;
          if (prob >= 1.0) return y;
          const at::Tensor u = at::rand(y.sizes(), generator, y.options().requires_grad(false));
          return at::where(u < prob, y, *kept);
        }));
  }

  Executor& plain_;     // runs the graph without the training hooks
  Executor& executor_;  // the training executor the hooks go into
  double prob_;
  at::Generator generator_;
  std::vector<RoundedWeight> weights_;
  std::map<std::string, LearnedScale> scales_;
  std::vector<int64_t> hooks_;
};

// The ranks' mean of the gradients of `rounding` and `scales` (and of `losses`, carried in the same
// buffer). LSQ scales its gradient by 1/sqrt(elements of the batch): a rank's batch is 1/N of the
// whole, so those come out sqrt(N) too large and are scaled back (as in QAT).
void averageOverRanks(ProcessGroup& group, const std::vector<at::Tensor>& rounding,
                      const std::vector<at::Tensor>& scales, const at::Tensor& losses) {
  std::vector<at::Tensor> tensors{losses};
  for (const at::Tensor& p : rounding) {
    if (p.grad().defined()) tensors.push_back(p.grad());  // defined alike on every rank
  }
  std::vector<at::Tensor> scale_grads;
  for (const at::Tensor& p : scales) {
    if (p.grad().defined()) scale_grads.push_back(p.grad());
  }
  tensors.insert(tensors.end(), scale_grads.begin(), scale_grads.end());
  group.allReduceMean(tensors);
  const double correction = 1.0 / std::sqrt(static_cast<double>(group.worldSize()));
  for (const at::Tensor& g : scale_grads)
    g.mul_(correction);
}

}  // namespace

ReconstructionReport reconstruct(passes::PreparedModel& model, const at::Tensor& images,
                                 const ReconstructionConfig& config,
                                 const ReconProgressFn& progress, ProcessGroup* group) {
  checkConfig(config);
  const auto start = Clock::now();
  const int world = group ? group->worldSize() : 1;
  const int rank = group ? group->rank() : 0;
  require(config.batch % world == 0,
          "a reconstruction batch of " + std::to_string(config.batch) + " cannot be split evenly " +
              "over " + std::to_string(world) + " ranks; give --recon-batch a multiple of " +
              "--world-size");
  const int64_t batch = config.batch / world;  // this rank's part of every iteration's batch
  require(images.dim() >= 1 && images.size(0) >= batch,
          "a reconstruction batch of " + std::to_string(batch) + (world > 1 ? " per rank" : "") +
              " needs at least " + std::to_string(batch) + " calibration samples, got " +
              std::to_string(images.dim() >= 1 ? images.size(0) : 0) +
              "; use more calibration data or a smaller batch");
  requireCalibrated(model, "reconstruction");
  const std::vector<ReconUnit> units =
      findReconUnits(model.graph(), config.pattern, config.max_block_layers);

  OpRegistry registry = passes::registryWithFakeQuantize(
      [&model](const std::string& n) { return model.quantizer(n); });
  Executor plain(model.graph(), {}, registry);
  Executor train(model.graph(), ExecutorOptions{/*enable_grad=*/true}, registry);
  // Each rank draws its own batches and QDrop masks; rank 0 draws what one process would.
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(
      config.seed + static_cast<uint64_t>(rank) * 0x9E3779B97F4A7C15ull);

  ReconstructionReport report;
  std::map<std::string, at::Tensor> rounded;
  std::set<std::string> learned_scales;
  model.setMode(quant::FakeQuantMode::Quantization);
  for (size_t u = 0; u < units.size(); ++u) {
    const ReconUnit& unit = units[u];
    const auto unit_start = Clock::now();
    UnitData data(model, plain, images, unit, rounded, config.prob < 1.0, config.cache_limit);
    const double cache_seconds = secondsSince(unit_start);
    UnitTraining training(model, plain, train, unit, config, learned_scales, generator);
    Adam rounding_opt(training.roundingVariables(), config.lr);
    Adam scale_opt(training.scales(), config.scale_lr);

    UnitReport r;
    r.name = unit.name;
    r.entry = unit.entry;
    r.exit = unit.exit;
    r.layers = unit.weighted.size();
    const int64_t n = images.size(0);
    for (int64_t it = 0; it < config.max_count; ++it) {
      const at::Tensor indices = at::randperm(n, generator, at::kLong).narrow(0, 0, batch);
      const UnitBatch b = data.gather(indices);
      at::Tensor input = b.quant_input;
      if (config.prob < 1.0) {
        const at::Tensor u01 = at::rand(input.sizes(), generator, input.options());
        input = at::where(u01 < config.prob, b.quant_input, b.float_input);
      }
      const bool regularize = it >= config.warm_up * static_cast<double>(config.max_count);
      TensorMap feeds{{unit.entry, input}};
      const at::Tensor regulariser =
          training.softWeights(feeds, regularize ? betaAt(config, it) : 0.0);
      const at::Tensor out = train.run(feeds, {unit.exit}).at(unit.exit);
      const at::Tensor diff = out - b.float_output;
      const at::Tensor rec = out.dim() >= 2 ? diff.pow(2).sum(1).mean() : diff.pow(2).mean();
      const at::Tensor round = regulariser * config.weight;
      (rec + round).backward();
      double rec_value = rec.item<double>(), round_value = round.item<double>();
      if (world > 1) {
        const at::Tensor losses = at::stack({rec.detach(), round.detach()}).to(at::kFloat);
        averageOverRanks(*group, rounding_opt.parameters(), scale_opt.parameters(), losses);
        rec_value = losses[0].item<double>();
        round_value = losses[1].item<double>();
      }
      rounding_opt.step();
      if (!scale_opt.parameters().empty()) {
        scale_opt.setLearningRate(config.scale_lr * 0.5 *
                                  (1.0 + std::cos(M_PI * static_cast<double>(it) /
                                                  static_cast<double>(config.max_count))));
        scale_opt.step();
      }
      if (it == 0) r.first_rec_loss = rec_value;
      r.last_rec_loss = rec_value;
      r.last_round_loss = round_value;
      if (progress) {
        progress(ReconProgress{u, units.size(), unit.name, it + 1, config.max_count, rec_value,
                               r.last_round_loss});
      }
    }
    r.flipped = training.finish(rounded, learned_scales);
    r.cached_samples = data.cachedSamples();
    r.cached_bytes = data.cachedBytes();
    r.recomputed_samples = data.recomputedSamples();
    r.seconds = secondsSince(unit_start);
    r.cache_seconds = cache_seconds;
    report.peak_cache_bytes = std::max(report.peak_cache_bytes, r.cached_bytes);
    report.iterations += config.max_count;
    report.units.push_back(r);
  }
  {
    at::NoGradGuard no_grad;
    for (const auto& [name, w] : rounded)
      writeBack(model.graph(), plain, name, w);
  }
  model.setMode(quant::FakeQuantMode::Quantization);
  report.seconds = secondsSince(start);
  report.iterations_per_second = report.iterations / std::max(report.seconds, 1e-9);
  return report;
}

}  // namespace qforge::algos
