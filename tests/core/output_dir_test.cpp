// Output directories written as one unit: nothing changes before commit(), a commit swaps the
// whole directory, old files are kept or dropped by role, a second writer is locked out, and what
// a killed run left beside the directory is cleared by the next one.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "core/error.h"
#include "core/files.h"
#include "core/output_dir.h"
#include "support/onnx_builder.h"

namespace qforge {
namespace {

namespace fs = std::filesystem;

void writeText(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

// Every entry name of `dir`.
std::set<std::string> entries(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    names.insert(e.path().filename().string());
  return names;
}

const std::set<std::string> kBoth = {OutputDirectory::kModelRole, OutputDirectory::kDeployRole};

TEST(OutputDirectory, NothingAppearsBeforeCommitAndEverythingAfter) {
  const fs::path root = testing::makeTempDir("outdir");
  const fs::path dir = root / "out";
  {
    OutputDirectory out(dir.string(), OutputDirectory::kModelRole, kBoth);
    writeText(fs::path(out.staging()) / "a.txt", "new a");
    EXPECT_FALSE(fs::exists(dir));
    EXPECT_EQ(out.finalPath(out.staging() + "/a.txt"), dir.string() + "/a.txt");
    EXPECT_EQ(out.finalPath("/elsewhere/b.txt"), "/elsewhere/b.txt");
    out.commit();
  }
  EXPECT_EQ(entries(dir), (std::set<std::string>{"a.txt", ".qforge-output.json"}));
  EXPECT_EQ(readFile((dir / "a.txt").string()), "new a");
  const auto roles = nlohmann::json::parse(readFile((dir / ".qforge-output.json").string()));
  EXPECT_EQ(roles["files"], nlohmann::json({{"a.txt", "model"}}));
  // Nothing stays beside it: no staging directory, no lock file.
  EXPECT_EQ(entries(root), (std::set<std::string>{"out"}));
}

TEST(OutputDirectory, AFailedRunLeavesTheOldDirectoryAsItWas) {
  const fs::path dir = fs::path(testing::makeTempDir("outdir")) / "out";
  fs::create_directories(dir);
  writeText(dir / "a.txt", "old a");
  {
    OutputDirectory out(dir.string(), OutputDirectory::kModelRole, kBoth);
    writeText(fs::path(out.staging()) / "a.txt", "new a");
    writeText(fs::path(out.staging()) / "b.txt", "new b");
    // No commit: the run threw.
  }
  EXPECT_EQ(entries(dir), (std::set<std::string>{"a.txt"}));
  EXPECT_EQ(readFile((dir / "a.txt").string()), "old a");
  EXPECT_EQ(entries(dir.parent_path()), (std::set<std::string>{"out"}));
}

TEST(OutputDirectory, OldFilesAreKeptOrDroppedByTheirRole) {
  const fs::path dir = fs::path(testing::makeTempDir("outdir")) / "out";
  {  // A quantize-like run: a prepared model and a deploy file.
    OutputDirectory out(dir.string(), OutputDirectory::kModelRole, kBoth);
    writeText(fs::path(out.staging()) / "prepared.json", "p1");
    writeText(fs::path(out.staging()) / "model.qoperator.onnx", "q1");
    out.setRole("model.qoperator.onnx", OutputDirectory::kDeployRole);
    out.commit();
  }
  writeText(dir / "notes.txt", "the user's");
  fs::create_directories(dir / "mine");
  writeText(dir / "mine" / "x.txt", "also the user's");
  {  // A deploy into the same directory: replaces deploy files only.
    OutputDirectory out(dir.string(), OutputDirectory::kDeployRole, {OutputDirectory::kDeployRole});
    writeText(fs::path(out.staging()) / "deploy.json", "d2");
    out.commit();
  }
  EXPECT_EQ(entries(dir), (std::set<std::string>{"prepared.json", "deploy.json", "notes.txt",
                                                 "mine", ".qforge-output.json"}));
  EXPECT_EQ(readFile((dir / "mine" / "x.txt").string()), "also the user's");
  {  // Another quantize-like run: the old model and deploy files go, the user's files stay.
    OutputDirectory out(dir.string(), OutputDirectory::kModelRole, kBoth);
    writeText(fs::path(out.staging()) / "report.json", "r3");
    out.commit();
  }
  EXPECT_EQ(entries(dir),
            (std::set<std::string>{"report.json", "notes.txt", "mine", ".qforge-output.json"}));
  const auto roles = nlohmann::json::parse(readFile((dir / ".qforge-output.json").string()));
  EXPECT_EQ(roles["files"], nlohmann::json({{"report.json", "model"}}));
}

TEST(OutputDirectory, AFileWrittenInPlaceIsKept) {
  const fs::path dir = fs::path(testing::makeTempDir("outdir")) / "out";
  {
    OutputDirectory out(dir.string(), OutputDirectory::kModelRole, kBoth);
    writeText(fs::path(out.staging()) / "checkpoint.pt", "c1");
    out.commit();
  }
  OutputDirectory out(dir.string(), OutputDirectory::kModelRole, kBoth);
  writeText(dir / "checkpoint.pt", "c2");  // the training loop's, while the run goes on
  writeText(fs::path(out.staging()) / "report.json", "r2");
  out.keepWrittenInPlace("checkpoint.pt", OutputDirectory::kModelRole);
  out.commit();
  EXPECT_EQ(readFile((dir / "checkpoint.pt").string()), "c2");
  EXPECT_EQ(readFile((dir / "report.json").string()), "r2");
}

TEST(OutputDirectory, ASecondWriterIsLockedOutUntilTheFirstEnds) {
  const fs::path dir = fs::path(testing::makeTempDir("outdir")) / "out";
  {
    OutputDirectory first(dir.string(), OutputDirectory::kModelRole, kBoth);
    try {
      OutputDirectory second(dir.string(), OutputDirectory::kModelRole, kBoth);
      FAIL() << "a second writer was let in";
    } catch (const Error& e) {
      EXPECT_NE(
          std::string(e.what()).find("another qforge run (pid " + std::to_string(::getpid()) + ")"),
          std::string::npos)
          << e.what();
    }
  }
  OutputDirectory third(dir.string(), OutputDirectory::kModelRole, kBoth);  // free again
  EXPECT_TRUE(fs::is_directory(third.staging()));
}

TEST(OutputDirectory, WhatAKilledRunLeftBesideIsCleared) {
  const fs::path root = testing::makeTempDir("outdir");
  fs::create_directories(root / ".out.qforge-staging-999999" / "deep");
  writeText(root / ".out.qforge-staging-999999" / "deep" / "half.onnx", "half");
  fs::create_directories(root / ".other.qforge-staging-1");  // another directory's: left alone
  OutputDirectory out((root / "out").string(), OutputDirectory::kModelRole, kBoth);
  EXPECT_FALSE(fs::exists(root / ".out.qforge-staging-999999"));
  EXPECT_TRUE(fs::exists(root / ".other.qforge-staging-1"));
}

TEST(OutputDirectory, ASymlinkedDirectoryIsWrittenWhereItPoints) {
  const fs::path root = testing::makeTempDir("outdir");
  fs::create_directories(root / "real");
  writeText(root / "real" / "keep.txt", "k");
  fs::create_directory_symlink(root / "real", root / "link");
  {
    OutputDirectory out((root / "link").string(), OutputDirectory::kModelRole, kBoth);
    writeText(fs::path(out.staging()) / "a.txt", "a");
    EXPECT_EQ(out.finalPath(out.staging() + "/a.txt"), (root / "link" / "a.txt").string());
    out.commit();
  }
  EXPECT_TRUE(fs::is_symlink(root / "link"));
  EXPECT_EQ(entries(root / "real"),
            (std::set<std::string>{"a.txt", "keep.txt", ".qforge-output.json"}));
}

TEST(OutputDirectory, PermissionsOfTheOldDirectoryCarryOver) {
  const fs::path dir = fs::path(testing::makeTempDir("outdir")) / "out";
  fs::create_directories(dir);
  fs::permissions(dir, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
  OutputDirectory out(dir.string(), OutputDirectory::kModelRole, kBoth);
  out.commit();
  EXPECT_EQ(fs::status(dir).permissions(),
            fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec);
}

TEST(OutputDirectory, RefusesWhatCannotBeAnOutputDirectory) {
  const fs::path root = testing::makeTempDir("outdir");
  writeText(root / "file", "x");
  const auto refusal = [](const std::string& dir) -> std::string {
    try {
      OutputDirectory out(dir, OutputDirectory::kModelRole, kBoth);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(refusal((root / "file").string()).find("exists and is not a directory"),
            std::string::npos);
  EXPECT_NE(refusal("").find("no output directory given"), std::string::npos);
  EXPECT_NE(refusal("/").find("is the current directory or holds it"), std::string::npos);
  const fs::path before = fs::current_path();
  fs::current_path(root);
  const std::string here = refusal(".");
  const std::string above = refusal("..");
  fs::current_path(before);
  EXPECT_NE(here.find(".: is the current directory or holds it"), std::string::npos) << here;
  EXPECT_NE(above.find("is the current directory or holds it"), std::string::npos) << above;
}

}  // namespace
}  // namespace qforge
