// What `qforge inspect` reports about a model, as JSON, for the CLI and the Python binding: its
// producer, IR version and opsets, node and parameter counts, ops by type, inputs and outputs
// with dtypes and shapes, and the ops qforge cannot run.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "ir/graph.h"

namespace qforge::pipelines {

// `model_path` only names the model in the report.
nlohmann::json inspectReport(const Graph& graph, const std::string& model_path);

}  // namespace qforge::pipelines
