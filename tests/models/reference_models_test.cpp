// Real models: torchvision's ResNet-18 and MobileNetV2, exported by
// tools/export_torchvision_models.py (a ctest fixture) with PyTorch eager's output beside them.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "exec/executor.h"
#include "ir/dump.h"
#include "ir/onnx_export.h"
#include "ir/onnx_import.h"
#include "ir/onnx_tensor.h"
#include "support/onnx_builder.h"

namespace qforge {
namespace {

class ReferenceModelTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::string path(const std::string& suffix) const {
    return std::string(QFORGE_BINARY_DIR) + "/models/" + GetParam() + suffix;
  }
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(path(".onnx")))
        << "run tools/export_torchvision_models.py --out build/models (ctest does it)";
  }
  at::Tensor runOn(const Graph& g, const at::Tensor& input) {
    Executor ex(g);
    return ex({input}).at(0);
  }
};

TEST_P(ReferenceModelTest, MatchesPyTorchEager) {
  Graph g = importOnnxFile(path(".onnx"));
  at::Tensor expected = readTensorProtoFile(path(".output.pb"));
  at::Tensor actual = runOn(g, readTensorProtoFile(path(".input.pb")));
  ASSERT_EQ(actual.sizes(), expected.sizes());
  const double max_diff = (actual - expected).abs().max().item<double>();
  EXPECT_LE(max_diff, 1e-4 * std::max(1.0, expected.abs().max().item<double>())) << max_diff;
  EXPECT_EQ(actual.argmax(1).item<int64_t>(), expected.argmax(1).item<int64_t>());
}

TEST_P(ReferenceModelTest, ImportExportImportGivesIdenticalGraphAndOutputs) {
  Graph first = importOnnxFile(path(".onnx"));
  const std::string out = testing::makeTempDir("roundtrip") + "/model.onnx";
  exportOnnxFile(first, out);
  Graph second = importOnnxFile(out);
  EXPECT_EQ(dumpGraph(first), dumpGraph(second));
  ASSERT_EQ(first.initializers().size(), second.initializers().size());
  for (const Value* v : first.initializers()) {
    EXPECT_TRUE(at::equal(v->initializer(), second.value(v->name())->initializer())) << v->name();
  }
  at::Tensor x = readTensorProtoFile(path(".input.pb"));
  EXPECT_TRUE(at::equal(runOn(first, x), runOn(second, x)));
}

TEST_P(ReferenceModelTest, BatchOfEightMatchesEightSingleRuns) {
  Graph g = importOnnxFile(path(".onnx"));
  at::Tensor x = readTensorProtoFile(path(".input.pb"));
  at::Tensor batch = at::cat({x, x * 0.5, x.flip(3), x, -x, x * 2, x.flip(2), x});
  at::Tensor together = runOn(g, batch);
  ASSERT_EQ(together.size(0), 8);
  for (int64_t i = 0; i < 8; ++i) {
    at::Tensor alone = runOn(g, batch.slice(0, i, i + 1));
    EXPECT_TRUE(at::allclose(together.slice(0, i, i + 1), alone, 1e-4, 1e-5)) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Torchvision, ReferenceModelTest,
                         ::testing::Values("resnet18", "mobilenet_v2"));

}  // namespace
}  // namespace qforge
