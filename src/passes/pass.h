// A pass: a named graph transformation with run(Graph&, PassContext&). Passes are plain objects
// held by a PassRegistry (by name) and run in order by a PassPipeline, which verifies the graph
// after each one and names the pass in any error. prepare() is the default pipeline of the
// registry's built-in passes; `qforge quantize --passes` and the library run one given as text.
//
// Two kinds, run in this order within one pipeline:
//   - graph passes edit the float graph (constants-to-initializers, fold-bn, cle, ...);
//   - placement passes find the quantization units and insert fake quantizers; they hand their
//     results on through the PassContext (units, settings, points), whose Node pointers a graph
//     pass after them would invalidate.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend_config.h"
#include "ir/graph.h"
#include "passes/activation_values.h"
#include "passes/insert_fake_quant.h"
#include "passes/quant_config.h"
#include "passes/quant_units.h"

namespace qforge::passes {

// What one pass did: how many things it changed (nodes folded, biases added, quantizers
// inserted...) and, for a caller's report, anything else it measured (e.g. CLE's report).
struct PassResult {
  int64_t changes = 0;
  std::any details;
};

// What the passes of one pipeline share.
struct PassContext {
  const backends::BackendConfig* backend = nullptr;  // placement passes need one
  QuantConfig config;                                // the user's overrides and extra ops
  // The default-domain opset upgrade-opset raises the graph to (0: none); prepare() sets the one
  // the backend's deploy files need (passes/deploy_opset.h).
  int64_t target_opset = 0;
  // Handed on by the placement passes, in pipeline order.
  // find-units: which values carry activations (read again by list-float-ops), and the units.
  std::shared_ptr<const ActivationValues> activations;
  std::optional<std::vector<QuantUnit>> units;
  std::optional<std::vector<UnitSettings>> settings;  // resolve-settings, parallel to units
  std::optional<std::vector<std::string>> float_ops;  // list-float-ops
  std::optional<std::vector<QuantPoint>> points;      // insert-fake-quant

  // The backend; throws naming `pass` when the pipeline was given none.
  const backends::BackendConfig& requireBackend(const std::string& pass) const;
  // The units; throws naming `pass` when find-units has not run before it.
  std::vector<QuantUnit>& requireUnits(const std::string& pass);
  // The settings; throws naming `pass` when resolve-settings has not run before it.
  const std::vector<UnitSettings>& requireSettings(const std::string& pass) const;
};

enum class PassKind { Graph, Placement };

class Pass {
 public:
  using Run = std::function<PassResult(Graph&, PassContext&)>;

  Pass(std::string name, PassKind kind, std::string summary, Run run);

  const std::string& name() const { return name_; }
  PassKind kind() const { return kind_; }
  const std::string& summary() const { return summary_; }  // one line for --help and errors
  PassResult run(Graph& graph, PassContext& context) const { return run_(graph, context); }

 private:
  std::string name_;
  PassKind kind_;
  std::string summary_;
  Run run_;
};

}  // namespace qforge::passes
