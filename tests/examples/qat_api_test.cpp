// The README's C++ QAT example, as written there but with a few steps, on the zoo ResNet: it
// compiles against the public headers, trains, finishes, and the finished model runs.
#include <gtest/gtest.h>

#include "algos/calibrate.h"
#include "algos/qat.h"
#include "backends/backend_config.h"
#include "ir/onnx_import.h"

namespace {

TEST(QatApiExample, TheReadmeExampleTrainsAndFinishes) {
  using namespace qforge;
  auto model = algos::prepareForQat(
      importOnnxFile(std::string(QFORGE_SOURCE_DIR) + "/models/zoo/resnet.onnx"),
      backends::loadBackend("TensorRT"));
  auto train = data::openDataset("fashion-mnist:train");
  data::LoaderOptions first_1024;
  first_1024.batch_size = 64;
  first_1024.limit = 1024;
  data::BatchLoader calib(train, first_1024);
  algos::calibrate(*model, calib, 16);
  algos::QatConfig config;
  config.epochs = 2;
  config.lr = 0.002;
  config.max_steps = 3;  // the README trains two whole epochs
  algos::QatTrainer trainer(*model, config, [](const at::Tensor& logits, const data::Batch& b) {
    return at::cross_entropy_loss(logits, b.labels);  // any scalar loss
  });
  algos::QatReport report = trainer.train(train, data::LoaderOptions{});
  EXPECT_EQ(report.steps_run, 3);
  EXPECT_EQ(trainer.finish(), 9);  // the ResNet's nine Conv+BN pairs merged
  const at::Tensor x = train->get(0).input.unsqueeze(0);
  const at::Tensor logits = model->executor().run({{"image", x}}).at("logits");
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{1, 10}));
}

}  // namespace
