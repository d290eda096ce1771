#include "verify/trace.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "algos/model_feeds.h"
#include "core/error.h"
#include "core/files.h"
#include "ir/onnx_export.h"
#include "ir/onnx_import.h"
#include "passes/fake_quantize_node.h"
#include "quant/fake_quantizers/nnie.h"
#include "quant/qscheme.h"
#include "verify/ort_observed_model.h"

namespace qforge::verify {

at::Tensor logGridLevels(const at::Tensor& x, double z) {
  const at::Tensor d = x.to(at::kDouble);
  const at::Tensor code = d.abs().clamp_min(1e-300).log2().mul_(16).sub_(z).round_();
  const at::Tensor positive = code.clamp(0, 127).add(1);
  const at::Tensor negative = code.clamp(1, 127).neg();
  return at::where(d >= std::exp2((z - 16) / 16), positive,
                   at::where(d < -std::exp2((z - 15) / 16), negative, at::zeros_like(d)));
}

namespace {

// ORT's values of `tensors` (intermediate tensors of the exported model `g`) on `feeds`: `g`
// written again with them as outputs too. Exposing a value this way can keep ORT from fusing the
// ops around it: floatGap wants exactly that (the op run unfused); the trace itself reads the
// tensors from ORT's own graph (OrtObservedModel).
TensorMap ortIntermediates(const OrtRunner& ort, Graph g, const TensorMap& feeds,
                           const std::vector<std::string>& tensors) {
  for (const std::string& name : tensors) {
    Value* v = g.findValue(name);
    if (v != nullptr && !g.isGraphOutput(v)) g.addOutput(v);
  }
  TempDir scratch("verify");
  const std::string traced = scratch.file("traced.onnx");
  exportOnnxFile(g, traced);
  return ort.run(traced, feeds, tensors);
}

// The largest difference between a reference tensor and ORT's integers, in levels, and how many
// elements are more than one level apart, accumulated over slices so that no double-precision
// copy of a whole tensor is ever made (U^2-NetP's largest traced tensor has 52M elements).
class LevelDifference {
 public:
  // `reference` is in levels already, or (with `scale`) a fake-quantized float value whose
  // level is round(v / scale) + zero_point, or (with `log_grid_z`) both are values on NNIE's
  // logarithmic grid (logGridLevels).
  void add(const at::Tensor& reference, const at::Tensor& got, std::optional<double> scale,
           int64_t zero_point, std::optional<double> log_grid_z = std::nullopt) {
    const at::Tensor ref = reference.reshape({-1});
    const at::Tensor ort = got.reshape({-1});
    constexpr int64_t kSlice = int64_t{1} << 20;
    for (int64_t begin = 0; begin < ref.numel(); begin += kSlice) {
      const int64_t n = std::min(kSlice, ref.numel() - begin);
      at::Tensor levels = ref.narrow(0, begin, n).to(at::kDouble);
      at::Tensor theirs = ort.narrow(0, begin, n).to(at::kDouble);
      if (log_grid_z) {
        levels = logGridLevels(levels, *log_grid_z);
        theirs = logGridLevels(theirs, *log_grid_z);
      } else if (scale) {
        levels = levels.div_(*scale).round_().add_(zero_point);
      }
      const at::Tensor diff = levels.sub_(theirs).abs_();
      max_ = std::max(max_, diff.max().item<double>());
      off_ += (diff > 1.0).sum().item<int64_t>();
    }
    elements_ += ref.numel();
  }
  double maxSteps() const { return max_; }
  double shareOff() const { return elements_ > 0 ? static_cast<double>(off_) / elements_ : 0.0; }

 private:
  double max_ = 0;
  int64_t off_ = 0;
  int64_t elements_ = 0;
};

// One tensor a trace compares: the reference executor's value and the exported model's tensor.
struct ComparedTensor {
  std::string quantizer;  // "" for a QOperator-only tensor
  std::string tensor;     // in the exported model, as ORT names it
  std::string reference;  // in the reference executor
  std::optional<double> scale;
  int64_t zero_point = 0;
  std::string reference_input;       // the float value the reference quantizes ("" when unknown)
  std::optional<double> log_grid_z;  // NNIE's logarithmic grid (logGridLevels), no scale
  // The simulation's integer range, when it is known (a [-127, 127] grid is written as int8).
  std::optional<std::pair<double, double>> range;
};

// The part of ORT's `got` (all traced samples) that run `run` of `runs` computed: all of it in one
// run; else rows [run * n, (run + 1) * n) when `got` is the runs' parts stacked on the first axis.
// Undefined when the shapes do not line up (a value whose first axis is no batch axis).
at::Tensor partOf(const at::Tensor& got, const at::Tensor& part, int64_t run, int64_t runs) {
  if (runs == 1) return got.sizes() == part.sizes() ? got : at::Tensor();
  if (part.dim() == 0 || got.dim() != part.dim() || got.size(0) != runs * part.size(0))
    return at::Tensor();
  at::Tensor rows = got.narrow(0, run * part.size(0), part.size(0));
  return rows.sizes() == part.sizes() ? rows : at::Tensor();
}

// Elements of each of `names` on `feeds`: one run of `executor` whose hooks record sizes and keep
// nothing (values no output depends on are not computed and count 0).
std::vector<int64_t> elementCounts(Executor& executor, const TensorMap& feeds,
                                   const std::vector<std::string>& names, int64_t fixed_batch,
                                   const TensorMap& overrides = {}) {
  std::vector<int64_t> counts(names.size(), 0);
  HookScope hooks(executor);
  for (size_t i = 0; i < names.size(); ++i) {
    hooks.add(names[i], [&counts, i](const Value&, const at::Tensor& t) {
      counts[i] += t.numel();
      return t;
    });
  }
  algos::runInBatches(executor, feeds, {}, fixed_batch, overrides);
  return counts;
}

// Splits `elements` (per compared tensor, graph order) into runs of tensors holding about
// `chunk_bytes` at `bytes_per_element` (at least one tensor each): [begin, end) pairs.
std::vector<std::pair<size_t, size_t>> chunksOf(const std::vector<int64_t>& elements,
                                                double bytes_per_element, int64_t chunk_bytes) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t begin = 0; begin < elements.size();) {
    size_t end = begin + 1;
    double bytes = static_cast<double>(elements[begin]) * bytes_per_element;
    while (end < elements.size() &&
           bytes + static_cast<double>(elements[end]) * bytes_per_element <=
               static_cast<double>(chunk_bytes)) {
      bytes += static_cast<double>(elements[end++]) * bytes_per_element;
    }
    out.emplace_back(begin, end);
    begin = end;
  }
  return out;
}

