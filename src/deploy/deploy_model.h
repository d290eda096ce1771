// What every deploy writer reads: the float graph a toolchain imports (FakeQuantize nodes
// stripped, BN merged, weights replaced by their fake-quantized values so that any rounding the
// toolchain applies lands on the same grid) and the quantization of each tensor in it, by the
// tensor's name in that graph. Formats differ only in how they spell this table.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "passes/prepare.h"

namespace qforge::deploy {

enum class TensorRole { Activation, Weight, Bias };
const char* toString(TensorRole role);

// One quantized tensor, in the vocabulary the deploy formats share.
struct TensorEncoding {
  std::string tensor;     // value name in DeployModel::graph
  std::string quantizer;  // the prepared model's quantizer ("" when read back from a file)
  TensorRole role = TensorRole::Activation;
  int bits = 8;
  bool symmetric = true;
  bool is_unsigned = false;
  bool power_of_two = false;
  int64_t axis = -1;  // channel axis when per channel, -1 when per tensor
  int64_t qmin = -128;
  int64_t qmax = 127;
  // One entry per channel, or one. Real value = (level - zero_point) * scale.
  std::vector<double> scale;
  std::vector<int64_t> zero_point;
  // False for grids no scale / zero point describes (NNIE's log grid): `state` does.
  bool affine = true;
  std::map<std::string, std::vector<double>> state;

  bool perChannel() const { return axis >= 0; }
  size_t channels() const { return scale.size(); }
  // The float range the grid covers for channel c: (qmin - zp) * s and (qmax - zp) * s.
  double min(size_t c = 0) const;
  double max(size_t c = 0) const;
  // max(|min|, |max|): the clip range symmetric formats store (TensorRT's amax).
  double absMax(size_t c = 0) const;
};

struct QuantTable {
  std::string backend;
  std::vector<TensorEncoding> tensors;  // graph order

  const TensorEncoding* find(const std::string& tensor) const;  // nullptr when absent
};

struct DeployModel {
  Graph graph;
  QuantTable table;
};

// Strips the prepared model's FakeQuantize nodes into a DeployModel. The prepared model is not
// changed; its quantizers must hold parameters (calibrated, trained or loaded).
DeployModel buildDeployModel(passes::PreparedModel& model);

}  // namespace qforge::deploy
