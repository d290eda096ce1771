// An ordered list of passes, parsed from text ("constants-to-initializers,fold-bn,find-units") or
// built in code, and run with the graph verified after each pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "passes/pass.h"
#include "passes/pass_registry.h"

namespace qforge::passes {

// What one pass of a run did.
struct PassRecord {
  std::string name;
  PassResult result;
  double seconds = 0;
};

class PassPipeline {
 public:
  PassPipeline() = default;
  // Passes named in `text`, comma-separated (spaces around names ignored), looked up in
  // `registry`. Throws qforge::Error for an empty list, an unknown or repeated name, or a graph
  // pass after a placement pass.
  static PassPipeline parse(const std::string& text,
                            const PassRegistry& registry = PassRegistry::builtin());

  // Appends `pass` (kept by pointer: the registry must outlive the pipeline); same checks as
  // parse().
  void add(const Pass& pass);
  bool contains(const std::string& name) const;
  bool hasPlacement() const;
  const std::vector<const Pass*>& passes() const { return passes_; }
  std::string text() const;  // the names, comma-separated

  // Runs every pass in order. After each, the graph is verified; an error from the pass or the
  // verifier is rethrown as "<where>, pass 'name': message". Returns one record per pass.
  std::vector<PassRecord> run(Graph& graph, PassContext& context,
                              const std::string& where = "prepare") const;

 private:
  std::vector<const Pass*> passes_;
};

}  // namespace qforge::passes
