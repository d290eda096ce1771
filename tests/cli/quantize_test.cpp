// `qforge quantize` as a user runs it: the zoo ResNet end to end, and every kind of bad input
// the issue names giving one clear line and exit code 2.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ir/onnx_import.h"
#include "support/cli_runner.h"
#include "support/onnx_builder.h"

namespace qforge::testing {
namespace {

std::string zoo(const std::string& name) {
  return std::string(QFORGE_SOURCE_DIR) + "/models/zoo/" + name + ".onnx";
}

void writeText(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// Conv 1x1 then Softmax: the backends quantize the Conv and leave Softmax in float.
std::string convSoftmaxModel(const std::string& dir) {
  OnnxBuilder b;
  b.input("image", onnx::TensorProto::FLOAT, {-1, 1, 28, 28});
  b.output("probs", onnx::TensorProto::FLOAT, {-1, 2, 28, 28});
  b.initializer("w", at::ones({2, 1, 1, 1}));
  b.node("Conv", {"image", "w"}, {"c"}, "conv");
  addIntAttribute(b.node("Softmax", {"c"}, {"probs"}, "softmax"), "axis", 1);
  const std::string path = dir + "/conv_softmax.onnx";
  b.save(path);
  return path;
}

TEST(QuantizeCli, QuantizesTheZooResNetAndWritesModelTableAndReport) {
  const std::string out = makeTempDir("quantize") + "/out";
  CliResult r = runCli("quantize " + zoo("resnet") +
                       " --backend TensorRT --calib-batches 2 --calib-batch 32 "
                       "--eval fashion-mnist:test --eval-limit 300 --out " +
                       out + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json report = nlohmann::json::parse(r.out);
  EXPECT_EQ(report["backend"], "TensorRT");
  EXPECT_EQ(report["calibration"]["batches"], 2);
  EXPECT_EQ(report["calibration"]["samples"], 64);
  const double float_top1 = report["float"]["top1"];
  const double quant_top1 = report["quantized"]["top1"];
  EXPECT_GT(float_top1, 0.85);
  EXPECT_GT(quant_top1, float_top1 - 0.03);  // 300 images: a few flips at most
  EXPECT_TRUE(std::filesystem::exists(out + "/model.qdq.onnx"));
  EXPECT_TRUE(std::filesystem::exists(out + "/report.json"));
  std::ifstream table_file(out + "/quantizers.json");
  const nlohmann::json table = nlohmann::json::parse(table_file);
  EXPECT_EQ(table["quantizers"].size(), report["quantizers"].size());
  Graph qdq = importOnnxFile(out + "/model.qdq.onnx");
  int q = 0;
  for (const Node* n : qdq.nodes())
    q += n->opType() == "QuantizeLinear";
  EXPECT_EQ(q, static_cast<int>(table["quantizers"].size()));
}

TEST(QuantizeCli, TextReportShowsTheTableAndAccuracy) {
  const std::string out = makeTempDir("quantize") + "/out";
  CliResult r = runCli("quantize " + zoo("resnet") +
                       " --backend QDQ --calib-batches 1 --calib-batch 16 "
                       "--eval fashion-mnist:test --eval-limit 100 --out " +
                       out);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("/stem/stem.0/Conv"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("float      top-1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("quantized  top-1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("calibrate"), std::string::npos) << r.out;
  // QDQ's weights are on [-127, 127]; its activations clamp at -128 with the scale amax / 127.
  EXPECT_NE(r.out.find("int8 sym [-127,127] ch0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("int8 sym [-128,127] amax/127"), std::string::npos) << r.out;
}

TEST(QuantizeCli, LogarithmicGridsGetTheirTableReportAndAnArithmeticQdqModel) {
  const std::string out = makeTempDir("quantize") + "/out";
  CliResult r =
      runCli("quantize " + zoo("resnet") +
             " --backend NNIE --calib-batches 1 --calib-batch 8 --out " + out + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json report = nlohmann::json::parse(r.out);
  EXPECT_NE(report["deploy_note"].get<std::string>().find("no model.qoperator.onnx"),
            std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(out + "/model.qdq.onnx"));
  ASSERT_FALSE(report["quantizers"].empty());
  for (const auto& q : report["quantizers"]) {
    EXPECT_TRUE(q["scale"].empty());
    EXPECT_GT(q["state"]["data_max"][0].get<double>(), 0.0) << q.dump();
  }
  EXPECT_TRUE(std::filesystem::exists(out + "/quantizers.json"));
}

TEST(QuantizeCli, UnknownBackendNameListsTheKnownOnes) {
  CliResult r =
      runCli("quantize " + zoo("resnet") + " --backend TensorRTX --out " + makeTempDir("quantize"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(lineCount(r.out), 1u) << r.out;
  EXPECT_NE(r.out.find("unknown backend 'TensorRTX'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("OpenVINO"), std::string::npos) << r.out;
}

TEST(QuantizeCli, MalformedBackendFilePointsAtTheKey) {
  const std::string dir = makeTempDir("quantize");
  writeText(dir + "/chip.json", R"({"name": "Chip", "weight": {"bitz": 8}})");
  CliResult r =
      runCli("quantize " + zoo("resnet") + " --backend " + dir + "/chip.json --out " + dir + "/o");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(lineCount(r.out), 1u) << r.out;
  EXPECT_NE(r.out.find("chip.json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'weight.bitz'"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/o/model.qdq.onnx"));

  writeText(dir + "/broken.json", R"({"name": "Chip", "weight": {"bits": 8,}})");
  r = runCli("quantize " + zoo("resnet") + " --backend " + dir + "/broken.json --out " + dir +
             "/o");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("not valid JSON at byte"), std::string::npos) << r.out;
}

TEST(QuantizeCli, ConfigNamingAMissingNodeSuggestsNearNames) {
  const std::string dir = makeTempDir("quantize");
  writeText(dir + "/cfg.yaml", "overrides:\n  - {name: /stem/stem.0/Convv, skip: true}\n");
  CliResult r = runCli("quantize " + zoo("resnet") + " --backend TensorRT --config " + dir +
                       "/cfg.yaml --out " + dir + "/o");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(lineCount(r.out), 1u) << r.out;
  EXPECT_NE(r.out.find("no node is named '/stem/stem.0/Convv'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("/stem/stem.0/Conv"), std::string::npos) << r.out;

  writeText(dir + "/bad.yaml", "weight: {bits: 4\n");
  r = runCli("quantize " + zoo("resnet") + " --backend TensorRT --config " + dir +
             "/bad.yaml --out " + dir + "/o");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("not valid YAML at line"), std::string::npos) << r.out;
}

// Mixed precision from the command line: the zoo ResNet on Academic at 5 bits per weight. The
// choice fits the budget, tuned_config.json replays it with --config (same widths per unit), and
// budgets that cannot work give one line, exit code 2 and no files.
TEST(QuantizeCli, ABitsBudgetChoosesWidthsPerUnitThatReplayFromTheWrittenConfig) {
  const std::string dir = makeTempDir("quantize-mp");
  const std::string common =
      " --backend Academic --calib-batches 1 --calib-batch 32 "
      "--eval fashion-mnist:test --eval-limit 64 --eval-batch 64";
  const CliResult r =
      runCli("quantize " + zoo("resnet") + common + " --bits-budget 5 --out " + dir + "/o --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json report = nlohmann::json::parse(r.out);
  const nlohmann::json& mp = report["mixed_precision"];
  EXPECT_EQ(mp["widths"], nlohmann::json({2, 3, 4, 5, 6, 7, 8}));
  EXPECT_LE(mp["average_bits"].get<double>(), 5.0);
  EXPECT_LE(mp["total_bits"].get<int64_t>(), mp["budget_bits"].get<int64_t>());
  EXPECT_EQ(mp["trials"].size(), 8u);
  int64_t total_bits = 0;
  std::map<std::string, int> bits_of;
  for (const nlohmann::json& u : mp["units"]) {
    total_bits += u["elements"].get<int64_t>() * u["bits"].get<int64_t>();
    bits_of[u["unit"]] = u["bits"];
  }
  EXPECT_EQ(total_bits, mp["total_bits"].get<int64_t>());
  // The backend pins the first and last units to 8 bits.
  EXPECT_EQ(bits_of.at("/stem/stem.0/Conv"), 8);
  EXPECT_EQ(bits_of.at("/fc/Gemm"), 8);
  // The quantizer table holds the chosen width of every unit's weight.
  for (const nlohmann::json& q : report["quantizers"]) {
    if (q["kind"] != "weight") continue;
    EXPECT_EQ(q["bits"], bits_of.at(q["unit"])) << q["unit"];
  }
  const CliResult replay = runCli("quantize " + zoo("resnet") + common + " --config " + dir +
                                  "/o/tuned_config.json --out " + dir + "/replay --json");
  ASSERT_EQ(replay.exit_code, 0) << replay.out;
  const nlohmann::json replayed = nlohmann::json::parse(replay.out);
  EXPECT_EQ(replayed["quantizers"], report["quantizers"]);
  EXPECT_EQ(replayed["quantized"]["top1"], report["quantized"]["top1"]);

  const CliResult text =
      runCli("quantize " + zoo("resnet") + common + " --bits-budget 4 --out " + dir + "/t");
  ASSERT_EQ(text.exit_code, 0) << text.out;
  EXPECT_NE(text.out.find("mixed      budget 4.00 bits per weight"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("uniform W2"), std::string::npos) << text.out;
}

TEST(QuantizeCli, BudgetsThatCannotWorkGiveOneLineAndWriteNothing) {
  const std::string dir = makeTempDir("quantize-mp-bad");
  const std::string common =
      " --calib-batches 1 --calib-batch 8 --eval fashion-mnist:test "
      "--eval-limit 16 --eval-batch 16 --out " +
      dir + "/o";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--backend Academic --bits-budget 1.5",
       "--bits-budget 1.50 is below the narrowest weight width Academic runs (2 bits)"},
      {"--backend Academic --bits-budget 2",
       "is below what the narrowest widths take"},  // the first and last units stay at 8
      {"--backend TensorRT --bits-budget 6", "TensorRT runs only 8-bit weights"},
      {"--backend Academic --bits-budget 5 --target-drop 1", "separate searches"},
      {"--backend Academic --size-budget 3Q", "--size-budget"},
  };
  for (const auto& [flags, message] : cases) {
    const CliResult r = runCli("quantize " + zoo("resnet") + " " + flags + common);
    EXPECT_EQ(r.exit_code, 2) << flags << ": " << r.out;
    EXPECT_EQ(lineCount(r.out), 1u) << flags << ": " << r.out;
    EXPECT_NE(r.out.find(message), std::string::npos) << flags << ": " << r.out;
    EXPECT_FALSE(std::filesystem::exists(dir + "/o")) << flags << ": files were written";
  }
}

TEST(QuantizeCli, AConfigBreakingTheBackendsConstraintsNamesTheTensorAndWritesNothing) {
  // TensorRT needs zero point 0; asymmetric uint8 activations break that.
  const std::string dir = makeTempDir("quantize");
  writeText(dir + "/asym.yaml", "activation: {symmetric: false, unsigned: true}\n");
  const CliResult r = runCli("quantize " + zoo("resnet") +
                             " --backend TensorRT --calib-batches 1 --calib-batch 8 --config " +
                             dir + "/asym.yaml --out " + dir + "/o");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(lineCount(r.out), 1u) << r.out;
  EXPECT_NE(r.out.find("tensor '"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("TensorRT needs zero point 0"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/o")) << "files were written";
}

// A model from a newer ONNX than qforge knows: refused in one line before calibrating, nothing
// written; the same model at opset 9 (upgraded to 13 for TensorRT's per-channel weights) goes
// through.
TEST(QuantizeCli, AnOpsetAbove21IsRefusedBeforeAnyWorkAndAnOpset9ModelIsUpgraded) {
  const std::string dir = makeTempDir("quantize-opset");
  for (int64_t opset : {22, 9}) {
    OnnxBuilder b(opset);
    b.input("image", onnx::TensorProto::FLOAT, {-1, 1, 8, 8});
    b.output("y", onnx::TensorProto::FLOAT, {-1, 2, 8, 8});
    b.initializer("w", at::randn({2, 1, 3, 3}));
    addIntsAttribute(b.node("Conv", {"image", "w"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
    b.node("Relu", {"c"}, {"y"}, "relu");
    const std::string model = dir + "/opset" + std::to_string(opset) + ".onnx";
    b.save(model);
    const std::string out = dir + "/out" + std::to_string(opset);
    const CliResult r = runCli("quantize " + model +
                               " --backend TensorRT --calib random:normal --calib-batches 1 "
                               "--quiet --out " +
                               out);
    if (opset == 22) {
      EXPECT_EQ(r.exit_code, 2) << r.out;
      EXPECT_EQ(lineCount(r.out), 1u) << r.out;
      EXPECT_NE(r.out.find("the model imports ONNX opset 22; qforge knows ONNX opsets up to 21"),
                std::string::npos)
          << r.out;
      EXPECT_FALSE(std::filesystem::exists(out)) << "files were written";
    } else {
      ASSERT_EQ(r.exit_code, 0) << r.out;
      const Graph qdq = importOnnxFile(out + "/model.qdq.onnx");
      EXPECT_EQ(qdq.model.opsetFor(""), 13);
    }
  }
}

TEST(QuantizeCli, YamlConfigChangesTheWidths) {
  const std::string dir = makeTempDir("quantize");
  writeText(dir + "/w4.yaml",
            "weight: {bits: 4}\noverrides:\n  - {op_type: Gemm, weight: {bits: 8}}\n");
  CliResult r = runCli("quantize " + zoo("resnet") +
                       " --backend TensorRT --calib-batches 1 "
                       "--calib-batch 8 --config " +
                       dir + "/w4.yaml --out " + dir + "/o --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json report = nlohmann::json::parse(r.out);
  int four = 0, eight = 0;
  for (const auto& q : report["quantizers"]) {
    if (q["kind"] != "weight") continue;
    (q["bits"] == 4 ? four : eight) += 1;
    if (q["unit"] == "/fc/Gemm") {
      EXPECT_EQ(q["bits"], 8);
    }
  }
  EXPECT_EQ(four, 9);  // the 9 Convs: stem, 2 per block x 3, shortcut convs of blocks 1 and 2
  EXPECT_EQ(eight, 1);
}

TEST(QuantizeCli, OpsTheBackendCannotQuantizeStayFloatAndAreListed) {
  const std::string dir = makeTempDir("quantize");
  CliResult r =
      runCli("quantize " + convSoftmaxModel(dir) +
             " --backend TensorRT --calib-batches 1 --calib-batch 4 --out " + dir + "/o --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json report = nlohmann::json::parse(r.out);
  ASSERT_EQ(report["float_ops"].size(), 1u);
  EXPECT_EQ(report["float_ops"][0].get<std::string>().rfind("Softmax x1: softmax", 0), 0u);
  EXPECT_EQ(report["quantizers"].size(), 2u);  // the Conv's input and weight
}

}  // namespace
}  // namespace qforge::testing
