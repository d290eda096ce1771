// prepare(): a float model in, a model ready to calibrate or train out. It runs a pipeline of
// passes (passes/pass_pipeline.h), by default:
//   constants-to-initializers   Constant nodes become initializers (later passes read Clip
//                               bounds, shapes as constants)
//   float16-to-float32          a model converted to float16 widened to float32 inside, its
//                               float16 inputs and outputs kept behind Casts
//   fold-constants              nodes on constants only evaluated into initializers, so shape
//                               arithmetic on constants is no computation to quantize
//   upgrade-opset               the opset raised to what the deploy files need
//                               (passes/deploy_opset.h), before calibration
//   fold-bn                     BatchNormalization folded into Conv/ConvTranspose/Gemm (before
//                               units: BN is not a unit), except after an op the backend
//                               quantizes without fusing BN (Academic)
//   find-units                  quantization units per the backend's roles and fusions
//   resolve-settings            each unit's settings: backend defaults, the user's config,
//                               first/last-layer width
//   list-float-ops              what stays float outside the units, for the report
//   insert-fake-quant           FakeQuantize nodes per the placement policy
// and then creates the quantizers. QAT keeps BN (no fold-bn) and adds zero-bias-under-bn after
// find-units. The graph is verified after each pass; errors name the pass.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend_config.h"
#include "exec/executor.h"
#include "ir/graph.h"
#include "passes/insert_fake_quant.h"
#include "passes/pass_pipeline.h"
#include "passes/quant_config.h"
#include "passes/quant_units.h"
#include "quant/fake_quantizer.h"
#include "quant/registry.h"

namespace qforge::passes {

// What the report says about one unit.
struct UnitSummary {
  std::string name;
  std::string ops;      // "Conv+Relu"
  std::string pattern;  // fusion pattern, "" for a lone op
  bool skipped = false;
  UnitSettings settings;
};

struct PrepareOptions {
  QuantConfig config;
  bool fold_batchnorm = true;  // QAT keeps BN as its own trainable op
  // The pass list as text ("cle,fold-bn"); empty: defaultPreparePasses(fold_batchnorm). A list of
  // graph passes only gets the placement passes appended (with zero-bias-under-bn when
  // fold_batchnorm is false); a list with placement passes runs as given and must place
  // quantizers.
  std::string passes;
  // Where the names of `passes` resolve (PassRegistry::builtin() when null; algos::builtinPasses()
  // adds cle).
  const PassRegistry* pass_registry = nullptr;
  // Registries the backend's observer and fake quantizer names resolve in (built-ins when null).
  const quant::ObserverRegistry* observers = nullptr;
  const quant::FakeQuantizerRegistry* fake_quantizers = nullptr;
};

class PreparedModel {
 public:
  PreparedModel(Graph graph, backends::BackendConfig backend);
  PreparedModel(const PreparedModel&) = delete;
  PreparedModel& operator=(const PreparedModel&) = delete;

  Graph& graph() { return graph_; }
  const Graph& graph() const { return graph_; }
  const backends::BackendConfig& backend() const { return backend_; }
  const std::vector<UnitSummary>& units() const { return units_; }
  const std::vector<QuantPoint>& points() const { return points_; }
  // Nodes that compute in float although they are not pure data movement ("Softmax: node a,
  // node b"), for the report.
  const std::vector<std::string>& floatOps() const { return float_ops_; }
  // What each pass of prepare() did, in order (empty for a model loaded from disk).
  const std::vector<PassRecord>& passRecords() const { return pass_records_; }

  quant::FakeQuantizer* quantizer(const std::string& name) const;
  std::vector<quant::FakeQuantizer*> quantizers() const;  // in point order

  // Every quantizer at once. Quantizers without an observer (fixed ranges, derived biases) are
  // off while the others calibrate, and on whenever quantization is.
  void setMode(quant::FakeQuantMode mode);

  // The executor over the prepared graph, with the FakeQuantize op. Built on first use, and built
  // again when the graph's structure has changed since (Graph::structureVersion): an edit by any
  // pass or caller is seen without bookkeeping, and hooks added to the old executor are gone.
  Executor& executor();

 private:
  friend std::unique_ptr<PreparedModel> assemblePreparedModel(Graph, backends::BackendConfig,
                                                              std::vector<UnitSummary>,
                                                              std::vector<QuantPoint>,
                                                              std::vector<std::string>,
                                                              const PrepareOptions&);
  friend std::unique_ptr<PreparedModel> prepare(Graph, const backends::BackendConfig&,
                                                const PrepareOptions&);
  Graph graph_;
  backends::BackendConfig backend_;
  std::vector<UnitSummary> units_;
  std::vector<QuantPoint> points_;
  std::vector<std::string> float_ops_;
  std::vector<PassRecord> pass_records_;
  std::map<std::string, std::unique_ptr<quant::FakeQuantizer>> quantizers_;
  std::unique_ptr<OpRegistry> registry_;
  std::unique_ptr<Executor> executor_;
  uint64_t executor_structure_ = 0;  // graph_.structureVersion() when executor_ was built
};

// The placement passes, in the order prepare() runs them after the graph passes.
inline constexpr const char* kPlacementPasses =
    "find-units,resolve-settings,list-float-ops,insert-fake-quant";

// prepare()'s pass list when PrepareOptions::passes is empty.
std::string defaultPreparePasses(bool fold_batchnorm);

// The pipeline prepare() runs for `options` (throws for a bad pass list, before any work).
PassPipeline preparePipeline(const PrepareOptions& options);

std::unique_ptr<PreparedModel> prepare(Graph graph, const backends::BackendConfig& backend,
                                       const PrepareOptions& options = {});

// A prepared model from its parts: `graph` already holds the FakeQuantize nodes of `points`; the
// quantizers are created from the points' specs (in `options`' registries), without parameters.
// prepare() ends here, and so does loading a saved prepared model (prepared_io.h).
std::unique_ptr<PreparedModel> assemblePreparedModel(Graph graph, backends::BackendConfig backend,
                                                     std::vector<UnitSummary> units,
                                                     std::vector<QuantPoint> points,
                                                     std::vector<std::string> float_ops,
                                                     const PrepareOptions& options = {});

}  // namespace qforge::passes
