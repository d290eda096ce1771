#include "algos/sensitivity.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <unordered_map>

#include "algos/calibrate.h"
#include "core/error.h"
#include "exec/op_traits.h"

namespace qforge::algos {

namespace {

// One FakeQuantize node of a quantizer: what it reads and writes.
struct Site {
  size_t quantizer;
  std::string input;
  std::string output;
  bool constant;  // reads an initializer (a weight or bias): the same tensor in every run
};

// Every quantizer's fake-quantize and observer switches, put back when the analysis ends however
// it ends.
class ModeGuard {
 public:
  explicit ModeGuard(std::vector<quant::FakeQuantizer*> quantizers)
      : quantizers_(std::move(quantizers)) {
    for (quant::FakeQuantizer* q : quantizers_)
      saved_.emplace_back(q->observerEnabled(), q->fakeQuantEnabled());
    for (quant::FakeQuantizer* q : quantizers_)
      q->setObserverEnabled(false);
  }
  ~ModeGuard() {
    for (size_t i = 0; i < quantizers_.size(); ++i) {
      quantizers_[i]->setObserverEnabled(saved_[i].first);
      quantizers_[i]->setFakeQuantEnabled(saved_[i].second);
    }
  }
  void setAll(bool on) const {
    for (quant::FakeQuantizer* q : quantizers_)
      q->setFakeQuantEnabled(on);
  }

 private:
  std::vector<quant::FakeQuantizer*> quantizers_;
  std::vector<std::pair<bool, bool>> saved_;
};

// Gradients recorded for the Fisher probes, and not after them, however they end.
class GradScope {
 public:
  explicit GradScope(Executor& executor) : executor_(executor) { executor_.setGradEnabled(true); }
  ~GradScope() { executor_.setGradEnabled(false); }

 private:
  Executor& executor_;
};

std::optional<quant::QParams> gridOf(quant::FakeQuantizer& q) {
  if (!q.affine()) return std::nullopt;
  return q.qparams();
}

// `t` as a value whose gradient backward() keeps: itself (retained) when autograd already tracks
// it, else a leaf copy that requires grad.
at::Tensor withGrad(const at::Tensor& t) {
  if (!t.requires_grad()) return t.detach().requires_grad_(true);
  at::Tensor x = t;
  x.retain_grad();
  return x;
}

// q's fake quantization of x, whatever q's switch says now.
at::Tensor quantized(quant::FakeQuantizer& q, const at::Tensor& x) {
  const bool was_on = q.fakeQuantEnabled();
  q.setFakeQuantEnabled(true);
  at::Tensor y = q.forward(x);
  q.setFakeQuantEnabled(was_on);
  return y;
}

std::vector<Site> sitesOf(const passes::PreparedModel& model,
                          const std::unordered_map<std::string, size_t>& index) {
  std::vector<Site> sites;
  for (const passes::QuantPoint& p : model.points()) {
    for (const std::string& name : p.nodes) {
      const Node* node = model.graph().findNode(name);
      if (node == nullptr || node->inputs().empty() || node->inputs()[0] == nullptr) continue;
      const Value* in = node->inputs()[0];
      sites.push_back(
          {index.at(p.quantizer), in->name(), node->output(0)->name(), in->isInitializer()});
    }
  }
  return sites;
}

// The output channel axis of a weight: where its FakeQuantize's reader takes it.
int64_t channelAxisOf(const Graph& graph, const Site& site, const at::Tensor& weight) {
  const Value* out = graph.value(site.output);
  if (out->uses().empty()) return 0;
  const Use& use = out->uses().front();
  const int64_t axis = weightChannelAxis(opInfoFor(graph, *use.node), *use.node, use.index, weight);
  return axis >= 0 ? axis : 0;
}

std::vector<std::string> scoredOutputs(const Graph& graph, const SensitivityOptions& options) {
  if (!options.outputs.empty()) {
    for (const std::string& name : options.outputs) {
      require(graph.isGraphOutput(graph.findValue(name)),
              "'" + name + "' is not an output of the model");
    }
    return options.outputs;
  }
  std::vector<std::string> names;
  for (const Value* v : graph.outputs())
    names.push_back(v->name());
  return names;
}

std::vector<double> ranksOf(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (size_t begin = 0; begin < order.size();) {
    size_t end = begin;
    while (end + 1 < order.size() && values[order[end + 1]] == values[order[begin]])
      ++end;
    const double average = (static_cast<double>(begin) + static_cast<double>(end)) / 2 + 1;
    for (size_t k = begin; k <= end; ++k)
      ranks[order[k]] = average;
    begin = end + 1;
  }
  return ranks;
}

}  // namespace

std::optional<double> SensitivityResult::top1Percent(bool quantized) const {
  const std::optional<int64_t>& count = quantized ? quantized_top1 : float_top1;
  if (!count || samples == 0) return std::nullopt;
  return 100.0 * static_cast<double>(*count) / static_cast<double>(samples);
}

std::optional<double> spearman(const std::vector<double>& a, const std::vector<double>& b) {
  require(a.size() == b.size(), "spearman: lists of different lengths");
  if (a.size() < 3) return std::nullopt;
  const std::vector<double> ra = ranksOf(a), rb = ranksOf(b);
  const double mean = (static_cast<double>(a.size()) + 1) / 2;
  double cov = 0, va = 0, vb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    cov += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (va == 0 || vb == 0) return std::nullopt;
  return cov / std::sqrt(va * vb);
}

SensitivityResult analyzeSensitivity(passes::PreparedModel& model,
                                     const std::vector<AnalysisBatch>& batches,
                                     const SensitivityOptions& options,
                                     const SensitivityProgress& progress) {
  require(!batches.empty(), "sensitivity analysis needs at least one batch of data");
  require(options.fisher_probes >= 1, "Fisher sensitivity needs at least one probe");
  require(options.references == nullptr || options.references->size() == batches.size(),
          "sensitivity analysis: one set of reference outputs per batch is needed");
  requireCalibrated(model, "sensitivity analysis");
  const std::vector<quant::FakeQuantizer*> quantizers = model.quantizers();
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < quantizers.size(); ++i)
    index[quantizers[i]->name()] = i;
  const std::vector<Site> sites = sitesOf(model, index);
  const Graph& graph = model.graph();
  Executor& executor = model.executor();
  const ModeGuard modes(quantizers);

