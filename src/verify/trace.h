// When ONNX Runtime and qforge disagree on a deployed model's output, where they start to:
// the integer tensors of the exported model compared one by one, in graph order, on the few
// samples that differ most.
#pragma once

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "exec/executor.h"
#include "ir/graph.h"
#include "passes/prepare.h"
#include "verify/ort_runner.h"

namespace qforge::verify {

// The float values entering a quantizer in ONNX Runtime (its QuantizeLinear's input, run with
// that value exposed, so unfused) against the simulation's, in the quantizer's steps.
struct FloatGap {
  double gap = 0;                // largest difference between the two values
  int64_t differing = 0;         // elements whose levels differ (ORT's against the simulation's)
  double max_levels = 0;         // largest level difference among them
  double boundary_distance = 0;  // furthest from a rounding boundary (x.5) such a value lies
};

// A tensor's op(s) rerun in the simulation on ONNX Runtime's own levels of the quantized values
// they compute from: whether its difference was carried there or arises in those ops.
struct LocalRerun {
  double max_levels = 0;         // ORT's levels against the rerun's, largest difference
  double share_off = 0;          // share of elements more than one level apart
  std::vector<std::string> ops;  // the ops rerun, "Conv 'Conv_12'" (graph order)
  int64_t fed = 0;               // quantized values replaced by ORT's
};

// Where two runs of the same model first differ by more than one quantization step.
struct Divergence {
  std::string quantizer;   // the prepared model's quantizer ("" for a QOperator-only tensor)
  std::string tensor;      // the integer tensor in the exported model
  std::string ort_writer;  // what writes it in the graph ORT runs ("QLinearConv 'c_token_3'")
  double max_steps = 0;    // largest difference on the traced samples, in levels
  int64_t index = 0;       // position among the compared tensors (graph order)
  int64_t compared = 0;    // how many tensors were compared
  double share_off = 0;    // share of its elements more than one level apart
  // QDQ model vs simulation, for the first tensor that differs and the first beyond one level:
  // the values entering its quantizer in both runs (see FloatGap).
  std::optional<FloatGap> float_gap;
  // When any level differed: its ops rerun on ORT's own levels of the values they read.
  std::optional<LocalRerun> rerun;
};

// Why a traced tensor's levels differ, from its float gap (nullopt when it was not measured):
// - "float_inputs_differ": the values entering the quantizer are half a step or more apart, and
//   the ops before it could not be rerun on ORT's inputs; when they could:
//   - "carried": fed ORT's levels of the quantized values they compute from, the simulation's ops
//     give ORT's levels (within one): the difference was carried from before;
//   - "op_differs": fed the same, they still differ by more than a level: one of those ops
//     computes differently in ONNX Runtime;
// - "rounding_ties": they are less than half a step apart, the levels at most one apart, and
//   every value whose level differs lies within that gap of a rounding boundary: float noise
//   (summation order) moved it to the other side;
// - "fused_kernel_differs": run unfused, ORT's levels equal the simulation's or differ only at
//   ties, but the trace found more: ORT's fused kernel computes differently;
// - "quantizer_differs": the values agree to less than half a step, but levels differ for values
//   further from a boundary: the quantization itself (scale, zero point, rounding, range: a value
//   past a [-127, 127] grid is -128 in int8) differs.
std::optional<std::string> differenceCause(const Divergence& d);
// "Conv 'c1', Relu 'r1' and 3 more": the first `shown` of a rerun's ops.
std::string describeOps(const std::vector<std::string>& ops, size_t shown = 4);
// One line for people, saying the same; `first`: d is the first tensor that differs at all.
std::string describeCause(const Divergence& d, bool first);

// NNIE's logarithmic grid, which deploy writes as float arithmetic (deploy/qdq_onnx.cpp): code =
// round(16 log2|x| - z) clamped to [0, 127] for positive values (from 2^((z - 16) / 16) on),
// [1, 127] for negative ones (below -2^((z - 15) / 16)), zero between. As levels: 0 for zero,
// code + 1 for positive values and -code for negative ones, so that neighbouring grid values are
// one level apart (the negative side has no code 0: its smallest value, code 1, is next to zero).
// Of a value on the grid (the quantized tensor) the code is exact; of any value, the one the grid
// gives it.
at::Tensor logGridLevels(const at::Tensor& x, double z);

// The encoding deploy.json lists for a quantizer or a tensor.
struct Encoding {
  std::string quantizer;
  std::string tensor;
  std::string role;
  double scale = 0;
  int64_t zero_point = 0;
  bool per_tensor = false;
};

std::vector<Encoding> encodings(const nlohmann::json& manifest);

// The samples of a streamed run that differ most, kept (inputs only) for tracing: at most `k`.
class WorstSamples {
 public:
  // `batch_axes`: the inputs that hold their batch on another axis than 0 (algos::batchAxes).
  explicit WorstSamples(int64_t k, std::map<std::string, int64_t> batch_axes = {})
      : k_(k), batch_axes_(std::move(batch_axes)) {}
  // `feeds` is one batch of every model input; `got`/`reference` its outputs (first axis the
  // batch) by output name.
  void add(const TensorMap& feeds, const TensorMap& got, const TensorMap& reference);
  bool empty() const { return kept_.empty(); }
  // The kept samples as one batch of feeds.
  TensorMap feeds() const;

 private:
  int64_t batchAxis(const std::string& input) const;

  int64_t k_;
  std::map<std::string, int64_t> batch_axes_;
  std::vector<std::pair<double, TensorMap>> kept_;  // (largest difference, one-sample feeds)
};

// Runs a traced comparison needs: ONNX Runtime, and qforge's model in runs of its fixed batch.
struct TraceContext {
  const OrtRunner& ort;
  int64_t fixed_batch = 0;
  // Compared tensors are held about this many bytes at a time (at least one tensor); each chunk
  // reruns both models on the traced samples. ORT's integers of a chunk are held for every traced
  // sample, qforge's values for one run of the fixed batch. Holding all of U^2-NetP's 196 at once
  // took 16 GB; in 1 GB chunks with qforge's side whole, 8.6 GB; one run at a time, 1.6 GB.
  int64_t chunk_bytes = int64_t{1} << 30;
};

// QDQ model vs simulation: each activation quantizer's integers, ORT's QuantizeLinear output (or
// the Clip of a quantizer written as arithmetic) against the simulation's on the same grid.
// `sim_overrides` are the initializers the simulation ORT is compared with replaces.
std::vector<Divergence> traceQdq(const TraceContext& context, passes::PreparedModel& model,
                                 const nlohmann::json& manifest,
                                 const std::vector<Encoding>& encodings, const std::string& path,
                                 const TensorMap& feeds, const TensorMap& sim_overrides);

// QOperator model vs its emulation: every integer tensor a kernel writes, and the integers of
// quantizers written as arithmetic.
std::vector<Divergence> traceQOperator(const TraceContext& context, const nlohmann::json& manifest,
                                       const std::string& path, const Graph& qop,
                                       Executor& emulator, const TensorMap& feeds);

// The first tensor that differs at all, the first beyond one level, and the one with the most
// elements beyond one level; of the tensors rerun on ORT's inputs, how many, and the first whose
// own ops give levels more than one apart.
struct TraceSummary {
  std::optional<Divergence> first_difference;
  std::optional<Divergence> divergence;
  std::optional<Divergence> largest;
  int64_t rerun = 0;
  std::optional<Divergence> first_own_difference;
};
TraceSummary summarize(const std::vector<Divergence>& tensors);

}  // namespace qforge::verify
