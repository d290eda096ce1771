// Runs the qforge binary as a user would and checks exit codes and what it prints.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <algorithm>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <fstream>

#include "core/utf8.h"
#include "support/cli_runner.h"
#include "support/onnx_builder.h"

namespace qforge {
namespace {

using testing::lineCount;
using testing::runCli;
using Result = testing::CliResult;

std::string unknownOpModel() {
  testing::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {-1, 3}).output("y", onnx::TensorProto::FLOAT, {-1, 3});
  b.initializer("w", at::ones({3}));
  b.node("Frobnicate", {"x", "w"}, {"y"}, "frob");
  const std::string path = testing::makeTempDir("cli") + "/model.onnx";
  b.save(path);
  return path;
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

// Names are UTF-8 (checked at import) but may hold control characters: a node named with a
// terminal escape, an op type with a newline. inspect shows them escaped, the dump too.
TEST(CliTest, InspectShowsNamesFromTheFileEscaped) {
  testing::OnnxBuilder b;
  b.input("x\x1b[2J", onnx::TensorProto::FLOAT, {-1, 3});
  b.output("y", onnx::TensorProto::FLOAT, {-1, 3});
  b.node("Frob\nnicate", {"x\x1b[2J"}, {"y"}, "n\x07ode");
  const std::string path = testing::makeTempDir("cli") + "/escapes.onnx";
  b.save(path);
  Result r = runCli("inspect --dump " + path);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\x07'), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("input       x\\x1B[2J float32[N,3]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" Frob\\x0Anicatex1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  Frob\\x0Anicate (opset 13): n\\x07ode\n"), std::string::npos) << r.out;
}

TEST(CliTest, RunShowsOutputNamesEscaped) {
  testing::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {1, 3});
  b.output("y\x1b[2J", onnx::TensorProto::FLOAT, {1, 3});
  b.node("Relu", {"x"}, {"y\x1b[2J"}, "relu");
  const std::string path = testing::makeTempDir("cli") + "/escaped_output.onnx";
  b.save(path);
  Result r = runCli("run " + path + " --iters 1 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("output   y\\x1B[2J [1,3]"), std::string::npos) << r.out;
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

// Each broken model the foundation must refuse, as a user meets it: one line, exit code 2, and
// the line names what is wrong.
TEST(CliTest, EveryBrokenModelIsOneLineNamingTheProblem) {
  const std::string dir = testing::makeTempDir("clibroken");
  auto base = [] {
    testing::OnnxBuilder b;
    b.input("x", onnx::TensorProto::FLOAT, {2}).output("y", onnx::TensorProto::FLOAT, {2});
    return b;
  };
  struct Case {
    std::string name, expect;
    testing::OnnxBuilder model;
  };
  std::vector<Case> cases;
  {
    testing::OnnxBuilder b = base();
    b.node("Mul", {"x", "w"}, {"y"}, "scale");  // w is never defined
    cases.push_back({"missing_initializer", "reads 'w'", b});
  }
  {
    testing::OnnxBuilder b = base();
    b.node("Add", {"x", "y"}, {"t"}, "p");
    b.node("Neg", {"t"}, {"y"}, "q");
    cases.push_back({"cycle", "cycle", b});
  }
  {
    testing::OnnxBuilder b = base();
    b.node("Neg", {"x"}, {"y"}, "a");
    b.node("Abs", {"x"}, {"y"}, "b");
    cases.push_back({"duplicate", "already defined", b});
  }
  {
    testing::OnnxBuilder b = base();
    auto* t = b.model().mutable_graph()->add_initializer();
    t->set_name("w");
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(2);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* e = t->add_external_data();
    e->set_key("location");
    e->set_value("../../etc/passwd");
    b.node("Mul", {"x", "w"}, {"y"}, "scale");
    cases.push_back({"escape", "outside the model's directory", b});
  }
  {
    // A name that is not UTF-8 (a mutated file): one line, valid UTF-8, the name escaped.
    testing::OnnxBuilder b = base();
    b.node("Neg", {"x"}, {"y"}, "neg\xFF\x1B]0;pwned\x07");
    cases.push_back(
        {"not_utf8", "node 0's name 'neg\\xFF\\x1B]0;pwned\\x07' is not UTF-8 text", b});
  }
  for (auto& c : cases) {
    const std::string path = dir + "/" + c.name + ".onnx";
    c.model.save(path);
    Result r = runCli("inspect " + path);
    EXPECT_EQ(r.exit_code, 2) << c.name << ": " << r.out;
    EXPECT_EQ(lineCount(r.out), 1u) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find(path), std::string::npos) << c.name << ": " << r.out;
    EXPECT_EQ(invalidUtf8Offset(r.out), std::string_view::npos) << c.name << ": " << r.out;
  }
  // A truncated copy of a real model.
  const std::string bytes = cases[0].model.bytes();
  const std::string truncated = dir + "/truncated.onnx";
  std::ofstream(truncated, std::ios::binary).write(bytes.data(), 20);
  Result r = runCli("run " + truncated);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(lineCount(r.out), 1u) << r.out;
  EXPECT_NE(r.out.find("truncated or not ONNX"), std::string::npos) << r.out;
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

TEST(CliTest, RunProfileNamesEachNodeThatRanSlowestFirst) {
  Result r = runCli("run --json --profile --iters 3 --warmup 0 " + bundled("tiny_cnn.onnx"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& nodes = j["profile_nodes"];
  // 18 nodes, of which the three BatchNormalizations and the two Relus right after them run
  // inside their convolutions' kernels.
  ASSERT_EQ(nodes.size(), 13u) << nodes.dump();
  double by_node = 0, by_type = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i > 0) {
      EXPECT_GE(nodes[i - 1]["ms_per_run"], nodes[i]["ms_per_run"]);
    }
    EXPECT_EQ(nodes[i]["node"].get<std::string>().rfind("node '", 0), 0u) << nodes[i];
    by_node += nodes[i]["ms_per_run"].get<double>();
  }
  for (const auto& row : j["profile"])
    by_type += row["ms_per_run"].get<double>();
  EXPECT_NEAR(by_node, by_type, 1e-9 + 1e-9 * by_type);
  EXPECT_NE(nodes.dump().find("/stem/stem.0/Conv"), std::string::npos);
  // The text lists the ten slowest.
  Result text = runCli("run --profile --iters 1 --warmup 0 " + bundled("tiny_cnn.onnx"));
  ASSERT_EQ(text.exit_code, 0) << text.out;
  const std::string listed = text.out.substr(text.out.find("slowest"));
  EXPECT_EQ(std::count(listed.begin(), listed.end(), '\n'), 11) << listed;
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

// An image model that leaves its height and width open (as Paddle2ONNX exports do): its sample
// inputs take 1 there, which a 2x2 pooling cannot take; the failure says to give them.
TEST(CliTest, RunTakesOpenDimsFromShapeAndSaysSoWhenTheyAreMissing) {
  testing::OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {-1, 3, -1, -1});
  b.output("y", onnx::TensorProto::FLOAT, {-1, 3, -1, -1});
  onnx::NodeProto& pool = b.node("MaxPool", {"x"}, {"y"}, "pool");
  testing::addIntsAttribute(pool, "kernel_shape", {2, 2});
  testing::addIntsAttribute(pool, "strides", {2, 2});
  const std::string path = testing::makeTempDir("cli") + "/open_dims.onnx";
  b.save(path);

  Result missing = runCli("run " + path + " --iters 1");
  EXPECT_EQ(missing.exit_code, 2) << missing.out;
  EXPECT_EQ(lineCount(missing.out), 1u) << missing.out;
  EXPECT_NE(missing.out.find("'pool'"), std::string::npos) << missing.out;
  EXPECT_NE(missing.out.find("open dims to 1: x [?,3,?,?]; give them with --shape"),
            std::string::npos)
      << missing.out;

  Result given = runCli("run --json " + path + " --iters 1 --batch 2 --shape x=3x8x6");
  ASSERT_EQ(given.exit_code, 0) << given.out;
  EXPECT_EQ(nlohmann::json::parse(given.out)["outputs"][0]["shape"],
            nlohmann::json::parse("[2, 3, 4, 3]"));

  for (const char* spec : {"x", "x=3x8", "x=3xax6", "x=4x8x8", "nope=3x8x8"}) {
    Result bad = runCli("run " + path + " --iters 1 --shape " + std::string(spec));
    EXPECT_EQ(bad.exit_code, 2) << spec << ": " << bad.out;
    EXPECT_EQ(lineCount(bad.out), 1u) << bad.out;
    EXPECT_NE(bad.out.find("--shape"), std::string::npos) << bad.out;
  }
}

// `run --backend` times the model prepared for a backend. With observers on (calibration) the
// outputs are the float model's (BatchNorm folded: equal to rounding); quantizing moves them by
// the quantization noise, a few percent of the logits at 8 bits, and never to nothing.
TEST(CliTest, RunPreparedForABackendInCalibrationAndQuantizedModes) {
  const std::string common = "run --json " + bundled("tiny_cnn.onnx") +
                             " --input image=" + bundled("tiny_cnn.input.pb") +
                             " --expect logits=" + bundled("tiny_cnn.output.pb");
  Result calibration = runCli(common + " --backend TensorRT --mode calibration");
  ASSERT_EQ(calibration.exit_code, 0) << calibration.out;
  nlohmann::json c = nlohmann::json::parse(calibration.out);
  EXPECT_EQ(c["backend"], "TensorRT");
  EXPECT_EQ(c["mode"], "calibration");
  EXPECT_GT(c["quantizers"].get<int>(), 2);
  EXPECT_LT(c["expect"][0]["max_abs_diff"].get<double>(), 1e-4);

  Result quantized = runCli(common + " --backend TensorRT --mode quantized --atol 1e-9 --rtol 0");
  ASSERT_EQ(quantized.exit_code, 1) << quantized.out;  // outside a zero tolerance: it moved
  nlohmann::json q = nlohmann::json::parse(quantized.out);
  EXPECT_EQ(q["mode"], "quantized");
  const double moved = q["expect"][0]["max_abs_diff"].get<double>();
  const double scale = q["outputs"][0]["abs_sum"].get<double>() / 40.0;  // mean |logit|, 4 x 10
  EXPECT_GT(moved, 1e-5);
  EXPECT_LT(moved, 0.2 * scale) << "mean |logit| " << scale;
}

TEST(CliTest, RunRefusesABadModeAndABackendWithOrtArithmetic) {
  for (const std::string args :
       {"--backend TensorRT --mode fast", "--backend TensorRT --arithmetic ort"}) {
    Result r = runCli("run " + bundled("tiny_cnn.onnx") + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.out;
    EXPECT_EQ(lineCount(r.out), 1u) << r.out;
  }
}

// A mistyped command is one line on stderr naming it and the commands, exit 2; CLI11 alone
// called it a missing subcommand (exit 106) and took `analyse --help` for the top-level help.
TEST(CliTest, AnUnknownCommandIsOneLineNamingTheCommands) {
  const std::string commands =
      "commands: inspect, run, eval, quantize, qat, deploy, verify, analyze, convert, help, "
      "completion; "
      "see `qforge help`\n";
  for (const std::string args : {"frobnicate", "analyse --help", "frobnicate model.onnx"}) {
    const testing::CliStreams r = testing::runCliStreams(args);
    const std::string word = args.substr(0, args.find(' '));
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.out, "") << args;
    EXPECT_EQ(r.err, "qforge: error: unknown command '" + word + "'; " + commands) << args;
  }
  const testing::CliStreams none = testing::runCliStreams("");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_EQ(none.err, "qforge: error: no command given; " + commands);
  // What stays CLI11's: the top-level flags.
  EXPECT_EQ(runCli("--help").exit_code, 0);
  EXPECT_EQ(runCli("--version").exit_code, 0);
}

TEST(CliTest, UsageErrorsExitNonZero) {
  EXPECT_NE(runCli("").exit_code, 0);
  EXPECT_NE(runCli("inspect").exit_code, 0);
  EXPECT_NE(runCli("frobnicate").exit_code, 0);
}

}  // namespace
}  // namespace qforge
