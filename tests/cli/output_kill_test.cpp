// Output directories survive SIGKILL: `quantize`, `deploy` and `qat` are killed at random moments
// while they replace a complete output directory, and after every kill the directory must be the
// old complete state or the new complete state, file for file. A second run writing the same
// directory is refused while the first goes on.
//
// Rounds per command: QFORGE_KILL_ROUNDS (default 8); the schedule of kill times is fixed by
// QFORGE_KILL_SEED (default 1). The proof in docs/BAD_INPUT.md runs 70 per command.
#include <gtest/gtest.h>
#include <signal.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>

#include "algos/qat_checkpoint.h"
#include "core/files.h"
#include "support/cli_runner.h"
#include "support/onnx_builder.h"

namespace qforge::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

std::string zoo(const std::string& name) {
  return std::string(QFORGE_SOURCE_DIR) + "/models/zoo/" + name + ".onnx";
}

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// A directory's state: each file's content by relative path ("<absent>" for no directory).
// report.json carries timings, so it stands for its backend and file list; `exempt` files are
// left out (QAT's checkpoint, checked apart).
using DirState = std::map<std::string, std::string>;

DirState stateOf(const fs::path& dir, const std::string& exempt = "") {
  DirState state;
  if (!fs::exists(dir)) return {{"<absent>", ""}};
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), dir).string();
    if (rel == exempt) continue;
    std::string content = readFile(e.path().string());
    if (rel == "report.json") {
      try {
        const nlohmann::json j = nlohmann::json::parse(content);
        content = "report of " + j.at("backend").dump() + " " + j.at("files").dump();
      } catch (const std::exception&) {
        content = "<report.json does not parse>";
      }
    }
    state[rel] = content;
  }
  return state;
}

// What differs between two states, for a failure message.
std::string describeDifference(const DirState& got, const DirState& old_state,
                               const DirState& new_state) {
  std::string out;
  for (const auto& [name, content] : got) {
    const bool in_old = old_state.count(name) && old_state.at(name) == content;
    const bool in_new = new_state.count(name) && new_state.at(name) == content;
    out += "  " + name + (in_old ? " old" : "") + (in_new ? " new" : "") +
           (!in_old && !in_new ? " NEITHER" : "") + "\n";
  }
  return out;
}

void copyTree(const fs::path& from, const fs::path& to) {
  fs::remove_all(to);
  if (fs::exists(from)) fs::copy(from, to, fs::copy_options::recursive);
}

struct KillTally {
  int old_state = 0, new_state = 0, failures = 0;
};

// Runs `args` (which writes `target`) `rounds` times from the state in `old_template`, killing
// it after a random delay in [0, 1.2 x its uninterrupted time], and checks each outcome. A
// present checkpoint (QAT's, written in place) must load whole.
KillTally killRepeatedly(const std::string& args, const fs::path& target,
                         const fs::path& old_template, const std::string& exempt, int rounds,
                         std::mt19937& rng) {
  const fs::path work = target.parent_path();
  // The new complete state: one uninterrupted run from the old one.
  copyTree(old_template, target);
  const Clock::time_point t0 = Clock::now();
  const pid_t full = spawnCli(args, (work / "full.log").string());
  EXPECT_GT(full, 0);
  EXPECT_EQ(waitExit(full), 0) << readFile((work / "full.log").string());
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const DirState new_state = stateOf(target, exempt);
  const DirState old_state = stateOf(old_template, exempt);
  EXPECT_NE(new_state, old_state) << "the two states must differ for the test to mean anything";

  KillTally tally;
  std::uniform_real_distribution<double> delay(0.0, 1.2 * seconds);
  for (int round = 0; round < rounds; ++round) {
    copyTree(old_template, target);
    const pid_t pid = spawnCli(args, (work / "cut.log").string());
    EXPECT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::duration<double>(delay(rng)));
    ::kill(pid, SIGKILL);
    waitExit(pid);
    const DirState got = stateOf(target, exempt);
    if (got == old_state) {
      ++tally.old_state;
    } else if (got == new_state) {
      ++tally.new_state;
    } else {
      ++tally.failures;
      ADD_FAILURE() << args << "\nround " << round << ": a directory that is neither state:\n"
                    << describeDifference(got, old_state, new_state);
    }
    if (!exempt.empty() && fs::exists(target / exempt)) {
      EXPECT_NO_THROW(algos::loadQatCheckpoint((target / exempt).string())) << "round " << round;
    }
  }
  // The next complete run clears what the killed ones left beside the directory.
  copyTree(old_template, target);
  const pid_t last = spawnCli(args, (work / "last.log").string());
  EXPECT_EQ(waitExit(last), 0) << readFile((work / "last.log").string());
  for (const auto& e : fs::directory_iterator(work)) {
    const std::string name = e.path().filename().string();
    EXPECT_EQ(name.find(".qforge-staging-"), std::string::npos) << name << " left behind";
  }
  std::printf("[ kills    ] %s: %d rounds in [0, %.2f s]: %d old, %d new, %d neither\n",
              args.substr(0, args.find(' ')).c_str(), rounds, 1.2 * seconds, tally.old_state,
              tally.new_state, tally.failures);
  return tally;
}

