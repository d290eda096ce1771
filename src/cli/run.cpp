// `qforge run MODEL`: load a model, run it on deterministic sample inputs, report outputs and
// latency. The smoke test of the whole import -> execute path. With --backend it times the model
// prepared for that backend instead: with every observer on (what each calibration batch costs)
// or quantizing (what evaluating the simulation costs), the figures bench/executor_speed_table.py
// sets against ONNX Runtime.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>

#include "backends/backend_config.h"
#include "cli/commands.h"
#include "cli/json_report.h"
#include "core/error.h"
#include "core/utf8.h"
#include "exec/executor.h"
#include "exec/ort_emulation.h"
#include "exec/sample_inputs.h"
#include "ir/onnx_import.h"
#include "ir/onnx_tensor.h"
#include "passes/fake_quantize_node.h"
#include "passes/prepare.h"

namespace qforge::cli {

namespace {

struct RunOptions {
  std::string model;
  int64_t batch = 1;
  int iterations = 10;
  int warmup = 2;
  uint64_t seed = 0;
  std::vector<std::string> input_files;     // NAME=FILE.pb
  std::vector<std::string> sample_shapes;   // NAME=DxDxD: one sample's dims, for open dims
  std::vector<std::string> expected_files;  // NAME=FILE.pb
  double atol = 1e-4;
  double rtol = 1e-4;
  std::string arithmetic = "onnx";
  std::string backend;               // "": the float model
  std::string mode = "calibration";  // with a backend: calibration or quantized
  bool profile = false;
  bool json = false;
};

std::pair<std::string, std::string> splitSpec(const std::string& spec, const std::string& flag) {
  const size_t eq = spec.find('=');
  require(eq != std::string::npos && eq > 0,
          flag + " '" + spec + "' must be NAME=FILE.pb (a serialized ONNX TensorProto)");
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}

// Replaces sample inputs with tensors read from ONNX TensorProto files given as NAME=FILE.pb.
void loadInputFiles(const Graph& graph, const std::vector<std::string>& specs, TensorMap& feeds) {
  for (const std::string& spec : specs) {
    auto [name, file] = splitSpec(spec, "--input");
    const Value* v = graph.findValue(name);
    require(v != nullptr && graph.isGraphInput(v),
            "--input names '" + name + "', which is not an input of the model");
    feeds[name] = readTensorProtoFile(file);
  }
}

// NAME=3x48x192 specs as the dims of one sample of each named input.
SampleShapes parseSampleShapes(const std::vector<std::string>& specs) {
  SampleShapes shapes;
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    require(eq != std::string::npos && eq > 0 && eq + 1 < spec.size(),
            "--shape '" + spec + "' must be NAME=DIMS, the dims after the batch, e.g. x=3x224x224");
    std::vector<int64_t> dims;
    size_t start = eq + 1;
    while (start <= spec.size()) {
      const size_t x = std::min(spec.find('x', start), spec.size());
      const std::string text = spec.substr(start, x - start);
      char* end = nullptr;
      const long long d = std::strtoll(text.c_str(), &end, 10);
      require(!text.empty() && end != nullptr && *end == '\0' && d > 0,
              "--shape '" + spec + "': '" + text + "' is not a positive dim (NAME=3x224x224)");
      dims.push_back(d);
      start = x + 1;
    }
    shapes[spec.substr(0, eq)] = dims;
  }
  return shapes;
}

// Compares outputs with reference tensors; returns a JSON row per comparison.
nlohmann::json compareOutputs(const Graph& graph, const std::vector<std::string>& specs,
                              const TensorMap& outputs, double atol, double rtol) {
  nlohmann::json rows = nlohmann::json::array();
  for (const std::string& spec : specs) {
    auto [name, file] = splitSpec(spec, "--expect");
    const Value* v = graph.findValue(name);
    require(v != nullptr && graph.isGraphOutput(v),
            "--expect names '" + name + "', which is not an output of the model");
    at::Tensor expected = readTensorProtoFile(file).to(at::kDouble);
    at::Tensor actual = outputs.at(name).to(at::kDouble);
    require(expected.sizes() == actual.sizes(),
            "--expect " + name + ": reference shape " + c10::str(expected.sizes()) +
                " differs from the output's " + c10::str(actual.sizes()));
    const double max_diff = expected.numel() ? (actual - expected).abs().max().item<double>() : 0;
    const bool ok = at::allclose(actual, expected, rtol, atol);
    rows.push_back({{"name", name}, {"max_abs_diff", max_diff}, {"within_tolerance", ok}});
  }
  return rows;
}

// Sums node timings by op type, slowest first.
nlohmann::json profileByOpType(const std::vector<NodeTiming>& timings, int runs) {
  std::map<std::string, std::pair<double, int>> by_op;
  for (const NodeTiming& t : timings) {
    auto& entry = by_op[t.node->opType()];
    entry.first += t.total_ms / runs;
    entry.second += 1;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> rows(by_op.begin(), by_op.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  nlohmann::json result = nlohmann::json::array();
  for (const auto& [op, stats] : rows) {
    result.push_back({{"op", op}, {"ms_per_run", stats.first}, {"nodes", stats.second}});
  }
  return result;
}

// Every node that ran, slowest first: where a model's time goes within an op type.
nlohmann::json nodesSlowestFirst(const std::vector<NodeTiming>& timings, int runs) {
  std::vector<const NodeTiming*> order;
  for (const NodeTiming& t : timings) {
    if (t.calls > 0) order.push_back(&t);
  }
  std::sort(order.begin(), order.end(),
            [](const NodeTiming* a, const NodeTiming* b) { return a->total_ms > b->total_ms; });
  nlohmann::json result = nlohmann::json::array();
  for (const NodeTiming* t : order) {
    result.push_back({{"node", t->node->describe()}, {"ms_per_run", t->total_ms / runs}});
  }
  return result;
}

int runModel(const RunOptions& o) {
  require(o.batch > 0, "--batch must be positive");
  require(o.iterations > 0 && o.warmup >= 0, "--iters must be positive and --warmup >= 0");
  require(o.arithmetic == "onnx" || o.arithmetic == "ort",
          "--arithmetic must be 'onnx' (ONNX's reference semantics) or 'ort' (ONNX Runtime's "
          "integer kernels), not '" +
              o.arithmetic + "'");
  require(o.mode == "calibration" || o.mode == "quantized",
          "--mode must be 'calibration' (observers on) or 'quantized' (fake quantization on), "
          "not '" +
              o.mode + "'");
  require(o.backend.empty() || o.arithmetic == "onnx",
          "--arithmetic ort runs a deployed QOperator model as it is; --backend prepares a float "
          "model, so give one of the two");
  Graph graph = importOnnxFile(o.model);
  const SampleShapes sample_shapes = parseSampleShapes(o.sample_shapes);
  TensorMap feeds = sampleInputs(graph, o.batch, true, o.seed, /*open_dim=*/1, sample_shapes);
  loadInputFiles(graph, o.input_files, feeds);
  int64_t batch = o.batch;
  if (!feeds.empty() && feeds.begin()->second.dim() > 0) batch = feeds.begin()->second.size(0);

  std::unique_ptr<passes::PreparedModel> prepared;
  if (!o.backend.empty()) {
    prepared = passes::prepare(graph.clone(), backends::loadBackend(o.backend));
    prepared->setMode(quant::FakeQuantMode::Calibration);
  }
  const OpRegistry registry =
      prepared ? passes::registryWithFakeQuantize(
                     [&prepared](const std::string& name) { return prepared->quantizer(name); })
      : o.arithmetic == "ort" ? ortEmulationRegistry()
                              : OpRegistry::builtin();
  ExecutorOptions exec_options;
  exec_options.profile = o.profile;
  Executor executor(prepared ? prepared->graph() : graph, exec_options, registry);
  // The quantized mode needs ranges: the warm-up runs calibrate them (at least one run).
  const int warmup = prepared && o.mode == "quantized" ? std::max(o.warmup, 1) : o.warmup;
  // Open dims filled with 1 suit a sequence model but not a CNN: a failure says which to give.
  std::string filled_open;  // "x [?,3,?,?], ..." for the inputs sampled with open dims
  for (const OpenInput& input : inputsWithOpenDims(graph)) {
    const bool from_file =
        std::any_of(o.input_files.begin(), o.input_files.end(),
                    [&](const std::string& spec) { return spec.rfind(input.name + "=", 0) == 0; });
    if (sample_shapes.count(input.name) == 0 && !from_file) {
      filled_open += (filled_open.empty() ? "" : ", ") + input.name + " " + input.declared;
    }
  }
  auto runOnce = [&]() {
    try {
      return executor.run(feeds);
    } catch (const Error& e) {
      if (filled_open.empty()) throw;
      throw Error(std::string(e.what()) + " (the sample inputs set open dims to 1: " + filled_open +
                  "; give them with --shape NAME=DxDxD, the dims after the batch)");
    }
  };
  for (int i = 0; i < warmup; ++i)
    runOnce();
  if (prepared && o.mode == "quantized") prepared->setMode(quant::FakeQuantMode::Quantization);
  executor.resetProfile();
  std::vector<double> ms;
  TensorMap outputs;
  for (int i = 0; i < o.iterations; ++i) {
    auto start = std::chrono::steady_clock::now();
    outputs = runOnce();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  const std::vector<double> ms_in_order = ms;
  std::sort(ms.begin(), ms.end());
  const nlohmann::json checks = compareOutputs(graph, o.expected_files, outputs, o.atol, o.rtol);
  bool all_ok = true;
  for (const auto& c : checks)
    all_ok = all_ok && c["within_tolerance"].get<bool>();
  const double median = ms[ms.size() / 2];

  nlohmann::json report;
  report["model"] = o.model;
  report["batch"] = batch;
  report["threads"] = at::get_num_threads();
  if (prepared) {
    report["backend"] = prepared->backend().name;
    report["mode"] = o.mode;
    report["quantizers"] = prepared->quantizers().size();
  }
  report["median_ms"] = median;
  report["min_ms"] = ms.front();
  // Every run in order: a machine whose memory is shared with other tenants has slow phases, and
  // a benchmark needs the distribution to see them (bench/executor_speed_table.py).
  report["times_ms"] = ms_in_order;
  report["outputs"] = nlohmann::json::array();
  for (const Value* v : graph.outputs()) {
    const at::Tensor& t = outputs.at(v->name());
    at::Tensor f = t.to(at::kDouble);
    report["outputs"].push_back({{"name", v->name()},
                                 {"shape", t.sizes().vec()},
                                 {"mean", f.mean().item<double>()},
                                 {"abs_sum", f.abs().sum().item<double>()}});
  }
  report["expect"] = checks;
  if (o.profile) {
    report["profile"] = profileByOpType(executor.profile(), o.iterations);
    // Every node in the JSON; the text shows the first ten.
    report["profile_nodes"] = nodesSlowestFirst(executor.profile(), o.iterations);
  }
  const int exit_code = all_ok ? 0 : 1;
  if (o.json) {
    std::cout << jsonReportText(report);
    return exit_code;
  }
  std::cout << "model    " << o.model << "\nbatch    " << batch
            << (o.input_files.empty() ? " (sample inputs, seed " + std::to_string(o.seed) + ")"
                                      : " (inputs from files)")
            << "\nthreads  " << at::get_num_threads();
  if (prepared) {
    std::cout << "\nbackend  " << prepared->backend().name << ", " << o.mode << " mode ("
              << prepared->quantizers().size() << " quantizers)";
  }
  std::cout << "\nlatency  median " << median << " ms, min " << ms.front() << " ms over "
            << o.iterations << " runs\n";
  for (const auto& out : report["outputs"]) {
    std::cout << "output   " << printableName(out["name"].get<std::string>()) << " "
              << out["shape"].dump() << " mean " << out["mean"].get<double>() << "\n";
  }
  if (o.profile) {
    std::cout << "profile  (ms per run, by op type)\n";
    for (const auto& row : report["profile"]) {
      std::cout << "  " << printableName(row["op"].get<std::string>()) << " x"
                << row["nodes"].get<int>() << ": " << row["ms_per_run"].get<double>() << "\n";
    }
    std::cout << "slowest  (ms per run, by node)\n";
    for (size_t i = 0; i < report["profile_nodes"].size() && i < 10; ++i) {
      const auto& row = report["profile_nodes"][i];
      std::cout << "  " << printableName(row["node"].get<std::string>()) << ": "
                << row["ms_per_run"].get<double>() << "\n";
    }
  }
  for (const auto& c : checks) {
    std::cout << "expect   " << printableName(c["name"].get<std::string>()) << ": max |diff| "
              << c["max_abs_diff"].get<double>() << " vs reference, "
              << (c["within_tolerance"].get<bool>() ? "within" : "OUTSIDE") << " tolerance (atol "
              << o.atol << ", rtol " << o.rtol << ")\n";
  }
  return exit_code;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> addRunCommand(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand("run",
                                     "Run a model on deterministic sample inputs and "
                                     "report its outputs and latency");
  sub->add_option("model", options->model, "ONNX model file")
      ->type_name(value_type::kFile)
      ->required();
  sub->add_option("--batch", options->batch, "Batch size of the sample inputs")
      ->capture_default_str();
  sub->add_option("--iters", options->iterations, "Timed runs")->capture_default_str();
  sub->add_option("--warmup", options->warmup, "Untimed runs first")->capture_default_str();
  sub->add_option("--seed", options->seed, "Seed of the sample inputs")->capture_default_str();
  sub->add_option("--input", options->input_files,
                  "NAME=FILE.pb: feed this input from a serialized ONNX TensorProto instead of "
                  "a sample (repeatable)");
  sub->add_option("--shape", options->sample_shapes,
                  "NAME=DxDxD: the dims after the batch of a sample for this input, for inputs "
                  "the model leaves open (default 1 each) (repeatable)");
  sub->add_option("--expect", options->expected_files,
                  "NAME=FILE.pb: compare this output with a reference tensor; exit 1 when it is "
                  "outside tolerance (repeatable)");
  sub->add_option("--atol", options->atol, "Absolute tolerance of --expect")->capture_default_str();
  sub->add_option("--rtol", options->rtol, "Relative tolerance of --expect")->capture_default_str();
  sub->add_option("--arithmetic", options->arithmetic,
                  "Quantized kernels as ONNX specifies them (onnx) or as ONNX Runtime computes "
                  "them (ort: the integer emulation)")
      ->capture_default_str();
  sub->add_option("--backend", options->backend,
                  "Time the model prepared for this backend (a built-in name or a .json file) "
                  "rather than the float model")
      ->type_name(value_type::kBackend);
  sub->add_option("--mode", options->mode,
                  "With --backend: calibration (every observer on, as each calibration batch "
                  "runs) or quantized (fake quantization on, ranges from the warm-up runs)")
      ->capture_default_str();
  sub->add_flag("--profile", options->profile,
                "Report time per op type and the slowest nodes (every node in --json)");
  sub->add_flag("--json", options->json, "Print machine-readable JSON");
  return {sub, [options] { return runModel(*options); }};
}

}  // namespace qforge::cli
