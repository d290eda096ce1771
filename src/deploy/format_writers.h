// The deploy writers for the vendor formats (formats/): each writes the parameter file(s) the
// backend's toolchain reads, under the names MQBench gives them (model_name "model"), and the
// ONNX model they refer to.
//
//   tensorrt  model.qdq.onnx, model_deploy_model.onnx, model_clip_ranges.json,
//             model_calibration.cache
//   snpe, qnn model_deploy_model.onnx, model_clip_ranges.json (AIMET legacy layout),
//             model.encodings (AIMET 1.0.0 layout)
//   ppl       model_deploy_model.onnx, model_clip_ranges.json ({"ppl": ...})
//   ppl_cuda  model_deploy_model.onnx, model_clip_ranges.json (text "tensor: amax")
//   vitis     model_deploy_model.onnx, model_clip_ranges.json ({"vitis": ...})
//   nnie      model_deploy_model.onnx, model_gfpq_param_dict.json
//   tengine   model_for_tengine.onnx, model_for_tengine.scale
//   stpu      model_for_stpu.onnx, model_stpu_minmax.json
#pragma once

#include "deploy/formats/tensorrt.h"
#include "deploy/writer_registry.h"

namespace qforge::deploy {

struct FormatWriterOptions {
  int tensorrt_version = formats::kDefaultTensorrtVersion;  // calibration cache header
};

void registerFormatWriters(WriterRegistry& registry, const FormatWriterOptions& options = {});

}  // namespace qforge::deploy
