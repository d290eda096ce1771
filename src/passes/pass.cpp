#include "passes/pass.h"

#include "core/error.h"

namespace qforge::passes {

Pass::Pass(std::string name, PassKind kind, std::string summary, Run run)
    : name_(std::move(name)), kind_(kind), summary_(std::move(summary)), run_(std::move(run)) {}

const backends::BackendConfig& PassContext::requireBackend(const std::string& pass) const {
  require(backend != nullptr, "pass '" + pass + "' places quantizers and needs a backend");
  return *backend;
}

std::vector<QuantUnit>& PassContext::requireUnits(const std::string& pass) {
  require(units.has_value(),
          "pass '" + pass + "' needs the units of 'find-units': list it earlier in the pipeline");
  return *units;
}

const std::vector<UnitSettings>& PassContext::requireSettings(const std::string& pass) const {
  require(settings.has_value(), "pass '" + pass +
                                    "' needs the settings of 'resolve-settings': list it earlier "
                                    "in the pipeline");
  return *settings;
}

}  // namespace qforge::passes
