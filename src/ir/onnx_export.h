// Graph -> ONNX. Files are written atomically; large models put their tensors in an external data
// file because a protobuf message cannot exceed 2 GiB.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>

#include "ir/graph.h"

namespace qforge {

struct ExportOptions {
  // Tensors go to an external data file when their total size exceeds this many bytes.
  int64_t external_data_threshold = int64_t{1} << 30;
  // Force external data regardless of size (for tests and for users who want it).
  bool force_external_data = false;
  // Tensors smaller than this stay inline even in external-data mode (as ONNX's own tools do).
  int64_t external_min_tensor_bytes = 1024;
};

onnx::ModelProto exportOnnxModel(const Graph& graph);

// Writes `path` (and `path`.data when external data is used). Returns true when external data
// was written.
bool exportOnnxFile(const Graph& graph, const std::string& path, const ExportOptions& options = {});

}  // namespace qforge
