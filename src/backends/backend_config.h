// BackendConfig: what one piece of hardware (or one runtime) quantizes, as data. Built-in backends
// are JSON files under backends/ compiled into the binary; users pass their own JSON file, which
// may extend a built-in. The schema is documented in docs/BACKENDS.md.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "quant/qscheme.h"

namespace qforge::backends {

// One kind of tensor (weights or activations): its grid and the algorithms that calibrate it.
struct QuantSpec {
  quant::QScheme scheme;  // scheme.axis: -1 per-tensor; >= 0 means "per channel" (axis per op)
  std::string observer = "MinMax";
  std::map<std::string, double> observer_options;
  std::string fake_quantizer = "Fixed";
  std::map<std::string, double> fake_quantizer_options;
};

enum class OpRole {
  Quantizable,  // a quantization unit: weights and activation inputs and/or output quantized
  SharesInput,  // moves or selects values (MaxPool, Reshape): output keeps its input's qparams
  Fixed,        // output quantized with fixed qparams known from the function's range (Sigmoid)
  Never,        // never quantized, inputs and outputs stay float (Shape, index inputs)
};

const char* toString(OpRole role);

struct OpTrait {
  OpRole role = OpRole::Quantizable;
  // Quantizable: input slots that carry activations to quantize; empty means every float input
  // that is not a weight or bias slot and not a constant.
  std::vector<int> activation_inputs;
  // Fixed: the output's grid and parameters.
  double fixed_scale = 0;
  int64_t fixed_zero_point = 0;
  bool fixed_unsigned = false;
};

// One step of a fusion pattern: alternative op types ("Relu|Clip"), optionally skippable.
struct FusionStep {
  std::vector<std::string> op_types;
  bool optional = false;

  bool accepts(const std::string& op_type) const;
};

// A chain of ops that runs as one quantized kernel on the hardware: no quantization point
// inside it. The first step is the unit's anchor (the op whose weights are quantized).
struct FusionPattern {
  std::vector<FusionStep> steps;
  std::string str() const;  // "Conv|ConvTranspose, BatchNormalization?, Relu|Clip?"
};

// Where quantization points go around each unit.
struct Placement {
  bool unit_inputs = true;     // TensorRT, NNIE, QDQ: quantize what a unit reads
  bool unit_outputs = false;   // SNPE, PPL, STPU (with inputs), Vitis (alone)
  bool graph_inputs = false;   // always quantize graph inputs, whoever reads them
  bool graph_outputs = false;  // quantize graph outputs produced by quantized units
};

// How biases of quantized units are represented on the hardware.
struct BiasRule {
  enum class Mode {
    Float,    // bias added in float / high precision (not simulated)
    Derived,  // int32 (bits) with scale = s_input * s_weight, zero point 0
    Own,      // own quantizer with `scheme` (Vitis: 8-bit power-of-two)
  };
  Mode mode = Mode::Float;
  int bits = 32;
  quant::QScheme scheme;  // Own only
  std::string observer = "MinMax";
};

struct Constraints {
  bool zero_point_zero = false;      // every zero point is 0 (TensorRT explicit quantization)
  bool unsigned_after_relu = false;  // unsigned grid for activations a ReLU-like op produced
  int first_last_bits = 0;           // > 0: first and last units at this width (academic)
  bool concat_shared_scale = false;  // every Concat input and output shares one quantizer
  BiasRule bias;
};

// What else the hardware runs besides the default specs: the widths a unit may take instead
// (mixed precision, "keep it 16-bit") and whether weights may go per-channel. `qforge analyze`
// suggests only these, and autotune and bit budgets choose only among them; keeping a unit float
// is always possible. Absent: the default widths only, per-channel only if the default is.
struct Alternatives {
  std::vector<int> weight_bits;      // includes the default width
  std::vector<int> activation_bits;  // includes the default width
  bool per_channel_weights = false;
};

struct BackendConfig {
  std::string name;
  std::string description;
  std::vector<std::string> notes;  // where and why the file departs from MQBench's defaults
  QuantSpec weight;
  QuantSpec activation;
  std::map<std::string, OpTrait> ops;  // by ONNX op type; unlisted ops stay float
  std::vector<FusionPattern> fusions;
  Placement placement;
  Constraints constraints;
  Alternatives alternatives;
  // Name of the deploy writer the deploy step uses for this backend ("qdq", "tensorrt", ...).
  std::string deploy_format = "qdq";

  // The trait of `op_type`, or nullptr when the backend leaves it in float.
  const OpTrait* trait(const std::string& op_type) const;
};

// Parses a backend document. `where` names the source in errors ("backends/snpe.json"). Keys are
// checked: an unknown or mistyped key throws qforge::Error naming its path ("weight.bits").
// `resolve_base` returns the JSON of the backend named by "extends" (built-ins by default).
BackendConfig parseBackendConfig(const nlohmann::json& document, const std::string& where);

// A weight/activation spec from its JSON object (keys checked) and back.
QuantSpec parseQuantSpec(const nlohmann::json& object, const std::string& where,
                         const std::string& path);
nlohmann::json toJson(const QuantSpec& spec);

// The names of the built-in backends, in the order docs list them.
std::vector<std::string> builtinBackendNames();
// The JSON text of a built-in backend, or nullptr. Names are matched case-insensitively.
const char* builtinBackendJson(const std::string& name);

// A built-in name ("TensorRT", case-insensitive) or a path to a .json file. Throws qforge::Error
// naming the known backends for an unknown name, and the file and key for a malformed file.
BackendConfig loadBackend(const std::string& name_or_path);
// The backend's document with its "extends" chain merged in: what loadBackend parses, and what a
// saved prepared model keeps so that it loads without the files it came from.
nlohmann::json resolveBackendDocument(const std::string& name_or_path);

}  // namespace qforge::backends
