// Every command's --json report carries the process's peak resident memory (peak_rss_bytes): run
// each one on the zoo ResNet (or its quantized directory) and read the figure back. A process
// that loaded libtorch and a model has a resident set of tens of MB at least, and none here
// reaches 16 GiB.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "support/cli_runner.h"
#include "support/onnx_builder.h"
#include "support/ort_dir.h"

namespace qforge::testing {
namespace {

std::string zooResNet() {
  return std::string(QFORGE_SOURCE_DIR) + "/models/zoo/resnet.onnx";
}

// The report's peak_rss_bytes, after checking the command succeeded and printed one JSON object.
int64_t peakOf(const std::string& args, const std::string& env = "") {
  const CliResult r = runCli(args + " --json", env);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.out;
  const nlohmann::json report = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_TRUE(report.contains("peak_rss_bytes")) << args;
  return report.value("peak_rss_bytes", int64_t{0});
}

TEST(JsonReport, EveryCommandReportsItsPeakResidentMemory) {
  const std::string dir = makeTempDir("json-report");
  const std::string q = dir + "/q";
  std::ofstream(dir + "/calib.cache") << "TRT-8601-EntropyCalibration2\nx: 3c000000\n";
  const std::string ort = "QFORGE_ORT_DIR=" + testOrtDir();
  const std::vector<std::string> commands = {
      "inspect " + zooResNet(),
      "run " + zooResNet() + " --iters 1 --warmup 0",
      "convert --from tensorrt_cache --to aimet_v1 " + dir + "/calib.cache " + dir + "/m.enc",
      "quantize " + zooResNet() + " --backend TensorRT --calib-batches 1 --calib-batch 16 --out " +
          q + " --quiet",
      "deploy " + q + " --out " + dir + "/d",
      "eval " + q + " --data fashion-mnist:test --limit 32",
      "analyze " + q +
          " --eval fashion-mnist:test --samples 4 --batch 4 --no-leave-one-out "
          "--no-fisher --quiet",
      "verify " + q + " --limit 16 --quiet",
      "qat " + zooResNet() +
          " --backend TensorRT --limit 32 --batch 16 --epochs 1 "
          "--calib-batches 1 --calib-batch 16 --out " +
          dir + "/qat --quiet",
  };
  for (const std::string& args : commands) {
    const int64_t peak = peakOf(args, ort);
    EXPECT_GT(peak, int64_t{10} << 20) << args;
    EXPECT_LT(peak, int64_t{16} << 30) << args;
  }
}

}  // namespace
}  // namespace qforge::testing
