// `qforge qat` as a user runs it on the zoo ResNet: a short training run that deploys, every
// --algo, SIGINT (checkpoint, exit 130, --resume ends bit-identical to an uninterrupted run),
// SIGKILL mid-epoch (the last checkpoint is whole and the run finishes the same), and bad input.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/files.h"
#include "support/cli_runner.h"
#include "support/onnx_builder.h"

extern char** environ;

namespace qforge::testing {
namespace {

std::string zoo(const std::string& name) {
  return std::string(QFORGE_SOURCE_DIR) + "/models/zoo/" + name + ".onnx";
}

// A short run: 384 training samples in batches of 32 (12 steps an epoch), one calibration batch.
std::string shortRun(const std::string& out, int epochs) {
  return "qat " + zoo("resnet") + " --backend TensorRT --limit 384 --batch 32 --epochs " +
         std::to_string(epochs) + " --calib-batches 1 --calib-batch 32 --lr 0.002 --out " + out;
}

// Starts qforge in the background (one thread, output to `log`) and returns its pid.
pid_t spawnCli(const std::string& args, const std::string& log) {
  const std::string command = "exec env QFORGE_NUM_THREADS=1 " + std::string(QFORGE_CLI) + " " +
                              args + " >" + log + " 2>&1";
  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
  return pid;
}

int waitExit(pid_t pid, bool* signalled = nullptr) {
  int status = 0;
  waitpid(pid, &status, 0);
  if (signalled) *signalled = WIFSIGNALED(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Waits until `path` exists (the first epoch's checkpoint), at most 120 s.
bool waitForFile(const std::string& path) {
  for (int i = 0; i < 12000; ++i) {
    if (std::filesystem::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

std::string bytes(const std::string& path) {
  return readFile(path);
}

TEST(QatCli, TrainsDeploysAndReportsPerEpochMetrics) {
  const std::string dir = makeTempDir("qat-cli");
  const CliResult r = runCli(shortRun(dir + "/run", 2) +
                                 " --eval fashion-mnist:test --eval-limit "
                                 "300 --json --csv " +
                                 dir + "/metrics.csv",
                             "QFORGE_NUM_THREADS=1");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["steps"], 24);
  EXPECT_EQ(j["epochs"].size(), 2u);
  EXPECT_EQ(j["interrupted"], false);
  EXPECT_GT(j["step_ms"].get<double>(), 0);
  EXPECT_GT(j["samples_per_second"].get<double>(), 0);
  EXPECT_GT(j["quantizer_parameters"].get<int64_t>(), 0);
  // A few steps from a calibrated start stay near float on 300 test images.
  EXPECT_GT(j["float_top1"].get<double>(), 85);
  EXPECT_GT(j["qat_top1"].get<double>(), j["float_top1"].get<double>() - 5);
  EXPECT_EQ(j["batchnorms_merged"], j["batchnorms_simulated"]);
  for (const char* f : {"run/checkpoint.pt", "run/prepared.onnx", "run/prepared.json",
                        "run/model.qdq.onnx", "run/report.json"})
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + f)) << f;
  std::ifstream csv(dir + "/metrics.csv");
  std::string header, line;
  std::getline(csv, header);
  EXPECT_EQ(header, "epoch,loss,train_top1,eval_top1,lr,steps,bn_frozen,seconds");
  int rows = 0;
  while (std::getline(csv, line))
    ++rows;
  EXPECT_EQ(rows, 2);
}

TEST(QatCli, EveryAlgorithmTrainsAndDeploys) {
  const std::string dir = makeTempDir("qat-algos");
  for (const std::string algo : {"lsq", "pact", "dsq", "dorefa", "tqt"}) {
    const CliResult r = runCli("qat " + zoo("resnet") +
                                   " --backend TensorRT --limit 64 --batch 32 --calib-batches 1 "
                                   "--calib-batch 32 --max-steps 2 --json --algo " +
                                   algo + " --out " + dir + "/" + algo,
                               "QFORGE_NUM_THREADS=1");
    ASSERT_EQ(r.exit_code, 0) << algo << ": " << r.out;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["algorithm"], algo);
    EXPECT_EQ(j["steps"], 2) << algo;
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + algo + "/model.qdq.onnx")) << algo;
  }
}

TEST(QatCli, SigintSavesACheckpointAndTheResumedRunEndsBitIdentical) {
  const std::string dir = makeTempDir("qat-sigint");
  const CliResult full =
      runCli(shortRun(dir + "/full", 3) + " --no-deploy --quiet", "QFORGE_NUM_THREADS=1");
  ASSERT_EQ(full.exit_code, 0) << full.out;

  const pid_t pid = spawnCli(shortRun(dir + "/cut", 3) + " --no-deploy", dir + "/cut.log");
  ASSERT_TRUE(waitForFile(dir + "/cut/checkpoint.pt"));  // epoch 1 done: now mid-epoch 2
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  kill(pid, SIGINT);
  const int code = waitExit(pid);
  const std::string log = bytes(dir + "/cut.log");
  ASSERT_EQ(code, 130) << log;
  EXPECT_NE(log.find("interrupted at step"), std::string::npos) << log;
  EXPECT_NE(log.find("--resume " + dir + "/cut"), std::string::npos) << log;
  EXPECT_FALSE(std::filesystem::exists(dir + "/cut/prepared.onnx"));  // nothing half-done

  const CliResult resumed =
      runCli(shortRun(dir + "/cut", 3) + " --resume " + dir + "/cut --no-deploy --json",
             "QFORGE_NUM_THREADS=1");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  const nlohmann::json j = nlohmann::json::parse(resumed.out);
  EXPECT_TRUE(j["resumed"].get<bool>());
  EXPECT_GT(j["resumed_at_step"].get<int64_t>(), 12);  // stopped inside epoch 2 or 3
  EXPECT_EQ(j["global_step"], 36);
  EXPECT_TRUE(bytes(dir + "/cut/prepared.onnx") == bytes(dir + "/full/prepared.onnx"));
  EXPECT_TRUE(bytes(dir + "/cut/prepared.json") == bytes(dir + "/full/prepared.json"));
}

TEST(QatCli, SigkillMidEpochLeavesAWholeCheckpointAndTheRunFinishesTheSame) {
  const std::string dir = makeTempDir("qat-sigkill");
  const CliResult full =
      runCli(shortRun(dir + "/full", 2) + " --no-deploy --quiet", "QFORGE_NUM_THREADS=1");
  ASSERT_EQ(full.exit_code, 0) << full.out;

  const pid_t pid = spawnCli(shortRun(dir + "/cut", 2) + " --no-deploy", dir + "/cut.log");
  ASSERT_TRUE(waitForFile(dir + "/cut/checkpoint.pt"));
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  kill(pid, SIGKILL);
  bool signalled = false;
  waitExit(pid, &signalled);
  ASSERT_TRUE(signalled);

  const CliResult resumed =
      runCli(shortRun(dir + "/cut", 2) + " --resume " + dir + "/cut --no-deploy --json",
             "QFORGE_NUM_THREADS=1");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out;
  const nlohmann::json j = nlohmann::json::parse(resumed.out);
  EXPECT_EQ(j["resumed_at_step"], 12);  // the end of epoch 1: the last checkpoint written
  EXPECT_TRUE(bytes(dir + "/cut/prepared.onnx") == bytes(dir + "/full/prepared.onnx"));
  EXPECT_TRUE(bytes(dir + "/cut/prepared.json") == bytes(dir + "/full/prepared.json"));
}

TEST(QatCli, BadInputGetsOneLineAndNoFiles) {
  const std::string dir = makeTempDir("qat-bad");
  const CliResult algo = runCli(shortRun(dir + "/a", 1) + " --algo lsqq");
  EXPECT_EQ(algo.exit_code, 2);
  EXPECT_NE(algo.out.find("unknown QAT algorithm 'lsqq'; known: lsq, lsq+, pact, dsq, dorefa, tqt"),
            std::string::npos)
      << algo.out;
  EXPECT_EQ(lineCount(algo.out), 1u) << algo.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/a"));

  const CliResult resume = runCli(shortRun(dir + "/b", 1) + " --resume " + dir + "/nowhere");
  EXPECT_EQ(resume.exit_code, 2);
  EXPECT_NE(resume.out.find("no checkpoint.pt there"), std::string::npos) << resume.out;

  const CliResult optimizer = runCli(shortRun(dir + "/c", 1) + " --optimizer rmsprop");
  EXPECT_EQ(optimizer.exit_code, 2);
  EXPECT_NE(optimizer.out.find("unknown optimizer 'rmsprop'; known: sgd, adam"), std::string::npos)
      << optimizer.out;

  const CliResult batch = runCli("qat " + zoo("resnet") +
                                 " --backend TensorRT --limit 20 --batch 32 --calib-batches 1 "
                                 "--calib-batch 8 --out " +
                                 dir + "/d");
  EXPECT_EQ(batch.exit_code, 2);
  EXPECT_NE(batch.out.find("20 samples, fewer than one batch of 32"), std::string::npos)
      << batch.out;
}

}  // namespace
}  // namespace qforge::testing
