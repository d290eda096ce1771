#include "passes/pass_pipeline.h"

#include <chrono>

#include "core/error.h"
#include "core/strings.h"
#include "ir/verifier.h"

namespace qforge::passes {

namespace {

std::string trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

}  // namespace

PassPipeline PassPipeline::parse(const std::string& text, const PassRegistry& registry) {
  PassPipeline pipeline;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string name = trim(text.substr(start, comma - start));
    require(!name.empty(), "pass list '" + text +
                               "' has an empty name; write names separated by "
                               "commas, e.g. 'fold-bn,cle'");
    pipeline.add(registry.get(name));
    start = comma + 1;
  }
  return pipeline;
}

void PassPipeline::add(const Pass& pass) {
  require(!contains(pass.name()), "pass '" + pass.name() + "' is listed twice");
  if (pass.kind() == PassKind::Graph && hasPlacement()) {
    throw Error("pass '" + pass.name() +
                "' edits the float graph and must come before the placement passes (" + text() +
                ")");
  }
  passes_.push_back(&pass);
}

bool PassPipeline::contains(const std::string& name) const {
  for (const Pass* p : passes_) {
    if (p->name() == name) return true;
  }
  return false;
}

bool PassPipeline::hasPlacement() const {
  for (const Pass* p : passes_) {
    if (p->kind() == PassKind::Placement) return true;
  }
  return false;
}

std::string PassPipeline::text() const {
  std::vector<std::string> names;
  for (const Pass* p : passes_)
    names.push_back(p->name());
  return join(names, ",");
}

std::vector<PassRecord> PassPipeline::run(Graph& graph, PassContext& context,
                                          const std::string& where) const {
  std::vector<PassRecord> records;
  for (const Pass* pass : passes_) {
    const auto start = std::chrono::steady_clock::now();
    try {
      PassRecord record{pass->name(), pass->run(graph, context), 0};
      verifyGraph(graph);
      record.seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      records.push_back(std::move(record));
    } catch (const Error& e) {
      throw e.within(where + ", pass '" + pass->name() + "'");
    }
  }
  return records;
}

}  // namespace qforge::passes
