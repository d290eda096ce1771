// The ONNX Runtime runner: tiny graphs run in the real onnxruntime-node and match closed-form
// values; batching matches one run; a missing node, a missing ORT install, a bad model and a
// misbehaving node process each give one documented line. Needs onnxruntime-node in
// $QFORGE_ORT_DIR or build/ort (scripts/install-ort.sh); without it these tests fail with the
// install command, they are not skipped.
#include "verify/ort_runner.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "core/files.h"
#include "ir/onnx_import.h"
#include "support/checks.h"
#include "support/onnx_builder.h"
#include "support/ort_dir.h"

namespace qforge::testing {
namespace {

using verify::OrtOptimization;
using verify::OrtRunner;
using verify::OrtRunnerOptions;

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;
constexpr int32_t kInt8 = onnx::TensorProto::INT8;

OrtRunner ortRunner(OrtRunnerOptions options = {}) {
  if (options.ort_dir.empty()) options.ort_dir = testOrtDir();
  return OrtRunner(options);
}

std::string saveModel(const OnnxBuilder& builder, const std::string& tag) {
  const std::string path = makeTempDir(tag) + "/model.onnx";
  builder.save(path);
  return path;
}

// Sets (or with nullptr unsets) an environment variable for one scope.
class EnvOverride {
 public:
  EnvOverride(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) saved_ = old;
    if (value) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~EnvOverride() {
    if (saved_) {
      setenv(name_.c_str(), saved_->c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_;
  std::optional<std::string> saved_;
};

// x + y over a dynamic batch dimension.
OnnxBuilder addModel() {
  OnnxBuilder b;
  b.input("x", kFloat, {-1, 3}).input("y", kFloat, {-1, 3}).output("z", kFloat, {-1, 3});
  b.node("Add", {"x", "y"}, {"z"});
  return b;
}

// A 3x3 all-ones kernel plus bias 0.5 over [N, 1, 4, 4]: each output is its window's sum + 0.5.
OnnxBuilder boxConvModel() {
  OnnxBuilder b;
  b.input("x", kFloat, {-1, 1, 4, 4}).output("y", kFloat, {-1, 1, 2, 2});
  b.initializer("w", at::ones({1, 1, 3, 3})).initializer("b", at::full({1}, 0.5));
  b.node("Conv", {"x", "w", "b"}, {"y"});
  return b;
}

at::Tensor boxConvExpected(const at::Tensor& x) {
  at::Tensor y = at::empty({x.size(0), 1, 2, 2});
  auto in = x.accessor<float, 4>();
  auto out = y.accessor<float, 4>();
  for (int64_t n = 0; n < x.size(0); ++n) {
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        float sum = 0.5f;
        for (int di = 0; di < 3; ++di) {
          for (int dj = 0; dj < 3; ++dj)
            sum += in[n][0][i + di][j + dj];
        }
        out[n][0][i][j] = sum;
      }
    }
  }
  return y;
}

TEST(OrtRunnerTest, AddMatchesClosedForm) {
  const std::string model = saveModel(addModel(), "ort-add");
  const at::Tensor x = at::arange(6, at::kFloat).reshape({2, 3});
  const at::Tensor y = at::full({2, 3}, 0.25);
  const TensorMap out = ortRunner().run(model, {{"x", x}, {"y", y}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(at::equal(out.at("z"), x + 0.25));
}

TEST(OrtRunnerTest, ConvMatchesWindowSums) {
  const std::string model = saveModel(boxConvModel(), "ort-conv");
  const at::Tensor x = at::arange(32, at::kFloat).reshape({2, 1, 4, 4});
  const at::Tensor y = ortRunner().run(model, {{"x", x}}).at("y");
  EXPECT_TRUE(at::equal(y, boxConvExpected(x))) << y;
}

TEST(OrtRunnerTest, QLinearConvInt8MatchesRequantizationFormula) {
  // y = saturate(round(x_s * (x - x_zp) * w_s * w / y_s) + y_zp) for a 1x1 conv, two channels.
  const float x_scale = 0.5f, w_scale = 0.25f, y_scale = 0.5f;
  const int x_zp = 1, y_zp = -3;
  const at::Tensor x = at::tensor({1, 2, 4, 121}, at::kChar).reshape({1, 1, 2, 2});
  const at::Tensor w = at::tensor({3, -5}, at::kChar).reshape({2, 1, 1, 1});
  OnnxBuilder b;
  b.input("x", kInt8, {1, 1, 2, 2}).output("y", kInt8, {1, 2, 2, 2});
  b.initializer("x_scale", at::scalar_tensor(x_scale))
      .initializer("x_zp", at::scalar_tensor(x_zp, at::kChar))
      .initializer("w", w)
      .initializer("w_scale", at::scalar_tensor(w_scale))
      .initializer("w_zp", at::scalar_tensor(0, at::kChar))
      .initializer("y_scale", at::scalar_tensor(y_scale))
      .initializer("y_zp", at::scalar_tensor(y_zp, at::kChar));
  b.node("QLinearConv", {"x", "x_scale", "x_zp", "w", "w_scale", "w_zp", "y_scale", "y_zp"}, {"y"});
  const at::Tensor y = ortRunner().run(saveModel(b, "ort-qlinearconv"), {{"x", x}}).at("y");
  ASSERT_EQ(y.scalar_type(), at::kChar);
  ASSERT_EQ(y.sizes(), (at::IntArrayRef{1, 2, 2, 2}));
  for (int c = 0; c < 2; ++c) {
    for (int i = 0; i < 4; ++i) {
      const int xv = x.flatten()[i].item<int>(), wv = w.flatten()[c].item<int>();
      const float real = x_scale * (xv - x_zp) * w_scale * wv;
      const int expected =
          std::clamp(static_cast<int>(std::nearbyint(real / y_scale)) + y_zp, -128, 127);
      EXPECT_EQ(y[0][c].flatten()[i].item<int>(), expected) << "channel " << c << " pixel " << i;
    }
  }
  EXPECT_EQ(y[0][1].flatten()[3].item<int>(), -128);  // the saturating case is in the data
}

TEST(OrtRunnerTest, QuantizeLinearGivesInt8HalfToEven) {
  OnnxBuilder b;
  b.input("x", kFloat, {7}).output("q", kInt8, {7});
  b.initializer("scale", at::scalar_tensor(0.5)).initializer("zp", at::scalar_tensor(0, at::kChar));
  b.node("QuantizeLinear", {"x", "scale", "zp"}, {"q"});
  const at::Tensor x = at::tensor({-300.f, -0.65f, -0.25f, 0.25f, 0.75f, 1.25f, 100.f});
  const at::Tensor q = ortRunner().run(saveModel(b, "ort-quantize"), {{"x", x}}).at("q");
  ASSERT_EQ(q.scalar_type(), at::kChar);
  // x / 0.5 = -600, -1.3, -0.5, 0.5, 1.5, 2.5, 200: ties go to even, the ends saturate.
  EXPECT_TRUE(at::equal(q, at::tensor({-128, -1, 0, 0, 2, 2, 127}, at::kChar))) << q;
}

TEST(OrtRunnerTest, EveryNpyTypeCrossesUnchanged) {
  const std::vector<std::pair<at::ScalarType, int32_t>> types = {
      {at::kFloat, onnx::TensorProto::FLOAT}, {at::kDouble, onnx::TensorProto::DOUBLE},
      {at::kChar, onnx::TensorProto::INT8},   {at::kByte, onnx::TensorProto::UINT8},
      {at::kInt, onnx::TensorProto::INT32},   {at::kLong, onnx::TensorProto::INT64},
      {at::kBool, onnx::TensorProto::BOOL}};
  OnnxBuilder b;
  TensorMap feeds;
  for (size_t i = 0; i < types.size(); ++i) {
    const std::string in = "in" + std::to_string(i), out = "out" + std::to_string(i);
    b.input(in, types[i].second, {2, 3}).output(out, types[i].second, {2, 3});
    b.node("Identity", {in}, {out});
    feeds[in] = (at::arange(6).reshape({2, 3}) * 37 - 100).to(types[i].first);
  }
  // int64 beyond 2^32 and 2^53 catches a reader that goes through doubles or int32.
  const std::vector<int64_t> wide = {(int64_t{1} << 40) + 1, -(int64_t{1} << 60) - 3, 0, 1, -1, 7};
  feeds["in5"] = at::tensor(wide).reshape({2, 3});
  const TensorMap out = ortRunner().run(saveModel(b, "ort-types"), feeds);
  for (size_t i = 0; i < types.size(); ++i) {
    const at::Tensor& got = out.at("out" + std::to_string(i));
    EXPECT_EQ(got.scalar_type(), types[i].first) << i;
    EXPECT_TRUE(at::equal(got, feeds.at("in" + std::to_string(i)))) << i << ": " << got;
  }
}

TEST(OrtRunnerTest, BatchedRunsEqualOneRun) {
  const std::string model = saveModel(boxConvModel(), "ort-batch");
  const at::Tensor x = at::randn({5, 1, 4, 4});
  OrtRunnerOptions batched;
  batched.batch = 2;  // 2 + 2 + 1 rows
  const at::Tensor whole = ortRunner().run(model, {{"x", x}}).at("y");
  const at::Tensor parts = ortRunner(batched).run(model, {{"x", x}}).at("y");
  ASSERT_EQ(parts.sizes(), (at::IntArrayRef{5, 1, 2, 2}));
  EXPECT_TRUE(at::equal(parts, whole));
  EXPECT_TRUE(at::allclose(whole, boxConvExpected(x), 1e-5, 1e-5));
}

TEST(OrtRunnerTest, ZooResNetInBatchesMatchesTheExecutor) {
  const std::string model = std::string(QFORGE_SOURCE_DIR) + "/models/zoo/resnet.onnx";
  const Graph graph = importOnnxFile(model);
  const std::string input = graph.inputs().at(0)->name();
  const std::string output = graph.outputs().at(0)->name();
  const at::Tensor x = at::rand({7, 1, 28, 28});
  OrtRunnerOptions options;
  options.batch = 3;
  const at::Tensor ort = ortRunner(options).run(model, {{input, x}}).at(output);
  const at::Tensor ours = Executor(graph).run({{input, x}}).at(output);
  ASSERT_EQ(ort.sizes(), ours.sizes());
  EXPECT_LT((ort - ours).abs().max().item<float>(), 1e-4);
}

TEST(OrtRunnerTest, ReturnsOnlyTheRequestedOutputs) {
  OnnxBuilder b = addModel();
  b.output("w", kFloat, {-1, 3});
  b.node("Mul", {"x", "y"}, {"w"});
  const at::Tensor x = at::arange(6, at::kFloat).reshape({2, 3});
  const TensorMap out = ortRunner().run(saveModel(b, "ort-outputs"), {{"x", x}, {"y", x}}, {"w"});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(at::equal(out.at("w"), x * x));
}

TEST(OrtRunnerTest, OptimizationLevelsAndThreadsGiveTheSameResult) {
  const std::string model = saveModel(boxConvModel(), "ort-levels");
  const at::Tensor x = at::randn({3, 1, 4, 4});
  const at::Tensor reference = ortRunner().run(model, {{"x", x}}).at("y");
  for (auto level :
       {OrtOptimization::Disabled, OrtOptimization::Basic, OrtOptimization::Extended}) {
    OrtRunnerOptions options;
    options.optimization = level;
    options.threads = 1;
    EXPECT_TRUE(at::allclose(ortRunner(options).run(model, {{"x", x}}).at("y"), reference))
        << verify::toString(level);
  }
  EXPECT_EQ(verify::parseOrtOptimization("extended"), OrtOptimization::Extended);
  EXPECT_NE(errorOf([] { verify::parseOrtOptimization("max"); }).find("disabled, basic"),
            std::string::npos);
}

// ---- errors ----

TEST(OrtRunnerTest, MissingNodeSaysHowToInstallIt) {
  const std::string empty_dir = makeTempDir("ort-no-node");
  {
    EnvOverride path("PATH", empty_dir.c_str());
    EXPECT_EQ(errorOf([] { ortRunner(); }),
              "Node.js not found (needed to run ONNX Runtime): apt install nodejs npm");
  }
  OrtRunnerOptions options;
  options.node = empty_dir + "/node";
  EXPECT_NE(errorOf([&] { ortRunner(options); }).find("apt install nodejs npm"), std::string::npos);
}

TEST(OrtRunnerTest, MissingOrtSaysTheInstallCommand) {
  OrtRunnerOptions options;
  options.ort_dir = makeTempDir("ort-empty");
  const std::string message = errorOf([&] { ortRunner(options); });
  EXPECT_NE(message.find("onnxruntime-node not found in '" + options.ort_dir + "'"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("npm install --ignore-scripts --prefix " + options.ort_dir +
                         " onnxruntime-node@" + verify::kOnnxRuntimeNodeVersion),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

TEST(OrtRunnerTest, ModelOrtRefusesGivesItsMessageAndThePath) {
  const std::string garbage = makeTempDir("ort-garbage") + "/broken.onnx";
  writeFileAtomically(garbage, "this is not a protobuf");
  std::string message = errorOf([&] { ortRunner().run(garbage, {}); });
  EXPECT_NE(message.find(garbage), std::string::npos) << message;
  EXPECT_NE(message.find("Protobuf parsing failed"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);

  OnnxBuilder b;
  b.input("x", kFloat, {2}).output("y", kFloat, {2});
  b.node("NoSuchOp", {"x"}, {"y"});
  const std::string unknown_op = saveModel(b, "ort-unknown-op");
  message = errorOf([&] { ortRunner().run(unknown_op, {{"x", at::ones({2})}}); });
  EXPECT_NE(message.find(unknown_op), std::string::npos) << message;
  EXPECT_NE(message.find("NoSuchOp"), std::string::npos) << message;

  message = errorOf([] { ortRunner().run("/nonexistent/model.onnx", {}); });
  EXPECT_EQ(message, "'/nonexistent/model.onnx': no such model file");
}

TEST(OrtRunnerTest, FeedsTheModelDoesNotHaveAreNamed) {
  const std::string model = saveModel(addModel(), "ort-bad-feed");
  const at::Tensor x = at::ones({2, 3});
  const std::string message = errorOf([&] { ortRunner().run(model, {{"x", x}, {"nope", x}}); });
  EXPECT_NE(message.find("has no input 'nope'"), std::string::npos) << message;
  EXPECT_NE(message.find(model), std::string::npos) << message;
}

// A stand-in for node that misbehaves, with a stub ORT directory so only the process handling
// is under test.
OrtRunnerOptions fakeNode(const std::string& tag, const std::string& script_body) {
  const std::string dir = makeTempDir(tag);
  const std::string node = dir + "/fake-node";
  writeFileAtomically(node, "#!/bin/sh\n" + script_body + "\n");
  ::chmod(node.c_str(), 0755);
  std::filesystem::create_directories(dir + "/ort/node_modules/onnxruntime-node");
  writeFileAtomically(dir + "/ort/node_modules/onnxruntime-node/package.json", "{}");
  OrtRunnerOptions options;
  options.node = node;
  options.ort_dir = dir + "/ort";
  return options;
}

TEST(OrtRunnerTest, NodeProcessFailuresAreOneLineErrors) {
  const std::string model = saveModel(addModel(), "ort-fake-node");

  OrtRunnerOptions slow = fakeNode("ort-slow", "exec sleep 30");
  slow.timeout_seconds = 0.5;
  const auto start = std::chrono::steady_clock::now();
  std::string message = errorOf([&] { OrtRunner(slow).run(model, {}); });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_NE(message.find("did not finish within"), std::string::npos) << message;
  EXPECT_NE(message.find(model), std::string::npos) << message;

  OrtRunnerOptions lingering = fakeNode("ort-lingering", "exec 2>&-; exec sleep 30");
  lingering.timeout_seconds = 0.5;
  message = errorOf([&] { OrtRunner(lingering).run(model, {}); });
  EXPECT_NE(message.find("did not finish within"), std::string::npos) << message;

  message = errorOf([&] { OrtRunner(fakeNode("ort-killed", "kill -9 $$")).run(model, {}); });
  EXPECT_NE(message.find("killed by signal 9"), std::string::npos) << message;

  message = errorOf([&] { OrtRunner(fakeNode("ort-exit", "exit 3")).run(model, {}); });
  EXPECT_NE(message.find("node exited with code 3 running ONNX Runtime on '" + model + "'"),
            std::string::npos)
      << message;

  message = errorOf([&] {
    OrtRunner(fakeNode("ort-says", "echo warming up >&2; echo 'error: it broke' >&2; exit 1"))
        .run(model, {});
  });
  EXPECT_EQ(message, "it broke");
}

// ---- set-up ----

TEST(OrtRunnerTest, OrtDirComesFromOptionThenEnvThenCache) {
  EnvOverride ort("QFORGE_ORT_DIR", "/env/ort");
  EnvOverride xdg("XDG_CACHE_HOME", "/xdg");
  EnvOverride home("HOME", "/home/someone");
  EXPECT_EQ(verify::resolveOrtDir("/explicit"), "/explicit");
  EXPECT_EQ(verify::resolveOrtDir(), "/env/ort");
  unsetenv("QFORGE_ORT_DIR");
  EXPECT_EQ(verify::resolveOrtDir(), "/xdg/qforge/ort");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(verify::resolveOrtDir(), "/home/someone/.cache/qforge/ort");
}

TEST(OrtRunnerTest, InstallCommandQuotesOnlyWhenTheShellNeedsIt) {
  const std::string pinned = std::string(" onnxruntime-node@") + verify::kOnnxRuntimeNodeVersion;
  EXPECT_EQ(verify::ortInstallCommand("/home/me/.cache/qforge/ort"),
            "npm install --ignore-scripts --prefix /home/me/.cache/qforge/ort" + pinned);
  EXPECT_EQ(verify::ortInstallCommand("/my dir/it's"),
            "npm install --ignore-scripts --prefix '/my dir/it'\\''s'" + pinned);
}

TEST(OrtRunnerTest, PinnedVersionAndEmbeddedScriptMatchTheRepo) {
  const std::string tools = std::string(QFORGE_SOURCE_DIR) + "/tools/ort/";
  const auto package = nlohmann::json::parse(readFile(tools + "package.json"));
  EXPECT_EQ(package["dependencies"]["onnxruntime-node"], verify::kOnnxRuntimeNodeVersion);
  EXPECT_EQ(std::string(verify::ortRunnerScript()), readFile(tools + "run_model.js"));
}

}  // namespace
}  // namespace qforge::testing
