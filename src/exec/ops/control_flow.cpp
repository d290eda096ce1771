// The control-flow ops as ONNX's operator pages define them: If (opsets 1-21), Loop (1-21) and
// Scan (8, and 9-21 without the batch axis). Sequence and optional values, which bodies may carry
// from opset 16 on, are not tensors and are not supported.
//
// Each body is imported from the node's attribute when the node runs and run by a nested
// Executor, so autograd, float16 handling and error messages work inside as outside. The
// quantization passes never see a body's values: they stay float, and the report lists the node
// among the float ops.
#include "exec/ops/control_flow.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "exec/executor.h"
#include "exec/ops/common.h"
#include "ir/captured_values.h"
#include "ir/onnx_import.h"

namespace qforge {

namespace {

using ops::kLatestOpset;
using ops::normalizeAxis;
using ops::op;
using ops::shapeString;

// One body of the running node, imported and ready to run many times.
class Body {
 public:
  Body(const OpContext& ctx, const std::string& attribute) : ctx_(ctx) {
    const Attribute* a = ctx.node().attributes.find(attribute);
    if (a == nullptr) ctx.fail("has no '" + attribute + "' body");
    const std::vector<onnx::GraphProto> bodies = subgraphsOf(*a);
    if (bodies.size() != 1) ctx.fail("attribute '" + attribute + "' is not a graph");
    ModelInfo outer;
    outer.opset_imports = {{"", ctx.opset()}};
    try {
      sub_ = std::make_unique<Subgraph>(importSubgraph(bodies.front(), outer));
      ExecutorOptions options;
      options.enable_grad = at::GradMode::is_enabled();
      executor_ = std::make_unique<Executor>(sub_->graph, options);
    } catch (const Error& e) {
      throw e.within(ctx.node().describe() + ", body '" + attribute + "'");
    }
    const std::vector<std::string> captured = capturedNames(ctx.node());
    const size_t first = onnxInputCount(ctx.node());
    for (size_t k = 0; k < captured.size(); ++k) {
      if (sub_->graph.findValue(captured[k]) != nullptr) {
        outer_values_[captured[k]] = ctx.input(first + k);
      }
    }
  }

  size_t formalInputCount() const { return sub_->formal_inputs.size(); }
  size_t outputCount() const { return sub_->graph.outputs().size(); }

  // Runs the body on its formal inputs (an undefined tensor leaves that input unfed).
  std::vector<at::Tensor> run(const std::vector<at::Tensor>& formals) {
    if (formals.size() > sub_->formal_inputs.size()) {
      ctx_.fail("its body takes " + std::to_string(sub_->formal_inputs.size()) +
                " inputs, but the node passes " + std::to_string(formals.size()));
    }
    TensorMap feeds = outer_values_;
    for (size_t i = 0; i < formals.size(); ++i) {
      if (formals[i].defined()) feeds[sub_->formal_inputs[i]] = formals[i];
    }
    TensorMap out;
    try {
      out = executor_->run(feeds);
    } catch (const Error& e) {
      throw e.within(ctx_.node().describe() + " body");
    }
    std::vector<at::Tensor> results;
    for (const Value* v : sub_->graph.outputs())
      results.push_back(out.at(v->name()));
    return results;
  }