// Compares `wanted` (graph order) on the traced `feeds`: ORT's integers of a chunk of tensors at a
// time, held for all samples (one byte each), against the reference executor's values one run of
// the fixed batch at a time. A tensor is compared once, with the first reference of its shape.
std::vector<Divergence> compareTensors(const TraceContext& context, Executor& reference,
                                       const OrtObservedModel& ort_model, const TensorMap& feeds,
                                       const std::vector<ComparedTensor>& wanted,
                                       const TensorMap& overrides) {
  std::vector<std::string> reference_names;
  for (const ComparedTensor& c : wanted)
    reference_names.push_back(c.reference);
  const std::vector<int64_t> elements =
      elementCounts(reference, feeds, reference_names, context.fixed_batch, overrides);
  // Held per traced element: ORT's integer, the reference's float for one run, and the copy the
  // npy reader makes.
  const int64_t runs = algos::batchRuns(feeds, context.fixed_batch);
  const double bytes_per_element = 2.0 + 4.0 / static_cast<double>(runs);

  std::set<std::string> compared;
  std::vector<Divergence> out;
  for (const auto& chunk : chunksOf(elements, bytes_per_element, context.chunk_bytes)) {
    // Named copies: C++17 lambdas cannot capture a structured binding (Clang refuses it).
    const size_t begin = chunk.first, end = chunk.second;
    std::vector<std::string> ort_names, chunk_references;
    for (size_t i = begin; i < end; ++i) {
      if (std::find(ort_names.begin(), ort_names.end(), wanted[i].tensor) == ort_names.end())
        ort_names.push_back(wanted[i].tensor);
      chunk_references.push_back(wanted[i].reference);
    }
    const TensorMap ort = ort_model.run(feeds, ort_names);
    std::map<size_t, LevelDifference> differences;  // by index into `wanted`
    auto compare_run = [&](int64_t run, int64_t run_count, TensorMap&& values) {
      for (size_t i = begin; i < end; ++i) {
        const ComparedTensor& c = wanted[i];
        const at::Tensor& value = values.at(c.reference);
        const auto in_ort = ort.find(c.tensor);  // absent: fused away in ORT's graph
        const at::Tensor got =
            in_ort == ort.end() ? at::Tensor() : partOf(in_ort->second, value, run, run_count);
        if (run == 0) {
          // The first run decides which reference a shared tensor is compared with.
          if (!got.defined() || compared.count(c.tensor)) continue;
          compared.insert(c.tensor);
          differences.emplace(i, LevelDifference{});
        }
        auto it = differences.find(i);
        if (it == differences.end()) continue;
        if (!got.defined()) {
          differences.erase(it);  // the shapes stop lining up: no comparison
          continue;
        }
        it->second.add(value, got, c.scale, c.zero_point, c.log_grid_z);
      }
    };
    algos::forEachBatchRun(reference, feeds, chunk_references, context.fixed_batch, overrides,
                           compare_run);
    for (const auto& [i, d] : differences) {
      out.push_back(Divergence{
          wanted[i].quantizer, wanted[i].tensor, ort_model.writer(wanted[i].tensor), d.maxSteps(),
          static_cast<int64_t>(out.size()), 0, d.shareOff(), std::nullopt, std::nullopt});
    }
  }
  for (Divergence& d : out)
    d.compared = static_cast<int64_t>(out.size());
  return out;
}

// How the exported model quantizes a tensor: the float value it quantizes, its rounding rule and
// its integer range. A QuantizeLinear rounds half to even onto its type's range; a chain written
// as arithmetic (deploy/qdq_onnx.cpp) is Div by the scale, a rounding (Round; Floor; Where of
// ties for half up; Sign times magnitude for half away from zero), Add of the zero point and Clip
// onto [qmin, qmax], whose output is the levels.
struct ExportedQuantize {
  std::string input;
  quant::RoundingMode rounding = quant::RoundingMode::HalfToEven;
  double qmin = 0;
  double qmax = 0;
};

