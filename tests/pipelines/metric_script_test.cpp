// A metric script of the user's own: the files it gets (read back and compared with the outputs
// given), top-1 computed by NumPy in a script giving autotune the same figures as qforge's own
// top-1, and scripts that fail, print no number or cannot run, each refused in one line.
#include "pipelines/metric_script.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/files.h"
#include "core/json_reader.h"
#include "data/npy.h"
#include "pipelines/autotune.h"
#include "pipelines/tiny_classifier.h"
#include "support/checks.h"
#include "support/quant_graphs.h"

namespace qforge::pipelines {
namespace {

using testing::errorOf;

std::string script(const TempDir& dir, const std::string& name, const std::string& text) {
  const std::string path = dir.file(name);
  std::ofstream(path) << text;
  ::chmod(path.c_str(), 0755);
  return path;
}

at::Tensor readNpy(const std::string& path) {
  return data::NpyFile(path).readAll();
}

TEST(MetricScript, GetsEveryOutputStackedTheLabelsAndAManifest) {
  TempDir dir("metric-files");
  const std::string keep = dir.file("kept");
  const std::string s =
      script(dir, "keep.sh", "#!/bin/sh\ncp -r \"$1\" \"" + keep + "\"\necho ' 42.5 '\n");
  at::manual_seed(3);
  const std::vector<TensorMap> outputs = {
      {{"logits/0", at::randn({2, 3})}, {"aux", at::randn({2, 1, 4})}},
      {{"logits/0", at::randn({1, 3})}, {"aux", at::randn({1, 1, 4})}}};
  const std::vector<at::Tensor> labels = {at::tensor({1, 2}), at::tensor({0})};
  EXPECT_EQ(runMetricScript(s, outputs, {"logits/0", "aux"}, labels, "quantized"), 42.5);
  const nlohmann::json manifest = parseJson(readFile(keep + "/outputs.json"), "outputs.json");
  EXPECT_EQ(manifest["model"], "quantized");
  EXPECT_EQ(manifest["samples"], 3);
  EXPECT_EQ(manifest["labels"], "labels.npy");
  EXPECT_EQ(manifest["outputs"]["logits/0"], "logits_0.npy");
  const at::Tensor logits = readNpy(keep + "/logits_0.npy");
  EXPECT_TRUE(at::equal(logits, at::cat({outputs[0].at("logits/0"), outputs[1].at("logits/0")})));
  const at::Tensor aux = readNpy(keep + "/" + manifest["outputs"]["aux"].get<std::string>());
  EXPECT_EQ(aux.sizes(), (std::vector<int64_t>{3, 1, 4}));
  EXPECT_TRUE(at::equal(readNpy(keep + "/labels.npy"), at::tensor({1, 2, 0}, at::kLong)));
  // Without labels there is no labels.npy.
  std::filesystem::remove_all(keep);
  runMetricScript(s, outputs, {"aux"}, {at::Tensor(), at::Tensor()}, "float");
  const nlohmann::json unlabelled = parseJson(readFile(keep + "/outputs.json"), "outputs.json");
  EXPECT_TRUE(unlabelled["labels"].is_null());
  EXPECT_EQ(unlabelled["model"], "float");
  EXPECT_FALSE(std::filesystem::exists(keep + "/labels.npy"));
}

// Top-1 in percent by NumPy, from the files alone.
constexpr const char* kNumpyTop1 = R"(#!/usr/bin/python3
import json, os, sys
import numpy as np
d = sys.argv[1]
m = json.load(open(os.path.join(d, "outputs.json")))
scores = np.load(os.path.join(d, m["outputs"]["y"]))
labels = np.load(os.path.join(d, m["labels"]))
print("scored", m["samples"], "samples")
print(100.0 * np.mean(scores.argmax(1) == labels))
)";

TEST(MetricScript, AutotuneWithATopOneScriptMeasuresWhatItsOwnTopOneDoes) {
  TempDir dir("metric-autotune");
  const Graph graph = testing::linearClassifier();
  AutotuneOptions o;
  o.ptq.graph = &graph;
  o.ptq.model_path = "linear";
  o.ptq.backend = testing::writeBackend(dir.file("tiny.json"),
                                        {{"weight", {{"bits", 3}}}, {"activation", {{"bits", 3}}}});
  o.ptq.calib = testing::classifierData(64, 1, "calib");
  o.ptq.calib_batches = 2;
  o.ptq.calib_batch = 32;
  o.ptq.eval = testing::classifierData(96, 2, "eval");
  o.ptq.eval_batch = 32;
  o.target_drop = -100;  // out of reach: every trial the search makes
  o.max_trials = 3;
  const AutotuneResult own = autotune(o);
  o.ptq.metric_script = script(dir, "top1.py", kNumpyTop1);
  const AutotuneResult scripted = autotune(o);
  EXPECT_EQ(own.metric, "top1");
  EXPECT_EQ(scripted.metric, "script");
  ASSERT_EQ(scripted.trials.size(), own.trials.size());
  EXPECT_NEAR(*scripted.float_metric, *own.float_metric, 1e-9);
  for (size_t i = 0; i < own.trials.size(); ++i) {
    EXPECT_NEAR(scripted.trials[i].metric, own.trials[i].metric, 1e-9) << i;
    EXPECT_NEAR(*scripted.trials[i].drop, *own.trials[i].drop, 1e-9) << i;
  }
  EXPECT_EQ(autotuneJson(scripted)["metric"], "script");
  // A script needs --target-drop, and is the metric on its own.
  o.target_drop.reset();
  o.target_sqnr = 20;
  EXPECT_NE(errorOf([&] { autotune(o); }).find("--target-drop"), std::string::npos);
  o.target_sqnr.reset();
  o.target_drop = 1;
  o.metric = "top1";
  EXPECT_EQ(errorOf([&] { autotune(o); }),
            "--metric-script is the metric: leave out --tune-metric top1");
}

TEST(MetricScript, FailuresAreOneLineNamingTheScript) {
  TempDir dir("metric-bad");
  const std::vector<TensorMap> outputs = {{{"y", at::ones({2, 3})}}};
  const std::vector<at::Tensor> labels = {at::Tensor()};
  const std::string fails =
      script(dir, "fails.sh", "#!/bin/sh\necho half >&2\necho boom >&2\nexit 3\n");
  EXPECT_EQ(
      errorOf([&] { runMetricScript(fails, outputs, {"y"}, labels, "float"); }),
      "--metric-script '" + fails + "' exited with code 3 on the float model's outputs: boom");
  const std::string words = script(dir, "words.sh", "#!/bin/sh\necho 12 apples\n");
  EXPECT_EQ(errorOf([&] { runMetricScript(words, outputs, {"y"}, labels, "quantized"); }),
            "--metric-script '" + words +
                "' printed '12 apples' as its last line on the quantized model's outputs; it "
                "must print the metric, one number (higher is better)");
  const std::string nan = script(dir, "nan.sh", "#!/bin/sh\necho nan\n");
  EXPECT_NE(
      errorOf([&] { runMetricScript(nan, outputs, {"y"}, labels, "float"); }).find("one number"),
      std::string::npos);
  const std::string plain = dir.file("plain.sh");
  std::ofstream(plain) << "echo 1\n";
  EXPECT_EQ(errorOf([&] { checkMetricScript(plain); }),
            "--metric-script '" + plain + "' is not executable; chmod +x it (with a #! line)");
  EXPECT_EQ(errorOf([&] { checkMetricScript(dir.file("none.py")); }),
            "--metric-script '" + dir.file("none.py") + "': no such file");
  const std::vector<TensorMap> scalar = {{{"y", at::ones({})}}};
  const std::string ok = script(dir, "ok.sh", "#!/bin/sh\necho 1\n");
  EXPECT_NE(errorOf([&] {
              runMetricScript(ok, scalar, {"y"}, labels, "float");
            }).find("output 'y' cannot be stacked"),
            std::string::npos);
}

}  // namespace
}  // namespace qforge::pipelines
