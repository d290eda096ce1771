// `qforge verify DIR --data SOURCE`: the deployed models in ONNX Runtime against qforge's
// simulation and integer emulation on the same inputs (verify/verify.h), streamed in steps of
// bounded size. Exit 0 when every criterion holds (against the simulation: top-1 agreement and
// accuracy gap for classifier outputs, SQNR, cosine, p99 difference and optionally IoU for the
// others; against the emulation: exact elements and largest difference), 1 otherwise.
#include <nlohmann/json.hpp>

#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "cli/commands.h"
#include "cli/json_report.h"
#include "core/error.h"
#include "core/resource_limits.h"
#include "core/utf8.h"
#include "pipelines/verify_pipeline.h"

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
  double min_sqnr = 30;
  double min_cosine = 0.999;
  double max_p99_steps = 1.0;
  std::optional<double> iou_threshold;
  double min_iou = 0.99;
  double max_quality_gap = 1.0;
  bool strict = false;
  std::string trace_memory = "1G";
  bool json = false;
  bool quiet = false;
};

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f%%", 100.0 * fraction);
  return buf;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

// "  output 'y' (classifier)  top-1 agree 64/64 (100.00%)  sqnr 41.2 dB  cos 0.99990  max 1
// steps  p99 0  exact 99.90%  within 1 step 100.00%"
std::string outputLine(const verify::OutputComparison& o) {
  std::string line = "           output '" + o.output + "'";
  if (o.classifier) {
    line += "  top-1 agree " + std::to_string(o.top1_agree) + "/" + std::to_string(o.samples) +
            " (" + percent(static_cast<double>(o.top1_agree) / o.samples) + ")";
  }
  line += "  sqnr " + (std::isfinite(o.sqnr_db) ? number(o.sqnr_db) + " dB" : "inf") + "  cos " +
          number(o.cosine) + "  max " + number(o.max_steps) + " steps  p99 " + number(o.p99_steps) +
          "  exact " + percent(o.exact_fraction) + "  within 1 step " +
          percent(o.within_one_step_fraction);
  if (o.iou) line += "  iou " + number(*o.iou);
  if (o.shape_mismatches > 0) {
    line +=
        "  shape differs in " + std::to_string(o.shape_mismatches) + " step(s): " + o.shape_example;
  }
  return line + "\n";
}

