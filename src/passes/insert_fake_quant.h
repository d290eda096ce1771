// Inserts FakeQuantize nodes where the backend's hardware quantizes: weights of every unit
// (per-channel on the right axis), activation inputs and/or outputs per the placement policy,
// graph inputs/outputs per its rules, biases per its bias rule. Never two quantizers on one
// value, never one inside a fused unit; Concat inputs share one quantizer where required.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backends/backend_config.h"
#include "ir/graph.h"
#include "passes/quant_units.h"

namespace qforge::passes {

// What one unit is quantized with, after the user's overrides.
struct UnitSettings {
  backends::QuantSpec weight;
  backends::QuantSpec activation;
  bool skip = false;  // the user asked for this unit to stay float
};

enum class PointKind { Weight, Bias, Activation, FixedOutput };
const char* toString(PointKind kind);

// One quantizer of the prepared model (several FakeQuantize nodes may share it).
struct QuantPoint {
  PointKind kind = PointKind::Activation;
  std::string quantizer;           // the FakeQuantizer's name
  std::string value;               // the float value it quantizes (first one when shared)
  std::string unit;                // the unit that asked for it ("" for graph inputs/outputs)
  backends::QuantSpec spec;        // final scheme: axis, signedness, bits resolved
  std::vector<std::string> nodes;  // the FakeQuantize nodes that run it
  // FixedOutput: the parameters the function's range dictates.
  double fixed_scale = 0;
  int64_t fixed_zero_point = 0;
  // Bias with scale s_input * s_weight: the two quantizers, and the integer width.
  std::string bias_input_quantizer;
  std::string bias_weight_quantizer;
  int bias_bits = 32;
};

// Edits `graph` and returns the quantizers to create, in graph order. `settings` is parallel to
// `units`.
std::vector<QuantPoint> insertFakeQuantizers(Graph& graph, const std::vector<QuantUnit>& units,
                                             const std::vector<UnitSettings>& settings,
                                             const backends::BackendConfig& backend);

// The quantizer whose output `v` carries, looking back through FakeQuantize nodes and ops the
// backend says share their input's qparams; nullopt when `v` is not quantized.
std::optional<std::string> quantizerFeeding(const Value* v, const backends::BackendConfig& backend);

}  // namespace qforge::passes
