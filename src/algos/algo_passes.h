// The passes of this layer, by name, beside the passes layer's own: what `--passes` and
// PrepareOptions::passes can name.
//   cle          cross-layer equalization with high-bias absorption (algos/equalization.h)
//   cle-relu6    the same, replacing ReLU6 between equalized layers by ReLU
// Their PassResult::details hold the EqualizationReport.
#pragma once

#include "passes/pass_registry.h"

namespace qforge::algos {

void registerAlgoPasses(passes::PassRegistry& registry);

// passes::PassRegistry::builtin()'s passes followed by this layer's.
const passes::PassRegistry& builtinPasses();

}  // namespace qforge::algos