std::string reportText(const verify::VerifyReport& r) {
  std::ostringstream out;
  char buf[256];
  out << "samples    " << r.samples << " (steps of " << r.batch
      << (r.whole_samples     ? ", one per run: the model input has no batch axis"
          : r.fixed_batch > 0 ? ", model batch fixed at " + std::to_string(r.fixed_batch)
                              : "")
      << ")\n";
  for (const auto& [path, top1] : r.accuracy)
    out << "top-1      " << percent(top1) << "  " << path << "\n";
  std::snprintf(buf, sizeof(buf), "%.6g", r.step);
  out << "step       " << buf << " (" << r.step_source << ")\n";
  for (const verify::Comparison& c : r.comparisons) {
    std::snprintf(buf, sizeof(buf), "%-10s ORT vs %-10s  max %.3g steps  p99 %.3g  exact %s%s\n",
                  c.model.c_str(), c.reference.c_str(), c.max_steps, c.p99_steps,
                  percent(c.exact_fraction).c_str(), c.judged ? "" : "  (diagnostic)");
    out << buf;
    for (const verify::OutputComparison& o : c.outputs)
      out << outputLine(o);
    // Built as strings: tensor names of real models overflow any fixed buffer.
    const auto line = [&](const char* what, const verify::Divergence& d) {
      std::snprintf(buf, sizeof(buf), "%.0f", d.max_steps);
      out << "           " << what << ": tensor '" << d.tensor << "'"
          << (d.quantizer.empty() ? "" : " (quantizer '" + d.quantizer + "')")
          << (d.ort_writer.empty() ? "" : ", written in ONNX Runtime by " + d.ort_writer)
          << ", up to " << buf << " steps, " << percent(d.share_off) << " of it > 1 step (tensor "
          << d.index + 1 << " of " << d.compared << " compared)\n";
    };
    const auto cause = [&](const verify::Divergence& d) {
      const std::string why =
          verify::describeCause(d, c.first_difference && d.index == c.first_difference->index);
      if (!why.empty()) out << "           why: " << why << "\n";
    };
    if (c.first_difference) {
      line("first difference", *c.first_difference);
      cause(*c.first_difference);
    }
    if (c.divergence) {
      line("first divergence > 1 step", *c.divergence);
      cause(*c.divergence);
    }
    if (c.largest && c.largest->share_off > 0) line("most elements off", *c.largest);
    if (c.rerun_tensors > 0 && c.first_own_difference) {
      const verify::Divergence& d = *c.first_own_difference;
      std::snprintf(buf, sizeof(buf), "%.0f", d.rerun->max_levels);
      out << "           first to differ on its own: tensor '" << d.tensor
          << "', fed ONNX Runtime's inputs still up to " << buf << " steps off (tensor "
          << d.index + 1 << " of " << d.compared << " compared)\n";
      out << "           its ops: " << verify::describeOps(d.rerun->ops, 8) << "\n";
      cause(d);
    } else if (c.rerun_tensors > 0) {
      out << "           fed ONNX Runtime's inputs, every tensor rerun (" << c.rerun_tensors
          << ") is within one step of it: what differs by more was carried from the one-step "
             "differences before it\n";
    }
  }
  for (const verify::OutputQuality& q : r.quality) {
    std::snprintf(buf, sizeof(buf),
                  "%.2f dB in ONNX Runtime, %.2f dB in the simulation (gap %.2f dB, 90%% "
                  "interval %.2f to %.2f over %lld samples)",
                  q.ort_sqnr_db, q.simulation_sqnr_db, q.gap_db, q.gap_low_db, q.gap_high_db,
                  static_cast<long long>(q.samples));
    out << "quality    output '" << q.output << "': SQNR against the float model " << buf << "\n";
  }
  for (const verify::Criterion& c : r.criteria) {
    out << "criterion  "
        << (c.passed   ? "ok    "
            : c.waived ? "waived"
                       : "FAILED")
        << "  " << c.comparison << ", output '" << c.output << "': " << c.metric << " "
        << number(c.value) << (c.at_least ? " >= " : " <= ") << number(c.threshold) << "\n";
  }
  for (const std::string& n : r.notes)
    out << "note       " << n << "\n";
  return out.str();
}

