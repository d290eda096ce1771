// The PTQ pipeline as a library call: on a tiny classifier with the caller's own graph and data,
// every report field against its closed form (calibration counts, MinMax scales, float and
// fake-quantized top-1 computed with ATen's own ops), the files and report.json, the progress
// events; on the zoo ResNet, the report equals what `qforge quantize --json` prints (timings
// aside) and the text report shows its fields; bad settings fail before any file is written.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "core/files.h"
#include "data/loader.h"
#include "pipelines/ptq_pipeline.h"
#include "support/checks.h"
#include "support/cli_runner.h"
#include "tiny_classifier.h"

namespace qforge::testing {
namespace {

const nlohmann::json* entryFor(const nlohmann::json& table, const std::string& kind) {
  for (const auto& q : table)
    if (q["kind"] == kind) return &q;
  return nullptr;
}

TEST(PtqPipeline, ReportsATinyClassifierAsItsClosedFormsSay) {
  TempDir dir("ptq-pipeline");
  const Graph graph = linearClassifier();
  auto calib = classifierData(40, 1, "calibration tensors");
  auto eval = classifierData(64, 2, "evaluation tensors");
  pipelines::PtqOptions o;
  o.graph = &graph;
  o.model_path = "tiny classifier";
  o.backend = writeBackend(dir.file("tiny.json"));
  o.calib = calib;
  o.calib_batches = 3;
  o.calib_batch = 8;
  o.eval = eval;
  o.eval_batch = 10;
  o.out = dir.file("out");
  const pipelines::PtqResult r = pipelines::runPtqPipeline(o);
  const pipelines::PtqReport& report = r.report;

  EXPECT_EQ(report.model, "tiny classifier");
  EXPECT_EQ(report.backend, "Tiny");
  EXPECT_EQ(report.algorithm, "naive");
  EXPECT_EQ(report.calibration.data, "calibration tensors");
  EXPECT_EQ(report.calibration.batches, 3);
  EXPECT_EQ(report.calibration.samples, 24);
  EXPECT_EQ(report.calibration.batch_size, 8);
  ASSERT_EQ(report.units.size(), 1u);
  EXPECT_EQ(report.units[0].ops, "Gemm");
  EXPECT_TRUE(report.float_ops.empty());
  EXPECT_FALSE(report.reconstruction || report.equalization || report.bias_correction);

  // MinMax over the 24 calibration samples (range widened to 0), uint8; symmetric int8 weights
  // per output channel.
  const at::Tensor calib_x = classifierInputs(40, 1).narrow(0, 0, 24);
  const nlohmann::json* input = entryFor(report.quantizers, "activation");
  const nlohmann::json* weight = entryFor(report.quantizers, "weight");
  ASSERT_TRUE(input && weight) << report.quantizers.dump();
  const double scale = asymmetricScale(calib_x);
  const int64_t zero_point = asymmetricZeroPoint(calib_x, scale);
  EXPECT_NEAR((*input)["scale"][0].get<double>(), scale, 1e-7);
  EXPECT_EQ((*input)["zero_point"][0].get<int64_t>(), zero_point);
  const at::Tensor weight_scales = symmetricScalesPerChannel(classifierWeight());
  ASSERT_EQ((*weight)["scale"].size(), 3u);
  for (int64_t c = 0; c < 3; ++c)
    EXPECT_NEAR((*weight)["scale"][c].get<double>(), weight_scales[c].item<double>(), 1e-7);

  // Float and quantized top-1 from ATen: addmm, and addmm on PyTorch's fake-quantized operands.
  const at::Tensor x = classifierInputs(64, 2), labels = classifierLabels(x, 2);
  const at::Tensor float_logits = at::addmm(classifierBias(), x, classifierWeight().t());
  const at::Tensor xq = at::fake_quantize_per_tensor_affine(x, scale, zero_point, 0, 255);
  const at::Tensor wq = at::fake_quantize_per_channel_affine(
      classifierWeight(), weight_scales.to(at::kFloat), at::zeros({3}, at::kInt), 0, -128, 127);
  const at::Tensor quant_logits = at::addmm(classifierBias(), xq, wq.t());
  ASSERT_TRUE(report.evaluation);
  const pipelines::Evaluation& e = *report.evaluation;
  EXPECT_EQ(e.data, "evaluation tensors");
  EXPECT_EQ(e.float_scores.metric, "top1");
  EXPECT_EQ(e.float_scores.samples, 64);
  EXPECT_EQ(e.float_scores.top1, correct(float_logits, labels));
  EXPECT_EQ(e.quantized_scores.top1, correct(quant_logits, labels));
  EXPECT_FALSE(e.float_scores.has_top5);  // three classes
  // The returned model is the quantized one.
  const at::Tensor y = r.model->executor().run({{"x", x}}).at("y");
  EXPECT_TRUE(at::allclose(y, quant_logits, 1e-5, 1e-5));
  EXPECT_FALSE(at::allclose(y, float_logits, 1e-5, 1e-5));

  // Files: deploy's, the table, the prepared model, report.json last, holding this report.
  ASSERT_FALSE(report.files.empty());
  EXPECT_EQ(report.files.back(), o.out + "/report.json");
  for (const std::string& f : report.files)
    EXPECT_TRUE(std::filesystem::exists(f)) << f;
  for (const char* name : {"model.qdq.onnx", "quantizers.json", "prepared.onnx", "deploy.json"})
    EXPECT_TRUE(std::filesystem::exists(o.out + "/" + name)) << name;
  EXPECT_EQ(readFile(o.out + "/report.json"), pipelines::ptqReportJson(report).dump(2) + "\n");
  const nlohmann::json table = nlohmann::json::parse(readFile(o.out + "/quantizers.json"));
  EXPECT_EQ(table["quantizers"], report.quantizers);
  EXPECT_GT(report.peak_rss_bytes, 0);
  EXPECT_GE(report.total_seconds, report.prepare_seconds + report.calibration.seconds);
}

// --calib-shuffle: the MinMax range is that of the seeded subset the loader draws (its indices
// taken from the batches, the range computed here), recorded in the report; without a seed it is
// the first samples'.
TEST(PtqPipeline, CalibratesOnTheSeededSubsetWhenShuffled) {
  TempDir dir("ptq-pipeline-shuffle");
  const Graph graph = linearClassifier();
  auto calib = classifierData(40, 1, "calibration tensors");
  pipelines::PtqOptions o;
  o.graph = &graph;
  o.model_path = "tiny classifier";
  o.backend = writeBackend(dir.file("tiny.json"));
  o.calib = calib;
  o.calib_batches = 2;
  o.calib_batch = 4;
  o.calib_shuffle_seed = 5;
  o.deploy = false;
  o.out = dir.file("out");
  const pipelines::PtqReport report = pipelines::runPtqPipeline(o).report;

  data::LoaderOptions loader_options;
  loader_options.batch_size = 4;
  loader_options.limit = 8;
  loader_options.shuffle_seed = 5;
  data::BatchLoader loader(calib, loader_options);
  std::vector<int64_t> drawn;
  while (auto batch = loader.next())
    drawn.insert(drawn.end(), batch->indices.begin(), batch->indices.end());
  ASSERT_EQ(drawn.size(), 8u);
  EXPECT_NE(drawn, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7})) << "seed 5 drew the first 8";
  const at::Tensor all = classifierInputs(40, 1);
  const at::Tensor subset = all.index_select(0, at::tensor(drawn, at::kLong));
  const at::Tensor first = all.narrow(0, 0, 8);
  ASSERT_FALSE(at::equal(subset.min(), first.min()) && at::equal(subset.max(), first.max()))
      << "the subset must differ in range from the first samples for this test to tell them apart";

