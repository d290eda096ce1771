// qforge's commands as Python functions: the same pipelines the CLI runs, the same options
// (flag names with underscores), the same reports as dicts. The GIL is released while a pipeline
// runs; data given as Python iterables is read before that (py_data.h).
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <functional>
#include <optional>

#include "bindings.h"
#include "core/error.h"
#include "core/files.h"
#include "core/peak_memory.h"
#include "deploy/deploy.h"
#include "ir/onnx_import.h"
#include "passes/prepared_io.h"
#include "pipelines/analysis_html.h"
#include "pipelines/analyze_pipeline.h"
#include "pipelines/eval_pipeline.h"
#include "pipelines/inspect_report.h"
#include "pipelines/ptq_pipeline.h"
#include "pipelines/qat_pipeline.h"
#include "pipelines/verify_pipeline.h"
#include "py_data.h"
#include "verify/ort_runner.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace qforge::python {

namespace {

// The model whose inputs data given as a Python iterable is matched to, loaded only when some
// data argument is one (source strings need no model here). A pipeline may take the loaded graph
// instead of reading the file again.
class ModelForData {
 public:
  explicit ModelForData(std::function<Graph()> load) : load_(std::move(load)) {}
  const Graph& graph() {
    if (!graph_) graph_ = std::make_unique<Graph>(load_());
    return *graph_;
  }
  const Graph* ifLoaded() const { return graph_.get(); }