const Node* producerOf(const Value* v, const char* op_type) {
  const Node* p = v != nullptr ? v->producer() : nullptr;
  return p != nullptr && p->opType() == op_type ? p : nullptr;
}

std::optional<double> scalarOf(const Value* v) {
  if (v == nullptr || !v->isInitializer() || v->initializer().numel() != 1) return std::nullopt;
  return v->initializer().to(at::kDouble).item<double>();
}

std::optional<ExportedQuantize> exportedQuantize(const Value* levels) {
  if (const Node* q = producerOf(levels, "QuantizeLinear")) {
    // The zero point's type is the levels' (uint8 without one).
    const Value* zp = q->input(2);
    const at::ScalarType type =
        zp != nullptr && zp->isInitializer() ? zp->initializer().scalar_type() : at::kByte;
    if (q->input(0) == nullptr || (type != at::kChar && type != at::kByte)) return std::nullopt;
    const bool is_signed = type == at::kChar;
    return ExportedQuantize{q->input(0)->name(), quant::RoundingMode::HalfToEven,
                            is_signed ? -128.0 : 0.0, is_signed ? 127.0 : 255.0};
  }
  const Node* clip = producerOf(levels, "Clip");
  const Node* add = clip != nullptr ? producerOf(clip->input(0), "Add") : nullptr;
  const Node* rounding =
      add != nullptr && add->input(0) != nullptr ? add->input(0)->producer() : nullptr;
  if (rounding == nullptr) return std::nullopt;
  const std::optional<double> qmin = scalarOf(clip->input(1));
  const std::optional<double> qmax = scalarOf(clip->input(2));
  ExportedQuantize found;
  const Node* div = nullptr;
  if (rounding->opType() == "Round") {
    div = producerOf(rounding->input(0), "Div");
  } else if (rounding->opType() == "Floor") {
    found.rounding = quant::RoundingMode::Floor;
    div = producerOf(rounding->input(0), "Div");
  } else if (rounding->opType() == "Where") {
    found.rounding = quant::RoundingMode::HalfUp;
    const Node* round = producerOf(rounding->input(2), "Round");
    div = round != nullptr ? producerOf(round->input(0), "Div") : nullptr;
  } else if (rounding->opType() == "Mul") {
    found.rounding = quant::RoundingMode::HalfAwayFromZero;
    const Node* sign = producerOf(rounding->input(0), "Sign");
    div = sign != nullptr ? producerOf(sign->input(0), "Div") : nullptr;
  }
  if (div == nullptr || div->input(0) == nullptr || !qmin || !qmax) return std::nullopt;
  found.input = div->input(0)->name();
  found.qmin = *qmin;
  found.qmax = *qmax;
  return found;
}

// `u` (values over the scale) rounded by `mode`, and each value's distance from the nearest
// rounding boundary (x.5 for the rounding modes, integers for floor), in steps.
at::Tensor roundedBy(const at::Tensor& u, quant::RoundingMode mode) {
  switch (mode) {
    case quant::RoundingMode::HalfToEven:
      return u.round();
    case quant::RoundingMode::HalfUp:
      return (u + 0.5).floor();
    case quant::RoundingMode::Floor:
      return u.floor();
    case quant::RoundingMode::HalfAwayFromZero:
      return u.sign() * (u.abs() + 0.5).floor();
  }
  return u.round();
}

at::Tensor distanceToBoundary(const at::Tensor& u, quant::RoundingMode mode) {
  if (mode == quant::RoundingMode::Floor) return (u - u.round()).abs();
  return (u - u.floor() - 0.5).abs();
}

// The value NNIE's grid arithmetic reads: Where(Not(Less(x, ...)), ...) (deploy/qdq_onnx.cpp).
std::optional<std::string> logGridInput(const Value* grid_value) {
  const Node* where = producerOf(grid_value, "Where");
  const Node* is_positive = where != nullptr ? producerOf(where->input(0), "Not") : nullptr;
  const Node* less = is_positive != nullptr ? producerOf(is_positive->input(0), "Less") : nullptr;
  if (less == nullptr || less->input(0) == nullptr) return std::nullopt;
  return less->input(0)->name();
}

