// Runs the qforge binary as a user would and checks exit codes and what it prints.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <fstream>

#include "support/onnx_builder.h"

namespace qforge {
namespace {

struct Result {
  int exit_code;
  std::string out;  // stdout and stderr together, unless split
};

Result runCli(const std::string& args, const std::string& env = "") {
  const std::string command = env + " " + QFORGE_CLI + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0)
    out.append(buf.data(), n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string unknownOpModel() {
  testing::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {-1, 3}).output("y", onnx::TensorProto::FLOAT, {-1, 3});
  b.initializer("w", at::ones({3}));
  b.node("Frobnicate", {"x", "w"}, {"y"}, "frob");
  const std::string path = testing::makeTempDir("cli") + "/model.onnx";
  b.save(path);
  return path;
}

size_t lineCount(const std::string& s) {
  return static_cast<size_t>(std::count(s.begin(), s.end(), '\n'));
}

TEST(CliTest, VersionAndHelp) {
  Result v = runCli("--version");
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.out.rfind("qforge ", 0), 0u) << v.out;
  Result h = runCli("--help");
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.out.find("inspect"), std::string::npos);
  EXPECT_NE(h.out.find("run"), std::string::npos);
}

TEST(CliTest, InspectJsonDescribesTheModel) {
  Result r = runCli("inspect --json " + unknownOpModel());
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["nodes"], 1);
  EXPECT_EQ(j["parameters"], 3);
  EXPECT_EQ(j["opsets"][""], 13);
  EXPECT_EQ(j["inputs"][0]["shape"], nlohmann::json::parse(R"(["N", 3])"));
  ASSERT_EQ(j["unsupported"].size(), 1u);
  EXPECT_EQ(j["unsupported"][0], "Frobnicate (opset 13): frob");
}

TEST(CliTest, RunningAnUnsupportedOpIsOneLineNamingTheNode) {
  Result r = runCli("run " + unknownOpModel());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(lineCount(r.out), 1u) << r.out;
  EXPECT_NE(r.out.find("node 'frob' (Frobnicate)"), std::string::npos) << r.out;
}

TEST(CliTest, BadFilesAreOneLineAndExitTwo) {
  const std::string dir = testing::makeTempDir("clibad");
  std::ofstream(dir + "/junk.onnx") << "not a model";
  for (const std::string& path : {dir + "/junk.onnx", dir + "/missing.onnx", dir}) {
    Result r = runCli("inspect " + path);
    EXPECT_EQ(r.exit_code, 2) << path;
    EXPECT_EQ(lineCount(r.out), 1u) << r.out;
    EXPECT_EQ(r.out.rfind("qforge: error: ", 0), 0u) << r.out;
  }
}

TEST(CliTest, BadThreadCountIsRefused) {
  Result r = runCli("inspect " + unknownOpModel(), "QFORGE_NUM_THREADS=lots");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("QFORGE_NUM_THREADS"), std::string::npos);
}

std::string bundled(const std::string& file) {
  return std::string(QFORGE_SOURCE_DIR) + "/models/" + file;
}

TEST(CliTest, RunMatchesTheBundledReferenceOutput) {
  Result r = runCli("run --json " + bundled("tiny_cnn.onnx") +
                    " --input image=" + bundled("tiny_cnn.input.pb") +
                    " --expect logits=" + bundled("tiny_cnn.output.pb"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["batch"], 4);
  EXPECT_EQ(j["outputs"][0]["shape"], nlohmann::json::parse("[4, 10]"));
  EXPECT_TRUE(j["expect"][0]["within_tolerance"].get<bool>());
  EXPECT_LT(j["expect"][0]["max_abs_diff"].get<double>(), 1e-4);
}

TEST(CliTest, RunFailsWhenOutputDiffersFromTheReference) {
  // The reference logits against different images: must be reported as outside tolerance.
  Result r = runCli("run " + bundled("tiny_cnn.onnx") +
                    " --batch 4 --expect logits=" + bundled("tiny_cnn.output.pb"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("OUTSIDE tolerance"), std::string::npos) << r.out;
}

TEST(CliTest, RunRejectsBadInputSpecs) {
  for (const std::string& spec : std::vector<std::string>{
           "--input image", "--input nosuch=" + bundled("tiny_cnn.input.pb"),
           "--expect image=" + bundled("tiny_cnn.input.pb"), "--input image=/nonexistent.pb"}) {
    Result r = runCli("run " + bundled("tiny_cnn.onnx") + " " + spec);
    EXPECT_EQ(r.exit_code, 2) << spec << ": " << r.out;
    EXPECT_EQ(lineCount(r.out), 1u) << r.out;
  }
}

TEST(CliTest, RunWithWrongInputShapeNamesTheNode) {
  Result r =
      runCli("run " + bundled("tiny_cnn.onnx") + " --input image=" + bundled("tiny_cnn.output.pb"));
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("node '"), std::string::npos) << r.out;
  EXPECT_EQ(lineCount(r.out), 1u) << r.out;
}

TEST(CliTest, UsageErrorsExitNonZero) {
  EXPECT_NE(runCli("").exit_code, 0);
  EXPECT_NE(runCli("inspect").exit_code, 0);
  EXPECT_NE(runCli("frobnicate").exit_code, 0);
}

}  // namespace
}  // namespace qforge
