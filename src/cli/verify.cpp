// `qforge verify DIR --data SOURCE`: the deployed models in ONNX Runtime against qforge's
// simulation and integer emulation on the same inputs (verify/verify.h). Exit 0 when every
// criterion holds (top-1 agreement and accuracy gap against the simulation, exact elements and
// largest difference against the emulation), 1 otherwise.
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/eval_support.h"
#include "exec/ort_emulation.h"
#include "passes/prepared_io.h"
#include "verify/verify.h"

namespace qforge::cli {

namespace {

struct VerifyCliOptions {
  std::string dir;
  std::string prepared;
  std::string data = "fashion-mnist:test";
  int64_t limit = 0;
  int64_t batch = 256;
  std::string ort_dir;
  std::string optimization = "all";
  double timeout = 1800;
  double min_agreement = 0.999;
  double max_accuracy_gap = 0.0005;
  double min_exact = 0.999;
  bool json = false;
  bool quiet = false;
};

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f%%", 100.0 * fraction);
  return buf;
}

std::string reportText(const verify::VerifyReport& r) {
  std::ostringstream out;
  char buf[256];
  out << "samples    " << r.samples << "\n";
  for (const auto& [path, top1] : r.accuracy)
    out << "top-1      " << percent(top1) << "  " << path << "\n";
  std::snprintf(buf, sizeof(buf), "step       %.6g (%s)\n", r.step, r.step_source.c_str());
  out << buf;
  for (const verify::Comparison& c : r.comparisons) {
    std::snprintf(buf, sizeof(buf),
                  "%-10s ORT vs %-10s  top-1 agree %lld/%lld (%s)  max %.3g steps  p99 %.3g  "
                  "exact %s%s\n",
                  c.model.c_str(), c.reference.c_str(), static_cast<long long>(c.top1_agree),
                  static_cast<long long>(c.samples),
                  percent(static_cast<double>(c.top1_agree) / c.samples).c_str(), c.max_steps,
                  c.p99_steps, percent(c.exact_fraction).c_str(), c.judged ? "" : "  (diagnostic)");
    out << buf;
    const auto line = [&](const char* what, const verify::Divergence& d) {
      std::snprintf(buf, sizeof(buf),
                    "           %s: tensor '%s'%s, up to %.0f steps, %.2f%% of it > 1 step "
                    "(tensor %lld of %lld compared)\n",
                    what, d.tensor.c_str(),
                    d.quantizer.empty() ? "" : (" (quantizer '" + d.quantizer + "')").c_str(),
                    d.max_steps, 100 * d.share_off, static_cast<long long>(d.index + 1),
                    static_cast<long long>(d.compared));
      out << buf;
    };
    if (c.first_difference) line("first difference", *c.first_difference);
    if (c.divergence) line("first divergence > 1 step", *c.divergence);
    if (c.largest && c.largest->share_off > 0) line("most elements off", *c.largest);
  }
  for (const std::string& n : r.notes)
    out << "note       " << n << "\n";
  return out.str();
}

int runVerify(const VerifyCliOptions& o) {
  const bool tty = !o.json && !o.quiet && ::isatty(STDERR_FILENO);
  auto model = passes::loadPreparedModel(o.prepared.empty() ? o.dir : o.prepared);
  auto dataset = openFor(o.data, model->graph());
  data::BatchLoader loader(dataset, loaderOptions(model->graph(), o.batch, o.limit));
  std::vector<at::Tensor> inputs, labels;
  ProgressBar progress(loader.size(), tty);
  const auto start = Clock::now();
  int64_t read = 0;
  while (auto batch = loader.next()) {
    inputs.push_back(batch->inputs);
    if (batch->labels.defined()) labels.push_back(batch->labels);
    read += batch->inputs.size(0);
    progress.update(read, secondsSince(start));
  }
  progress.clear();

  verify::VerifyOptions options;
  options.batch = o.batch;
  options.min_agreement = o.min_agreement;
  options.max_accuracy_gap = o.max_accuracy_gap;
  options.min_exact = o.min_exact;
  options.ort.ort_dir = o.ort_dir;
  options.ort.optimization = verify::parseOrtOptimization(o.optimization);
  options.ort.timeout_seconds = o.timeout;
  options.emulation = &ortEmulationRegistry();
  const verify::VerifyReport report = verify::verifyDeployment(
      *model, o.dir, at::cat(inputs, 0),
      labels.size() == inputs.size() ? at::cat(labels, 0) : at::Tensor(), options);
  nlohmann::json j = verify::toJson(report);
  j["data"] = dataset->describe();
  j["seconds"] = secondsSince(start);
  if (o.json) {
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << reportText(report);
    if (report.passed) {
      std::cout << "verified   ONNX Runtime matches the simulation and the emulation\n";
    }
    for (const std::string& f : report.failures)
      std::cout << "MISMATCH   " << f << "\n";
  }
  return report.passed ? 0 : 1;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> addVerifyCommand(CLI::App& app) {
  auto o = std::make_shared<VerifyCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "verify",
      "Run the deployed ONNX models in ONNX Runtime against qforge's simulation and emulation");
  sub->add_option("dir", o->dir, "Directory with deploy.json (from quantize or deploy)")
      ->required();
  sub->add_option("--prepared", o->prepared,
                  "Prepared model directory, when not DIR itself (qforge deploy --out elsewhere)");
  sub->add_option("--data", o->data, "Evaluation data (same sources as eval --data)")
      ->capture_default_str();
  sub->add_option("--limit", o->limit, "Only the first N samples (0: all)")->capture_default_str();
  sub->add_option("--batch", o->batch, "Batch size for every runtime")->capture_default_str();
  sub->add_option("--ort-dir", o->ort_dir,
                  "Where onnxruntime-node is installed (default $QFORGE_ORT_DIR or "
                  "~/.cache/qforge/ort)");
  sub->add_option("--ort-optimization", o->optimization,
                  "ONNX Runtime graph optimization: disabled, basic, extended, all")
      ->capture_default_str();
  sub->add_option("--timeout", o->timeout, "Seconds before an ONNX Runtime run is abandoned")
      ->capture_default_str();
  sub->add_option("--min-agreement", o->min_agreement,
                  "Top-1 agreement with the simulation needed to pass")
      ->capture_default_str();
  sub->add_option("--max-accuracy-gap", o->max_accuracy_gap,
                  "Largest accuracy difference from the simulation (fraction) to pass")
      ->capture_default_str();
  sub->add_option("--min-exact", o->min_exact,
                  "Share of output elements equal to the emulation's needed to pass")
      ->capture_default_str();
  sub->add_flag("--json", o->json, "Print the report as JSON");
  sub->add_flag("--quiet,-q", o->quiet, "No progress bar");
  return {sub, [o] { return runVerify(*o); }};
}

}  // namespace qforge::cli