// floatGap on NNIE's logarithmic grid, in its codes (16 log2|x| - z: one step per code); values
// too small for the grid to tell apart count as the smallest it does.
std::optional<FloatGap> logGridFloatGap(const TraceContext& context, Executor& reference,
                                        const std::string& path, const TensorMap& feeds,
                                        const ComparedTensor& c, const TensorMap& overrides) {
  Graph exported = importOnnxFile(path);
  const std::optional<std::string> input = logGridInput(exported.findValue(c.tensor));
  if (!input) return std::nullopt;
  const TensorMap ort =
      ortIntermediates(context.ort, std::move(exported), feeds, {*input, c.tensor});
  const double z = *c.log_grid_z;
  const auto codes = [z, smallest = std::exp2((z - 17) / 16)](const at::Tensor& x) {
    return x.to(at::kDouble).abs().clamp_min(smallest).log2().mul_(16).sub_(z);
  };
  std::optional<FloatGap> found;
  algos::forEachBatchRun(
      reference, feeds, {c.reference_input}, context.fixed_batch, overrides,
      [&](int64_t run, int64_t runs, TensorMap&& values) {
        const at::Tensor& mine = values.at(c.reference_input);
        const at::Tensor got = partOf(ort.at(*input), mine, run, runs);
        const at::Tensor got_grid = partOf(ort.at(c.tensor), mine, run, runs);
        if (!got.defined() || !got.is_floating_point() || !got_grid.defined()) return;
        FloatGap g = found.value_or(FloatGap{});
        const at::Tensor u = codes(mine);
        g.gap = std::max(g.gap, (codes(got) - u).abs().max().item<double>());
        const at::Tensor apart = (logGridLevels(mine, z) - logGridLevels(got_grid, z)).abs();
        const at::Tensor differing = apart > 0.5;
        g.differing += differing.sum().item<int64_t>();
        g.max_levels = std::max(g.max_levels, apart.max().item<double>());
        if (differing.any().item<bool>()) {
          // Its boundaries: between codes (x.5), and where positive and negative values start.
          const at::Tensor to_boundary =
              at::minimum((u - u.floor() - 0.5).abs(), at::minimum((u + 16).abs(), (u + 15).abs()));
          g.boundary_distance = std::max(g.boundary_distance,
                                         to_boundary.masked_select(differing).max().item<double>());
        }
        found = g;
      });
  return found;
}

// The float values entering `c`'s quantizer in ORT (the input of the QuantizeLinear writing
// c.tensor, or of the Div of an arithmetic chain, exposed as an extra output) against the
// reference's, on the same run: their largest gap in steps of c.scale, and where ORT's levels
// and the reference's own rounding of its value differ, how far from a rounding boundary those
// values lie. Nullopt when the exported model writes that tensor otherwise or the shapes do not
// line up. Exposing the float value keeps ORT from fusing the op that writes it with the
// QuantizeLinear: this is the op run unfused.
std::optional<FloatGap> floatGap(const TraceContext& context, Executor& reference,
                                 const std::string& path, const TensorMap& feeds,
                                 const ComparedTensor& c, const TensorMap& overrides) {
  if (c.reference_input.empty()) return std::nullopt;
  if (c.log_grid_z) return logGridFloatGap(context, reference, path, feeds, c, overrides);
  if (!c.scale) return std::nullopt;
  Graph exported = importOnnxFile(path);
  const std::optional<ExportedQuantize> quantize = exportedQuantize(exported.findValue(c.tensor));
  if (!quantize) return std::nullopt;
  const TensorMap ort =
      ortIntermediates(context.ort, std::move(exported), feeds, {quantize->input, c.tensor});
  const at::Tensor& ort_levels = ort.at(c.tensor);
  std::optional<FloatGap> found;
  algos::forEachBatchRun(
      reference, feeds, {c.reference_input}, context.fixed_batch, overrides,
      [&](int64_t run, int64_t runs, TensorMap&& values) {
        const at::Tensor& mine = values.at(c.reference_input);
        const at::Tensor got = partOf(ort.at(quantize->input), mine, run, runs);
        const at::Tensor got_levels = partOf(ort_levels, mine, run, runs);
        if (!got.defined() || !got.is_floating_point() || !got_levels.defined()) return;
        FloatGap g = found.value_or(FloatGap{});
        const at::Tensor u = mine.to(at::kDouble).div(*c.scale);
        g.gap = std::max(g.gap, (got.to(at::kDouble).div(*c.scale) - u).abs().max().item<double>());
        // The reference's own levels of its value, by the exported rounding rule, on its own
        // range (the file's container may hold more: int8's -128 below a [-127, 127] grid).
        const auto [lo, hi] = c.range.value_or(std::make_pair(quantize->qmin, quantize->qmax));
        const at::Tensor levels =
            roundedBy(u, quantize->rounding).add(static_cast<double>(c.zero_point)).clamp(lo, hi);
        const at::Tensor apart = (levels - got_levels.to(at::kDouble)).abs();
        const at::Tensor differing = apart > 0.5;
        g.differing += differing.sum().item<int64_t>();
        g.max_levels = std::max(g.max_levels, apart.max().item<double>());
        if (differing.any().item<bool>()) {
          // Past the range a value's boundary is the range's edge, however far it lies.
          const at::Tensor shifted = u + static_cast<double>(c.zero_point);
          const at::Tensor outside = (shifted < lo - 0.5) | (shifted > hi + 0.5);
          const at::Tensor to_edge =
              at::minimum((shifted - (lo - 0.5)).abs(), (shifted - (hi + 0.5)).abs());
          const at::Tensor to_boundary =
              at::where(outside, to_edge, distanceToBoundary(u, quantize->rounding));
          g.boundary_distance = std::max(g.boundary_distance,
                                         to_boundary.masked_select(differing).max().item<double>());
        }
        found = g;
      });
  return found;
}

