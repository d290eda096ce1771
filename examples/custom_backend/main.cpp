// Quantizes a model for the made-up ToyNPU chip (toy_npu.json and toy_npu.cpp), calibrates it on
// Fashion-MNIST train and compares float and quantized top-1 on the first test images.
#include <cstdio>
#include <filesystem>

#include "algos/calibrate.h"
#include "core/error.h"
#include "custom_backend/toy_npu.h"
#include "data/dataset.h"
#include "ir/onnx_import.h"

using namespace qforge;

static data::BatchLoader loader(const std::string& spec, int64_t batch_size, int64_t limit) {
  data::LoaderOptions options;
  options.batch_size = batch_size;
  options.limit = limit;
  return data::BatchLoader(data::openDataset(spec), options);
}

static double top1(Executor& executor, const Graph& graph, data::BatchLoader& loader) {
  const std::string input = algos::dataInput(graph).name(), output = graph.outputs()[0]->name();
  int64_t correct = 0;
  for (loader.reset(); auto batch = loader.next();) {
    const at::Tensor logits = executor.run({{input, batch->inputs}}, {output}).at(output);
    correct += logits.argmax(1).eq(batch->labels).sum().item<int64_t>();
  }
  return 100.0 * static_cast<double>(correct) / static_cast<double>(loader.size());
}

int main(int argc, char** argv) try {
  require(argc >= 4, "usage: custom_backend_example MODEL.onnx toy_npu.json OUT_DIR [TEST_IMAGES]");
  // 1. Registries: the built-ins plus ToyNPU's observer, fake quantizer and writer.
  quant::ObserverRegistry observers;
  quant::FakeQuantizerRegistry fake_quantizers;
  deploy::WriterRegistry writers;
  quant::registerBuiltinObservers(observers);
  quant::registerBuiltinFakeQuantizers(fake_quantizers);
  deploy::registerBuiltinWriters(writers);
  toy_npu::registerToyNpu(observers, fake_quantizers, writers);

  // 2. Prepare: units and quantizers where toy_npu.json places them, of the kinds it names.
  const backends::BackendConfig backend = backends::loadBackend(argv[2]);
  passes::PrepareOptions options;
  options.observers = &observers;
  options.fake_quantizers = &fake_quantizers;
  const Graph float_graph = importOnnxFile(argv[1]);
  auto model = passes::prepare(importOnnxFile(argv[1]), backend, options);
  std::printf("%s: %zu units, %zu quantizers\n", backend.name.c_str(), model->units().size(),
              model->points().size());

  // 3. Calibrate: 16 batches of 64 training images through the observers.
  data::BatchLoader calibration = loader("fashion-mnist:train", 64, 16 * 64);
  algos::calibrate(*model, calibration, 16);

  // 4. Deploy with the writer the backend names ("deploy_format": "toy_npu").
  std::filesystem::create_directories(argv[3]);
  for (const std::string& file : writers.get(backend.deploy_format)(
           *model, qforge::deploy::buildDeployModel(*model), argv[3])) {
    std::printf("wrote %s\n", file.c_str());
  }

  data::BatchLoader test = loader("fashion-mnist:test", 100, argc > 4 ? std::stoll(argv[4]) : 500);
  Executor float_executor(float_graph);
  const double float_top1 = top1(float_executor, float_graph, test);
  const double toy_top1 = top1(model->executor(), model->graph(), test);
  std::printf("top-1 on %lld test images: float %.2f%%, ToyNPU %.2f%%\n",
              static_cast<long long>(test.size()), float_top1, toy_top1);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "error: %s\n", e.what());
  return 1;
}
