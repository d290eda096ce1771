#include "exec/executor.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "core/error.h"
#include "core/resource_limits.h"
#include "ir/captured_values.h"
#include "ir/onnx_import.h"

namespace qforge {

namespace {

int64_t opsetOf(const Graph& graph, const Node& node) {
  int64_t v = graph.model.opsetFor(node.domain());
  // A model that imports no version for the default domain is treated as the oldest we run.
  return v > 0 ? v : (node.domain().empty() ? 1 : 0);
}

// A control-flow node's bodies run only when the node does; their ops are checked up front all
// the same, so an op qforge cannot run is reported before any work, wherever it sits.
void checkBodies(const Node& node, const ModelInfo& model, const ExecutorOptions& options,
                 const OpRegistry& registry) {
  for (const Attribute& a : node.attributes.all()) {
    for (const onnx::GraphProto& body : subgraphsOf(a)) {
      try {
        Subgraph sub = importSubgraph(body, model);
        Executor check(sub.graph, options, registry);
      } catch (const Error& e) {
        throw e.within(node.describe() + ", body '" + a.name + "'");
      }
    }
  }
}

}  // namespace

namespace {

// Op -> the nodes (in bodies too, named "If_0/inner") that `registry` cannot run.
void collectUnsupported(const Graph& graph, const OpRegistry& registry, const std::string& prefix,
                        std::map<std::string, std::vector<std::string>>& missing) {
  for (const Node* node : graph.nodes()) {
    const std::string name =
        prefix + (node->name().empty() ? node->outputs().at(0)->name() : node->name());
    for (const Attribute& a : node->attributes.all()) {
      for (const onnx::GraphProto& body : subgraphsOf(a)) {
        try {
          collectUnsupported(importSubgraph(body, graph.model).graph, registry, name + "/",
                             missing);
        } catch (const Error&) {
          // A body that does not import is reported when the model runs, with its reason.
        }
      }
    }
    const int64_t opset = opsetOf(graph, *node);
    if (registry.find(node->domain(), node->opType(), opset) != nullptr) continue;
    std::string key = (node->domain().empty() ? "" : node->domain() + "::") + node->opType() +
                      " (opset " + std::to_string(opset) + ")";
    missing[key].push_back(name);
  }
}

}  // namespace

std::vector<std::string> Executor::unsupportedOps(const Graph& graph, const OpRegistry& registry) {
  std::map<std::string, std::vector<std::string>> missing;
  collectUnsupported(graph, registry, "", missing);
  std::vector<std::string> lines;
  for (const auto& [op, nodes] : missing) {
    std::string line = op + ": ";
    for (size_t i = 0; i < nodes.size() && i < 3; ++i)
      line += (i ? ", " : "") + nodes[i];
    if (nodes.size() > 3) line += " and " + std::to_string(nodes.size() - 3) + " more";
    lines.push_back(line);
  }
  return lines;
}

Executor::Executor(const Graph& graph, ExecutorOptions options, const OpRegistry& registry)
    : graph_(graph), options_(options) {
  // Nodes without inputs (Constant, mostly) first: exporters put a Clip's bound right before the
  // Clip, which would otherwise sit between a Conv and the Clip it can compute (Step::tail).
  std::vector<Node*> order = graph.topologicalOrder();
  std::stable_partition(order.begin(), order.end(), [](const Node* node) {
    return std::all_of(node->inputs().begin(), node->inputs().end(),
                       [](const Value* in) { return in == nullptr; });
  });
  for (const Node* node : order) {
    const int64_t opset = opsetOf(graph, *node);
    const OpInfo* info = registry.find(node->domain(), node->opType(), opset);
    if (info == nullptr) {
      const std::string op = (node->domain().empty() ? "" : node->domain() + "::") + node->opType();
      if (node->domain().empty() && opset > kNewestOnnxOpset) {
        throw Error("the model imports ONNX opset " + std::to_string(opset) +
                    "; qforge knows ONNX opsets up to " + std::to_string(kNewestOnnxOpset) +
                    ": convert the model to opset " + std::to_string(kNewestOnnxOpset) +
                    " or lower (its exporter's opset option, or onnx.version_converter)");
      }
      throw Error(node->describe() + ": qforge cannot run " + op + " at opset " +
                  std::to_string(opset) +
                  (registry.knowsOp(node->domain(), node->opType())
                       ? " (other opset versions are supported; convert the model's opset)"
                       : " (the op is not supported yet)"));
    }
    if (hasSubgraphs(*node)) checkBodies(*node, graph.model, options, registry);
    steps_.push_back(Step{node, info, opset, false, {}, {}, {}, {}, StepMemo()});
  }
  std::unordered_map<const Node*, size_t> index;
  for (size_t i = 0; i < steps_.size(); ++i)
    index[steps_[i].node] = i;
  for (const Value* v : graph.inputs())
    indexOf(v);
  for (size_t i = 0; i < steps_.size(); ++i) {
    Step& s = steps_[i];
    s.tail = planTail(i, index);
    for (const Value* in : s.node->inputs())
      s.inputs.push_back(in == nullptr ? -1 : static_cast<int64_t>(indexOf(in)));
    for (const Value* out : s.node->outputs()) {
      s.outputs.push_back(static_cast<int64_t>(indexOf(out)));
      producer_step_[s.outputs.back()] = static_cast<int64_t>(i);
    }
  }
  for (const Value* v : graph.outputs())
    indexOf(v);
  planMemos();
  resetProfile();
}

// Which steps remember their last result (exec/step_memo.h), in execution order: a value is
// stable when it is an initializer or a remembered step's output.
void Executor::planMemos() {
  std::vector<bool> stable(values_.size(), false);
  for (size_t v = 0; v < values_.size(); ++v)
    stable[v] = producer_step_[v] < 0 && values_[v]->isInitializer();
  for (Step& s : steps_) {
    if (!s.tail.steps.empty()) continue;  // a lowering that computes its followers
    std::vector<bool> stable_inputs;
    for (int64_t in : s.inputs)
      stable_inputs.push_back(in < 0 || stable[in]);
    s.memo = StepMemo(StepMemo::keyFor(*s.node, stable_inputs));
    for (int64_t out : s.outputs)
      stable[out] = s.memo.enabled();
  }
}

size_t Executor::indexOf(const Value* v) {
  const auto [it, added] = value_index_.emplace(v, values_.size());
  if (added) {
    values_.push_back(v);
    producer_step_.push_back(-1);
  }
  return it->second;
}

// One run's view of the values, by index: fed tensors, remaining reads, the values kept for the
// caller, and the live tensors.
struct Executor::RunState {
  std::vector<const at::Tensor*> fed;
  std::vector<char> needed;  // per step
  std::vector<size_t> reads;
  std::vector<char> keep;
  std::vector<at::Tensor> env;
  std::vector<char> present;
};

namespace {

// The most followers a lowering computes: LayerNorm written out (ReduceMean's eight).
constexpr size_t kMaxTail = 8;

}  // namespace

// The followers of step `head` that its lowering may compute in its own kernel, in execution
// order: nodes of the types it names that read a value computed by `head` or an earlier follower
// (only output 0 of each is used), whose other inputs are ready before `head` runs. Cut after the
// last follower where the nodes so far form a closed region: every value they compute but the
// last is read only inside it and is no graph output. A chain of single readers is closed at
// every length; a LayerNorm written out only as a whole, since its Sub feeds Pow and Div.
Executor::Tail Executor::planTail(size_t head,
                                  const std::unordered_map<const Node*, size_t>& index) const {
  const std::vector<std::string>& fusable = steps_[head].info->fusable_followers;
  if (fusable.empty()) return {};
  std::vector<const Node*> region = {steps_[head].node};
  auto inside = [&](const Value* v) {
    return v != nullptr && v->producer() != nullptr &&
           std::find(region.begin(), region.end(), v->producer()) != region.end();
  };
  auto onlyOutputZeroUsed = [&](const Node* node) {
    return !node->outputs().empty() &&
           std::all_of(node->outputs().begin() + 1, node->outputs().end(), [&](const Value* o) {
             return o->uses().empty() && !graph_.isGraphOutput(o);
           });
  };
  auto joinable = [&](const Node* next) {
    if (!next->domain().empty() ||
        std::find(fusable.begin(), fusable.end(), next->opType()) == fusable.end() ||
        std::find(region.begin(), region.end(), next) != region.end() ||
        !onlyOutputZeroUsed(next)) {
      return false;
    }
    return std::all_of(next->inputs().begin(), next->inputs().end(), [&](const Value* in) {
      return in == nullptr || inside(in) || in->producer() == nullptr ||
             index.at(in->producer()) < head;
    });
  };
  // Closed when each value computed so far but the last node's is read only by region nodes.
  auto closed = [&]() {
    for (size_t i = 0; i + 1 < region.size(); ++i) {
      const Value* v = region[i]->outputs()[0];
      if (graph_.isGraphOutput(v)) return false;
      for (const Use& use : v->uses()) {
        if (std::find(region.begin(), region.end(), use.node) == region.end()) return false;
      }
    }
    return true;
  };
  if (!onlyOutputZeroUsed(region[0])) return {};
  Tail tail;
  size_t closed_length = 0;
  while (tail.steps.size() < kMaxTail) {
    // The earliest joinable reader of a region value keeps the followers in execution order.
    const Node* next = nullptr;
    for (const Node* member : region) {
      for (const Use& use : member->outputs()[0]->uses()) {
        if ((next == nullptr || index.at(use.node) < index.at(next)) && joinable(use.node)) {
          next = use.node;
        }
      }
    }
    if (next == nullptr) break;
    region.push_back(next);
    tail.steps.push_back(index.at(next));
    tail.closed.push_back(closed());
    if (tail.closed.back()) closed_length = tail.steps.size();
  }
  tail.steps.resize(closed_length);
  tail.closed.resize(closed_length);
  return tail;
}

// How much of the planned tail is offered: none while gradients are recorded, else the followers
// up to the first value between them that something can see (a hook: an observer or a quantizer;
// a requested or a fed value).
size_t Executor::offeredTail(const Step& s, const RunState& run) const {
  if (options_.enable_grad) return 0;
  size_t count = 0;
  const Step* previous = &s;
  for (size_t t : s.tail.steps) {
    // Checked in turn, the step's value and each earlier follower's all stay unseen.
    const int64_t between = previous->outputs[0];
    if (!run.needed[t] || hooked(*values_[between]) || run.keep[between] || run.fed[between]) {
      break;
    }
    ++count;
    previous = &steps_[t];
  }
  return count;
}

void Executor::resetProfile() {
  timings_.clear();
  if (!options_.profile) return;
  for (const Step& s : steps_)
    timings_.push_back(NodeTiming{s.node});
}

int64_t Executor::addHook(const std::string& value_name, ValueHook hook) {
  require(graph_.findValue(value_name) != nullptr,
          "cannot hook '" + value_name + "': no value of that name in the graph");
  hooks_.push_back(HookEntry{next_hook_id_, value_name, std::move(hook), false});
  return next_hook_id_++;
}

int64_t Executor::addFinalHook(const std::string& value_name, ValueHook hook) {
  const int64_t id = addHook(value_name, std::move(hook));
  hooks_.back().final = true;
  return id;
}

void Executor::removeHook(int64_t id) {
  hooks_.erase(
      std::remove_if(hooks_.begin(), hooks_.end(), [&](const HookEntry& h) { return h.id == id; }),
      hooks_.end());
}

void Executor::clearHooks() {
  hooks_.clear();
}

bool Executor::hooked(const Value& v) const {
  return std::any_of(hooks_.begin(), hooks_.end(),
                     [&](const HookEntry& h) { return h.value == v.name(); });
}

at::Tensor Executor::applyHooks(const Value& v, at::Tensor t) const {
  for (const bool final : {false, true}) {
    for (const HookEntry& h : hooks_) {
      if (h.final == final && h.value == v.name()) t = h.hook(v, t);
    }
  }
  return t;
}

TensorMap Executor::run(const TensorMap& feeds, const std::vector<std::string>& outputs) {
  for (const auto& [name, tensor] : feeds) {
    // Checked before composing a message: this runs for every feed of every run.
    if (graph_.findValue(name) == nullptr) {
      throw Error("input '" + name +
                  "' is not a value of the model; its inputs are listed by `qforge inspect`");
    }
    if (!tensor.defined()) throw Error("input '" + name + "' is an empty (undefined) tensor");
  }
  std::vector<const Value*> wanted;
  if (outputs.empty()) {
    wanted.assign(graph_.outputs().begin(), graph_.outputs().end());
  } else {
    for (const auto& name : outputs)
      wanted.push_back(graph_.value(name));
  }
  if (options_.enable_grad) {
    at::AutoGradMode grad(true);
    return runSteps(feeds, wanted);
  }
  at::NoGradGuard no_grad;
  return runSteps(feeds, wanted);
}

namespace {

// While a node runs, the executor holds exactly two handles to each input tensor: its
// environment entry and the OpContext's copy. More handles mean someone else (the caller's feed,
// the graph's initializer passed through Identity, a hook that kept it) can still see the data.
constexpr long kExecutorHandles = 2;

// Only the executor sees this tensor and its storage, and the tensor covers all of it (in any
// dense layout: convolutions leave their outputs channels-last).
bool soleOwner(const at::Tensor& t) {
  return t.defined() && t.use_count() == kExecutorHandles && t.storage().use_count() == 1 &&
         t.is_non_overlapping_and_dense() && t.storage_offset() == 0 &&
         t.storage().nbytes() == static_cast<size_t>(t.numel()) * t.element_size();
}

}  // namespace

std::vector<bool> Executor::overwritableInputs(const Step& s, const OpContext& ctx,
                                               const RunState& run) const {
  std::vector<bool> flags(s.inputs.size(), false);
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    const int64_t in = s.inputs[i];
    if (in < 0 || producer_step_[in] < 0 || run.keep[in] || run.fed[in]) continue;
    // This node must be the last reader, reading it once: otherwise a later slot or node would
    // see the overwritten data.
    const auto uses_here = std::count(s.inputs.begin(), s.inputs.end(), in);
    if (uses_here != 1 || run.reads[in] != 1) continue;
    flags[i] = soleOwner(ctx.inputs()[i]);
  }
  return flags;
}