// The ops that compute the value entering `target`'s quantizer in the prepared graph `g`, back to
// the quantized values they read (the region's boundary), graph inputs and constants. A
// quantizer's value is a boundary only when it is the one value compared for that quantizer: a
// quantizer shared by several values (Concat's inputs) names one exported tensor, so the others
// are walked through and recomputed.
struct RegionBefore {
  std::vector<const Node*> ops;                 // graph order, fake quantizers left out
  std::vector<const ComparedTensor*> boundary;  // replaced by ORT's levels in the rerun
};

// The compared tensors a rerun can stand on, by the simulation's value: those with a scale whose
// quantizer names one value only. Built once for all the regions of a trace.
using Boundaries = std::map<std::string, const ComparedTensor*>;

Boundaries boundariesOf(const std::vector<ComparedTensor>& wanted) {
  std::map<std::string, int> values_per_quantizer;
  for (const ComparedTensor& c : wanted)
    ++values_per_quantizer[c.quantizer];
  Boundaries by_value;
  for (const ComparedTensor& c : wanted) {
    const bool has_levels = c.scale || c.log_grid_z;
    if (has_levels && values_per_quantizer[c.quantizer] == 1) by_value[c.reference] = &c;
  }
  return by_value;
}

RegionBefore regionBefore(const Graph& g, const ComparedTensor& target,
                          const Boundaries& boundary_by_value) {
  RegionBefore region;
  std::set<const Node*> inside;
  const Value* start = g.findValue(target.reference_input);
  std::vector<const Value*> pending{start};
  while (!pending.empty()) {
    const Value* v = pending.back();
    pending.pop_back();
    if (v == nullptr || v->isInitializer() || v->producer() == nullptr) continue;
    const Node* p = v->producer();
    if (!inside.insert(p).second) continue;
    const auto b = boundary_by_value.find(v->name());
    if (b != boundary_by_value.end() && passes::isFakeQuantize(p)) {
      region.boundary.push_back(b->second);
      continue;
    }
    for (const Value* in : p->inputs())
      pending.push_back(in);
  }
  for (const Node* n : g.topologicalOrder()) {
    if (inside.count(n) && !passes::isFakeQuantize(n)) region.ops.push_back(n);
  }
  return region;
}

// Every compared tensor recomputed from ORT's own inputs: the simulation runs with each quantized
// value a tensor's ops read (its region's boundary) replaced by ORT's levels, dequantized as
// DequantizeLinear does, so that each tensor's value depends on its own ops alone. Its levels
// against ORT's then say whether those ops compute as ORT does (found[i].rerun). Tensors of
// quantizers shared by several values are not rerun (the exported model names one tensor for
// them); the regions of the tensors after them reach through them. Chunked as compareTensors.
void compareFed(const TraceContext& context, const Graph& g, Executor& reference,
                const OrtObservedModel& ort_model, const TensorMap& feeds,
                const std::vector<ComparedTensor>& wanted, const TensorMap& overrides,
                std::vector<Divergence>& found) {
  const Boundaries boundaries = boundariesOf(wanted);
  // (index into found, its compared tensor), graph order: the tensors that can be boundaries are
  // the ones a rerun can compare.
  std::vector<std::pair<size_t, const ComparedTensor*>> targets;
  for (size_t i = 0; i < found.size(); ++i) {
    for (const auto& [value, c] : boundaries) {
      if (c->tensor == found[i].tensor && c->quantizer == found[i].quantizer) {
        targets.emplace_back(i, c);
        break;
      }
    }
  }
  if (targets.empty()) return;
  std::vector<std::string> names;
  for (const auto& t : targets)
    names.push_back(t.second->reference);
  const std::vector<int64_t> elements =
      elementCounts(reference, feeds, names, context.fixed_batch, overrides);
  const int64_t runs = algos::batchRuns(feeds, context.fixed_batch);
  const double bytes_per_element = 2.0 + 4.0 / static_cast<double>(runs);

  for (const auto& [begin, end] : chunksOf(elements, bytes_per_element, context.chunk_bytes)) {
    // What each hooked value does: compared (a target of this chunk), replaced (a boundary).
    struct Role {
      const ComparedTensor* compared = nullptr;
      const ComparedTensor* replaced = nullptr;
      size_t found_index = 0;
    };
    std::map<std::string, Role> roles;
    std::map<size_t, RegionBefore> regions;
    std::vector<std::string> ort_names, outputs;
    auto want_from_ort = [&](const std::string& tensor) {
      if (std::find(ort_names.begin(), ort_names.end(), tensor) == ort_names.end())
        ort_names.push_back(tensor);
    };
    for (size_t k = begin; k < end; ++k) {
      const auto& [index, c] = targets[k];
      Role& role = roles[c->reference];
      role.compared = c;
      role.found_index = index;
      want_from_ort(c->tensor);
      outputs.push_back(c->reference);
      RegionBefore region = regionBefore(g, *c, boundaries);
      for (const ComparedTensor* b : region.boundary) {
        roles[b->reference].replaced = b;
        want_from_ort(b->tensor);
      }
      regions.emplace(index, std::move(region));
    }
    const TensorMap ort = ort_model.run(feeds, ort_names);
    const auto ort_levels = [&ort](const std::string& tensor) {
      const auto it = ort.find(tensor);  // absent: fused away in ORT's graph
      return it == ort.end() ? at::Tensor() : it->second;
    };

    int64_t run_index = 0;
    std::map<size_t, LevelDifference> differences;
    std::set<size_t> unaligned;
    std::set<std::string> unfed;  // boundaries ORT gave no levels of, by reference value
    HookScope hooks(reference);
    for (const auto& [value, role] : roles) {
      hooks.add(value, [&, role = role](const Value&, const at::Tensor& t) {
        if (role.compared != nullptr) {
          const at::Tensor in_ort = ort_levels(role.compared->tensor);
          const at::Tensor got =
              in_ort.defined() ? partOf(in_ort, t, run_index, runs) : at::Tensor();
          if (got.defined()) {
            differences[role.found_index].add(t, got, role.compared->scale,
                                              role.compared->zero_point, role.compared->log_grid_z);
          } else {
            unaligned.insert(role.found_index);
          }
        }
        if (role.replaced == nullptr) return t;
        const at::Tensor in_ort = ort_levels(role.replaced->tensor);
        const at::Tensor levels =
            in_ort.defined() ? partOf(in_ort, t, run_index, runs) : at::Tensor();
        if (!levels.defined()) {
          // Not fed ORT's levels, the reruns reading this value would carry the simulation's
          // own differences and look like ops that compute differently.
          unfed.insert(role.replaced->reference);
          return t;
        }
        // A logarithmic grid's tensor in ORT holds the grid's values themselves.
        if (role.replaced->log_grid_z) return levels.to(t.scalar_type());
        return levels.to(at::kFloat)
            .sub_(static_cast<float>(role.replaced->zero_point))
            .mul_(static_cast<float>(*role.replaced->scale))
            .to(t.scalar_type());
      });
    }
    algos::forEachBatchRun(reference, feeds, outputs, context.fixed_batch, overrides,
                           [&](int64_t run, int64_t, TensorMap&&) { run_index = run + 1; });
    for (auto& [index, difference] : differences) {
      if (unaligned.count(index)) continue;
      const RegionBefore& region = regions.at(index);
      const bool all_fed =
          std::none_of(region.boundary.begin(), region.boundary.end(),
                       [&](const ComparedTensor* b) { return unfed.count(b->reference) > 0; });
      if (!all_fed) continue;
      LocalRerun rerun;
      rerun.max_levels = difference.maxSteps();
      rerun.share_off = difference.shareOff();
      rerun.fed = static_cast<int64_t>(region.boundary.size());
      for (const Node* n : region.ops) {
        rerun.ops.push_back(n->opType() + " '" +
                            (n->name().empty() ? n->output(0)->name() : n->name()) + "'");
      }
      found[index].rerun = std::move(rerun);
    }
  }
}

