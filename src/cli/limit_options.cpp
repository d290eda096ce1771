// The resource-limit flags (core/resource_limits.h) of the commands that read models:
// --max-model-bytes, --max-tensor-bytes, --max-subgraph-depth, --max-nodes. Their defaults come
// from the environment (QFORGE_MAX_*) or the built-in caps, shown in --help.
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "core/resource_limits.h"

namespace qforge::cli {

namespace {

// What the flags said, applied once the command line parsed (a bad size is then an error with
// exit 2, not an exception out of the parser).
struct LimitFlags {
  std::string model_bytes, tensor_bytes, subgraph_depth, nodes;
};

LimitFlags& limitFlags() {
  static LimitFlags flags;
  return flags;
}

// A whole number of at least 1.
int64_t parseCount(const std::string& text, const std::string& flag) {
  size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  require(used == text.size() && used > 0 && n >= 1,
          flag + " '" + text + "' must be a whole number of at least 1");
  return n;
}

}  // namespace

void addLimitOptions(CLI::App* command) {
  LimitFlags& f = limitFlags();
  const ResourceLimits defaults;
  const std::string group = "Resource limits";
  command
      ->add_option("--max-model-bytes", f.model_bytes,
                   "Refuse a model whose initializers add up to more (default " +
                       byteSizeText(defaults.max_model_bytes) + ")")
      ->type_name("SIZE")
      ->group(group);
  command
      ->add_option("--max-tensor-bytes", f.tensor_bytes,
                   "Refuse any one tensor larger than this, read or computed (default " +
                       byteSizeText(defaults.max_tensor_bytes) + ")")
      ->type_name("SIZE")
      ->group(group);
  command
      ->add_option("--max-subgraph-depth", f.subgraph_depth,
                   "Refuse control-flow bodies nested deeper (default " +
                       std::to_string(defaults.max_subgraph_depth) + ")")
      ->type_name("N")
      ->group(group);
  command
      ->add_option("--max-nodes", f.nodes,
                   "Refuse a model with more nodes, subgraphs included (default " +
                       std::to_string(defaults.max_nodes) + ")")
      ->type_name("N")
      ->group(group);
}

void applyLimitOptions() {
  const LimitFlags& f = limitFlags();
  ResourceLimits limits = resourceLimitsFromEnvironment();
  if (!f.model_bytes.empty())
    limits.max_model_bytes = parseByteSize(f.model_bytes, "--max-model-bytes");
  if (!f.tensor_bytes.empty())
    limits.max_tensor_bytes = parseByteSize(f.tensor_bytes, "--max-tensor-bytes");
  if (!f.subgraph_depth.empty())
    limits.max_subgraph_depth = parseCount(f.subgraph_depth, "--max-subgraph-depth");
  if (!f.nodes.empty()) limits.max_nodes = parseCount(f.nodes, "--max-nodes");
  setResourceLimits(limits);
}

}  // namespace qforge::cli
