// A model's tensors as ONNX Runtime computes them when it runs the model, not a variant of it.
// A trace exposes intermediate tensors as extra graph outputs, but in the exported file that
// changes ORT's graph: it does not fuse DequantizeLinear -> Conv -> QuantizeLinear into a
// QLinearConv, nor turn an int8 QuantizeLinear/DequantizeLinear pair into uint8, when that
// QuantizeLinear's output is a graph output (PaddleOCR's detector on OpenVINO: 12 QLinearConvs in
// the real run, none with every level exposed). So the tensors are read from the graph ORT's own
// optimizations leave, saved once and run with optimization disabled.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/files.h"
#include "exec/executor.h"  // TensorMap
#include "verify/ort_runner.h"

namespace qforge::verify {

class OrtObservedModel {
 public:
  // Saves ORT's optimized graph of `path` at `ort`'s optimization level; throws qforge::Error
  // when ORT cannot load it.
  OrtObservedModel(const OrtRunner& ort, const std::string& path);

  // `tensors` (names in the exported model) on `feeds`, as ORT computes them. A quantized tensor
  // ORT rewrote to another zero point (int8 to uint8: +128) comes back on the exported one's
  // levels, as int32, and one ORT holds channels-last in the exported layout. The output of a
  // group ORT fused (DequantizeLinear -> Conv -> QuantizeLinear into QLinearConv) is that
  // kernel's output. Tensors ORT has no counterpart of are left out of the result.
  TensorMap run(const TensorMap& feeds, const std::vector<std::string>& tensors) const;

  // What writes `tensor` in ORT's graph: "QLinearConv 'p2o.Conv.0_token_12'"; "" when ORT fused
  // it away.
  std::string writer(const std::string& tensor) const;

  // The zero point of the QuantizeLinear writing `tensor` in the exported model, the levels
  // run() returns are on; nullopt when no per-tensor QuantizeLinear writes it.
  std::optional<int64_t> exportedZeroPoint(const std::string& tensor) const;

 private:
  // Where an exported tensor is in ORT's graph, what to add to its values to get the exported
  // tensor's levels back, and how ORT's layout permutes its axes (ORT's tensor is the exported
  // one's permute(perm): channels-last for its NHWC kernels).
  struct Location {
    std::string name;
    int64_t shift = 0;
    std::vector<int64_t> perm;
  };
  std::optional<Location> locate(const std::string& tensor) const;
  std::optional<Location> locateFused(const onnx::NodeProto& quantize) const;
  std::optional<int64_t> levelsZeroPoint(const onnx::NodeProto& kernel) const;
  using Initializers = std::map<std::string, const onnx::TensorProto*>;
  static std::optional<int64_t> zeroPointOf(const Initializers& initializers,
                                            const std::string& name);
  void traceLayouts();

  TempDir dir_;
  OrtRunner runner_;  // the caller's options with optimization disabled
  onnx::ModelProto exported_, optimized_;
  std::map<std::string, const onnx::NodeProto*> optimized_nodes_;                // by name
  std::map<std::string, const onnx::NodeProto*> optimized_writers_;              // by output
  std::map<std::string, std::vector<const onnx::NodeProto*>> exported_readers_;  // by input
  std::map<std::string, const onnx::NodeProto*> exported_writers_;               // by output
  Initializers exported_initializers_, optimized_initializers_;                  // by name
  std::map<std::string, std::vector<int64_t>> layouts_;  // ORT's tensors not in the model's layout
};

}  // namespace qforge::verify