// Measures the float gap of the first tensor that differs, of the first beyond one level and of
// the first whose own ops differ by more.
void measureFloatGaps(const TraceContext& context, Executor& reference, const std::string& path,
                      const TensorMap& feeds, const std::vector<ComparedTensor>& wanted,
                      const TensorMap& overrides, std::vector<Divergence>& found) {
  const TraceSummary summary = summarize(found);
  for (const std::optional<Divergence>& d :
       {summary.first_difference, summary.divergence, summary.first_own_difference}) {
    if (!d) continue;
    Divergence& target = found[static_cast<size_t>(d->index)];
    if (target.float_gap) continue;
    const auto c = std::find_if(wanted.begin(), wanted.end(), [&](const ComparedTensor& w) {
      return w.tensor == target.tensor && w.quantizer == target.quantizer;
    });
    if (c == wanted.end()) continue;
    try {
      target.float_gap = floatGap(context, reference, path, feeds, *c, overrides);
    } catch (const Error&) {
      // ORT refusing the copy with the float value exposed leaves the trace as it was found.
    }
  }
}

}  // namespace

std::optional<std::string> differenceCause(const Divergence& d) {
  if (!d.float_gap) return std::nullopt;
  const FloatGap& g = *d.float_gap;
  if (g.gap >= 0.5) {
    if (!d.rerun) return std::string("float_inputs_differ");
    return std::string(d.rerun->max_levels <= 1.0 + 1e-9 ? "carried" : "op_differs");
  }
  // Unfused, ORT's levels are the simulation's (or differ only at ties) while the trace found
  // more: what differs is ORT's fused kernel.
  if (g.differing == 0) return std::string("fused_kernel_differs");
  // A value whose level differs lies within the float noise of a rounding boundary: a tie.
  const bool ties = g.max_levels <= 1.0 + 1e-9 && g.boundary_distance <= g.gap + 1e-3;
  if (ties) {
    return std::string(d.max_steps <= 1.0 + 1e-9 ? "rounding_ties" : "fused_kernel_differs");
  }
  return std::string("quantizer_differs");
}

std::string describeOps(const std::vector<std::string>& ops, size_t shown) {
  std::string out;
  shown = std::min(shown, ops.size());
  for (size_t i = 0; i < shown; ++i)
    out += (i ? ", " : "") + ops[i];
  if (ops.size() > shown) out += " and " + std::to_string(ops.size() - shown) + " more";
  return out;
}

