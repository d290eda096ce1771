// A small float classifier (5 classes) for the targets whose input configures quantization (backend
// and quant config files): prepare() it under the fuzzed settings, calibrate on two batches and run
// it quantized, so bit widths, schemes, observers and their options are used, not only parsed.
#pragma once

#include <ATen/ATen.h>

#include "algos/calibrate.h"
#include "algos/qat_config.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "exec/sample_inputs.h"
#include "ir/onnx_import.h"
#include "ir/parse.h"
#include "passes/prepare.h"
#include "quant/fake_quantizer.h"

namespace qforge::fuzz {

inline const Graph& tinyModel() {
  static const Graph model = [] {
    Graph g = parseGraph(R"(
      graph tiny
      input %x: float32[N,3,6,6]
      init %w1: float32[4,3,3,3]
      init %b1: float32[4]
      init %gamma: float32[4]
      init %beta: float32[4]
      init %mean: float32[4]
      init %var: float32[4] = {1, 1, 1, 1}
      init %w2: float32[4,4,1,1]
      init %fc: float32[5,8]
      init %fcb: float32[5]
      %c1 = Conv[kernel_shape=[3,3], pads=[1,1,1,1]](%x, %w1, %b1)  # conv1
      %bn = BatchNormalization(%c1, %gamma, %beta, %mean, %var)  # bn1
      %r6 = Clip[max=6.0, min=0.0](%bn)  # relu6
      %p = MaxPool[kernel_shape=[2,2], strides=[2,2]](%r6)  # pool
      %c2 = Conv[kernel_shape=[1,1]](%p, %w2)  # conv2
      %r = Relu(%c2)  # relu
      %sum = Add(%r, %p)  # add
      %cat = Concat[axis=1](%sum, %r)  # concat
      %sig = Sigmoid(%cat)  # sigmoid
      %swish = Mul(%cat, %sig)  # swish
      %gap = GlobalAveragePool(%swish)  # gap
      %f = Flatten(%gap)  # flatten
      %logits = Gemm[transB=1](%f, %fc, %fcb)  # fc
      output %logits: float32[N,5]
    )");
    at::manual_seed(7);
    for (Value* v : g.initializers()) {
      if (v->name() != "var") v->setInitializer(at::randn(v->initializer().sizes()));
    }
    return copyGraph(g);
  }();
  return model;
}

// Random images of the tiny model's input size with labels.
class RandomImages : public data::Dataset {
 public:
  explicit RandomImages(int64_t n) : n_(n) {}
  int64_t size() const override { return n_; }
  data::Sample get(int64_t i) override {
    at::manual_seed(100 + i);
    return {at::randn({3, 6, 6}), i % 5, "sample " + std::to_string(i)};
  }
  bool hasLabels() const override { return true; }
  std::string describe() const override { return "random images"; }

 private:
  int64_t n_;
};

// Two batches of four random images.
inline void calibrateOn(passes::PreparedModel& model) {
  data::LoaderOptions options;
  options.batch_size = 4;
  data::BatchLoader loader(std::make_shared<RandomImages>(8), options);
  algos::calibrate(model, loader, 2);
}

// prepare() with these settings, two calibration batches, one quantized run.
inline void prepareAndRun(const backends::BackendConfig& backend,
                          const passes::QuantConfig& config) {
  passes::PrepareOptions options;
  options.config = config;
  std::unique_ptr<passes::PreparedModel> model =
      passes::prepare(tinyModel().clone(), backend, options);
  model->setMode(quant::FakeQuantMode::Calibration);
  for (uint64_t seed : {1, 2})
    (void)model->executor().run(sampleInputs(model->graph(), 2, true, seed));
  model->setMode(quant::FakeQuantMode::Quantization);
  (void)model->executor().run(sampleInputs(model->graph(), 2, true, 3));
}

// The QAT settings the qat_checkpoint target resumes with (its seeds are written with them).
inline algos::QatConfig tinyQatConfig() {
  algos::QatConfig config;
  config.epochs = 2;
  config.batch_size = 2;
  config.lr = 1e-2;
  return config;
}

}  // namespace qforge::fuzz
