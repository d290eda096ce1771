// When verify may trust the integer emulation over the float simulation: only when ONNX Runtime's
// QDQ model meets the emulation criteria on every output.
#include <gtest/gtest.h>

#include "verify/verify.h"

namespace qforge::verify {
namespace {

OutputComparison output(const std::string& name, double exact, double max_steps) {
  OutputComparison o;
  o.output = name;
  o.exact_fraction = exact;
  o.max_steps = max_steps;
  return o;
}

Comparison comparison(const std::string& model, const std::string& reference,
                      std::vector<OutputComparison> outputs) {
  Comparison c;
  c.model = model;
  c.reference = reference;
  c.outputs = std::move(outputs);
  return c;
}

TEST(ExactQdqEmulation, OnlyAQdqEmulationExactOnEveryOutputCounts) {
  const VerifyOptions options;  // min_exact 0.999, max_emulation_steps 1
  const std::vector<Comparison> exact = {
      comparison("qdq", "simulation", {output("y", 0.0, 1.7)}),
      comparison("qdq", "emulation", {output("y", 1.0, 0.0), output("z", 0.9995, 1.0)}),
      comparison("qoperator", "emulation", {output("y", 1.0, 0.0)})};
  const Comparison* found = exactEmulation(exact, options, "qdq");
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found, &exact[1]);

  // One output below the exact share, or one element two steps off: not exact.
  std::vector<Comparison> share = exact;
  share[1].outputs[1].exact_fraction = 0.99;
  EXPECT_EQ(exactEmulation(share, options, "qdq"), nullptr);
  std::vector<Comparison> off = exact;
  off[1].outputs[0].max_steps = 2.0;
  EXPECT_EQ(exactEmulation(off, options, "qdq"), nullptr);
  // The QOperator model's emulation says nothing about what ORT makes of the QDQ model.
  const std::vector<Comparison> qoperator_only = {exact[0], exact[2]};
  EXPECT_EQ(exactEmulation(qoperator_only, options, "qdq"), nullptr);
  // Thresholds are the options'.
  VerifyOptions strict;
  strict.min_exact = 1.0;
  EXPECT_EQ(exactEmulation(exact, strict, "qdq"), nullptr);
}

}  // namespace
}  // namespace qforge::verify
