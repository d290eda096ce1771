// A model of two inputs (a float image with a fixed batch of 1 and an int64 scalar, a gain
// like a sample rate) through quantize, eval and verify as a user runs them: per-input data
// sources, random: data, every input fed, ONNX Runtime run one sample at a time, the
// probability map scored by SQNR/cosine rather than top-1; and data mistakes refused before
// anything is written.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "data/npy.h"
#include "ir/onnx_export.h"
#include "ir/onnx_import.h"
#include "support/cli_json.h"
#include "support/cli_runner.h"
#include "support/onnx_builder.h"
#include "support/ort_dir.h"

namespace qforge::testing {
namespace {

// x [1,1,4,4] -> Conv 3x3 (pad 1) -> * Cast(gain) -> Sigmoid -> y [1,1,4,4].
std::string gainMapModel(const std::string& dir) {
  OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {1, 1, 4, 4})
      .input("gain", onnx::TensorProto::INT64, {})
      .output("y", onnx::TensorProto::FLOAT, {1, 1, 4, 4});
  b.initializer(
      "w",
      at::tensor({0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.1f, 0.2f, 0.0f, -0.3f}).reshape({1, 1, 3, 3}));
  b.initializer("b", at::tensor({0.05f}));
  addIntsAttribute(b.node("Conv", {"x", "w", "b"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
  addIntAttribute(b.node("Cast", {"gain"}, {"gain_f"}, "cast"), "to", onnx::TensorProto::FLOAT);
  b.node("Mul", {"c", "gain_f"}, {"m"}, "mul");
  b.node("Sigmoid", {"m"}, {"y"}, "sigmoid");
  const std::string path = dir + "/gain_map.onnx";
  b.save(path);
  return path;
}

const char kData[] = "'x=random:normal,count=12,seed=4;gain=const:2'";

// The gain map quantized for TensorRT on kData into `out`; its exit code.
int quantizeGainMap(const std::string& model, const std::string& out) {
  const CliResult r = runCli("quantize " + model + " --backend TensorRT --calib " + kData +
                             " --calib-batch 4 --calib-batches 3 --out " + out + " --quiet");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return r.exit_code;
}

TEST(MultiInputDataCli, QuantizeEvalAndVerifyFeedEveryInputOneSampleAtATime) {
  const std::string dir = makeTempDir("multi_input");
  const std::string model = gainMapModel(dir);
  const std::string out = dir + "/q";
  ASSERT_EQ(quantizeGainMap(model, out), 0);
  CliResult r;

  // eval on the prepared directory: the simulated quantization, outputs only.
  r = runCli("eval " + out + " --data " + kData + " --metric none --json --dump-outputs " + dir +
             "/sim.npy");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json j = jsonOf(r);
  EXPECT_EQ(j["samples"], 12);
  EXPECT_EQ(j["metric"], "none");
  EXPECT_FALSE(j.contains("psnr_db"));
  data::NpyFile sim(dir + "/sim.npy");
  EXPECT_EQ(sim.shape(), (std::vector<int64_t>{12, 1, 4, 4}));
  const at::Tensor maps = sim.readAll();
  EXPECT_GT(maps.min().item<float>(), 0.0f);  // a sigmoid's range
  EXPECT_LT(maps.max().item<float>(), 1.0f);

  // The float model against the quantized one: SQNR and cosine of every output.
  r = runCli("eval " + model + " --data " + kData + " --metric none --reference " + out +
             "/prepared.onnx --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  j = jsonOf(r);
  ASSERT_EQ(j["reference"]["outputs"].size(), 1u) << j.dump(2);
  const auto& vs = j["reference"]["outputs"][0];
  EXPECT_EQ(vs["output"], "y");
  EXPECT_GT(vs["sqnr_db"].get<double>(), 20.0);
  EXPECT_GT(vs["cosine"].get<double>(), 0.99);

  // verify: ONNX Runtime gets every input and batches of the model's 1.
  r = runCli("verify " + out + " --data " + kData + " --batch 8 --json", ortEnv());
  j = jsonOf(r);
  EXPECT_EQ(r.exit_code, 0) << j.dump(2);
  EXPECT_EQ(j["samples"], 12);
  EXPECT_EQ(j["fixed_batch"], 1);
  bool judged_sqnr = false;
  for (const auto& c : j["comparisons"]) {
    ASSERT_EQ(c["outputs"].size(), 1u);
    EXPECT_FALSE(c["outputs"][0]["classifier"].get<bool>());
    EXPECT_FALSE(c["outputs"][0].contains("top1_agree"));
  }
  for (const auto& c : j["criteria"]) {
    EXPECT_NE(c["metric"], "top1_agreement");
    if (c["metric"] == "sqnr_db" && c["comparison"] == "qdq model vs simulation") {
      judged_sqnr = true;
      EXPECT_EQ(c["threshold"], 30.0);
      EXPECT_TRUE(c["passed"].get<bool>());
    }
  }
  EXPECT_TRUE(judged_sqnr) << j.dump(2);

  // ORT's QDQ model computes exactly what the simulation does here (SQNR infinite, null in JSON),
  // so no SQNR threshold can fail...
  r = runCli("verify " + out + " --data " + kData + " --min-sqnr 1000 --json", ortEnv());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_TRUE(jsonOf(r)["comparisons"][0]["outputs"][0]["sqnr_db"].is_null()) << r.out;
  // ...until the file differs: the Conv output's scale 1% larger in it. Thresholds are the
  // user's: with --strict (no waiver for carried rounding) an impossible SQNR fails, with the
  // figure.
  std::ifstream manifest_file(out + "/deploy.json");
  const std::string conv_output =
      nlohmann::json::parse(manifest_file)["quantized_values"]["c"].get<std::string>();
  Graph g = importOnnxFile(out + "/model.qdq.onnx");
  Value* scale = g.value(conv_output)->producer()->input(1);
  scale->setInitializer(scale->initializer() * 1.01);
  exportOnnxFile(g, out + "/model.qdq.onnx");
  r = runCli(
      "verify " + out + " --data " + kData + " --min-sqnr 1000 --iou-threshold 0.5 --strict --json",
      ortEnv());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  j = jsonOf(r);
  ASSERT_FALSE(j["failures"].empty());
  EXPECT_NE(j["failures"][0].get<std::string>().find("SQNR"), std::string::npos);
  EXPECT_NE(j["failures"][0].get<std::string>().find("1000"), std::string::npos);
  EXPECT_TRUE(j["comparisons"][0]["outputs"][0].contains("iou"));
}

// The trace of a model with a fixed batch compares ORT's integers of all traced samples with the
// simulation one run of that batch at a time: a broken scale in the QDQ model is still the first
// tensor beyond one level, with every traced sample compared, also with room for one tensor.
TEST(MultiInputDataCli, TheTraceOfAFixedBatchModelComparesOneRunAtATime) {
  const std::string dir = makeTempDir("multi_input");
  const std::string model = gainMapModel(dir);
  const std::string out = dir + "/q";
  ASSERT_EQ(quantizeGainMap(model, out), 0);
  CliResult r;
  std::ifstream manifest_file(out + "/deploy.json");
  const nlohmann::json manifest = nlohmann::json::parse(manifest_file);
  // The Conv's output, read by the Mul: its QuantizeLinear's scale grows by half.
  std::string victim;
  for (const auto& [quantizer, tensor] : manifest["quantized_values"].items()) {
    if (quantizer == "c") victim = tensor.get<std::string>();
  }
  ASSERT_FALSE(victim.empty()) << manifest["quantized_values"].dump();
  Graph g = importOnnxFile(out + "/model.qdq.onnx");
  Value* scale = g.value(victim)->producer()->input(1);
  scale->setInitializer(scale->initializer() * 1.5);
  exportOnnxFile(g, out + "/model.qdq.onnx");

  for (const char* memory : {"1G", "1"}) {
    r = runCli("verify " + out + " --data " + kData + " --trace-memory " + memory + " --json",
               ortEnv());
    EXPECT_EQ(r.exit_code, 1) << r.out;
    const nlohmann::json j = jsonOf(r);
    EXPECT_EQ(j["fixed_batch"], 1);
    const nlohmann::json* sim = nullptr;
    for (const auto& c : j["comparisons"]) {
      if (c["model"] == "qdq" && c["reference"] == "simulation") sim = &c;
    }
    ASSERT_NE(sim, nullptr) << j.dump(2);
    ASSERT_TRUE(sim->contains("first_divergence")) << sim->dump(2);
    EXPECT_EQ((*sim)["first_divergence"]["tensor"], victim) << memory;
    EXPECT_EQ((*sim)["first_divergence"]["quantizer"], "c") << memory;
    // The input's quantizer and the Conv's output: both compared, in graph order.
    EXPECT_EQ((*sim)["first_divergence"]["index"], 1) << sim->dump(2);
    EXPECT_EQ((*sim)["first_divergence"]["compared"], 2) << sim->dump(2);
    // Scaled by 1.5, most of the map moves by more than one level.
    EXPECT_GT((*sim)["first_divergence"]["share_off"].get<double>(), 0.3) << sim->dump(2);
  }
}

TEST(MultiInputDataCli, DataMistakesNameTheInputAndWriteNothing) {
  const std::string dir = makeTempDir("multi_input");
  const std::string model = gainMapModel(dir);
  const std::string out = dir + "/q";
  const auto quantize = [&](const std::string& data) {
    return runCli("quantize " + model + " --backend TensorRT --calib " + data +
                  " --calib-batch 2 --calib-batches 1 --out " + out + " --quiet");
  };
  CliResult r = quantize("'x=random:normal,shape=1x5x5;gain=const:2'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("input 'x'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1,5,5]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1,4,4]"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out));

  r = quantize("random:normal");  // the int64 gain cannot be drawn from a normal
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("'gain'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gain=const:VALUE"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out));

  r = quantize("'x=random:normal'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("nothing for the model input 'gain'"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(MultiInputDataCli, EvalDumpsOutputsOfAModelThatChangesShape) {
  // y = ReduceSum(x, axis 1, keepdims): [N, 4] -> [N, 1]; no labels. --metric auto used to
  // insist on PSNR against the input and refuse; it now only runs and dumps.
  const std::string dir = makeTempDir("multi_input");
  OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {-1, 4}).output("y", onnx::TensorProto::FLOAT, {-1, 1});
  b.initializer("axes", at::tensor(std::vector<int64_t>{1}));
  b.node("ReduceSum", {"x", "axes"}, {"y"}, "sum");
  b.save(dir + "/sum.onnx");
  const at::Tensor x = at::arange(12, at::kFloat).reshape({3, 4});
  data::NpyWriter w(dir + "/x.npy", at::kFloat, {3, 4});
  w.append(x);
  w.close();
  CliResult r = runCli("eval " + dir + "/sum.onnx --data " + dir + "/x.npy --json --dump-outputs " +
                       dir + "/y.npy");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(jsonOf(r)["metric"], "none");
  const at::Tensor y = data::NpyFile(dir + "/y.npy").readAll();
  EXPECT_TRUE(at::equal(y, at::tensor({6.0f, 22.0f, 38.0f}).reshape({3, 1})));
  r = runCli("eval " + dir + "/sum.onnx --data " + dir + "/x.npy --metric psnr");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("--metric none"), std::string::npos) << r.out;
  r = runCli("eval " + dir + "/sum.onnx --data " + dir + "/x.npy --metric psnnr");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("auto, top1, psnr or none"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace qforge::testing
