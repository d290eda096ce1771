#include "deploy/formats/table_formats.h"

#include "core/error.h"
#include "core/strings.h"
#include "deploy/formats/aimet.h"
#include "deploy/formats/ppl.h"
#include "deploy/formats/tengine.h"
#include "deploy/formats/tensorrt.h"
#include "deploy/formats/vitis.h"

namespace qforge::deploy::formats {

const std::vector<TableFormat>& tableFormats() {
  static const std::vector<TableFormat> formats = {
      {"tensorrt_ranges", "TensorRT clip ranges JSON (MQBench's blob_range, amax = 127 * scale)",
       [](const QuantTable& t) { return tensorrtClipRanges(t); }, parseTensorrtClipRanges},
      {"tensorrt_cache", "TensorRT calibration cache (hex float32 scale = amax / 127)",
       [](const QuantTable& t) { return tensorrtCalibrationCache(t); },
       parseTensorrtCalibrationCache},
      {"aimet_legacy", "SNPE/QNN encodings, AIMET legacy layout (offset = qmin - zero point)",
       aimetLegacyEncodings, parseAimetLegacyEncodings},
      {"aimet_v1", "SNPE/QNN encodings, AIMET 1.0.0 layout", aimetV1Encodings,
       parseAimetV1Encodings},
      {"ppl", "PPL W8A16 JSON (step, zero_point, min, max, bit)", pplParams, parsePplParams},
      {"ppl_cuda", "PPL-CUDA clip ranges text (tensor: amax)", pplCudaClipRanges,
       parsePplCudaClipRanges},
      {"vitis", "Vitis power-of-two scales JSON", vitisScales, parseVitisScales},
      {"tengine", "Tengine .scale text (tensor scale zero_point)",
       [](const QuantTable& t) { return tengineScales(t); }, parseTengineScales},
  };
  return formats;
}

const TableFormat& tableFormat(const std::string& name) {
  std::vector<std::string> names;
  for (const TableFormat& f : tableFormats()) {
    if (f.name == name) return f;
    names.push_back(f.name);
  }
  std::string hint;
  if (name == "nnie" || name == "stpu") {
    hint = "; " + name + " files are keyed by layer and need the model: write them with the " +
           "deploy step";
  }
  throw Error("unknown parameter format '" + name + "' (known: " + join(names) + ")" + hint);
}

}  // namespace qforge::deploy::formats