int runVerify(const VerifyCliOptions& o) {
  pipelines::VerifyPipelineOptions p;
  p.dir = o.dir;
  p.prepared = o.prepared;
  p.data = o.data;
  p.limit = o.limit;
  p.batch = o.batch;
  verify::VerifyOptions& options = p.verify;
  options.min_agreement = o.min_agreement;
  options.max_accuracy_gap = o.max_accuracy_gap;
  options.min_exact = o.min_exact;
  options.min_sqnr_db = o.min_sqnr;
  options.min_cosine = o.min_cosine;
  options.max_p99_steps = o.max_p99_steps;
  options.iou_threshold = o.iou_threshold;
  options.min_iou = o.min_iou;
  options.max_quality_gap_db = o.max_quality_gap;
  options.waive_carried_rounding = !o.strict;
  options.ort.ort_dir = o.ort_dir;
  options.ort.optimization = verify::parseOrtOptimization(o.optimization);
  options.ort.timeout_seconds = o.timeout;
  options.trace_chunk_bytes = parseByteSize(o.trace_memory, "--trace-memory");
  require(options.trace_chunk_bytes > 0,
          "--trace-memory must be positive, not '" + o.trace_memory + "'");
  const pipelines::VerifyPipelineResult result = pipelines::runVerify(p);
  const verify::VerifyReport& report = result.report;
  if (o.json) {
    std::cout << jsonReportText(result.json);
  } else {
    std::cout << printable(reportText(report));  // value names from the file
    if (report.passed) {
      std::cout << "verified   ONNX Runtime meets every criterion above\n";
    }
    for (const std::string& f : report.failures)
      std::cout << "MISMATCH   " << printable(f) << "\n";
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
      ->type_name(value_type::kDir)
      ->required();
  sub->add_option("--prepared", o->prepared,
                  "Prepared model directory, when not DIR itself (qforge deploy --out elsewhere)")
      ->type_name(value_type::kDir);
  sub->add_option("--data", o->data,
                  "Evaluation data (same sources as eval --data: folder:DIR, npz:FILE, "
                  "random:normal[,seed=N], NAME=SPEC;NAME=const:VALUE per input, ...)")
      ->type_name(value_type::kSource)
      ->capture_default_str();
  sub->add_option("--limit", o->limit, "Only the first N samples (0: all)")->capture_default_str();
  sub->add_option("--batch", o->batch,
                  "Samples per step for every runtime (fewer when one step's inputs would pass "
                  "4 MiB; a multiple of the model's fixed batch dim)")
      ->capture_default_str();
  sub->add_option("--ort-dir", o->ort_dir,
                  "Where onnxruntime-node is installed (default $QFORGE_ORT_DIR or "
                  "~/.cache/qforge/ort)")
      ->type_name(value_type::kDir);
  sub->add_option("--ort-optimization", o->optimization,
                  "ONNX Runtime graph optimization: disabled, basic, extended, all")
      ->capture_default_str();
  sub->add_option("--timeout", o->timeout, "Seconds before an ONNX Runtime run is abandoned")
      ->capture_default_str();
  sub->add_option("--min-agreement", o->min_agreement,
                  "Top-1 agreement with the simulation needed to pass")
      ->capture_default_str();
  sub->add_option("--max-accuracy-gap", o->max_accuracy_gap,
                  "Largest accuracy difference from the simulation (fraction) to pass, rounded up "
                  "to whole samples")
      ->capture_default_str();
  sub->add_option("--min-exact", o->min_exact,
                  "Share of output elements equal to the emulation's needed to pass")
      ->capture_default_str();
  sub->add_option("--min-sqnr", o->min_sqnr,
                  "SQNR (dB) against the simulation needed to pass, for non-classifier outputs")
      ->capture_default_str();
  sub->add_option("--min-cosine", o->min_cosine,
                  "Cosine similarity with the simulation needed to pass (non-classifier outputs)")
      ->capture_default_str();
  sub->add_option("--max-p99-steps", o->max_p99_steps,
                  "Largest 99th-percentile difference from the simulation, in output steps "
                  "(non-classifier outputs)")
      ->capture_default_str();
  sub->add_option("--iou-threshold", o->iou_threshold,
                  "Also score the IoU of the output maps thresholded at this value (masks, "
                  "probability maps)");
  sub->add_option("--min-iou", o->min_iou, "IoU needed to pass with --iou-threshold")
      ->capture_default_str();
  sub->add_option("--max-quality-gap", o->max_quality_gap,
                  "When every difference was carried from rounding at ties (no tensor differs on "
                  "its own), the largest gap (dB) between ORT's and the simulation's SQNR against "
                  "the float model, beyond the spread over the verified samples (the gap's 90% "
                  "bootstrap interval must lie past it to fail)")
      ->capture_default_str();
  sub->add_flag("--strict", o->strict,
                "Judge every element-wise criterion, even when the differences are rounding "
                "carried through the graph");
  sub->add_option("--trace-memory", o->trace_memory,
                  "Memory the tensor-by-tensor trace of disagreeing paths may hold at once (512M, "
                  "2G); it reruns the models once per that much of compared tensors")
      ->capture_default_str();
  sub->add_flag("--json", o->json, "Print the report as JSON");
  sub->add_flag("--quiet,-q", o->quiet, "No progress bar");
  return {sub, [o] { return runVerify(*o); }};
}

}  // namespace qforge::cli
