// `qforge quantize --algo ...`: reconstruction, equalization and bias correction from the CLI on
// the zoo ResNet (a few iterations), the JSON report's figures, the cache budget, data-parallel
// calibration and reconstruction over two processes, and bad input.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "support/cli_runner.h"
#include "support/onnx_builder.h"
#include "support/rank_processes.h"

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

std::string fileText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Two ranks of `args` on loopback, rank r writing to out_r; returns both exit codes.
std::vector<int> runTwoRanks(const std::string& args, const std::string& dir) {
  const std::string master = "127.0.0.1:" + std::to_string(unusedLoopbackPort());
  std::vector<pid_t> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string r = std::to_string(rank);
    ranks.push_back(spawnCli(args + " --world-size 2 --rank " + r + " --master " + master +
                                 " --timeout 60 --out " + dir + "/out" + r,
                             dir + "/rank" + r + ".log"));
  }
  return {waitExit(ranks[0]), waitExit(ranks[1])};
}

// EMA activation ranges depend on batch order: two ranks (3 and 2 of 5 batches) must fold them in
// one process's order to write the same quantizers.json, byte for byte.
TEST(QuantizeAlgoCli, TwoRanksCalibrateToTheQuantizersOfOneProcess) {
  const std::string dir = makeTempDir("quantize-ranks");
  const std::string common = "quantize " + zoo("resnet") +
                             " --backend Academic --calib-batches 5 --calib-batch 32 --no-deploy "
                             "--quiet";
  const CliResult one = runCli(common + " --out " + dir + "/one", "QFORGE_NUM_THREADS=1");
  ASSERT_EQ(one.exit_code, 0) << one.out;
  const std::vector<int> exits = runTwoRanks(common + " --json", dir);
  ASSERT_EQ(exits, (std::vector<int>{0, 0}))
      << fileText(dir + "/rank0.log") << fileText(dir + "/rank1.log");
  EXPECT_EQ(fileText(dir + "/out0/quantizers.json"), fileText(dir + "/one/quantizers.json"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/out1"));  // rank 1 writes nothing
  const nlohmann::json report = nlohmann::json::parse(fileText(dir + "/out0/report.json"));
  EXPECT_EQ(report["world_size"], 2);
  EXPECT_EQ(report["calibration"]["batches"], 5);
  EXPECT_EQ(report["calibration"]["samples"], 160);
  const nlohmann::json rank1 = nlohmann::json::parse(fileText(dir + "/rank1.log"));
  EXPECT_EQ(rank1["rank"], 1);
  EXPECT_TRUE(rank1["files"].empty());
}

// One calibration batch for two ranks: calibration runs it on rank 0 alone, reconstruction splits
// its samples. Too few samples for a step fail on both ranks with the same line.
TEST(QuantizeAlgoCli, TwoRanksReconstructTogetherAndRefuseWhatRunsAlone) {
  const std::string dir = makeTempDir("quantize-ranks-qdrop");
  const std::string common = "quantize " + zoo("resnet") +
                             " --backend TensorRT --calib-batches 1 --algo qdrop --iters 20 "
                             "--no-deploy --quiet --json";
  const std::vector<int> exits = runTwoRanks(common + " --calib-batch 64", dir);
  ASSERT_EQ(exits, (std::vector<int>{0, 0}))
      << fileText(dir + "/rank0.log") << fileText(dir + "/rank1.log");
  const nlohmann::json report = nlohmann::json::parse(fileText(dir + "/out0/report.json"));
  EXPECT_EQ(report["calibration"]["batches"], 1);
  EXPECT_EQ(report["reconstruction"]["samples"], 64);  // 32 on each rank
  EXPECT_EQ(report["reconstruction"]["iterations"], 5 * 20);
  const std::string small = dir + "/small";
  std::filesystem::create_directories(small);
  EXPECT_EQ(runTwoRanks(common + " --calib-batch 8", small), (std::vector<int>{2, 2}));
  for (const char* rank : {"/rank0.log", "/rank1.log"}) {
    EXPECT_NE(fileText(small + rank)
                  .find("a reconstruction batch of 16 per rank needs at least 16 calibration "
                        "samples, got 4"),
              std::string::npos)
        << fileText(small + rank);
  }
  const CliResult tuned = runCli("quantize " + zoo("resnet") +
                                 " --backend TensorRT --target-drop 1 --eval fashion-mnist:test "
                                 "--world-size 2 --out " +
                                 dir + "/tuned");
  EXPECT_EQ(tuned.exit_code, 2);
  EXPECT_NE(tuned.out.find("run in one process: drop --world-size or the target"),
            std::string::npos)
      << tuned.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/tuned"));
  const CliResult odd = runCli("quantize " + zoo("resnet") +
                               " --backend TensorRT --algo qdrop --recon-batch 15 --world-size 2 "
                               "--rank 2 --out " +
                               dir + "/odd");
  EXPECT_EQ(odd.exit_code, 2);
  EXPECT_NE(odd.out.find("--rank"), std::string::npos) << odd.out;
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