std::string describeCause(const Divergence& d, bool first) {
  const std::optional<std::string> cause = differenceCause(d);
  if (!cause) return "";
  char gap[32];
  std::snprintf(gap, sizeof(gap), "%.3g", d.float_gap->gap);
  if (*cause == "carried" || *cause == "op_differs") {
    const LocalRerun& r = *d.rerun;
    char levels[32];
    std::snprintf(levels, sizeof(levels), "%.0f", r.max_levels);
    const std::string ops = describeOps(r.ops);
    const std::string fed = "rerun on ONNX Runtime's own levels of the " + std::to_string(r.fed) +
                            " quantized value" + (r.fed == 1 ? "" : "s") + " they compute from";
    if (*cause == "carried") {
      return std::string("the values entering its quantizer differ by up to ") + gap +
             " steps, carried from the differences before it: " + fed + ", the simulation's " +
             ops + " give ONNX Runtime's levels (within one)";
    }
    return std::string("the values entering its quantizer differ by up to ") + gap +
           " steps: " + fed + ", the simulation's " + ops + " still give levels up to " + levels +
           " apart, so an op among them computes differently in ONNX Runtime";
  }
  if (*cause == "float_inputs_differ") {
    // No compared tensor before the first difference differs, so only a float op can have moved
    // its input; later, differences carried from earlier tensors do it too.
    return std::string("the values entering its quantizer differ by up to ") + gap + " steps: " +
           (first ? "an op before it computes differently in ONNX Runtime"
                  : "carried from the differences before it, or an op since the last compared "
                    "tensor computes differently");
  }
  if (*cause == "rounding_ties") {
    return std::string(
               "float rounding noise: the values entering its quantizer differ by at "
               "most ") +
           gap + " steps, and each level difference is a value that close to a rounding boundary";
  }
  if (*cause == "fused_kernel_differs") {
    return std::string("run unfused, ONNX Runtime quantizes it as the simulation does (inputs ") +
           gap +
           " steps apart, differences only at ties): the difference comes from the kernel ONNX "
           "Runtime fuses this op and its quantization into";
  }
  char boundary[32];
  std::snprintf(boundary, sizeof(boundary), "%.2g", d.float_gap->boundary_distance);
  return std::string("the values entering its quantizer agree to ") + gap +
         " steps, but levels differ for values up to " + boundary +
         " steps from a rounding boundary: the quantization itself (scale, zero point, "
         "rounding, range) differs";
}

std::vector<Encoding> encodings(const nlohmann::json& manifest) {
  std::vector<Encoding> out;
  for (const auto& t : manifest.at("tensors")) {
    Encoding e;
    e.quantizer = t.at("quantizer").get<std::string>();
    e.tensor = t.at("tensor").get<std::string>();
    e.role = t.at("role").get<std::string>();
    if (t.value("affine", true) && t.at("scale").size() == 1) {
      e.per_tensor = true;
      e.scale = t.at("scale")[0].get<double>();
      e.zero_point = t.at("zero_point")[0].get<int64_t>();
    }
    out.push_back(e);
  }
  return out;
}

