// `qforge quantize --algo ...`: reconstruction, equalization and bias correction from the CLI on
// the zoo ResNet (a few iterations), the JSON report's figures, the cache budget, and bad input.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "support/cli_runner.h"
#include "support/onnx_builder.h"

namespace qforge::testing {
namespace {

std::string zoo(const std::string& name) {
  return std::string(QFORGE_SOURCE_DIR) + "/models/zoo/" + name + ".onnx";
}

std::string w2a4() {
  return std::string(QFORGE_SOURCE_DIR) + "/bench/configs/w2a4_minmax.yaml";
}

TEST(QuantizeAlgoCli, QDropReconstructsEveryBlockAndBeatsNaiveCalibration) {
  const std::string dir = makeTempDir("quantize-algo");
  const std::string common = "quantize " + zoo("resnet") + " --backend Academic --config " +
                             w2a4() + " --calib-batches 2 --calib-batch 64 --eval " +
                             "fashion-mnist:test --eval-limit 500 --json";
  const CliResult naive = runCli(common + " --out " + dir + "/naive");
  ASSERT_EQ(naive.exit_code, 0) << naive.out;
  const CliResult qdrop =
      runCli(common + " --algo qdrop --iters 60 --cache-limit 8M --out " + dir + "/qdrop");
  ASSERT_EQ(qdrop.exit_code, 0) << qdrop.out;
  const nlohmann::json n = nlohmann::json::parse(naive.out);
  const nlohmann::json q = nlohmann::json::parse(qdrop.out);
  EXPECT_EQ(n["algorithm"], "naive");
  EXPECT_FALSE(n.contains("reconstruction"));
  const nlohmann::json& r = q["reconstruction"];
  EXPECT_EQ(r["algorithm"], "qdrop");
  EXPECT_EQ(r["pattern"], "block");
  EXPECT_EQ(r["prob"], 0.5);
  EXPECT_EQ(r["samples"], 128);
  EXPECT_EQ(r["max_count"], 60);
  EXPECT_EQ(r["units"].size(), 5u);  // stem, three residual blocks, the classifier
  EXPECT_EQ(r["iterations"], 5 * 60);
  EXPECT_LE(r["peak_cache_bytes"].get<int64_t>(), int64_t{8} << 20);
  int64_t recomputed = 0;
  for (const auto& u : r["units"])
    recomputed += u["recomputed_samples"].get<int64_t>();
  EXPECT_GT(recomputed, 0);  // the first block's 128 samples do not fit in 8 MiB
  EXPECT_GT(q["quantized"]["top1"].get<double>(), n["quantized"]["top1"].get<double>() + 0.10)
      << "naive " << n["quantized"]["top1"] << ", qdrop " << q["quantized"]["top1"];
  EXPECT_GT(q["peak_rss_bytes"].get<int64_t>(), 0);
}

TEST(QuantizeAlgoCli, EqualizationAndBiasCorrectionAreReported) {
  const std::string dir = makeTempDir("quantize-cle");
  const CliResult r = runCli("quantize " + zoo("mobilenet") +
                             " --backend QDQ --calib-batches 1 --calib-batch 32 "
                             "--cle-relu6-to-relu --bias-correction --out " +
                             dir + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["equalization"]["pairs"].size(), 10u);
  EXPECT_GT(j["equalization"]["relu6_replaced"].size(), 10u);
  EXPECT_GT(j["bias_correction"]["layers"].size(), 10u);
}

TEST(QuantizeAlgoCli, BadReconstructionInputGetsOneClearLine) {
  const std::string dir = makeTempDir("quantize-algo-bad");
  const std::string base =
      "quantize " + zoo("resnet") + " --backend Academic --calib-batch 16 --out " + dir + "/o";
  CliResult r = runCli(base + " --algo optq");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("unknown reconstruction algorithm 'optq'; known: adaround, brecq, qdrop"),
            std::string::npos)
      << r.out;
  r = runCli(base + " --calib-batches 1 --algo brecq");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(
      r.out.find("a reconstruction batch of 32 needs at least 32 calibration samples, got 16"),
      std::string::npos)
      << r.out;
  std::ofstream(dir + "/r.yaml") << "quantize:\n  reconstruction:\n    iterations: 5\n";
  r = runCli(base + " --algo qdrop --algo-config " + dir + "/r.yaml");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("iterations is not a reconstruction key"), std::string::npos) << r.out;
  r = runCli(base + " --algo qdrop --cache-limit lots");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("--cache-limit 'lots' is not a size"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace qforge::testing
