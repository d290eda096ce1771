#include "algos/algo_passes.h"

#include "algos/equalization.h"

namespace qforge::algos {

namespace {

passes::Pass equalizationPass(const std::string& name, bool relu6_to_relu) {
  return passes::Pass(name, passes::PassKind::Graph,
                      relu6_to_relu
                          ? "cross-layer equalization, ReLU6 between equalized layers becomes ReLU"
                          : "cross-layer equalization of Conv pairs with high-bias absorption",
                      [relu6_to_relu](Graph& graph, passes::PassContext&) -> passes::PassResult {
                        EqualizationOptions options;
                        options.relu6_to_relu = relu6_to_relu;
                        EqualizationReport report = equalizeCrossLayer(graph, options);
                        const auto pairs = static_cast<int64_t>(report.pairs.size());
                        return {pairs, std::move(report)};
                      });
}

}  // namespace

void registerAlgoPasses(passes::PassRegistry& registry) {
  registry.add(equalizationPass("cle", false));
  registry.add(equalizationPass("cle-relu6", true));
}

const passes::PassRegistry& builtinPasses() {
  static const passes::PassRegistry registry = [] {
    passes::PassRegistry r;
    passes::registerBuiltinPasses(r);
    registerAlgoPasses(r);
    return r;
  }();
  return registry;
}

}  // namespace qforge::algos
