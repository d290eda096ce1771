#include "verify/trace.h"

#include <algorithm>
#include <functional>
#include <set>

#include "algos/model_feeds.h"
#include "core/files.h"
#include "ir/onnx_export.h"
#include "ir/onnx_import.h"
#include "passes/fake_quantize_node.h"

namespace qforge::verify {

namespace {

// ORT's values of `tensors` (integer tensors of the model at `path`) on `feeds`: a copy of the
// model that also outputs them.
TensorMap ortIntermediates(const OrtRunner& ort, const std::string& path, const TensorMap& feeds,
                           const std::vector<std::string>& tensors) {
  Graph g = importOnnxFile(path);
  for (const std::string& name : tensors) {
    Value* v = g.findValue(name);
    if (v != nullptr && !g.isGraphOutput(v)) g.addOutput(v);
  }
  TempDir scratch("verify");
  const std::string traced = scratch.file("traced.onnx");
  exportOnnxFile(g, traced);
  return ort.run(traced, feeds, tensors);
}

using TensorPair = std::tuple<std::string, std::string, at::Tensor, at::Tensor>;

// Each of `pairs` (quantizer, tensor, reference levels, ORT levels; graph order) with its largest
// difference in levels.
std::vector<Divergence> tensorDifferences(const std::vector<TensorPair>& pairs) {
  std::vector<Divergence> out;
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto& [quantizer, tensor, ref, got] = pairs[i];
    const at::Tensor diff = (ref.to(at::kDouble) - got.to(at::kDouble)).abs();
    out.push_back(Divergence{quantizer, tensor, diff.max().item<double>(), static_cast<int64_t>(i),
                             static_cast<int64_t>(pairs.size()),
                             (diff > 1.0).to(at::kDouble).mean().item<double>()});
  }
  return out;
}

// Per compared element held: the simulation's levels (float: exact up to 2^24) and ORT's integer,
// with room for the one value being converted.
constexpr int64_t kBytesPerElement = 6;

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

// The pairs of compared tensors [begin, end) (in graph order), run for those tensors only.
using ChunkPairs = std::function<std::vector<TensorPair>(size_t begin, size_t end)>;

// tensorDifferences over the tensors whose element counts are `elements`, in chunks of at most
// `chunk_bytes` (at least one tensor each).
std::vector<Divergence> differencesInChunks(const std::vector<int64_t>& elements,
                                            int64_t chunk_bytes, const ChunkPairs& pairs_of) {
  std::vector<Divergence> out;
  for (size_t begin = 0; begin < elements.size();) {
    size_t end = begin + 1;
    int64_t bytes = elements[begin] * kBytesPerElement;
    while (end < elements.size() && bytes + elements[end] * kBytesPerElement <= chunk_bytes)
      bytes += elements[end++] * kBytesPerElement;
    for (Divergence d : tensorDifferences(pairs_of(begin, end))) {
      d.index = static_cast<int64_t>(out.size());
      out.push_back(d);
    }
    begin = end;
  }
  for (Divergence& d : out)
    d.compared = static_cast<int64_t>(out.size());
  return out;
}

}  // namespace

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
  int64_t rows = 0;
  for (const auto& [name, t] : got)
    rows = std::max<int64_t>(rows, t.dim() > 0 ? t.size(0) : 0);
  if (rows == 0) return;
  at::Tensor worst = at::zeros({rows}, at::kDouble);
  for (const auto& [name, t] : got) {
    if (t.dim() == 0 || t.size(0) != rows) continue;
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
  std::vector<std::tuple<std::string, std::string, const Encoding*>> wanted;  // fq, tensor, enc
  for (const Node* n : model.graph().topologicalOrder()) {
    if (!passes::isFakeQuantize(n)) continue;
    const std::string fq_quantizer = passes::quantizerOf(*n);
    for (const Encoding& e : encodings) {
      if (e.quantizer != fq_quantizer || e.role != "activation" || !e.per_tensor) continue;
      if (!quantized.contains(e.quantizer)) continue;
      wanted.emplace_back(n->output(0)->name(), quantized[e.quantizer].get<std::string>(), &e);
      break;
    }
  }
  // A quantizer shared by several values (Concat's inputs) has FakeQuantize nodes on each, but
  // the QDQ model names one tensor for it: compare that tensor with the first of those values of
  // its shape, once.
  std::set<std::string> compared;
  std::vector<std::string> fq_outs;
  for (const auto& [fq_out, tensor, e] : wanted)
    fq_outs.push_back(fq_out);
  const std::vector<int64_t> elements =
      elementCounts(model.executor(), feeds, fq_outs, context.fixed_batch, sim_overrides);
  return differencesInChunks(elements, context.chunk_bytes, [&](size_t begin, size_t end) {
    std::vector<std::string> ort_names, sim_names;
    for (size_t i = begin; i < end; ++i) {
      const auto& [fq_out, tensor, e] = wanted[i];
      if (std::find(ort_names.begin(), ort_names.end(), tensor) == ort_names.end()) {
        ort_names.push_back(tensor);
      }
      sim_names.push_back(fq_out);
    }
    const TensorMap ort = ortIntermediates(context.ort, path, feeds, ort_names);
    TensorMap sim =
        algos::runInBatches(model.executor(), feeds, sim_names, context.fixed_batch, sim_overrides);
    std::vector<TensorPair> pairs;
    for (size_t i = begin; i < end; ++i) {
      const auto& [fq_out, tensor, e] = wanted[i];
      const at::Tensor& got = ort.at(tensor);
      if (compared.count(tensor) || sim.at(fq_out).sizes() != got.sizes()) continue;
      compared.insert(tensor);
      const at::Tensor levels =
          ((sim.at(fq_out).to(at::kDouble) / e->scale).round() + e->zero_point).to(at::kFloat);
      sim.erase(fq_out);  // only the levels are held
      pairs.emplace_back(e->quantizer, tensor, levels, got);
    }
    return pairs;
  });
}

