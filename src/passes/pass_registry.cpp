#include "passes/pass_registry.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"

namespace qforge::passes {

namespace {

bool isPipelineName(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

}  // namespace

void PassRegistry::add(Pass pass) {
  require(isPipelineName(pass.name()),
          "pass name '" + pass.name() + "' must be lowercase letters, digits and '-'");
  require(find(pass.name()) == nullptr, "pass '" + pass.name() + "' is registered twice");
  passes_.push_back(std::move(pass));
}

const Pass* PassRegistry::find(const std::string& name) const {
  for (const Pass& p : passes_) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

const Pass& PassRegistry::get(const std::string& name) const {
  if (const Pass* p = find(name)) return *p;
  throw Error("unknown pass '" + name + "'; known: " + join(names()));
}

std::vector<std::string> PassRegistry::names() const {
  std::vector<std::string> out;
  for (const Pass& p : passes_)
    out.push_back(p.name());
  return out;
}

const PassRegistry& PassRegistry::builtin() {
  static const PassRegistry registry = [] {
    PassRegistry r;
    registerBuiltinPasses(r);
    return r;
  }();
  return registry;
}

}  // namespace qforge::passes
