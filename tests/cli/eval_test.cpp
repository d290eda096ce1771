// `qforge eval` run as a user would, on models and data whose scores are known by hand.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "data/data_test_files.h"
#include "data/npy.h"
#include "support/cli_runner.h"
#include "support/onnx_builder.h"

namespace qforge {
namespace {

using testing::lineCount;
using testing::runCli;
using Result = testing::CliResult;

// y = x * scale, for inputs [N, dims...]: logits = the sample itself (scale 1), or a dimmed
// image (scale 0.5).
std::string scaleModel(const std::string& dir, const std::vector<int64_t>& dims, float scale) {
  testing::OnnxBuilder b;
  std::vector<int64_t> shape = {-1};
  shape.insert(shape.end(), dims.begin(), dims.end());
  b.input("x", onnx::TensorProto::FLOAT, shape).output("y", onnx::TensorProto::FLOAT, shape);
  b.initializer("s", at::full({1}, scale));
  b.node("Mul", {"x", "s"}, {"y"}, "scale");
  const std::string path = dir + "/scale.onnx";
  b.save(path);
  return path;
}

void writeNpy(const std::string& path, const at::Tensor& t) {
  data::NpyWriter w(path, t.scalar_type(), t.sizes().vec());
  w.append(t);
  w.close();
}

TEST(EvalCliTest, TopOneAndTopFiveCountedByHand) {
  const std::string dir = testing::makeTempDir("evaltop");
  // 6 classes; logits are the samples themselves.
  const std::vector<float> logits = {
      9, 1, 2, 3, 4, 5,  // argmax 0; label 0: top-1 hit
      0, 1, 2, 3, 4, 5,  // argmax 5; label 0: top-5 miss (rank 6)
      0, 9, 2, 3, 4, 5,  // argmax 1; label 2: top-5 hit
      5, 4, 3, 2, 1, 0,  // argmax 0; label 4: top-5 hit
  };
  at::Tensor x = at::tensor(logits).reshape({4, 6});
  writeNpy(dir + "/x.npy", x);
  writeNpy(dir + "/y.npy", at::tensor(std::vector<int64_t>{0, 0, 2, 4}));
  Result r = runCli("eval " + scaleModel(dir, {6}, 1) + " --data " + dir + "/x.npy --labels " +
                    dir + "/y.npy --batch 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["metric"], "top1");
  EXPECT_EQ(j["samples"], 4);
  EXPECT_EQ(j["top1_correct"], 1);
  EXPECT_EQ(j["top5_correct"], 3);
  EXPECT_DOUBLE_EQ(j["top1"].get<double>(), 0.25);
  EXPECT_GT(j["images_per_second"].get<double>(), 0);

  Result text = runCli("eval " + scaleModel(dir, {6}, 1) + " --data npy:" + dir +
                       "/x.npy --labels " + dir + "/y.npy");
  ASSERT_EQ(text.exit_code, 0) << text.out;
  EXPECT_NE(text.out.find("top-1    25.00%  (1 / 4)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("top-5    75.00%  (3 / 4)"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find('\r'), std::string::npos) << "progress bar drawn into a pipe";
}

TEST(EvalCliTest, FashionMnistWithAConstantClassifier) {
  // Logits = bias [0.9, 0.8, ..., 0.0] whatever the image: always class 0 (1,000 of the 10,000
  // test images), top-5 always classes 0-4 (5,000).
  const std::string dir = testing::makeTempDir("evalfm");
  testing::OnnxBuilder b;
  b.input("image", onnx::TensorProto::FLOAT, {-1, 1, 28, 28})
      .output("logits", onnx::TensorProto::FLOAT, {-1, 10});
  b.initializer("w", at::zeros({784, 10}));
  b.initializer("b", at::linspace(0.9, 0.0, 10));
  b.node("Flatten", {"image"}, {"flat"}, "flatten");
  b.node("MatMul", {"flat", "w"}, {"mm"}, "matmul");
  b.node("Add", {"mm", "b"}, {"logits"}, "add");
  b.save(dir + "/const.onnx");
  Result r = runCli("eval " + dir + "/const.onnx --data fashion-mnist:test --batch 500 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["samples"], 10000);
  EXPECT_EQ(j["top1_correct"], 1000);
  EXPECT_EQ(j["top5_correct"], 5000);
  EXPECT_EQ(j["data"], "fashion-mnist:test");

  Result limited = runCli("eval " + dir + "/const.onnx --limit 100 --shuffle 3 --json");
  ASSERT_EQ(limited.exit_code, 0) << limited.out;
  EXPECT_EQ(nlohmann::json::parse(limited.out)["samples"], 100);

  Result wrong_shape = runCli("eval " + dir + "/const.onnx --data fashion-mnist:test --resize 32");
  EXPECT_EQ(wrong_shape.exit_code, 2) << wrong_shape.out;
  EXPECT_EQ(lineCount(wrong_shape.out), 1u) << wrong_shape.out;
  EXPECT_NE(wrong_shape.out.find("t10k-images-idx3-ubyte.gz' image 0"), std::string::npos)
      << wrong_shape.out;
  EXPECT_NE(wrong_shape.out.find("model input 'image' [1,28,28]"), std::string::npos)
      << wrong_shape.out;
}

TEST(EvalCliTest, PsnrAndDumpedOutputs) {
  const std::string dir = testing::makeTempDir("evalpsnr");
  // Two unlabelled 1x2x2 images of constant 0.4 and 0.8; the model halves them, so the error is
  // 0.2 and 0.4: MSE 0.04 and 0.16, PSNR 10 log10(1/0.04) = 13.979 and 7.959 dB.
  writeNpy(dir + "/imgs.npy",
           at::cat({at::full({1, 1, 2, 2}, 0.4f), at::full({1, 1, 2, 2}, 0.8f)}));
  Result r = runCli("eval " + scaleModel(dir, {1, 2, 2}, 0.5f) + " --data " + dir +
                    "/imgs.npy --json --dump-outputs " + dir + "/out.npy");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["metric"], "psnr");
  EXPECT_NEAR(j["mse"].get<double>(), (0.04 + 0.16) / 2, 1e-7);
  EXPECT_NEAR(j["psnr_db"].get<double>(), (13.9794001 + 7.9588002) / 2, 1e-5);
  data::NpyFile dumped(dir + "/out.npy");
  EXPECT_EQ(dumped.shape(), (std::vector<int64_t>{2, 1, 2, 2}));
  at::Tensor out = dumped.readAll();
  EXPECT_NEAR(out[0][0][1][1].item<float>(), 0.2f, 1e-7);
  EXPECT_NEAR(out[1][0][0][0].item<float>(), 0.4f, 1e-7);
}

TEST(EvalCliTest, NoiseIsScoredAgainstTheCleanSample) {
  // An identity model on noisy inputs: its PSNR is the noisy input's, and its MSE is close to
  // sigma^2 (2 x 1 x 28 x 28 = 1,568 noise draws: 0.01 +- 4%).
  const std::string dir = testing::makeTempDir("evalnoise");
  writeNpy(dir + "/clean.npy", at::full({2, 1, 28, 28}, 0.5f));
  Result r = runCli("eval " + scaleModel(dir, {1, 28, 28}, 1) + " --data " + dir +
                    "/clean.npy --noise 0.1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["mse"].get<double>(), 0.01, 0.0015);
  EXPECT_NEAR(j["psnr_db"].get<double>(), j["input_psnr_db"].get<double>(), 1e-9);
  EXPECT_NEAR(j["psnr_db"].get<double>(), 20.0, 0.7);  // 10 log10(1 / 0.01)
}

TEST(EvalCliTest, BadRequestsAreOneLineAndExitTwo) {
  const std::string dir = testing::makeTempDir("evalbad");
  const std::string model = scaleModel(dir, {3}, 1);
  writeNpy(dir + "/x.npy", at::zeros({2, 3}));
  writeNpy(dir + "/wide.npy", at::zeros({2, 4}));
  at::Tensor nan = at::zeros({2, 3});
  nan[1][2] = NAN;
  writeNpy(dir + "/nan.npy", nan);
  struct Case {
    std::string args, expect;
  };
  writeNpy(dir + "/big_labels.npy", at::tensor(std::vector<int64_t>{1, 3}));
  for (const Case& c : std::vector<Case>{
           {"--data " + dir + "/x.npy --labels " + dir + "/big_labels.npy",
            "x.npy sample 1: label 3 is outside the model's 3 classes"},
           {"--data " + dir + "/x.npy --metric top1", "has no labels"},
           {"--data " + dir + "/x.npy --metric accuracy", "--metric must be"},
           {"--data " + dir + "/wide.npy", "wide.npy' row 0: sample shape [4]"},
           {"--data " + dir + "/nan.npy", "nan.npy' row 1: 1 NaN/Inf value"},
           {"--data " + dir + "/missing.npy", "missing.npy"},
           {"--data " + dir + "/x.npy --batch 0", "--batch"},
           {"--data " + dir + "/x.npy --limit 0", "--limit must be a positive"},
           {"--data " + dir + "/x.npy --crop 3y4", "--crop"},
       }) {
    Result r = runCli("eval " + model + " " + c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << ": " << r.out;
    EXPECT_EQ(lineCount(r.out), 1u) << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos) << c.args << ": " << r.out;
  }
}

// The committed zoo: qforge's score on the full test set equals the one PyTorch measured when
// the model was trained (recorded in models/zoo/NAME.json), and meets the bar.
struct ZooCase {
  std::string name;
  double min_top1;  // 0 for the denoiser
};

void PrintTo(const ZooCase& c, std::ostream* os) {
  *os << c.name;
}

class EvalZooTest : public ::testing::TestWithParam<ZooCase> {};

TEST_P(EvalZooTest, MatchesPyTorchOnTheFullTestSet) {
  const ZooCase& c = GetParam();
  const std::string zoo = std::string(QFORGE_SOURCE_DIR) + "/models/zoo/";
  std::ifstream info_file(zoo + c.name + ".json");
  ASSERT_TRUE(info_file.good()) << zoo + c.name + ".json";
  const nlohmann::json info = nlohmann::json::parse(info_file);
  EXPECT_LE(info["bytes"].get<int64_t>(), 4 << 20);
  const bool denoiser = info["task"] == "denoise";
  Result r = runCli("eval " + zoo + c.name + ".onnx --data fashion-mnist:test --json" +
                    (denoiser ? " --noise " + info["noise"]["sigma"].dump() : ""));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["samples"], 10000);
  if (denoiser) {
    EXPECT_NEAR(j["psnr_db"].get<double>(), info["test"]["psnr_db"].get<double>(), 1e-3);
    EXPECT_NEAR(j["input_psnr_db"].get<double>(), info["test"]["noisy_input_psnr_db"].get<double>(),
                1e-3);
    EXPECT_GT(j["psnr_db"].get<double>(), j["input_psnr_db"].get<double>() + 5);
  } else {
    EXPECT_EQ(j["top1_correct"], info["test"]["top1_count"]);
    EXPECT_GE(j["top1"].get<double>(), c.min_top1);
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, EvalZooTest,
                         ::testing::Values(ZooCase{"resnet", 0.925}, ZooCase{"mobilenet", 0.915},
                                           ZooCase{"vit", 0.88}, ZooCase{"unet", 0}),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace qforge