  const nlohmann::json* input = entryFor(report.quantizers, "activation");
  ASSERT_TRUE(input);
  const double scale = asymmetricScale(subset);
  EXPECT_NEAR((*input)["scale"][0].get<double>(), scale, 1e-7);
  EXPECT_EQ((*input)["zero_point"][0].get<int64_t>(), asymmetricZeroPoint(subset, scale));
  EXPECT_EQ(report.calibration.shuffle_seed, std::optional<uint64_t>(5));
  EXPECT_EQ(pipelines::ptqReportJson(report)["calibration"]["shuffle_seed"], 5);

  o.calib_shuffle_seed.reset();
  o.out = dir.file("out-first");
  const pipelines::PtqReport unshuffled = pipelines::runPtqPipeline(o).report;
  const nlohmann::json* first_input = entryFor(unshuffled.quantizers, "activation");
  ASSERT_TRUE(first_input);
  EXPECT_NEAR((*first_input)["scale"][0].get<double>(), asymmetricScale(first), 1e-7);
  EXPECT_FALSE(pipelines::ptqReportJson(unshuffled)["calibration"].contains("shuffle_seed"));
}

TEST(PtqPipeline, ProgressComesPerStageAndEndsEachStage) {
  TempDir dir("ptq-progress");
  const Graph graph = linearClassifier();
  pipelines::PtqOptions o;
  o.graph = &graph;
  o.backend = writeBackend(dir.file("tiny.json"));
  o.calib = classifierData(40, 1, "calib");
  o.calib_batches = 2;
  o.calib_batch = 10;
  o.eval = classifierData(30, 2, "eval");
  o.eval_batch = 7;
  o.out = dir.file("out");
  o.deploy = false;
  std::vector<pipelines::ProgressEvent> events;
  pipelines::runPtqPipeline(o, [&](const pipelines::ProgressEvent& e) { events.push_back(e); });
  // calibrate: 2 batches then the end; each evaluation: 5 batches (7, 7, 7, 7, 2) then the end.
  std::vector<std::string> stages;
  for (const auto& e : events)
    stages.push_back(e.stage + (e.last ? " end" : ""));
  EXPECT_EQ(stages,
            (std::vector<std::string>{
                "calibrate", "calibrate", "calibrate end", "evaluate float", "evaluate float",
                "evaluate float", "evaluate float", "evaluate float", "evaluate float end",
                "evaluate quantized", "evaluate quantized", "evaluate quantized",
                "evaluate quantized", "evaluate quantized", "evaluate quantized end"}));
  EXPECT_EQ(events[1].done, 20);
  EXPECT_EQ(events[1].total, 20);
  EXPECT_EQ(events[3].done, 7);
  EXPECT_EQ(events[7].done, 30);
  EXPECT_EQ(events[7].total, 30);
  EXPECT_EQ(events[3].unit, "img");
  EXPECT_FALSE(std::filesystem::exists(o.out + "/model.qdq.onnx"));  // deploy off
  EXPECT_TRUE(std::filesystem::exists(o.out + "/prepared.onnx"));
}