  SensitivityResult result;
  result.outputs = scoredOutputs(graph, options);
  result.quantizers.resize(quantizers.size());
  std::vector<RangeAccumulator> ranges;
  for (size_t i = 0; i < quantizers.size(); ++i) {
    result.quantizers[i].quantizer = quantizers[i]->name();
    ranges.emplace_back(options.seed * 1000003 + i);
  }
  std::vector<std::optional<quant::QParams>> grids;
  for (quant::FakeQuantizer* q : quantizers)
    grids.push_back(gridOf(*q));

  // Weights and biases are the same in every run: their figures need no data.
  for (const Site& s : sites) {
    if (!s.constant) continue;
    QuantizerSensitivity& r = result.quantizers[s.quantizer];
    quant::FakeQuantizer& q = *quantizers[s.quantizer];
    const at::Tensor w = graph.value(s.input)->initializer();
    if (!w.is_floating_point()) continue;
    const at::Tensor wq = quantized(q, w);
    r.local.emplace().add(wq, w);
    r.accumulated = r.local;
    r.range = weightRange(w, grids[s.quantizer], q.scheme(), channelAxisOf(graph, s, w));
  }

  std::vector<bool> measured(quantizers.size(), options.measured.empty());
  for (const std::string& name : options.measured) {
    const auto it = index.find(name);
    require(it != index.end(), "sensitivity analysis: the model has no quantizer '" + name + "'");
    measured[it->second] = true;
  }
  const int64_t measured_count = std::count(measured.begin(), measured.end(), true);
  const int64_t per_batch = (options.references != nullptr ? 1 : 2) +
                            (options.isolated ? measured_count : 0) +
                            (options.leave_one_out ? measured_count : 0) +
                            (options.fisher ? options.fisher_probes + 1 : 0);
  const int64_t planned = per_batch * static_cast<int64_t>(batches.size());
  auto ran = [&](const std::string& what) {
    ++result.runs;
    if (progress) progress(result.runs, planned, what);
  };
  auto outputsOf = [&](const TensorMap& feeds) { return executor.run(feeds, result.outputs); };
  auto compare = [&](const TensorMap& got, const TensorMap& reference, NoiseSums& sums) {
    for (const std::string& name : result.outputs)
      sums.add(got.at(name), reference.at(name));
  };

