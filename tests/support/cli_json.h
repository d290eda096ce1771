// The JSON report a CLI run printed (--json), for the CLI tests.
#pragma once

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

#include "support/cli_runner.h"

namespace qforge::testing {

// The JSON object from the first '{' of the run's output on (an empty object, and a test
// failure, when there is none).
inline nlohmann::json jsonOf(const CliResult& r) {
  const size_t start = r.out.find('{');
  EXPECT_NE(start, std::string::npos) << r.out;
  return start == std::string::npos ? nlohmann::json::object()
                                    : nlohmann::json::parse(r.out.substr(start));
}

// The comparison `model` vs `reference` ("qdq", "emulation") of a `qforge verify --json` report,
// or nullptr.
inline const nlohmann::json* verifyComparison(const nlohmann::json& report,
                                              const std::string& model,
                                              const std::string& reference) {
  for (const auto& c : report["comparisons"]) {
    if (c["model"] == model && c["reference"] == reference) return &c;
  }
  return nullptr;
}

}  // namespace qforge::testing
