// `qforge inspect MODEL`: what a model is made of and whether qforge can run it. Names from the
// file are shown through printableName(): UTF-8 as it is, control characters escaped.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/json_report.h"
#include "core/utf8.h"
#include "ir/dump.h"
#include "ir/onnx_import.h"
#include "pipelines/inspect_report.h"

namespace qforge::cli {

namespace {

struct InspectOptions {
  std::string model;
  bool json = false;
  bool dump = false;
};

// The dump's lines, each escaped as a name is (a name in it may hold terminal escapes or a newline
// of its own, which then shows as \x0A).
std::string printableLines(const std::string& text) {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    out += printable(text.substr(start, end - start)) + "\n";
    start = end + 1;
  }
  return out;
}

int runInspect(const InspectOptions& o) {
  Graph graph = importOnnxFile(o.model);
  const nlohmann::json report = pipelines::inspectReport(graph, o.model);
  const int64_t parameters = report["parameters"];
  const auto op_counts = report["ops"].get<std::map<std::string, int>>();
  const auto unsupported = report["unsupported"].get<std::vector<std::string>>();

  if (o.json) {
    std::cout << jsonReportText(report);
    return 0;
  }
  std::cout << "model       " << o.model << "\n"
            << "producer    " << printableName(report["producer"].get<std::string>()) << "\n"
            << "ir_version  " << graph.model.ir_version << "\n"
            << "opsets     ";
  for (const auto& [domain, version] : graph.model.opset_imports) {
    std::cout << " " << (domain.empty() ? "ai.onnx" : printableName(domain)) << ":" << version;
  }
  std::cout << "\nnodes       " << graph.nodeCount() << "\nparameters  " << parameters << "\n";
  for (const Value* v : graph.inputs()) {
    if (!v->isInitializer())
      std::cout << "input       " << printableName(v->name()) << " " << printableName(v->type.str())
                << "\n";
  }
  for (const Value* v : graph.outputs()) {
    std::cout << "output      " << printableName(v->name()) << " " << printableName(v->type.str())
              << "\n";
  }
  std::cout << "ops        ";
  for (const auto& [op, count] : op_counts)
    std::cout << " " << printableName(op) << "x" << count;
  std::cout << "\n";
  if (unsupported.empty()) {
    std::cout << "qforge can run every op of this model\n";
  } else {
    std::cout << "qforge cannot run yet:\n";
    for (const auto& line : unsupported)
      std::cout << "  " << printableName(line) << "\n";
  }
  if (o.dump) std::cout << "\n" << printableLines(dumpGraph(graph));
  return 0;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> addInspectCommand(CLI::App& app) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* sub = app.add_subcommand("inspect",
                                     "Show a model's ops, opsets, inputs, outputs, "
                                     "parameter count and unsupported ops");
  sub->add_option("model", options->model, "ONNX model file")
      ->type_name(value_type::kFile)
      ->required();
  sub->add_flag("--json", options->json, "Print machine-readable JSON");
  sub->add_flag("--dump", options->dump, "Also print the graph as text");
  return {sub, [options] { return runInspect(*options); }};
}

}  // namespace qforge::cli