  bool count_top1 = true;
  int64_t float_top1 = 0, quantized_top1 = 0;
  for (size_t batch_index = 0; batch_index < batches.size(); ++batch_index) {
    const AnalysisBatch& batch = batches[batch_index];
    const TensorMap& feeds = batch.feeds;
    // The float run: the reference outputs, the values every quantizer sees, their ranges.
    std::unordered_map<std::string, at::Tensor> float_values;
    TensorMap reference;
    if (options.references != nullptr) {
      reference = options.references->at(batch_index);
    } else {
      modes.setAll(false);
      HookScope hooks(executor);
      for (const Site& s : sites) {
        if (s.constant) continue;
        hooks.add(s.input, [&, s](const Value&, const at::Tensor& t) {
          if (t.is_floating_point()) {
            float_values[s.input] = t;
            ranges[s.quantizer].add(t, grids[s.quantizer], quantizers[s.quantizer]->scheme());
          }
          return t;
        });
      }
      reference = outputsOf(feeds);
      ran("float");
      if (options.keep_references) result.references.push_back(reference);
    }
    for (const std::string& name : result.outputs) {
      require(reference.at(name).is_floating_point(),
              "output '" + name + "' is not a float tensor; name float outputs to score");
    }
    result.samples += reference.at(result.outputs.front()).dim() > 0
                          ? reference.at(result.outputs.front()).size(0)
                          : 1;

    // Every quantizer on: the outputs' noise, each quantizer's own and accumulated noise.
    {
      modes.setAll(true);
      HookScope hooks(executor);
      std::unordered_map<std::string, at::Tensor> seen;
      for (const Site& s : sites) {
        if (s.constant) continue;
        hooks.add(s.input, [&, s](const Value&, const at::Tensor& t) {
          seen[s.input] = t;
          return t;
        });
        hooks.add(s.output, [&, s](const Value&, const at::Tensor& t) {
          auto it = seen.find(s.input);
          if (it != seen.end() && t.is_floating_point()) {
            QuantizerSensitivity& r = result.quantizers[s.quantizer];
            if (!r.local) r.local.emplace();
            r.local->add(t, it->second);
            // The float run may not have reached this value (a branch taken only here).
            const auto reference_value = float_values.find(s.input);
            if (reference_value != float_values.end() &&
                reference_value->second.sizes() == t.sizes()) {
              if (!r.accumulated) r.accumulated.emplace();
              r.accumulated->add(t, reference_value->second);
            }
            seen.erase(it);
          }
          return t;
        });
      }
      const TensorMap quantized_outputs = outputsOf(feeds);
      compare(quantized_outputs, reference, result.quantized);
      if (options.keep_outputs) result.quantized_outputs.push_back(quantized_outputs);
      const at::Tensor& scores = reference.at(result.outputs.front());
      count_top1 = count_top1 && batch.labels.defined() && scores.dim() == 2 &&
                   scores.size(1) >= 2 && batch.labels.numel() == scores.size(0);
      if (count_top1) {
        const at::Tensor labels = batch.labels.to(at::kLong).reshape({-1});
        float_top1 += scores.argmax(1).eq(labels).sum().item<int64_t>();
        quantized_top1 +=
            quantized_outputs.at(result.outputs.front()).argmax(1).eq(labels).sum().item<int64_t>();
      }
      ran("all quantizers");
    }
    float_values.clear();

    for (size_t i = 0; i < quantizers.size(); ++i) {
      if (!measured[i]) continue;
      QuantizerSensitivity& r = result.quantizers[i];
      if (options.isolated) {
        modes.setAll(false);
        quantizers[i]->setFakeQuantEnabled(true);
        if (!r.isolated) r.isolated.emplace();
        compare(outputsOf(feeds), reference, *r.isolated);
        ran("only " + quantizers[i]->name());
      }
      if (options.leave_one_out) {
        modes.setAll(true);
        quantizers[i]->setFakeQuantEnabled(false);
        if (!r.leave_one_out) r.leave_one_out.emplace();
        compare(outputsOf(feeds), reference, *r.leave_one_out);
        ran("all but " + quantizers[i]->name());
      }
    }

    if (options.fisher) {
      modes.setAll(false);
      const GradScope grad(executor);
      // Seeded by batch alone, so the probes do not change with which other figures ran.
      at::Generator generator =
          at::make_generator<at::CPUGeneratorImpl>(options.seed * 7919 + batch_index);
      for (int64_t probe = 0; probe < options.fisher_probes; ++probe) {
        struct Watched {
          size_t quantizer;
          at::Tensor value;  // requires grad
          at::Tensor error;  // its quantization error
        };
        std::vector<Watched> watched;
        TensorMap outputs;
        {
          HookScope hooks(executor);
          for (const Site& s : sites) {
            hooks.add(s.input, [&, s](const Value&, const at::Tensor& t) {
              if (!t.is_floating_point()) return t;
              const at::Tensor x = withGrad(t);
              at::Tensor error;
              {
                at::NoGradGuard no_grad;
                const at::Tensor plain = t.detach();
                error = quantized(*quantizers[s.quantizer], plain) - plain;
              }
              watched.push_back({s.quantizer, x, error});
              return x;
            });
          }
          outputs = outputsOf(feeds);
        }
        at::Tensor objective;
        for (const std::string& name : result.outputs) {
          const at::Tensor& y = outputs.at(name);
          const at::Tensor direction = at::randn(y.sizes(), generator, y.options());
          const at::Tensor term = (y * direction).sum();
          objective = objective.defined() ? objective + term : term;
        }
        if (objective.requires_grad()) objective.backward();
        std::vector<double> projection(quantizers.size(), 0.0);
        std::vector<bool> reached(quantizers.size(), false);
        for (const Watched& w : watched) {
          if (!w.value.grad().defined()) continue;
          projection[w.quantizer] +=
              (w.value.grad().to(at::kDouble) * w.error.to(at::kDouble)).sum().item<double>();
          reached[w.quantizer] = true;
        }
        for (size_t i = 0; i < quantizers.size(); ++i) {
          QuantizerSensitivity& r = result.quantizers[i];
          const double share =
              projection[i] * projection[i] / static_cast<double>(options.fisher_probes);
          r.fisher = r.fisher.value_or(0) + (reached[i] ? share : 0);
        }
        ran("Fisher probe");
      }

      // With every quantizer on: the gradient of <e, y> (e the outputs' error, held fixed) at
      // each quantizer's output, against that quantizer's own error there. Leaving quantizer i
      // out moves the outputs by about -J d_i, which takes 2 <e, J d_i> - |J d_i|^2 off the noise:
      // the first term from this pass, the second from the Fisher probes.
      modes.setAll(true);
      struct Watched {
        size_t quantizer;
        at::Tensor value;  // the quantizer's output, requires grad
        at::Tensor error;  // output minus input
      };
      std::vector<Watched> watched;
      std::unordered_map<std::string, at::Tensor> inputs;
      TensorMap outputs;
      {
        HookScope hooks(executor);
        for (const Site& s : sites) {
          hooks.add(s.input, [&, s](const Value&, const at::Tensor& t) {
            if (t.is_floating_point()) inputs[s.input] = t.detach();
            return t;
          });
          hooks.add(s.output, [&, s](const Value&, const at::Tensor& t) {
            const auto in = inputs.find(s.input);
            if (!t.is_floating_point() || in == inputs.end() || in->second.sizes() != t.sizes())
              return t;
            const at::Tensor x = withGrad(t);
            watched.push_back({s.quantizer, x, t.detach() - in->second});
            return x;
          });
        }
        outputs = outputsOf(feeds);
      }
      at::Tensor objective;
      for (const std::string& name : result.outputs) {
        const at::Tensor& y = outputs.at(name);
        const at::Tensor term = (y * (y.detach() - reference.at(name))).sum();
        objective = objective.defined() ? objective + term : term;
      }
      if (objective.requires_grad()) objective.backward();
      for (const Watched& w : watched) {
        if (!w.value.grad().defined()) continue;
        QuantizerSensitivity& r = result.quantizers[w.quantizer];
        r.error_alignment =
            r.error_alignment.value_or(0) +
            (w.value.grad().to(at::kDouble) * w.error.to(at::kDouble)).sum().item<double>();
      }
      ran("error alignment");
    }
  }

  for (QuantizerSensitivity& r : result.quantizers) {
    if (r.error_alignment && r.fisher) r.fisher_gain = 2 * *r.error_alignment - *r.fisher;
  }

  for (size_t i = 0; i < quantizers.size(); ++i) {
    if (!ranges[i].empty()) result.quantizers[i].range = ranges[i].finish();
  }
  if (count_top1) {
    result.float_top1 = float_top1;
    result.quantized_top1 = quantized_top1;
  }
  return result;
}

}  // namespace qforge::algos