void WorstSamples::add(const TensorMap& feeds, const TensorMap& got, const TensorMap& reference) {
  const int64_t rows = algos::rowsOf(got);
  if (rows == 0) return;
  at::Tensor worst = at::zeros({rows}, at::kDouble);
  for (const auto& [name, t] : got) {
    if (t.dim() == 0 || t.size(0) != rows) continue;
    if (t.sizes() != reference.at(name).sizes()) continue;  // a data-dependent size differs
    const at::Tensor d = (t.to(at::kDouble) - reference.at(name).to(at::kDouble)).abs();
    worst = at::maximum(worst, d.reshape({rows, -1}).amax(1));
  }
  for (int64_t i = 0; i < rows; ++i) {
    const double score = worst[i].item<double>();
    if (static_cast<int64_t>(kept_.size()) >= k_ && score <= kept_.back().first) continue;
    TensorMap sample;
    for (const auto& [name, t] : feeds) {
      const int64_t axis = batchAxis(name);
      sample[name] = t.dim() > axis && t.size(axis) == rows ? t.narrow(axis, i, 1).clone() : t;
    }
    kept_.emplace_back(score, std::move(sample));
    std::stable_sort(kept_.begin(), kept_.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    if (static_cast<int64_t>(kept_.size()) > k_) kept_.pop_back();
  }
}

TensorMap WorstSamples::feeds() const {
  TensorMap out;
  for (const auto& [name, first] : kept_.front().second) {
    if (first.dim() == 0) {
      out[name] = first;  // no batch axis: the first kept sample's value
      continue;
    }
    std::vector<at::Tensor> rows;
    for (const auto& [score, sample] : kept_)
      rows.push_back(sample.at(name));
    out[name] = at::cat(rows, batchAxis(name));
  }
  return out;
}

int64_t WorstSamples::batchAxis(const std::string& input) const {
  auto it = batch_axes_.find(input);
  return it != batch_axes_.end() ? it->second : 0;
}

std::vector<Divergence> traceQdq(const TraceContext& context, passes::PreparedModel& model,
                                 const nlohmann::json& manifest,
                                 const std::vector<Encoding>& encodings, const std::string& path,
                                 const TensorMap& feeds, const TensorMap& sim_overrides) {
  const nlohmann::json quantized = manifest.value("quantized_values", nlohmann::json::object());
  // A quantizer shared by several values (Concat's inputs) has FakeQuantize nodes on each, but
  // the QDQ model names one tensor for it: compareTensors compares that tensor once.
  const OrtObservedModel ort_model(context.ort, path);
  std::set<std::string> retyped;
  for (const auto& t : manifest.value("retyped_pairs", nlohmann::json::array()))
    retyped.insert(t.get<std::string>());
  std::vector<ComparedTensor> wanted;
  for (const Node* n : model.graph().topologicalOrder()) {
    if (!passes::isFakeQuantize(n)) continue;
    const std::string fq_quantizer = passes::quantizerOf(*n);
    for (const Encoding& e : encodings) {
      if (e.quantizer != fq_quantizer || e.role != "activation" || !e.per_tensor) continue;
      if (!quantized.contains(e.quantizer)) continue;
      // A pair deploy wrote in the other 8-bit type (deploy/ort_double_qdq_guard.h) has its
      // levels on the file's zero point, 128 from the prepared model's. Any other tensor keeps
      // the prepared one, so that a file written with another zero point shows as a difference.
      const std::string tensor = quantized[e.quantizer].get<std::string>();
      const int64_t zero_point = retyped.count(tensor)
                                     ? ort_model.exportedZeroPoint(tensor).value_or(e.zero_point)
                                     : e.zero_point;
      std::optional<std::pair<double, double>> range;
      // A pair retyped onto the other container keeps its grid 128 levels over.
      if (const quant::FakeQuantizer* q = model.quantizer(fq_quantizer);
          q != nullptr && !retyped.count(tensor)) {
        range = std::make_pair(static_cast<double>(q->scheme().qmin()),
                               static_cast<double>(q->scheme().qmax()));
      }
      wanted.push_back(ComparedTensor{e.quantizer, tensor, n->output(0)->name(), e.scale,
                                      zero_point, n->input(0)->name(), std::nullopt, range});
      break;
    }
    // NNIE's logarithmic grid has no scale: its tensors are compared in codes.
    const auto* log_grid =
        dynamic_cast<const quant::NnieFakeQuantizer*>(model.quantizer(fq_quantizer));
    if (log_grid != nullptr && quantized.contains(fq_quantizer) && log_grid->dataMax() > 0) {
      wanted.push_back(ComparedTensor{fq_quantizer, quantized[fq_quantizer].get<std::string>(),
                                      n->output(0)->name(), std::nullopt, 0, n->input(0)->name(),
                                      quant::nnieGridOffset(log_grid->dataMax()), std::nullopt});
    }
  }
  std::vector<Divergence> found =
      compareTensors(context, model.executor(), ort_model, feeds, wanted, sim_overrides);
  if (summarize(found).first_difference) {
    // Where levels differ, whether each tensor's own ops make the difference or carry it. ORT
    // refusing the traced copy leaves the trace without it.
    try {
      compareFed(context, model.graph(), model.executor(), ort_model, feeds, wanted, sim_overrides,
                 found);
    } catch (const Error&) {
    }
  }
  measureFloatGaps(context, model.executor(), path, feeds, wanted, sim_overrides, found);
  return found;
}

std::vector<Divergence> traceQOperator(const TraceContext& context, const nlohmann::json& manifest,
                                       const std::string& path, const Graph& qop,
                                       Executor& emulator, const TensorMap& feeds) {
  std::map<std::string, std::string> quantizer_of;
  const nlohmann::json quantized = manifest.value("quantized_values", nlohmann::json::object());
  for (const auto& [quantizer, tensor] : quantized.items()) {
    quantizer_of[tensor.get<std::string>()] = quantizer;
  }
  std::vector<ComparedTensor> wanted;
  for (const Node* n : qop.topologicalOrder()) {
    const std::string& op = n->opType();
    const std::string& name = n->output(0)->name();
    // A quantizer written as arithmetic stays float in this model; its Clip holds the integers.
    const bool arithmetic_levels = op == "Clip" && quantizer_of.count(name);
    if (op == "QuantizeLinear" || op.rfind("QLinear", 0) == 0 ||
        (op == "QGemm" && n->inputs().size() > 7) || arithmetic_levels) {
      const auto it = quantizer_of.find(name);
      wanted.push_back(ComparedTensor{it == quantizer_of.end() ? "" : it->second, name, name,
                                      std::nullopt, 0, "", std::nullopt, std::nullopt});
    }
  }
  return compareTensors(context, emulator, OrtObservedModel(context.ort, path), feeds, wanted, {});
}

TraceSummary summarize(const std::vector<Divergence>& tensors) {
  TraceSummary s;
  for (const Divergence& d : tensors) {
    if (d.max_steps > 0 && !s.first_difference) s.first_difference = d;
    if (d.max_steps > 1.0 && !s.divergence) s.divergence = d;
    if (!s.largest || d.share_off > s.largest->share_off) s.largest = d;
    if (d.rerun) {
      ++s.rerun;
      if (d.rerun->max_levels > 1.0 + 1e-9 && !s.first_own_difference) s.first_own_difference = d;
    }
  }
  return s;
}

}  // namespace qforge::verify