 private:
  std::function<Graph()> load_;
  std::unique_ptr<Graph> graph_;
};

ModelForData onnxModel(const std::string& path) {
  return ModelForData([path] { return importOnnxFile(path); });
}

pipelines::DataSource dataFor(const py::object& data, ModelForData& model, int64_t limit,
                              const std::string& what) {
  if (data.is_none() || py::isinstance<py::str>(data) || py::hasattr(data, "__fspath__"))
    return dataSourceFrom(data, Graph(), limit, what);
  return dataSourceFrom(data, model.graph(), limit, what);
}

// The calibration and evaluation settings quantize and qat share (their options name them alike):
// iterables are read up to what each stage uses.
template <typename Options>
void setCalibAndEval(Options& o, ModelForData& model, const py::object& calib,
                     int64_t calib_batches, int64_t calib_batch, const py::object& eval,
                     int64_t eval_limit, int64_t eval_batch) {
  require(calib_batches > 0 && calib_batch > 0, "calib_batches and calib_batch must be positive");
  o.calib = dataFor(calib, model, calib_batches * calib_batch, "calib");
  o.calib_batches = calib_batches;
  o.calib_batch = calib_batch;
  o.eval = dataFor(eval, model, eval_limit > 0 ? eval_limit : 0, "eval");
  o.eval_limit = eval_limit;
  o.eval_batch = eval_batch;
}

// Runs `work` (a pipeline, returning its JSON report) with the GIL released; the report as dicts.
template <typename Work>
py::object reportOf(Work&& work) {
  nlohmann::json report;
  {
    py::gil_scoped_release release;
    report = work();
  }
  return toPython(withPeakResidentBytes(std::move(report)));  // as every CLI --json report
}

py::object quantize(const py::object& model, const std::string& backend, const py::object& calib,
                    int64_t calib_batches, int64_t calib_batch, const py::object& out,
                    const py::object& eval, int64_t eval_limit, int64_t eval_batch,
                    const std::string& config, const std::string& algo, int64_t iters,
                    int64_t recon_batch, const std::string& algo_config,
                    const std::string& cache_limit, uint64_t seed, const std::string& passes,
                    bool cle, bool cle_relu6_to_relu, bool bias_correction,
                    std::optional<uint64_t> calib_shuffle, std::optional<double> target_drop,
                    std::optional<double> target_sqnr, const std::string& tune_metric,
                    const std::string& tune_ranking, const py::object& metric_script,
                    int64_t max_trials, double time_budget, std::optional<double> bits_budget,
                    const std::string& size_budget, bool deploy, bool quiet,
                    const py::object& progress) {
  pipelines::PtqOptions o;
  o.model_path = pathOf(model, "model");
  o.backend = backend;
  o.out = pathOf(out, "out");
  ModelForData float_model = onnxModel(o.model_path);
  setCalibAndEval(o, float_model, calib, calib_batches, calib_batch, eval, eval_limit, eval_batch);
  o.config = config;
  o.algo = algo;
  o.iters = iters;
  o.recon_batch = recon_batch;
  o.algo_config = algo_config;
  o.cache_limit = cache_limit;
  o.seed = seed;
  o.passes = passes;
  o.cle = cle;
  o.cle_relu6_to_relu = cle_relu6_to_relu;
  o.bias_correction = bias_correction;
  o.calib_shuffle_seed = calib_shuffle;
  o.target_drop = target_drop;
  o.target_sqnr = target_sqnr;
  o.tune_metric = tune_metric;
  o.tune_ranking = tune_ranking;
  if (!metric_script.is_none()) o.metric_script = pathOf(metric_script, "metric_script");
  o.max_trials = max_trials;
  o.time_budget = time_budget;
  o.bits_budget = bits_budget;
  o.size_budget = size_budget;
  o.deploy = deploy;
  o.graph = float_model.ifLoaded();
  const pipelines::ProgressCallback callback = progressFor(quiet, progress);
  return reportOf(
      [&] { return pipelines::ptqReportJson(pipelines::runPtqPipeline(o, callback).report); });
}

py::object analyze(const py::object& model, const std::string& backend, const std::string& config,
                   const py::object& calib, int64_t calib_batches, int64_t calib_batch,
                   std::optional<uint64_t> calib_shuffle, const py::object& data, int64_t samples,
                   int64_t batch, bool isolated, bool leave_one_out, bool fisher,
                   int64_t fisher_probes, const std::vector<std::string>& outputs, int64_t top,
                   uint64_t seed, const py::object& report_html, const py::object& write_config,
                   bool quiet, const py::object& progress) {
  pipelines::AnalyzeOptions o;
  o.model_path = pathOf(model, "model");
  o.backend = backend;
  o.config = config;
  // A prepared directory has no ONNX inputs to match Python data to: sources only, then.
  ModelForData float_model = onnxModel(o.model_path);
  require(calib_batches > 0 && calib_batch > 0, "calib_batches and calib_batch must be positive");
  o.calib = dataFor(calib, float_model, calib_batches * calib_batch, "calib");
  o.calib_batches = calib_batches;
  o.calib_batch = calib_batch;
  o.calib_shuffle_seed = calib_shuffle;
  o.data = dataFor(data, float_model, samples, "data");
  o.samples = samples;
  o.batch = batch;
  o.isolated = isolated;
  o.leave_one_out = leave_one_out;
  o.fisher = fisher;
  o.fisher_probes = fisher_probes;
  o.outputs = outputs;
  o.top = top;
  o.seed = seed;
  o.graph = float_model.ifLoaded();
  const std::string html = report_html.is_none() ? "" : pathOf(report_html, "report");
  const std::string config_out = write_config.is_none() ? "" : pathOf(write_config, "write_config");
  if (!html.empty()) requireWritableFile(html, "report");
  if (!config_out.empty()) requireWritableFile(config_out, "write_config");
  const pipelines::ProgressCallback callback = progressFor(quiet, progress);
  return reportOf([&] {
    const pipelines::AnalyzeResult result = pipelines::runAnalysis(o, callback);
    if (!html.empty()) writeFileAtomically(html, pipelines::analysisHtml(result.report));
    if (!config_out.empty())
      writeFileAtomically(config_out, pipelines::suggestedConfig(result.report).dump(2) + "\n");
    return result.report;
  });
}

// The batch a QAT loss sees: {"inputs": first input's tensor, "labels": ... or None, "feeds":
// {input name: tensor}}.
py::dict batchDict(const data::Batch& batch) {
  py::dict feeds;
  for (const auto& [name, t] : batch.feeds)
    feeds[py::str(name)] = t;
  return py::dict("inputs"_a = batch.inputs.defined() ? py::cast(batch.inputs) : py::none(),
                  "labels"_a = batch.labels.defined() ? py::cast(batch.labels) : py::none(),
                  "feeds"_a = feeds);
}

algos::QatLoss lossFrom(const py::object& loss) {
  auto held = std::make_shared<HeldObject>(loss);
  return [held](const at::Tensor& output, const data::Batch& batch) {
    py::gil_scoped_acquire gil;
    requireTorch();
    const py::object result = held->get()(output, batchDict(batch));
    require(THPVariable_Check(result.ptr()),
            "the loss callable returned a " +
                std::string(py::str(result.get_type().attr("__name__"))) +
                ", not a torch tensor (a scalar computed from the output)");
    at::Tensor t = py::cast<at::Tensor>(result);
    require(t.numel() == 1 && t.requires_grad(),
            "the loss callable must return one value computed from the output with torch "
            "operations (it has " +
                std::to_string(t.numel()) + " values" +
                (t.requires_grad() ? "" : " and no gradient to the model") + ")");
    return t.reshape({});
  };
}

py::object qat(const py::object& model, const std::string& backend, const py::object& data,
               const py::object& out, int64_t epochs, int64_t batch, double lr,
               const std::string& optimizer, const std::string& schedule, const std::string& algo,
               const py::object& loss, double distill_temperature,
               const std::vector<std::string>& distill_at, double distill_weight,
               const std::string& config, const std::string& passes, int64_t limit,
               int64_t max_steps, double momentum, double weight_decay, int64_t step_epochs,
               double step_gamma, std::optional<int64_t> freeze_bn_epoch, int64_t augment_shift,
               bool augment_flip, double label_smoothing, bool freeze_weights,
               double quantizer_lr_scale, const py::object& calib, int64_t calib_batches,
               int64_t calib_batch, const py::object& eval, int64_t eval_limit, int64_t eval_batch,
               uint64_t seed, const std::string& resume, const std::string& csv, int world_size,
               int rank, const std::string& master, double timeout, bool deploy, bool quiet,
               const py::object& progress) {
  pipelines::QatPipelineOptions o;
  o.model_path = pathOf(model, "model");
  o.backend = backend;
  o.out = out.is_none() ? std::string() : pathOf(out, "out");
  o.resume = resume;
  ModelForData float_model = onnxModel(o.model_path);
  o.data = dataFor(data, float_model, limit, "data");
  o.limit = limit;
  setCalibAndEval(o, float_model, calib, calib_batches, calib_batch, eval, eval_limit, eval_batch);
  o.algo = algo;
  o.config = config;
  o.passes = passes;
  if (py::isinstance<py::str>(loss)) {
    o.loss = py::cast<std::string>(loss);
  } else {
    require(PyCallable_Check(loss.ptr()),
            "loss must be 'auto', 'cross-entropy', 'mse', 'kl' or a callable(output, batch)");
    o.custom_loss = lossFrom(loss);
    o.custom_loss_name = "Python callable " +
                         std::string(py::str(py::getattr(loss, "__qualname__", py::str("loss"))));
  }
  o.distill_temperature = distill_temperature;
  o.distill_at = distill_at;
  o.distill_weight = distill_weight;
  algos::QatConfig& t = o.training;
  t.epochs = epochs;
  t.batch_size = batch;
  t.lr = lr;
  t.optimizer = algos::parseQatOptimizer(optimizer);
  t.schedule = algos::parseQatSchedule(schedule);
  t.max_steps = max_steps;
  t.momentum = momentum;
  t.weight_decay = weight_decay;
  t.step_epochs = step_epochs;
  t.step_gamma = step_gamma;
  t.freeze_bn_epoch = freeze_bn_epoch.value_or(-1);
  o.freeze_bn_epoch_given = freeze_bn_epoch.has_value();
  t.augment_shift = augment_shift;
  t.augment_flip = augment_flip;
  t.label_smoothing = label_smoothing;
  t.train_weights = !freeze_weights;
  t.quantizer_lr_scale = quantizer_lr_scale;
  t.seed = seed;
  o.csv = csv;
  o.distributed.world_size = world_size;
  o.distributed.rank = rank;
  o.distributed.master = master;
  o.distributed.timeout_seconds = timeout;
  o.deploy = deploy;
  o.graph = float_model.ifLoaded();
  const pipelines::ProgressCallback callback = progressFor(quiet, progress);
  return reportOf(
      [&] { return pipelines::qatReportJson(pipelines::runQatPipeline(o, callback).report); });
}

py::object deployCommand(const py::object& prepared, const py::object& out) {
  const std::string dir = pathOf(prepared, "prepared");
  const std::string out_dir = pathOf(out, "out");
  return reportOf([&] {
    auto model = passes::loadPreparedModel(dir);
    const deploy::DeployResult r = deploy::deployPreparedModel(*model, out_dir);
    return nlohmann::json{
        {"backend", model->backend().name}, {"files", r.files}, {"notes", r.notes}};
  });
}

py::object verifyCommand(const py::object& dir, const py::object& data, const py::object& prepared,
                         int64_t limit, int64_t batch, const std::string& ort_dir,
                         const std::string& ort_optimization, double timeout, double min_agreement,
                         double max_accuracy_gap, double min_exact, double min_sqnr,
                         double min_cosine, double max_p99_steps,
                         std::optional<double> iou_threshold, double min_iou) {
  pipelines::VerifyPipelineOptions o;
  o.dir = pathOf(dir, "dir");
  o.prepared = prepared.is_none() ? std::string() : pathOf(prepared, "prepared");
  o.limit = limit;
  o.batch = batch;
  verify::VerifyOptions& v = o.verify;
  v.ort.ort_dir = ort_dir;
  v.ort.optimization = verify::parseOrtOptimization(ort_optimization);
  v.ort.timeout_seconds = timeout;
  v.min_agreement = min_agreement;
  v.max_accuracy_gap = max_accuracy_gap;
  v.min_exact = min_exact;
  v.min_sqnr_db = min_sqnr;
  v.min_cosine = min_cosine;
  v.max_p99_steps = max_p99_steps;
  v.iou_threshold = iou_threshold;
  v.min_iou = min_iou;
  // Iterables are matched to the prepared model's inputs.
  const std::string prepared_dir = o.prepared.empty() ? o.dir : o.prepared;
  ModelForData model([&] { return std::move(passes::loadPreparedModel(prepared_dir)->graph()); });
  o.data = dataFor(data, model, limit, "data");
  return reportOf([&] { return pipelines::runVerify(o).json; });
}

py::object evalCommand(const py::object& model, const py::object& data, int64_t limit,
                       int64_t batch, const std::string& metric, std::optional<uint64_t> shuffle,
                       double noise, uint64_t noise_seed, double peak, const std::string& labels,
                       std::vector<double> mean, std::vector<double> std_dev, int64_t resize,
                       const std::string& crop, int64_t channels, bool bgr, bool nhwc,
                       const std::string& dump_outputs, const std::string& reference,
                       double iou_threshold, bool quiet, const py::object& progress) {
  pipelines::EvalOptions o;
  o.model_path = pathOf(model, "model");
  // Iterables are matched to the inputs of the model as eval runs it.
  const std::string path = o.model_path;
  ModelForData run_model([path] {
    return passes::isPreparedModelDir(path) ? std::move(passes::loadPreparedModel(path)->graph())
                                            : importOnnxFile(path);
  });
  o.data = dataFor(data, run_model, limit > 0 ? limit : 0, "data");
  o.limit = limit;
  o.batch = batch;
  o.metric = metric;
  o.shuffle_seed = shuffle;
  o.noise = noise;
  o.noise_seed = noise_seed;
  o.peak = peak;
  o.labels = labels;
  o.mean = std::move(mean);
  o.std = std::move(std_dev);
  o.resize = resize;
  std::tie(o.crop_height, o.crop_width) = pipelines::parseCrop(crop);
  o.channels = channels;
  o.bgr = bgr;
  o.nhwc = nhwc;
  o.dump_outputs = dump_outputs;
  o.reference = reference;
  o.iou_threshold = iou_threshold;
  const pipelines::ProgressCallback callback = progressFor(quiet, progress);
  return reportOf([&] { return pipelines::evalReportJson(o, pipelines::runEval(o, callback)); });
}

py::object inspectCommand(const py::object& model) {
  const std::string path = pathOf(model, "model");
  return reportOf([&] { return pipelines::inspectReport(importOnnxFile(path), path); });
}

}  // namespace

