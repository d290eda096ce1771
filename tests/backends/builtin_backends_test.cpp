// The effective op roles of every built-in backend, pinned. The files list only exceptions to the
// op table's defaults (layout-only ops share their input's quantizer); what they resolve to must
// stay what the complete lists said before (builtin_backend_roles.json, written from them).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "backends/backend_config.h"

namespace qforge::testing {
namespace {

using backends::BackendConfig;
using backends::OpTrait;
using nlohmann::json;

json pinnedRoles() {
  std::ifstream in(std::string(QFORGE_SOURCE_DIR) + "/tests/backends/builtin_backend_roles.json");
  return json::parse(in);
}

// `trait` against its pinned form: a role string, or an object with role, inputs and the fixed
// role's scale, zero point and grid.
void expectTrait(const OpTrait& trait, const json& pinned) {
  if (pinned.is_string()) {
    EXPECT_EQ(backends::toString(trait.role), pinned.get<std::string>());
    EXPECT_TRUE(trait.activation_inputs.empty());
    return;
  }
  EXPECT_EQ(backends::toString(trait.role), pinned.at("role").get<std::string>());
  EXPECT_EQ(trait.activation_inputs, pinned.value("inputs", std::vector<int>{}));
  if (pinned.contains("scale")) {
    EXPECT_DOUBLE_EQ(trait.fixed_scale, pinned.at("scale").get<double>());
    EXPECT_EQ(trait.fixed_zero_point, pinned.at("zero_point").get<int64_t>());
    EXPECT_EQ(trait.fixed_unsigned, pinned.at("unsigned").get<bool>());
  }
}

TEST(BuiltinBackends, EffectiveRolesArePinned) {
  const json pinned = pinnedRoles();
  const std::vector<std::string> names = backends::builtinBackendNames();
  ASSERT_EQ(pinned.size(), names.size());
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(pinned.contains(name));
    const json& roles = pinned.at(name);
    const BackendConfig config = backends::loadBackend(name);
    EXPECT_EQ(config.ops.size(), roles.size());
    for (const auto& [op, trait] : roles.items()) {
      SCOPED_TRACE(op);
      ASSERT_NE(config.trait(op), nullptr);
      expectTrait(*config.trait(op), trait);
    }
    for (const auto& [op, trait] : config.ops) {
      EXPECT_TRUE(roles.contains(op)) << op << " is " << backends::toString(trait.role);
    }
  }
}

TEST(BuiltinBackends, FilesListNoRoleTheTableGivesByDefault) {
  for (const std::string& name : backends::builtinBackendNames()) {
    const json doc = json::parse(backends::builtinBackendJson(name));
    for (const char* op :
         {"Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Dropout"}) {
      const json* role = doc.at("ops").contains(op) ? &doc.at("ops").at(op) : nullptr;
      EXPECT_TRUE(role == nullptr || role->is_null()) << name << " lists " << op;
    }
  }
}

}  // namespace
}  // namespace qforge::testing
