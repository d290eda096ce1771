// `qforge run MODEL`: load a model, run it on deterministic sample inputs, report outputs and
// latency. The smoke test of the whole import -> execute path.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <iostream>

#include "cli/commands.h"
#include "core/error.h"
#include "exec/executor.h"
#include "exec/sample_inputs.h"
#include "ir/onnx_import.h"

namespace qforge::cli {

namespace {

struct RunOptions {
  std::string model;
  int64_t batch = 1;
  int iterations = 10;
  int warmup = 2;
  uint64_t seed = 0;
  bool json = false;
};

int runModel(const RunOptions& o) {
  require(o.batch > 0, "--batch must be positive");
  require(o.iterations > 0 && o.warmup >= 0, "--iters must be positive and --warmup >= 0");
  Graph graph = importOnnxFile(o.model);
  Executor executor(graph);
  TensorMap feeds = sampleInputs(graph, o.batch, true, o.seed);
  for (int i = 0; i < o.warmup; ++i)
    executor.run(feeds);
  std::vector<double> ms;
  TensorMap outputs;
  for (int i = 0; i < o.iterations; ++i) {
    auto start = std::chrono::steady_clock::now();
    outputs = executor.run(feeds);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  const double median = ms[ms.size() / 2];

  nlohmann::json report;
  report["model"] = o.model;
  report["batch"] = o.batch;
  report["threads"] = at::get_num_threads();
  report["median_ms"] = median;
  report["min_ms"] = ms.front();
  report["outputs"] = nlohmann::json::array();
  for (const Value* v : graph.outputs()) {
    const at::Tensor& t = outputs.at(v->name());
    at::Tensor f = t.to(at::kDouble);
    report["outputs"].push_back({{"name", v->name()},
                                 {"shape", t.sizes().vec()},
                                 {"mean", f.mean().item<double>()},
                                 {"abs_sum", f.abs().sum().item<double>()}});
  }
  if (o.json) {
    std::cout << report.dump(2) << "\n";
    return 0;
  }
  std::cout << "model    " << o.model << "\nbatch    " << o.batch << " (sample inputs, seed "
            << o.seed << ")\nthreads  " << at::get_num_threads() << "\nlatency  median " << median
            << " ms, min " << ms.front() << " ms over " << o.iterations << " runs\n";
  for (const auto& out : report["outputs"]) {
    std::cout << "output   " << out["name"].get<std::string>() << " " << out["shape"].dump()
              << " mean " << out["mean"].get<double>() << "\n";
  }
  return 0;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> addRunCommand(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* sub = app.add_subcommand("run",
                                     "Run a model on deterministic sample inputs and "
                                     "report its outputs and latency");
  sub->add_option("model", options->model, "ONNX model file")->required();
  sub->add_option("--batch", options->batch, "Batch size of the sample inputs")
      ->capture_default_str();
  sub->add_option("--iters", options->iterations, "Timed runs")->capture_default_str();
  sub->add_option("--warmup", options->warmup, "Untimed runs first")->capture_default_str();
  sub->add_option("--seed", options->seed, "Seed of the sample inputs")->capture_default_str();
  sub->add_flag("--json", options->json, "Print machine-readable JSON");
  return {sub, [options] { return runModel(*options); }};
}

}  // namespace qforge::cli
