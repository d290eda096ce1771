// Passes by name. builtin() holds the passes of this layer (the steps of prepare()); layers above
// add theirs to a copy (algos::builtinPasses() adds cross-layer equalization).
#pragma once

#include <string>
#include <vector>

#include "passes/pass.h"

namespace qforge::passes {

class PassRegistry {
 public:
  // Adds `pass`; throws when its name is empty, has characters a pipeline text cannot hold
  // (anything but lowercase letters, digits and '-'), or is taken.
  void add(Pass pass);
  // The pass called `name`, or nullptr.
  const Pass* find(const std::string& name) const;
  // The pass called `name`; throws "unknown pass 'x'; known: a, b, ..." when there is none.
  const Pass& get(const std::string& name) const;
  std::vector<std::string> names() const;  // in registration order

  // The passes of this layer, in the order prepare() runs them.
  static const PassRegistry& builtin();

 private:
  std::vector<Pass> passes_;
};

// The built-in passes, registered in pipeline order:
//   constants-to-initializers, float16-to-float32, fold-constants, upgrade-opset, fold-bn (graph
//   passes);
//   find-units, zero-bias-under-bn, resolve-settings, list-float-ops, insert-fake-quant
//   (placement passes).
void registerBuiltinPasses(PassRegistry& registry);

}  // namespace qforge::passes
