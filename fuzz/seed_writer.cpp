// Writes the seeds fuzz/make_seeds.sh cannot write with Python: models and files that qforge
// itself produces from the small model of fuzz/tiny_model.h (ONNX models, a prepared model
// directory as the prepared_model target's one input, a QAT checkpoint, every convert format).
// Usage: fuzz_seed_writer OUT_DIR (writes OUT_DIR/<target>/<seed>).
#include <ATen/ATen.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>

#include "algos/qat.h"
#include "backends/backend_config.h"
#include "core/files.h"
#include "data/loader.h"
#include "deploy/deploy_model.h"
#include "deploy/formats/table_formats.h"
#include "fuzz/fuzz_support.h"
#include "fuzz/tiny_model.h"
#include "ir/onnx_export.h"
#include "ir/parse.h"
#include "passes/prepared_io.h"

namespace qforge::fuzz {
namespace {

namespace fs = std::filesystem;

void put(const fs::path& dir, const std::string& name, const std::string& content) {
  fs::create_directories(dir);
  writeFileAtomically((dir / name).string(), content);
  std::cout << (dir / name).string() << " (" << content.size() << " bytes)\n";
}

std::string modelBytes(const Graph& graph) {
  std::string bytes;
  exportOnnxModel(graph).SerializeToString(&bytes);
  return bytes;
}

// More ops for the model targets: shape arithmetic, a few elementwise and reduction ops.
const char* const kShapeOps = R"(
  graph shape_ops
  input %x: float32[N,4,3]
  init %zero: int64[] = {0}
  init %minus_one: int64[1] = {-1}
  init %axes: int64[1] = {0}
  %s = Shape(%x)  # shape
  %n = Gather[axis=0](%s, %zero)  # batch
  %nu = Unsqueeze(%n, %axes)  # batch_1d
  %flat_shape = Concat[axis=0](%nu, %minus_one)  # flat_shape
  %f = Reshape(%x, %flat_shape)  # flatten
  %t = Transpose[perm=[1,0]](%f)  # transpose
  %e = Exp(%t)  # exp
  %m = ReduceMean[axes=[0], keepdims=1](%e)  # mean
  %d = Div(%e, %m)  # div
  %sl = Slice(%d, %zero_s, %two, %zero_a)  # slice
  init %zero_s: int64[1] = {0}
  init %two: int64[1] = {2}
  init %zero_a: int64[1] = {0}
  %y = Tanh(%sl)  # tanh
  output %y
)";

void writeSeeds(const fs::path& out) {
  const Graph& tiny = tinyModel();
  const std::string tiny_onnx = modelBytes(tiny);
  const std::string shape_onnx = modelBytes(copyGraph(parseGraph(kShapeOps)));
  for (const char* target : {"onnx_model", "executor"}) {
    put(out / target, "tiny_classifier.onnx", tiny_onnx);
    put(out / target, "shape_ops.onnx", shape_onnx);
  }

  // A calibrated prepared model per backend: the prepared_model seeds, and the tables every
  // convert format writes.
  for (const char* name : {"tensorrt", "snpe", "vitis"}) {
    const bool keep_prepared = std::string(name) == "tensorrt";  // one is enough (20 KB)
    const backends::BackendConfig backend = backends::loadBackend(name);
    std::unique_ptr<passes::PreparedModel> model = passes::prepare(tiny.clone(), backend);
    calibrateOn(*model);
    model->setMode(quant::FakeQuantMode::Quantization);
    if (keep_prepared) {
      const TempDir dir("seed");
      passes::savePreparedModel(*model, backends::resolveBackendDocument(name), dir.path());
      put(out / "prepared_model", std::string(name) + ".prepared",
          readFile(dir.file("prepared.json")) + kPreparedSeparator +
              readFile(dir.file("prepared.onnx")));
    }

    const deploy::QuantTable table = deploy::buildDeployModel(*model).table;
    const auto& formats = deploy::formats::tableFormats();
    for (size_t i = 0; i < formats.size(); ++i) {
      std::string text;
      try {
        text = formats[i].write(table);
      } catch (const Error&) {
        continue;  // this backend's grid is not one the format can hold
      }
      const std::string picks{static_cast<char>(i), static_cast<char>((i + 1) % formats.size())};
      put(out / "convert", std::string(name) + "." + formats[i].name, picks + text);
    }
  }

  // A checkpoint after one QAT step (the trainer stops and saves at once).
  {
    const backends::BackendConfig backend = backends::loadBackend("tensorrt");
    std::unique_ptr<passes::PreparedModel> model = algos::prepareForQat(tiny.clone(), backend);
    calibrateOn(*model);
    const TempDir dir("seed");
    std::atomic<bool> stop{true};
    algos::QatConfig config = tinyQatConfig();
    config.checkpoint_path = dir.file("checkpoint.pt");
    config.stop = &stop;
    algos::QatTrainer trainer(*model, config);
    data::LoaderOptions loader;
    (void)trainer.train(std::make_shared<RandomImages>(8), loader);
    put(out / "qat_checkpoint", "one_step.pt", readFile(config.checkpoint_path));
  }
}

}  // namespace
}  // namespace qforge::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_seed_writer OUT_DIR\n";
    return 2;
  }
  try {
    qforge::fuzz::writeSeeds(argv[1]);
  } catch (const std::exception& e) {
    std::cerr << "fuzz_seed_writer: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
