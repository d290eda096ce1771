// The vendor-format deploy writers on a real prepared model: the files land under MQBench's
// names, read back to the table they were written from, and a table a format refuses leaves
// no file behind.
#include "deploy/format_writers.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "backends/backend_config.h"
#include "core/error.h"
#include "core/files.h"
#include "deploy/formats/aimet.h"
#include "deploy/formats/tensorrt.h"
#include "support/onnx_builder.h"
#include "support/quant_graphs.h"

namespace qforge::testing {
namespace {

std::unique_ptr<passes::PreparedModel> calibrated(const backends::BackendConfig& backend) {
  at::manual_seed(3);
  auto m = passes::prepare(convReluConv(), backend);
  calibrateOn(*m, at::randn({2, 2, 5, 5}));
  return m;
}

std::vector<std::string> fileNames(const std::vector<std::string>& paths) {
  std::vector<std::string> names;
  for (const auto& p : paths)
    names.push_back(std::filesystem::path(p).filename().string());
  return names;
}

TEST(FormatWriters, TensorrtFilesReadBackToTheTable) {
  deploy::WriterRegistry registry;
  deploy::registerBuiltinWriters(registry);
  auto m = calibrated(backends::loadBackend("TensorRT"));
  const deploy::DeployModel d = deploy::buildDeployModel(*m);
  const std::string dir = makeTempDir("trt_writer");
  const auto written = registry.get("tensorrt")(*m, d, dir);
  EXPECT_EQ(fileNames(written),
            (std::vector<std::string>{"model_clip_ranges.json", "model_calibration.cache",
                                      "model_deploy_model.onnx", "model.qdq.onnx"}));
  const deploy::QuantTable cache =
      deploy::formats::parseTensorrtCalibrationCache(readFile(written[1]), written[1]);
  size_t activations = 0;
  for (const deploy::TensorEncoding& e : d.table.tensors) {
    if (e.role != deploy::TensorRole::Activation) continue;
    ++activations;
    const deploy::TensorEncoding* back = cache.find(e.tensor);
    ASSERT_NE(back, nullptr) << e.tensor;
    EXPECT_FLOAT_EQ(static_cast<float>(back->scale[0]), static_cast<float>(e.scale[0]));
  }
  EXPECT_EQ(cache.tensors.size(), activations);
  EXPECT_GT(activations, 0u);
}

TEST(FormatWriters, SnpeWritesBothAimetLayouts) {
  deploy::WriterRegistry registry;
  deploy::registerBuiltinWriters(registry);
  auto m = calibrated(backends::loadBackend("SNPE"));
  const deploy::DeployModel d = deploy::buildDeployModel(*m);
  const std::string dir = makeTempDir("snpe_writer");
  const auto written = registry.get("snpe")(*m, d, dir);
  ASSERT_EQ(fileNames(written),
            (std::vector<std::string>{"model_clip_ranges.json", "model.encodings",
                                      "model_deploy_model.onnx"}));
  const deploy::QuantTable legacy =
      deploy::formats::parseAimetLegacyEncodings(readFile(written[0]), written[0]);
  const deploy::QuantTable v1 =
      deploy::formats::parseAimetV1Encodings(readFile(written[1]), written[1]);
  for (const deploy::TensorEncoding& e : d.table.tensors) {
    for (const deploy::QuantTable* t : {&legacy, &v1}) {
      const deploy::TensorEncoding* back = t->find(e.tensor);
      ASSERT_NE(back, nullptr) << e.tensor;
      EXPECT_EQ(back->scale, e.scale) << e.tensor;
      for (size_t c = 0; c < e.channels(); ++c) {
        EXPECT_DOUBLE_EQ(back->min(c), e.min(c)) << e.tensor;
        EXPECT_DOUBLE_EQ(back->max(c), e.max(c)) << e.tensor;
      }
    }
  }
}

TEST(FormatWriters, EveryVendorBackendWritesItsFiles) {
  deploy::WriterRegistry registry;
  deploy::registerBuiltinWriters(registry);
  for (const char* name :
       {"SNPE", "QNN", "PPLW8A16", "PPLCUDA", "Vitis", "NNIE", "Tengine_u8", "STPU"}) {
    SCOPED_TRACE(name);
    const backends::BackendConfig backend = backends::loadBackend(name);
    auto m = calibrated(backend);
    const deploy::DeployModel d = deploy::buildDeployModel(*m);
    const std::string dir = makeTempDir(std::string("writer_") + name);
    const auto written = registry.get(backend.deploy_format)(*m, d, dir);
    ASSERT_GE(written.size(), 2u);
    for (const std::string& path : written)
      EXPECT_GT(std::filesystem::file_size(path), 10u) << path;
  }
}

TEST(FormatWriters, RefusedTableLeavesNoFile) {
  deploy::WriterRegistry registry;
  deploy::registerBuiltinWriters(registry);
  // tinyBackend quantizes activations asymmetrically: TensorRT cannot take them.
  auto m = calibrated(tinyBackend());
  const deploy::DeployModel d = deploy::buildDeployModel(*m);
  const std::string dir = makeTempDir("refused_writer");
  EXPECT_THROW(registry.get("tensorrt")(*m, d, dir), Error);
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  for (const char* format : {"snpe", "qnn", "ppl", "ppl_cuda", "vitis", "nnie", "tengine", "stpu"})
    EXPECT_TRUE(registry.has(format)) << format;
}

}  // namespace
}  // namespace qforge::testing