std::vector<Divergence> traceQOperator(const TraceContext& context, const nlohmann::json& manifest,
                                       const std::string& path, const Graph& qop,
                                       Executor& emulator, const TensorMap& feeds) {
  std::map<std::string, std::string> quantizer_of;
  const nlohmann::json quantized = manifest.value("quantized_values", nlohmann::json::object());
  for (const auto& [quantizer, tensor] : quantized.items()) {
    quantizer_of[tensor.get<std::string>()] = quantizer;
  }
  std::vector<std::string> names;
  for (const Node* n : qop.topologicalOrder()) {
    const std::string& op = n->opType();
    // A quantizer written as arithmetic stays float in this model; its Clip holds the integers.
    const bool arithmetic_levels = op == "Clip" && quantizer_of.count(n->output(0)->name());
    if (op == "QuantizeLinear" || op.rfind("QLinear", 0) == 0 ||
        (op == "QGemm" && n->inputs().size() > 7) || arithmetic_levels) {
      names.push_back(n->output(0)->name());
    }
  }
  const std::vector<int64_t> elements = elementCounts(emulator, feeds, names, context.fixed_batch);
  return differencesInChunks(elements, context.chunk_bytes, [&](size_t begin, size_t end) {
    const std::vector<std::string> chunk(names.begin() + static_cast<std::ptrdiff_t>(begin),
                                         names.begin() + static_cast<std::ptrdiff_t>(end));
    const TensorMap ort = ortIntermediates(context.ort, path, feeds, chunk);
    const TensorMap emu = algos::runInBatches(emulator, feeds, chunk, context.fixed_batch);
    std::vector<TensorPair> pairs;
    for (const std::string& name : chunk) {
      const auto it = quantizer_of.find(name);
      pairs.emplace_back(it == quantizer_of.end() ? "" : it->second, name, emu.at(name),
                         ort.at(name));
    }
    return pairs;
  });
}

TraceSummary summarize(const std::vector<Divergence>& tensors) {
  TraceSummary s;
  for (const Divergence& d : tensors) {
    if (d.max_steps > 0 && !s.first_difference) s.first_difference = d;
    if (d.max_steps > 1.0 && !s.divergence) s.divergence = d;
    if (!s.largest || d.share_off > s.largest->share_off) s.largest = d;
  }
  return s;
}

}  // namespace qforge::verify