namespace {

// ATen 1.13 has no CPU kernels in float16 for convolution, matmul, pooling and resampling, which
// models converted to float16 are full of. Such an op runs as ONNX Runtime's CPU provider runs
// it: inputs cast to float32, the op, results cast back to float16.
bool lacksHalfKernel(const std::string& message, const OpContext& ctx) {
  if (message.find("not implemented for 'Half'") == std::string::npos) return false;
  for (const at::Tensor& t : ctx.inputs()) {
    if (t.defined() && t.scalar_type() == at::kHalf) return true;
  }
  return false;
}

std::vector<at::Tensor> runHalfInFloat32(const OpInfo& info, const OpContext& ctx) {
  std::vector<at::Tensor> widened;
  for (const at::Tensor& t : ctx.inputs())
    widened.push_back(t.defined() && t.scalar_type() == at::kHalf ? t.to(at::kFloat) : t);
  OpContext wide(ctx.node(), ctx.opset(), std::move(widened));
  std::vector<at::Tensor> results = info.run(wide);
  for (at::Tensor& r : results) {
    if (r.defined() && r.scalar_type() == at::kFloat) r = r.to(at::kHalf);
  }
  return results;
}

}  // namespace

TensorMap Executor::runSteps(const TensorMap& feeds, const std::vector<const Value*>& wanted) {
  // A Reshape, Expand or ConstantOfShape may ask for any size at run time: refused before it
  // is allocated (core/resource_limits.h), naming the node below.
  TensorAllocationLimit allocation_limit;
  std::vector<size_t> wanted_index;
  for (const Value* v : wanted)
    wanted_index.push_back(indexOf(v));
  const size_t value_count = values_.size();
  RunState run;
  run.fed.assign(value_count, nullptr);
  for (const auto& [name, tensor] : feeds) {
    // A fed value that no step reads and nobody asked for plays no part.
    const auto it = value_index_.find(graph_.findValue(name));
    if (it != value_index_.end()) run.fed[it->second] = &tensor;
  }
  // Which steps are needed: walk back from the wanted values, stopping at fed values.
  run.needed.assign(steps_.size(), 0);
  std::vector<size_t> work = wanted_index;
  while (!work.empty()) {
    const size_t v = work.back();
    work.pop_back();
    if (run.fed[v]) continue;
    const int64_t p = producer_step_[v];
    if (p < 0) {
      if (!values_[v]->isInitializer()) {
        throw Error("input '" + values_[v]->name() + "' was not given; the model needs it");
      }
      continue;
    }
    if (run.needed[p]) continue;
    run.needed[p] = 1;
    for (int64_t in : steps_[p].inputs) {
      if (in >= 0) work.push_back(static_cast<size_t>(in));
    }
  }

  // Remaining reads per value, so intermediates are freed as soon as nothing needs them.
  run.reads.assign(value_count, 0);
  for (size_t step = 0; step < steps_.size(); ++step) {
    if (!run.needed[step]) continue;
    for (int64_t in : steps_[step].inputs) {
      if (in >= 0) ++run.reads[in];
    }
  }
  run.keep.assign(value_count, 0);
  for (size_t v : wanted_index)
    run.keep[v] = 1;

  run.env.resize(value_count);
  run.present.assign(value_count, 0);
  auto store = [&](size_t v, at::Tensor t) {
    run.env[v] = std::move(t);
    run.present[v] = 1;
  };
  auto fetch = [&](size_t v) -> at::Tensor {
    if (run.present[v]) return run.env[v];
    at::Tensor t = run.fed[v] ? *run.fed[v] : values_[v]->initializer();
    t = applyHooks(*values_[v], t);
    store(v, t);
    return t;
  };

  // A node has run: its inputs' remaining reads drop, and those nothing needs any more are freed.
  auto release = [&](const Step& done) {
    for (int64_t in : done.inputs) {
      if (in >= 0 && --run.reads[in] == 0 && !run.keep[in]) {
        run.env[in] = at::Tensor();
        run.present[in] = 0;
      }
    }
  };
  // Steps whose work an earlier step's lowering did in its own kernel (Step::tail).
  std::vector<bool> absorbed(steps_.size(), false);
  for (size_t step = 0; step < steps_.size(); ++step) {
    const Step& s = steps_[step];
    if (!run.needed[step] || absorbed[step]) continue;
    const auto start = options_.profile ? std::chrono::steady_clock::now()
                                        : std::chrono::steady_clock::time_point();
    std::vector<at::Tensor> inputs;
    inputs.reserve(s.inputs.size());
    for (int64_t in : s.inputs)
      inputs.push_back(in >= 0 ? fetch(in) : at::Tensor());
    std::vector<at::Tensor> results;
    size_t absorbed_count = 0;
    const std::vector<at::Tensor>* remembered = s.memo.enabled() ? s.memo.lookup(inputs) : nullptr;
    if (remembered != nullptr) {
      results = *remembered;
    } else {
      OpContext ctx(*s.node, s.opset, std::move(inputs));
      ctx.setNodeState(&s.state);
      // A remembered step's inputs stay as they were: the memo compares them next run.
      if (!options_.enable_grad && !s.memo.enabled()) {
        ctx.setOverwritable(overwritableInputs(s, ctx, run));
      }
      if (const size_t offered = offeredTail(s, run); offered > 0) {
        std::vector<OpContext> tail;
        tail.reserve(offered);
        std::vector<int64_t> computed = {s.outputs[0]};
        for (size_t k = 0; k < offered; ++k) {
          const Step& t = steps_[s.tail.steps[k]];
          std::vector<at::Tensor> follower_inputs;
          follower_inputs.reserve(t.inputs.size());
          for (int64_t in : t.inputs) {
            // Values computed inside the lowering's kernel do not exist on their own: undefined.
            const bool inside = std::find(computed.begin(), computed.end(), in) != computed.end();
            follower_inputs.push_back(in >= 0 && !inside ? fetch(in) : at::Tensor());
          }
          tail.emplace_back(*t.node, t.opset, std::move(follower_inputs));
          computed.push_back(t.outputs[0]);
        }
        ctx.setTail(std::move(tail),
                    std::vector<bool>(s.tail.closed.begin(), s.tail.closed.begin() + offered));
      }
      try {
        results = s.half_via_float ? runHalfInFloat32(*s.info, ctx) : s.info->run(ctx);
      } catch (const ResourceLimitError& e) {
        throw e.within(s.node->describe());
      } catch (const Error&) {
        throw;
      } catch (const std::exception& e) {
        // ATen's messages are multi-line with a C++ backtrace; keep the first line.
        std::string what = e.what();
        what = what.substr(0, what.find('\n'));
        if (!s.half_via_float && lacksHalfKernel(what, ctx)) {
          s.half_via_float = true;
          results = runHalfInFloat32(*s.info, ctx);
        } else {
          throw Error(s.node->describe() + ", opset " + std::to_string(s.opset) + ": " + what);
        }
      }
      absorbed_count = std::min(ctx.absorbed(), ctx.tail().size());
      if (absorbed_count > 0 && !s.tail.closed[absorbed_count - 1]) {
        throw Error(s.node->describe() + ": its lowering computed " +
                    std::to_string(absorbed_count) +
                    " following node(s), whose values are also read elsewhere (a qforge bug)");
      }
      if (s.memo.enabled()) s.memo.remember(ctx.inputs(), results);
    }
    if (absorbed_count > 0) {
      // The lowering computed its followers too: its output is the last one's, and the
      // followers' reads are done.
      const int64_t last = steps_[s.tail.steps[absorbed_count - 1]].outputs[0];
      store(last, applyHooks(*values_[last], results.at(0)));
      for (size_t k = 0; k < absorbed_count; ++k) {
        absorbed[s.tail.steps[k]] = true;
        release(steps_[s.tail.steps[k]]);
      }
    }
    const auto& outs = s.node->outputs();
    if (absorbed_count == 0 && results.size() < outs.size()) {
      // Trailing optional outputs nobody reads may be omitted by a lowering.
      for (size_t i = results.size(); i < outs.size(); ++i) {
        require(outs[i]->uses().empty() && !graph_.isGraphOutput(outs[i]),
                s.node->describe() + ": output " + std::to_string(i) + " is used but qforge does " +
                    "not compute it");
      }
    }
    for (size_t i = 0; absorbed_count == 0 && i < outs.size() && i < results.size(); ++i) {
      if (!results[i].defined()) continue;
      store(s.outputs[i], applyHooks(*outs[i], results[i]));
    }
    release(s);
    if (options_.profile) {
      timings_[step].total_ms +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      timings_[step].calls++;
    }
  }

  TensorMap result;
  for (size_t k = 0; k < wanted.size(); ++k) {
    const Value* v = wanted[k];
    at::Tensor t = fetch(wanted_index[k]);
    if (!t.defined()) throw Error("value '" + v->name() + "' was not computed");
    result[v->name()] = t;
  }
  return result;
}

std::vector<at::Tensor> Executor::operator()(const std::vector<at::Tensor>& inputs) {
  std::vector<const Value*> runtime_inputs;
  for (const Value* v : graph_.inputs()) {
    if (!v->isInitializer()) runtime_inputs.push_back(v);
  }
  require(inputs.size() == runtime_inputs.size(),
          "the model takes " + std::to_string(runtime_inputs.size()) + " input(s), got " +
              std::to_string(inputs.size()));
  TensorMap feeds;
  for (size_t i = 0; i < inputs.size(); ++i)
    feeds[runtime_inputs[i]->name()] = inputs[i];
  TensorMap out = run(feeds);
  std::vector<at::Tensor> result;
  for (const Value* v : graph_.outputs())
    result.push_back(out.at(v->name()));
  return result;
}

}  // namespace qforge