std::string quantizeArgs(const std::string& backend, const fs::path& out) {
  return "quantize " + zoo("resnet") + " --backend " + backend +
         " --calib fashion-mnist:train --calib-batches 1 --calib-batch 8 --out " + out.string();
}

TEST(OutputKill, EveryKillLeavesTheOldOrTheNewDirectory) {
  const fs::path dir = makeTempDir("kill");
  const int rounds = envInt("QFORGE_KILL_ROUNDS", 8);
  std::mt19937 rng(static_cast<unsigned>(envInt("QFORGE_KILL_SEED", 1)));
  // The old complete state: TensorRT's output, and an OpenVINO prepared model to deploy from.
  ASSERT_EQ(runCli(quantizeArgs("TensorRT", dir / "old")).exit_code, 0);
  ASSERT_EQ(runCli(quantizeArgs("OpenVINO", dir / "openvino")).exit_code, 0);

  const fs::path target = dir / "work" / "out";
  fs::create_directories(target.parent_path());
  KillTally total;
  const auto add = [&total](const KillTally& t) {
    total.old_state += t.old_state;
    total.new_state += t.new_state;
    total.failures += t.failures;
  };
  add(killRepeatedly(quantizeArgs("OpenVINO", target), target, dir / "old", "", rounds, rng));
  add(killRepeatedly("deploy " + (dir / "openvino").string() + " --out " + target.string(), target,
                     dir / "old", "", rounds, rng));
  add(killRepeatedly("qat " + zoo("resnet") +
                         " --backend TensorRT --limit 64 --batch 32 --epochs 2 --calib-batches 1"
                         " --calib-batch 32 --out " +
                         target.string(),
                     target, dir / "old", "checkpoint.pt", rounds, rng));
  EXPECT_EQ(total.failures, 0);
  // Kills landed on both sides of the swap (with the default rounds too).
  EXPECT_GT(total.old_state, 0);
  EXPECT_GT(total.new_state, 0);
}

TEST(OutputKill, ASecondRunOnTheSameDirectoryIsRefused) {
  const fs::path dir = makeTempDir("lock");
  const std::string out = (dir / "out").string();
  const pid_t first = spawnCli("qat " + zoo("resnet") +
                                   " --backend TensorRT --limit 256 --batch 32 --epochs 20"
                                   " --calib-batches 1 --calib-batch 32 --no-deploy --out " +
                                   out,
                               (dir / "first.log").string());
  ASSERT_GT(first, 0);
  // Wait for the lock: the first run writes its pid into it.
  const fs::path lock = dir / ".out.qforge-lock";
  for (int i = 0; i < 3000 && (!fs::exists(lock) || fs::file_size(lock) == 0); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const CliResult second = runCli(quantizeArgs("TensorRT", out));
  ::kill(first, SIGKILL);
  waitExit(first);
  EXPECT_EQ(second.exit_code, 2) << second.out;
  EXPECT_EQ(lineCount(second.out), 1u) << second.out;
  EXPECT_NE(second.out.find(out + ": another qforge run (pid " + std::to_string(first) +
                            ") is writing this directory"),
            std::string::npos)
      << second.out;
  // Killed, the first run holds nothing: the next run goes ahead.
  EXPECT_EQ(runCli(quantizeArgs("TensorRT", out)).exit_code, 0);
}

}  // namespace
}  // namespace qforge::testing