// The report without what changes from run to run (times, memory) and with file names only.
nlohmann::json withoutTimings(nlohmann::json j) {
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto& [key, value] : j.items()) {
      if (key == "seconds" || key == "peak_rss_bytes") continue;
      out[key] = withoutTimings(value);
    }
    if (out.contains("files")) {
      for (auto& f : out["files"])
        f = std::filesystem::path(f.get<std::string>()).filename().string();
    }
    return out;
  }
  if (j.is_array()) {
    for (auto& item : j)
      item = withoutTimings(item);
  }
  return j;
}

TEST(PtqPipeline, TheZooResNetReportEqualsWhatTheCliPrints) {
  TempDir dir("ptq-cli");
  const std::string model = std::string(QFORGE_SOURCE_DIR) + "/models/zoo/resnet.onnx";
  const CliResult cli =
      runCli("quantize " + model +
                 " --backend TensorRT --calib-batches 2 --calib-batch 8 --eval fashion-mnist:test "
                 "--eval-limit 100 --bias-correction --out " +
                 dir.file("cli") + " --json",
             "QFORGE_NUM_THREADS=1");
  ASSERT_EQ(cli.exit_code, 0) << cli.out;
  pipelines::PtqOptions o;
  o.model_path = model;
  o.backend = "TensorRT";
  o.calib = "fashion-mnist:train";
  o.calib_batches = 2;
  o.calib_batch = 8;
  o.eval = "fashion-mnist:test";
  o.eval_limit = 100;
  o.bias_correction = true;
  o.out = dir.file("library");
  const pipelines::PtqResult r = pipelines::runPtqPipeline(o);
  const nlohmann::json library = pipelines::ptqReportJson(r.report);
  EXPECT_EQ(withoutTimings(library), withoutTimings(nlohmann::json::parse(cli.out)));
  EXPECT_EQ(library["threads"], 1);  // the test runs single-threaded, as the CLI did

  const CliResult text =
      runCli("quantize " + model +
                 " --backend TensorRT --calib-batches 2 --calib-batch 8 --eval fashion-mnist:test "
                 "--eval-limit 100 --bias-correction --out " +
                 dir.file("text"),
             "QFORGE_NUM_THREADS=1");
  ASSERT_EQ(text.exit_code, 0) << text.out;
  const pipelines::PtqReport& report = r.report;
  for (const std::string& line : std::vector<std::string>{
           "model      " + model + "\n", "backend    TensorRT\n",
           "units      " + std::to_string(report.units.size()) + " quantized units, " +
               std::to_string(report.quantizers.size()) + " quantizers\n",
           "float      " + pipelines::scoreText(report.evaluation->float_scores) + "\n",
           "quantized  " + pipelines::scoreText(report.evaluation->quantized_scores) + "\n",
           std::string("(2 batches), total ")}) {
    EXPECT_NE(text.out.find(line), std::string::npos) << line << "\n" << text.out;
  }
  EXPECT_NE(text.out.find("bias       "), std::string::npos) << text.out;
}

