#include "deploy/format_writers.h"

#include <filesystem>

#include "core/files.h"
#include "deploy/formats/aimet.h"
#include "deploy/formats/format_support.h"
#include "deploy/formats/nnie.h"
#include "deploy/formats/ppl.h"
#include "deploy/formats/stpu.h"
#include "deploy/formats/tengine.h"
#include "deploy/formats/vitis.h"
#include "deploy/qdq_onnx.h"
#include "ir/onnx_export.h"

namespace qforge::deploy {

namespace {

// Files are produced as (name, text) first so that a table a format refuses leaves no file
// behind; the ONNX models are written last.
struct TextFile {
  std::string name;
  std::string text;
};

std::vector<std::string> writeAll(const std::string& out_dir, const std::vector<TextFile>& files,
                                  const Graph& graph, const std::string& onnx_name) {
  const std::filesystem::path dir(out_dir);
  std::vector<std::string> written;
  for (const TextFile& f : files) {
    const std::string path = (dir / f.name).string();
    writeFileAtomically(path, f.text);
    written.push_back(path);
  }
  const std::string onnx_path = (dir / onnx_name).string();
  exportOnnxFile(graph, onnx_path);
  written.push_back(onnx_path);
  return written;
}

// The table the "linear" formats list: MQBench adds the inputs of Flatten/Reshape/Resize.
QuantTable linearTable(const DeployModel& deploy) {
  return formats::withReshapeInputRanges(deploy.table, deploy.graph);
}

const char* const kDeployOnnx = "model_deploy_model.onnx";
const char* const kClipRanges = "model_clip_ranges.json";

DeployWriter tablesWriter(std::function<std::vector<TextFile>(const DeployModel&)> make,
                          std::string onnx_name = kDeployOnnx) {
  return [make, onnx_name](passes::PreparedModel&, const DeployModel& deploy,
                           const std::string& out_dir) {
    return writeAll(out_dir, make(deploy), deploy.graph, onnx_name);
  };
}

}  // namespace

void registerFormatWriters(WriterRegistry& registry, const FormatWriterOptions& options) {
  const int trt_version = options.tensorrt_version;
  registry.add("tensorrt", [trt_version](passes::PreparedModel& model, const DeployModel& deploy,
                                         const std::string& out_dir) {
    const QuantTable linear = linearTable(deploy);
    const std::vector<TextFile> files = {
        {kClipRanges, formats::tensorrtClipRanges(linear)},
        {"model_calibration.cache", formats::tensorrtCalibrationCache(linear, trt_version)}};
    std::vector<std::string> written = writeAll(out_dir, files, deploy.graph, kDeployOnnx);
    const std::string qdq_path = (std::filesystem::path(out_dir) / "model.qdq.onnx").string();
    exportOnnxFile(toQdqGraph(model), qdq_path);
    written.push_back(qdq_path);
    return written;
  });

  const DeployWriter aimet = tablesWriter([](const DeployModel& deploy) {
    return std::vector<TextFile>{
        {kClipRanges, formats::aimetLegacyEncodings(linearTable(deploy))},
        {"model.encodings", formats::aimetV1Encodings(linearTable(deploy))}};
  });
  registry.add("snpe", aimet);
  registry.add("qnn", aimet);

  registry.add(
      "ppl", tablesWriter([](const DeployModel& deploy) {
        return std::vector<TextFile>{{kClipRanges, formats::pplParams(linearTable(deploy))}};
      }));
  registry.add("ppl_cuda", tablesWriter([](const DeployModel& deploy) {
                 return std::vector<TextFile>{
                     {kClipRanges, formats::pplCudaClipRanges(linearTable(deploy))}};
               }));
  registry.add(
      "vitis", tablesWriter([](const DeployModel& deploy) {
        return std::vector<TextFile>{{kClipRanges, formats::vitisScales(linearTable(deploy))}};
      }));
  registry.add("nnie", tablesWriter([](const DeployModel& deploy) {
                 return std::vector<TextFile>{
                     {"model_gfpq_param_dict.json", formats::nnieGfpqParams(deploy)}};
               }));
  registry.add("tengine", tablesWriter(
                              [](const DeployModel& deploy) {
                                return std::vector<TextFile>{
                                    {"model_for_tengine.scale",
                                     formats::tengineScales(deploy.table, &deploy.graph)}};
                              },
                              "model_for_tengine.onnx"));
  registry.add(
      "stpu",
      tablesWriter(
          [](const DeployModel& deploy) {
            return std::vector<TextFile>{{"model_stpu_minmax.json", formats::stpuMinMax(deploy)}};
          },
          "model_for_stpu.onnx"));
}

}  // namespace qforge::deploy
