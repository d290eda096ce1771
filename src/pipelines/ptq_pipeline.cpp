#include "pipelines/ptq_pipeline.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <any>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "algos/algo_passes.h"
#include "algos/calibrate.h"
#include "backends/backend_config.h"
#include "core/error.h"
#include "core/files.h"
#include "core/json_reader.h"
#include "core/output_dir.h"
#include "core/peak_memory.h"
#include "core/resource_limits.h"
#include "deploy/deploy.h"
#include "deploy/qdq_onnx.h"
#include "ir/onnx_import.h"
#include "passes/prepared_io.h"
#include "passes/quant_config.h"
#include "pipelines/autotune.h"
#include "pipelines/mixed_precision.h"

namespace qforge::pipelines {

namespace {

// A fresh copy of the float model on every call: one is evaluated, one prepared.
Graph loadFloatModel(const PtqOptions& o) {
  if (o.graph) return copyGraph(*o.graph);
  require(!o.model_path.empty(), "no model given: name an ONNX file or pass a graph");
  return importOnnxFile(o.model_path);
}

// The first `batches` batches of the calibration data, as one tensor.
at::Tensor collectInputs(data::BatchLoader& loader, int64_t batches) {
  loader.reset();
  std::vector<at::Tensor> parts;
  while (static_cast<int64_t>(parts.size()) < batches) {
    auto batch = loader.next();
    if (!batch) break;
    parts.push_back(batch->inputs);
  }
  require(!parts.empty(), "the calibration data yielded no batch to reconstruct on");
  return at::cat(parts);
}

// Rank r's contiguous share of the samples (the rows [r n / N, (r + 1) n / N)), split by sample
// rather than by batch so that every rank gets some even when there are fewer batches than ranks;
// every rank sees the same n, so a share too small for a step fails alike on all of them.
at::Tensor rankShare(const at::Tensor& samples, algos::ProcessGroup* group) {
  if (!group || group->worldSize() == 1) return samples;
  const int64_t n = samples.size(0), world = group->worldSize(), rank = group->rank();
  const int64_t begin = rank * n / world, end = (rank + 1) * n / world;
  return samples.narrow(0, begin, end - begin);
}

algos::CalibrationResult calibrateWithProgress(passes::PreparedModel& model,
                                               data::BatchLoader& loader, int64_t batches,
                                               const ProgressCallback& progress,
                                               algos::ProcessGroup* group) {
  ProgressEvent event;
  event.stage = "calibrate";
  event.total = loader.size();
  event.unit = "img";
  const auto start = Clock::now();
  const algos::CalibrationResult result = algos::calibrate(
      model, loader, batches,
      [&](int64_t, int64_t, int64_t samples) {
        if (!progress) return;
        event.done = samples;
        event.seconds = secondsSince(start);
        progress(event);
      },
      group);
  if (progress) {
    event.last = true;
    progress(event);
  }
  return result;
}

ReconstructionSummary reconstructWithProgress(passes::PreparedModel& model,
                                              data::BatchLoader& calib_loader,
                                              int64_t calib_batches,
                                              const algos::ReconstructionConfig& config,
                                              const ProgressCallback& progress,
                                              algos::ProcessGroup* group) {
  const at::Tensor all = collectInputs(calib_loader, calib_batches);
  const at::Tensor images = rankShare(all, group);
  ProgressEvent event;
  event.stage = "reconstruct";
  event.unit = "it";
  const auto start = Clock::now();
  ReconstructionSummary summary;
  summary.config = config;
  summary.result = algos::reconstruct(
      model, images, config,
      [&](const algos::ReconProgress& p) {
        if (!progress) return;
        char note[200];
        std::snprintf(note, sizeof(note), "unit %zu/%zu %s  loss %.4g + %.4g", p.unit + 1, p.units,
                      p.name.substr(0, 40).c_str(), p.rec_loss, p.round_loss);
        event.total = static_cast<int64_t>(p.units) * p.iterations;
        event.done = static_cast<int64_t>(p.unit) * p.iterations + p.iteration;
        event.seconds = secondsSince(start);
        event.note = note;
        progress(event);
      },
      group);
  if (progress) {
    event.last = true;
    progress(event);
  }
  summary.samples = all.size(0);
  return summary;
}

// Float against quantized on `options.eval`.
Evaluation evaluate(const PtqOptions& o, const Graph& float_graph, passes::PreparedModel& model,
                    const ProgressCallback& progress) {
  auto eval_data = openSource(o.eval, float_graph);
  data::BatchLoader loader(
      eval_data, loaderOptionsFor(float_graph, o.eval_batch, o.eval_limit < 0 ? 0 : o.eval_limit));
  Evaluation e;
  e.data = eval_data->describe();
  Executor float_executor(float_graph);
  auto t = Clock::now();
  e.float_scores =
      scoreModel(float_executor, float_graph, loader, e.data, progress, "evaluate float");
  e.float_seconds = secondsSince(t);
  t = Clock::now();
  e.quantized_scores =
      scoreModel(model.executor(), model.graph(), loader, e.data, progress, "evaluate quantized");
  e.quantized_seconds = secondsSince(t);
  return e;
}

// Every file written into the staging directory, which becomes the output directory in one step
// once report.json is there too (core/output_dir.h). Deploy goes first: it checks the backend's
// constraints before writing anything, so a model the backend cannot take (a config broke one of
// them) changes nothing. Paths in the report are the final ones.
void writeOutputs(const PtqOptions& o, passes::PreparedModel& model,
                  const std::optional<nlohmann::json>& tuned_config, OutputDirectory& out,
                  PtqReport& report) {
  std::vector<std::string> written;
  if (o.deploy) {
    const deploy::DeployResult deployed = deploy::writeDeployFiles(model, out.staging());
    for (const std::string& f : deployed.files) {
      out.setRole(std::filesystem::path(f).filename().string(), OutputDirectory::kDeployRole);
      written.push_back(f);
    }
    report.deploy_notes = deployed.notes;
  }
  const std::string table_path =
      (std::filesystem::path(out.staging()) / "quantizers.json").string();
  writeFileAtomically(
      table_path,
      nlohmann::json{{"backend", report.backend}, {"quantizers", report.quantizers}}.dump(2) +
          "\n");
  written.push_back(table_path);
  if (tuned_config) {
    const std::string path = (std::filesystem::path(out.staging()) / "tuned_config.json").string();
    writeFileAtomically(path, tuned_config->dump(2) + "\n");
    written.push_back(path);
  }
  for (const std::string& f :
       passes::savePreparedModel(model, backends::resolveBackendDocument(o.backend), out.staging()))
    written.push_back(f);
  written.push_back((std::filesystem::path(out.staging()) / "report.json").string());
  report.files.clear();
  for (const std::string& f : written)
    report.files.push_back(out.finalPath(f));
}

}  // namespace

int64_t parseByteSize(const std::string& text) {
  return qforge::parseByteSize(text, "--cache-limit");
}

algos::ReconstructionConfig reconstructionSettings(const PtqOptions& o) {
  algos::ReconstructionConfig c = algos::reconstructionPreset(o.algo);
  if (!o.algo_config.empty()) {
    const std::string text = readFile(o.algo_config);
    const bool yaml =
        o.algo_config.size() > 5 && (o.algo_config.substr(o.algo_config.size() - 5) == ".yaml" ||
                                     o.algo_config.substr(o.algo_config.size() - 4) == ".yml");
    const nlohmann::json j =
        yaml ? passes::yamlToJson(text, o.algo_config) : parseJson(text, o.algo_config);
    algos::applyReconstructionKeys(c, j, o.algo_config);
  }
  require(o.iters >= 0, "--iters must be positive");
  require(o.recon_batch >= 0, "--recon-batch must be positive");
  if (o.iters > 0) c.max_count = o.iters;
  if (o.recon_batch > 0) c.batch = o.recon_batch;
  if (!o.cache_limit.empty()) c.cache_limit = parseByteSize(o.cache_limit);
  c.seed = o.seed;
  return c;
}

std::string preparePassList(const PtqOptions& o) {
  const char* cle = o.cle_relu6_to_relu ? "cle-relu6" : o.cle ? "cle" : nullptr;
  if (cle == nullptr) return o.passes;
  return std::string(cle) + "," +
         (o.passes.empty() ? passes::defaultPreparePasses(true) : o.passes);
}

namespace {

// What the whole run cost: threads, peak memory and seconds since `start`.
void stampRunFigures(PtqReport& report, Clock::time_point start) {
  report.threads = at::get_num_threads();
  report.peak_rss_bytes = peakResidentBytes();
  report.total_seconds = secondsSince(start);
}

// The settings checked before anything is locked or read: counts, reconstruction, backend.
backends::BackendConfig checkedBackend(const PtqOptions& o,
                                       std::optional<algos::ReconstructionConfig>& recon) {
  require(o.calib_batches > 0, "--calib-batches must be at least 1");
  require(o.calib_batch > 0, "--calib-batch must be at least 1");
  algos::validateDistributedOptions(o.distributed);
  if (o.distributed.world_size > 1) {
    require(!(o.target_drop || o.target_sqnr || o.bits_budget || !o.size_budget.empty()),
            "autotune and mixed precision (--target-drop, --target-sqnr, --bits-budget, "
            "--size-budget) run in one process: drop --world-size or the target");
  }
  if (o.algo != "naive") recon = reconstructionSettings(o);
  return backends::loadBackend(o.backend);
}

}  // namespace

PtqResult quantizeModel(const PtqOptions& o, const ProgressCallback& progress) {
  const auto start = Clock::now();
  std::optional<algos::ReconstructionConfig> recon;
  const backends::BackendConfig backend = checkedBackend(o, recon);
  PtqResult result;
  PtqReport& report = result.report;
  passes::PrepareOptions prepare_options;
  prepare_options.passes = preparePassList(o);
  prepare_options.pass_registry = &algos::builtinPasses();
  try {
    passes::preparePipeline(prepare_options);  // a bad list is refused before any work
  } catch (const Error& e) {
    throw e.within("--passes");
  }
  if (o.quant_config) {
    prepare_options.config = *o.quant_config;
  } else if (!o.config.empty()) {
    prepare_options.config = passes::loadQuantConfig(o.config);
  }
  Graph float_graph = loadFloatModel(o);
  Graph to_prepare = float_graph.clone();  // the float graph stays for evaluation

  const auto prepare_start = Clock::now();
  result.model = passes::prepare(std::move(to_prepare), backend, prepare_options);
  passes::PreparedModel& model = *result.model;
  report.prepare_seconds = secondsSince(prepare_start);
  for (const passes::PassRecord& r : model.passRecords()) {
    if (r.name == "cle" || r.name == "cle-relu6") {
      report.equalization = std::any_cast<algos::EqualizationReport>(r.result.details);
    }
  }

  // Connected after everything local was checked, so a bad flag on one rank fails there at once.
  std::unique_ptr<algos::ProcessGroup> group;
  if (o.distributed.world_size > 1) group = std::make_unique<algos::ProcessGroup>(o.distributed);
  auto calib_data = openSource(o.calib, float_graph);
  data::LoaderOptions calib_options =
      loaderOptionsFor(float_graph, o.calib_batch, o.calib_batch * o.calib_batches);
  calib_options.shuffle_seed = o.calib_shuffle_seed;
  data::BatchLoader calib_loader(calib_data, calib_options);
  const algos::CalibrationResult calibration =
      calibrateWithProgress(model, calib_loader, o.calib_batches, progress, group.get());
  if (recon) {
    report.reconstruction = reconstructWithProgress(model, calib_loader, o.calib_batches, *recon,
                                                    progress, group.get());
  }
  if (o.bias_correction) {
    calib_loader.reset();
    report.bias_correction = algos::correctBias(model, calib_loader, o.calib_batches);
  }

  report.model = o.model_path;
  report.backend = backend.name;
  report.algorithm = o.algo;
  report.calibration = {calib_data->describe(), calibration.batches,  calibration.samples,
                        o.calib_batch,          o.calib_shuffle_seed, calibration.seconds};
  report.units = model.units();
  report.float_ops = model.floatOps();
  report.quantizers = deploy::quantizerTable(model);
  report.world_size = o.distributed.world_size;
  report.rank = o.distributed.rank;
  const bool lead = o.distributed.rank == 0;
  if (!o.eval.empty() && lead) report.evaluation = evaluate(o, float_graph, model, progress);
  report.total_seconds = secondsSince(start);
  return result;
}

PtqResult runPtqPipeline(const PtqOptions& o, const ProgressCallback& progress) {
  const auto start = Clock::now();
  std::optional<algos::ReconstructionConfig> recon;
  checkedBackend(o, recon);
  if (o.distributed.rank != 0) {
    // The other ranks' share of calibration and reconstruction; rank 0 writes the outputs.
    PtqResult result = quantizeModel(o, progress);
    stampRunFigures(result.report, start);
    return result;
  }
  // Locked now, so a second run writing the same directory is refused before any work.
  OutputDirectory out(o.out, OutputDirectory::kModelRole,
                      {OutputDirectory::kModelRole, OutputDirectory::kDeployRole});
  PtqOptions chosen = o;
  std::optional<nlohmann::json> tuned, mixed, tuned_config;
  const bool budget = o.bits_budget || !o.size_budget.empty();
  require(!budget || !(o.target_drop || o.target_sqnr),
          "a budget (--bits-budget, --size-budget) and a target (--target-drop, --target-sqnr) "
          "are separate searches: give one");
  if (budget) {
    MixedPrecisionOptions m;
    m.ptq = o;
    m.bits_budget = o.bits_budget;
    if (!o.size_budget.empty())
      m.size_budget = qforge::parseByteSize(o.size_budget, "--size-budget");
    m.metric = o.tune_metric;
    m.ranking = o.tune_ranking;
    const MixedPrecisionResult result = mixedPrecision(m, progress);
    mixed = mixedPrecisionJson(result);
    tuned_config = result.chosen().config;
    chosen.config.clear();
    chosen.quant_config = passes::parseQuantConfig(*tuned_config, "mixed precision's choice");
  } else if (o.target_drop || o.target_sqnr) {
    AutotuneOptions a;
    a.ptq = o;
    a.metric = o.tune_metric;
    a.ranking = o.tune_ranking;
    a.target_drop = o.target_drop;
    a.target_sqnr = o.target_sqnr;
    a.max_trials = o.max_trials;
    a.time_budget = o.time_budget;
    const AutotuneResult trials = autotune(a, progress);
    tuned = autotuneJson(trials);
    tuned_config = trials.trials[trials.best].config;
    chosen.config.clear();
    chosen.quant_config = passes::parseQuantConfig(*tuned_config, "autotune's chosen config");
  }
  PtqResult result = quantizeModel(chosen, progress);
  PtqReport& report = result.report;
  report.autotune = tuned;
  report.mixed_precision = mixed;
  writeOutputs(o, *result.model, tuned_config, out, report);
  stampRunFigures(report, start);
  writeFileAtomically((std::filesystem::path(out.staging()) / "report.json").string(),
                      ptqReportJson(report).dump(2) + "\n");
  out.commit();
  return result;
}

}  // namespace qforge::pipelines