TEST(PtqPipeline, BadSettingsFailBeforeAnyFileIsWritten) {
  TempDir dir("ptq-bad");
  const Graph graph = linearClassifier();
  pipelines::PtqOptions o;
  o.graph = &graph;
  o.backend = writeBackend(dir.file("tiny.json"));
  o.calib = classifierData(16, 1, "calib");
  o.out = dir.file("out");
  const auto failure = [&](void (*change)(pipelines::PtqOptions&)) {
    pipelines::PtqOptions changed = o;
    change(changed);
    return errorOf([&] { pipelines::runPtqPipeline(changed); });
  };
  EXPECT_EQ(failure([](pipelines::PtqOptions& c) { c.calib_batches = 0; }),
            "--calib-batches must be at least 1");
  EXPECT_EQ(failure([](pipelines::PtqOptions& c) { c.calib_batch = 0; }),
            "--calib-batch must be at least 1");
  EXPECT_EQ(failure([](pipelines::PtqOptions& c) { c.graph = nullptr; }),
            "no model given: name an ONNX file or pass a graph");
  EXPECT_EQ(failure([](pipelines::PtqOptions& c) { c.calib = pipelines::DataSource(); }),
            "no data given: name a data source or pass an opened dataset");
  EXPECT_EQ(failure([](pipelines::PtqOptions& c) { c.algo = "optq"; }),
            "unknown reconstruction algorithm 'optq'; known: adaround, brecq, qdrop");
  EXPECT_NE(failure([](pipelines::PtqOptions& c) {
              c.backend = "TensorRTX";
            }).find("unknown backend 'TensorRTX'"),
            std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(o.out));
}

TEST(PtqPipeline, ReconstructionSettingsApplyThePresetThenTheFlags) {
  pipelines::PtqOptions o;
  o.algo = "adaround";
  const algos::ReconstructionConfig preset = algos::reconstructionPreset("adaround");
  algos::ReconstructionConfig c = pipelines::reconstructionSettings(o);
  EXPECT_EQ(c.algorithm, "adaround");
  EXPECT_EQ(c.max_count, preset.max_count);
  EXPECT_EQ(c.batch, preset.batch);
  EXPECT_EQ(c.cache_limit, preset.cache_limit);
  o.iters = 7;
  o.recon_batch = 5;
  o.cache_limit = "3M";
  o.seed = 11;
  c = pipelines::reconstructionSettings(o);
  EXPECT_EQ(c.max_count, 7);
  EXPECT_EQ(c.batch, 5);
  EXPECT_EQ(c.cache_limit, 3 * 1024 * 1024);
  EXPECT_EQ(c.seed, 11u);
  o.iters = -1;
  EXPECT_EQ(errorOf([&] { pipelines::reconstructionSettings(o); }), "--iters must be positive");
}

TEST(PtqPipeline, ByteSizesReadUnitsOfTwoToTheTenth) {
  EXPECT_EQ(pipelines::parseByteSize("100"), 100);
  EXPECT_EQ(pipelines::parseByteSize("100B"), 100);
  EXPECT_EQ(pipelines::parseByteSize("64K"), 64 * 1024);
  EXPECT_EQ(pipelines::parseByteSize("1.5MiB"), 3 * 512 * 1024);
  EXPECT_EQ(pipelines::parseByteSize("4G"), int64_t{4} << 30);
  EXPECT_EQ(pipelines::parseByteSize("4T"), int64_t{4} << 40);
  for (const char* bad : {"lots", "4Q", "-1", ""}) {
    EXPECT_EQ(
        errorOf([&] { pipelines::parseByteSize(bad); }),
        "--cache-limit '" + std::string(bad) + "' is not a size; write bytes or e.g. 512M, 4G")
        << bad;
  }
}

}  // namespace
}  // namespace qforge::testing
