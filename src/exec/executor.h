// Runs a Graph on ATen. Every node is resolved against the OpInfo table when the executor is
// built, so an unsupported op is reported up front (node, op, opset), never mid-run.
#pragma once

#include <ATen/core/Tensor.h>

#include <any>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "exec/op_info.h"
#include "exec/step_memo.h"
#include "ir/graph.h"

namespace qforge {

using TensorMap = std::unordered_map<std::string, at::Tensor>;

// Called when a value becomes available (graph input, initializer read, node output). Returns the
// tensor the rest of the graph sees: return `t` unchanged to observe, anything else to replace.
using ValueHook = std::function<at::Tensor(const Value& value, const at::Tensor& t)>;

struct ExecutorOptions {
  // Record autograd history (training, AdaRound). Off: runs under no-grad.
  bool enable_grad = false;
  // Time every node (wall clock); read with Executor::profile().
  bool profile = false;
};

// Accumulated wall time of one node over the runs since the last resetProfile().
struct NodeTiming {
  const Node* node;
  double total_ms = 0;
  int64_t calls = 0;
};

class Executor {
 public:
  // Keeps a reference to `graph`: it must outlive the executor. Initializers are read at each
  // run, so weight updates are seen without rebuilding. Throws qforge::Error for each node whose
  // op has no lowering at the graph's opset.
  explicit Executor(const Graph& graph, ExecutorOptions options = {},
                    const OpRegistry& registry = OpRegistry::builtin());

  // Runs the nodes needed to compute `outputs` (graph outputs when empty) from `feeds`. Feeds may
  // name graph inputs or any intermediate value (then only the subgraph after them runs), and
  // override initializers of the same name. Batch size may differ from the declared one.
  TensorMap run(const TensorMap& feeds, const std::vector<std::string>& outputs = {});

  // Convenience: positional graph inputs in, graph outputs out (graph order).
  std::vector<at::Tensor> operator()(const std::vector<at::Tensor>& inputs);

  // Hooks run in registration order. Returns an id for removeHook.
  int64_t addHook(const std::string& value_name, ValueHook hook);
  // A hook that runs after every addHook hook of its value, whenever they were added: for hooks
  // that read the value the others leave.
  int64_t addFinalHook(const std::string& value_name, ValueHook hook);
  void removeHook(int64_t id);
  void clearHooks();

  void setGradEnabled(bool enabled) { options_.enable_grad = enabled; }
  // Per-node timings in execution order (empty unless ExecutorOptions::profile).
  const std::vector<NodeTiming>& profile() const { return timings_; }
  void resetProfile();
  const Graph& graph() const { return graph_; }

  // Ops of `graph` that `registry` cannot run, as "Op (opset N): node names..." lines.
  static std::vector<std::string> unsupportedOps(
      const Graph& graph, const OpRegistry& registry = OpRegistry::builtin());

 private:
  // Steps after a step that its lowering may compute in its own kernel (OpInfo::fusable_followers),
  // planned from the graph; offered at run time up to the first value between them that something
  // observes (OpContext::tail).
  struct Tail {
    std::vector<size_t> steps;
    // closed[k]: no value the step and steps[0..k] compute, but the last, is read elsewhere; so a
    // lowering may stop after steps[k].
    std::vector<bool> closed;
  };
  struct Step {
    const Node* node;
    const OpInfo* info;
    int64_t opset;
    // Learnt on the first run: the op has no float16 kernel, so it runs widened to float32.
    mutable bool half_via_float = false;
    mutable std::any state;  // OpContext::nodeState
    Tail tail;
    // The node's inputs and outputs as indices into values_ (-1: an omitted optional input).
    std::vector<int64_t> inputs;
    std::vector<int64_t> outputs;
    // The last result of a shape computation, and what it was computed from.
    mutable StepMemo memo;
  };
  // What one run tracks per value, in vectors indexed like values_: a run at batch 1 spent more
  // time building hash maps of these than in most kernels.
  struct RunState;
  struct HookEntry {
    int64_t id;
    std::string value;
    ValueHook hook;
    bool final = false;
  };

  TensorMap runSteps(const TensorMap& feeds, const std::vector<const Value*>& wanted);
  at::Tensor applyHooks(const Value& v, at::Tensor t) const;
  bool hooked(const Value& v) const;
  Tail planTail(size_t head, const std::unordered_map<const Node*, size_t>& index) const;
  void planMemos();
  size_t offeredTail(const Step& s, const RunState& run) const;
  std::vector<bool> overwritableInputs(const Step& s, const OpContext& ctx,
                                       const RunState& run) const;
  // The index of `v` in values_, adding it when no node reads or writes it (a requested graph
  // input).
  size_t indexOf(const Value* v);

  const Graph& graph_;
  ExecutorOptions options_;
  std::vector<Step> steps_;           // topological order
  std::vector<const Value*> values_;  // every value a step, input or output refers to
  std::unordered_map<const Value*, size_t> value_index_;
  std::vector<int64_t> producer_step_;  // per value: the step computing it, or -1
  std::vector<NodeTiming> timings_;     // parallel to steps_ when profiling
  std::vector<HookEntry> hooks_;
  int64_t next_hook_id_ = 1;
};

// Hooks added through it are removed from the executor when the scope ends, however it ends.
class HookScope {
 public:
  explicit HookScope(Executor& executor) : executor_(executor) {}
  ~HookScope() {
    for (int64_t id : ids_)
      executor_.removeHook(id);
  }
  HookScope(const HookScope&) = delete;
  HookScope& operator=(const HookScope&) = delete;
  void add(const std::string& value, ValueHook hook) {
    ids_.push_back(executor_.addHook(value, std::move(hook)));
  }
  void addFinal(const std::string& value, ValueHook hook) {
    ids_.push_back(executor_.addFinalHook(value, std::move(hook)));
  }

 private:
  Executor& executor_;
  std::vector<int64_t> ids_;
};

}  // namespace qforge