 private:
  const OpContext& ctx_;
  std::unique_ptr<Subgraph> sub_;
  std::unique_ptr<Executor> executor_;
  TensorMap outer_values_;
};

bool scalarTruth(const OpContext& ctx, const at::Tensor& t, const std::string& what) {
  if (t.numel() != 1) {
    ctx.fail(what + " must hold one value, got shape " + shapeString(t.sizes()));
  }
  return t.to(at::kBool).item<bool>();
}

std::vector<at::Tensor> runIf(const OpContext& ctx) {
  const bool cond = scalarTruth(ctx, ctx.input(0), "the condition");
  Body body(ctx, cond ? "then_branch" : "else_branch");
  std::vector<at::Tensor> outs = body.run({});
  if (outs.size() != ctx.outputCount()) {
    ctx.fail("its " + std::string(cond ? "then" : "else") + " branch returns " +
             std::to_string(outs.size()) + " values, but the node has " +
             std::to_string(ctx.outputCount()) + " outputs");
  }
  return outs;
}

// Per-iteration values of one scan output, joined along a new axis.
at::Tensor stackSlices(const OpContext& ctx, std::vector<at::Tensor> slices, int64_t axis,
                       bool reversed, size_t output) {
  if (slices.empty()) {
    ctx.fail("output " + std::to_string(output) +
             " collects values of its iterations, and there were none; qforge cannot tell the "
             "shape of an empty scan output");
  }
  if (reversed) std::reverse(slices.begin(), slices.end());
  const int64_t rank = slices.front().dim() + 1;
  try {
    return at::stack(slices, normalizeAxis(ctx, axis, rank));
  } catch (const c10::Error&) {
    ctx.fail("output " + std::to_string(output) +
             " collects values of different shapes across iterations; ONNX needs one shape");
  }
}

std::vector<at::Tensor> runLoop(const OpContext& ctx) {
  const int64_t max_trips = ctx.hasInput(0) ? ctx.input(0).to(at::kLong).item<int64_t>()
                                            : std::numeric_limits<int64_t>::max();
  bool cond = ctx.hasInput(1) ? scalarTruth(ctx, ctx.input(1), "the condition") : true;
  const size_t carried =
      onnxInputCount(ctx.node()) - std::min<size_t>(onnxInputCount(ctx.node()), 2);
  std::vector<at::Tensor> vars;
  for (size_t i = 0; i < carried; ++i)
    vars.push_back(ctx.input(2 + i));

  Body body(ctx, "body");
  if (body.outputCount() < 1 + carried) {
    ctx.fail("its body returns " + std::to_string(body.outputCount()) + " values; it must return " +
             "the condition and the " + std::to_string(carried) + " loop-carried values");
  }
  const size_t scanned = body.outputCount() - 1 - carried;
  std::vector<std::vector<at::Tensor>> scans(scanned);
  for (int64_t trip = 0; trip < max_trips && cond; ++trip) {
    std::vector<at::Tensor> formals{at::scalar_tensor(trip, at::kLong),
                                    at::scalar_tensor(cond, at::kBool)};
    formals.insert(formals.end(), vars.begin(), vars.end());
    formals.resize(std::min(formals.size(), body.formalInputCount()));
    std::vector<at::Tensor> outs = body.run(formals);
    cond = scalarTruth(ctx, outs[0], "the body's condition output");
    for (size_t i = 0; i < carried; ++i)
      vars[i] = outs[1 + i];
    for (size_t k = 0; k < scanned; ++k)
      scans[k].push_back(outs[1 + carried + k]);
  }
  std::vector<at::Tensor> results = vars;
  for (size_t k = 0; k < scanned; ++k)
    results.push_back(stackSlices(ctx, std::move(scans[k]), 0, false, carried + k));
  return results;
}

// Scan's settings for one run over sequences whose scan axis is `axes[j]`.
struct ScanSpec {
  std::vector<int64_t> input_axes, input_directions, output_axes, output_directions;
};

// One attribute per scan input or output, defaulting to zeros.
std::vector<int64_t> perSlot(const OpContext& ctx, const std::string& name, size_t count) {
  std::vector<int64_t> values = ctx.attrInts(name, std::vector<int64_t>(count, 0));
  if (values.size() != count) {
    ctx.fail("attribute '" + name + "' has " + std::to_string(values.size()) +
             " entries; the node has " + std::to_string(count) + " of those");
  }
  return values;
}

std::vector<at::Tensor> scanSequences(const OpContext& ctx, Body& body,
                                      std::vector<at::Tensor> states,
                                      const std::vector<at::Tensor>& sequences,
                                      const ScanSpec& spec) {
  int64_t steps = -1;
  std::vector<int64_t> axes;
  for (size_t j = 0; j < sequences.size(); ++j) {
    const int64_t axis = normalizeAxis(ctx, spec.input_axes[j], sequences[j].dim());
    axes.push_back(axis);
    const int64_t length = sequences[j].size(axis);
    if (steps >= 0 && length != steps) {
      ctx.fail("scan input " + std::to_string(j) + " has " + std::to_string(length) +
               " steps, the first has " + std::to_string(steps) + "; they must agree");
    }
    steps = length;
  }
  const size_t scanned = body.outputCount() - states.size();
  std::vector<std::vector<at::Tensor>> outputs(scanned);
  for (int64_t t = 0; t < steps; ++t) {
    std::vector<at::Tensor> formals = states;
    for (size_t j = 0; j < sequences.size(); ++j) {
      const int64_t index = spec.input_directions[j] != 0 ? steps - 1 - t : t;
      formals.push_back(sequences[j].select(axes[j], index));
    }
    std::vector<at::Tensor> outs = body.run(formals);
    for (size_t i = 0; i < states.size(); ++i)
      states[i] = outs[i];
    for (size_t k = 0; k < scanned; ++k)
      outputs[k].push_back(outs[states.size() + k]);
  }
  for (size_t k = 0; k < scanned; ++k) {
    states.push_back(stackSlices(ctx, std::move(outputs[k]), spec.output_axes[k],
                                 spec.output_directions[k] != 0, states.size()));
  }
  return states;
}

// How many states and sequences a Scan node passes its body after its `leading` inputs (Scan-8's
// sequence_lens), and how many scan outputs the body returns after the states.
struct ScanLayout {
  size_t states = 0, sequences = 0, scanned = 0;
};

ScanLayout scanLayout(const OpContext& ctx, const Body& body, size_t leading) {
  const size_t inputs = onnxInputCount(ctx.node());
  const auto sequences = static_cast<size_t>(ctx.attrInt("num_scan_inputs"));
  if (sequences == 0 || sequences + leading > inputs) {
    ctx.fail("num_scan_inputs is " + std::to_string(sequences) + " but the node has " +
             std::to_string(inputs) + " inputs");
  }
  ScanLayout layout{inputs - leading - sequences, sequences, 0};
  if (body.outputCount() < layout.states) ctx.fail("its body returns fewer values than its states");
  layout.scanned = body.outputCount() - layout.states;
  return layout;
}

std::vector<at::Tensor> runScan(const OpContext& ctx) {
  Body body(ctx, "body");
  const ScanLayout layout = scanLayout(ctx, body, 0);
  const size_t inputs = layout.states + layout.sequences, state_count = layout.states;
  ScanSpec spec{perSlot(ctx, "scan_input_axes", layout.sequences),
                perSlot(ctx, "scan_input_directions", layout.sequences),
                perSlot(ctx, "scan_output_axes", layout.scanned),
                perSlot(ctx, "scan_output_directions", layout.scanned)};
  std::vector<at::Tensor> states, sequences;
  for (size_t i = 0; i < inputs; ++i)
    (i < state_count ? states : sequences).push_back(ctx.input(i));
  return scanSequences(ctx, body, std::move(states), sequences, spec);
}

// Scan-8: every input has a batch axis 0, and the sequences run along axis 1; each batch entry
// is scanned on its own and the results joined again along axis 0.
std::vector<at::Tensor> runScan8(const OpContext& ctx) {
  Body body(ctx, "body");
  const ScanLayout layout = scanLayout(ctx, body, 1);
  const size_t state_count = layout.states, sequence_count = layout.sequences;
  const size_t scanned = layout.scanned;
  const std::vector<int64_t> directions = perSlot(ctx, "directions", sequence_count);
  ScanSpec spec{std::vector<int64_t>(sequence_count, 0), directions,
                std::vector<int64_t>(scanned, 0), std::vector<int64_t>(scanned, 0)};
  const int64_t batch = ctx.input(1).size(0);
  if (ctx.hasInput(0)) {
    const at::Tensor lengths = ctx.input(0).to(at::kLong);
    const int64_t steps = ctx.input(1 + state_count).size(1);
    if (!lengths.eq(steps).all().item<bool>()) {
      ctx.fail("sequence_lens shorter than the sequences are not supported");
    }
  }
  std::vector<std::vector<at::Tensor>> per_batch(state_count + scanned);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<at::Tensor> states, sequences;
    for (size_t i = 0; i < state_count + sequence_count; ++i)
      (i < state_count ? states : sequences).push_back(ctx.input(1 + i)[b]);
    std::vector<at::Tensor> outs = scanSequences(ctx, body, std::move(states), sequences, spec);
    for (size_t k = 0; k < outs.size(); ++k)
      per_batch[k].push_back(outs[k]);
  }
  std::vector<at::Tensor> results;
  for (auto& values : per_batch)
    results.push_back(at::stack(values, 0));
  return results;
}

}  // namespace

void registerControlFlowOps(OpRegistry& r) {
  r.add(op("If", 1, kLatestOpset, runIf));
  r.add(op("Loop", 1, kLatestOpset, runLoop));
  r.add(op("Scan", 8, 8, runScan8));
  r.add(op("Scan", 9, kLatestOpset, runScan));
}

}  // namespace qforge