void bindCommands(py::module_& m) {
  m.def("quantize", &quantize,
        "Post-training quantization, as `qforge quantize`; returns report.json as a dict.",
        "model"_a, py::kw_only(), "backend"_a, "calib"_a = "fashion-mnist:train",
        "calib_batches"_a = 32, "calib_batch"_a = 64, "out"_a, "eval"_a = py::none(),
        "eval_limit"_a = -1, "eval_batch"_a = 100, "config"_a = "", "algo"_a = "naive",
        "iters"_a = 0, "recon_batch"_a = 0, "algo_config"_a = "", "cache_limit"_a = "",
        "seed"_a = 0, "passes"_a = "", "cle"_a = false, "cle_relu6_to_relu"_a = false,
        "bias_correction"_a = false, "calib_shuffle"_a = py::none(), "target_drop"_a = py::none(),
        "target_sqnr"_a = py::none(), "tune_metric"_a = "auto", "tune_ranking"_a = "isolated",
        "metric_script"_a = py::none(), "max_trials"_a = 20, "time_budget"_a = 0.0,
        "bits_budget"_a = py::none(), "size_budget"_a = "", "deploy"_a = true, "quiet"_a = false,
        "progress"_a = py::none());
  m.def("analyze", &analyze,
        "Sensitivity analysis, as `qforge analyze --json`: per quantizer the isolated, "
        "leave-one-out and Fisher sensitivity, ranges, the ranking and fixes. Returns the report "
        "as a dict.",
        "model"_a, py::kw_only(), "backend"_a = "", "config"_a = "",
        "calib"_a = "fashion-mnist:train", "calib_batches"_a = 8, "calib_batch"_a = 32,
        "calib_shuffle"_a = py::none(), "data"_a = py::none(), "samples"_a = 32, "batch"_a = 8,
        "isolated"_a = true, "leave_one_out"_a = true, "fisher"_a = true, "fisher_probes"_a = 4,
        "outputs"_a = std::vector<std::string>(), "top"_a = 10, "seed"_a = 0,
        "report"_a = py::none(), "write_config"_a = py::none(), "quiet"_a = false,
        "progress"_a = py::none());
  m.def("qat", &qat,
        "Quantization-aware training, as `qforge qat`; `loss` may be a callable(output, "
        "batch) returning a scalar tensor. Returns report.json as a dict.",
        "model"_a, py::kw_only(), "backend"_a, "data"_a = "fashion-mnist:train",
        "out"_a = py::none(), "epochs"_a = 1, "batch"_a = 64, "lr"_a = 1e-3, "optimizer"_a = "sgd",
        "schedule"_a = "cosine", "algo"_a = "", "loss"_a = "auto", "distill_temperature"_a = 1.0,
        "distill_at"_a = std::vector<std::string>(), "distill_weight"_a = 1.0, "config"_a = "",
        "passes"_a = "", "limit"_a = 0, "max_steps"_a = 0, "momentum"_a = 0.9,
        "weight_decay"_a = 0.0, "step_epochs"_a = 1, "step_gamma"_a = 0.1,
        "freeze_bn_epoch"_a = py::none(), "augment_shift"_a = 0, "augment_flip"_a = false,
        "label_smoothing"_a = 0.0, "freeze_weights"_a = false, "quantizer_lr_scale"_a = 1.0,
        "calib"_a = py::none(), "calib_batches"_a = 16, "calib_batch"_a = 64, "eval"_a = py::none(),
        "eval_limit"_a = 0, "eval_batch"_a = 200, "seed"_a = 0, "resume"_a = "", "csv"_a = "",
        "world_size"_a = 1, "rank"_a = 0, "master"_a = "127.0.0.1:29500", "timeout"_a = 300.0,
        "deploy"_a = true, "quiet"_a = false, "progress"_a = py::none());
  m.def("deploy", &deployCommand, "A saved prepared model's deploy files, as `qforge deploy`.",
        "prepared"_a, py::kw_only(), "out"_a);
  m.def("verify", &verifyCommand,
        "The deployed models in ONNX Runtime against the simulation and emulation, as "
        "`qforge verify --json`; report['passed'] is the verdict.",
        "dir"_a, py::kw_only(), "data"_a = "fashion-mnist:test", "prepared"_a = py::none(),
        "limit"_a = 0, "batch"_a = 256, "ort_dir"_a = "", "ort_optimization"_a = "all",
        "timeout"_a = 1800.0, "min_agreement"_a = 0.999, "max_accuracy_gap"_a = 0.0005,
        "min_exact"_a = 0.999, "min_sqnr"_a = 30.0, "min_cosine"_a = 0.999, "max_p99_steps"_a = 1.0,
        "iou_threshold"_a = py::none(), "min_iou"_a = 0.99);
  m.def("eval", &evalCommand,
        "A model or prepared directory scored over data, as `qforge eval --json`.", "model"_a,
        py::kw_only(), "data"_a = "fashion-mnist:test", "limit"_a = -1, "batch"_a = 100,
        "metric"_a = "auto", "shuffle"_a = py::none(), "noise"_a = 0.0, "noise_seed"_a = 0,
        "peak"_a = 1.0, "labels"_a = "", "mean"_a = std::vector<double>{0.0},
        "std"_a = std::vector<double>{1.0}, "resize"_a = 0, "crop"_a = "", "channels"_a = 0,
        "bgr"_a = false, "nhwc"_a = false, "dump_outputs"_a = "", "reference"_a = "",
        "iou_threshold"_a = -1.0, "quiet"_a = false, "progress"_a = py::none());
  m.def("inspect", &inspectCommand,
        "An ONNX model's ops, opsets, inputs and outputs, as `qforge inspect --json`.", "model"_a);
}

}  // namespace qforge::python
