#include "pipelines/inspect_report.h"

#include <map>
#include <vector>

#include "exec/executor.h"

namespace qforge::pipelines {

namespace {

nlohmann::json valueJson(const Value& v) {
  nlohmann::json shape = nlohmann::json::array();
  if (v.type.shape) {
    for (const Dim& d : *v.type.shape) {
      if (d.isKnown()) {
        shape.push_back(d.value);
      } else {
        shape.push_back(d.param.empty() ? "?" : d.param);
      }
    }
  }
  return {{"name", v.name()}, {"dtype", dtypeName(v.type.dtype)}, {"shape", shape}};
}

}  // namespace

nlohmann::json inspectReport(const Graph& graph, const std::string& model_path) {
  std::map<std::string, int> op_counts;
  for (const Node* n : graph.nodes()) {
    op_counts[(n->domain().empty() ? "" : n->domain() + "::") + n->opType()]++;
  }
  int64_t parameters = 0;
  for (const Value* v : graph.initializers())
    parameters += v->initializer().numel();

  nlohmann::json report;
  report["model"] = model_path;
  report["ir_version"] = graph.model.ir_version;
  report["opsets"] = graph.model.opset_imports;
  report["producer"] = graph.model.producer_name + " " + graph.model.producer_version;
  report["nodes"] = graph.nodeCount();
  report["ops"] = op_counts;
  report["parameters"] = parameters;
  report["inputs"] = nlohmann::json::array();
  for (const Value* v : graph.inputs()) {
    if (!v->isInitializer()) report["inputs"].push_back(valueJson(*v));
  }
  report["outputs"] = nlohmann::json::array();
  for (const Value* v : graph.outputs())
    report["outputs"].push_back(valueJson(*v));
  report["unsupported"] = Executor::unsupportedOps(graph);
  return report;
}

}  // namespace qforge::pipelines
