// `qforge quantize --algo A` for every PTQ algorithm (naive calibration, AdaRound, BRECQ, QDrop)
// on every zoo model at W4A4 (bench/configs/w4a4_mse.yaml, the Academic backend), with two
// reconstruction iterations per unit: each run exits 0, reports one unit per layer or block, and
// the quantized model stays above a floor on 200 Fashion-MNIST test images that a broken
// quantization (garbage weights, a unit trained on the wrong tensor) does not reach. AdaRound on
// the ViT used to stop with an internal error.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <ostream>
#include <string>
#include <tuple>

#include "support/cli_runner.h"
#include "support/onnx_builder.h"

namespace qforge::testing {
namespace {

struct ZooModel {
  std::string name;
  size_t layers, blocks;  // reconstruction units per granularity
  // Quantized top-1 (classifiers) or PSNR in dB (the denoiser) on the first 200 test images.
  // Measured at these settings: ResNet 0.94, MobileNetV2 0.60-0.61 (4-bit depthwise layers are
  // hard), ViT 0.885-0.89, U-Net 25.6 dB (float: 0.94, 0.945, 0.875, 26.5 dB); chance is 0.10,
  // the noisy input 14 dB.
  double floor;
};

// gtest names the parameter in ctest's test list by this, not by a byte dump.
void PrintTo(const ZooModel& model, std::ostream* os) {
  *os << model.name;
}

const ZooModel kModels[] = {{"resnet", 10, 5, 0.85},
                            {"mobilenet", 24, 9, 0.45},
                            {"vit", 14, 8, 0.80},
                            {"unet", 12, 3, 22.0}};
const std::string kAlgorithms[] = {"naive", "adaround", "brecq", "qdrop"};

class QuantizeZooCli : public ::testing::TestWithParam<std::tuple<ZooModel, std::string>> {};

TEST_P(QuantizeZooCli, RunsAndStaysAboveItsFloor) {
  const auto& [model, algorithm] = GetParam();
  const std::string dir = makeTempDir("quantize-zoo-" + model.name + "-" + algorithm);
  const CliResult r = runCli(
      "quantize " + std::string(QFORGE_SOURCE_DIR) + "/models/zoo/" + model.name +
      ".onnx --backend Academic --config " + std::string(QFORGE_SOURCE_DIR) +
      "/bench/configs/w4a4_mse.yaml --algo " + algorithm +
      " --calib-batches 1 --calib-batch 32 --iters 2 --recon-batch 8 --eval fashion-mnist:test "
      "--eval-limit 200 --json --out " +
      dir + "/out");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["algorithm"], algorithm);

  if (algorithm == "naive") {
    EXPECT_FALSE(j.contains("reconstruction"));
  } else {
    const nlohmann::json& rec = j["reconstruction"];
    const bool layers = algorithm == "adaround";
    EXPECT_EQ(rec["pattern"], layers ? "layer" : "block");
    const size_t units = layers ? model.layers : model.blocks;
    ASSERT_EQ(rec["units"].size(), units);
    EXPECT_EQ(rec["iterations"].get<size_t>(), units * 2);
    for (const auto& u : rec["units"]) {
      EXPECT_TRUE(std::isfinite(u["last_rec_loss"].get<double>())) << u["name"];
      EXPECT_GE(u["last_rec_loss"].get<double>(), 0.0) << u["name"];
    }
  }

  const nlohmann::json& q = j["quantized"];
  EXPECT_EQ(q["samples"], 200);
  const bool denoiser = model.name == "unet";
  ASSERT_EQ(q["metric"], denoiser ? "psnr" : "top1");
  const double score = q[denoiser ? "psnr_db" : "top1"].get<double>();
  EXPECT_TRUE(std::isfinite(score));
  EXPECT_GE(score, model.floor) << "float " << j["float"].dump();
}

INSTANTIATE_TEST_SUITE_P(ReconAlgos, QuantizeZooCli,
                         ::testing::Combine(::testing::ValuesIn(kModels),
                                            ::testing::ValuesIn(kAlgorithms)),
                         [](const ::testing::TestParamInfo<QuantizeZooCli::ParamType>& info) {
                           return std::get<0>(info.param).name + "_" + std::get<1>(info.param);
                         });

}  // namespace
}  // namespace qforge::testing
