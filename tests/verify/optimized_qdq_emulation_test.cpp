// verify's emulation of the QDQ and QOperator models on the graphs ONNX Runtime optimized them
// into: when a kernel of the emulation fails on such a graph, the QOperator model's own emulation
// takes over from the first step and a note says why, and verify still passes; it is never a
// failure of the model.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "exec/ort_emulation.h"
#include "pipelines/verify_pipeline.h"
#include "support/cli_runner.h"
#include "support/onnx_builder.h"
#include "support/ort_dir.h"

namespace qforge::testing {
namespace {

std::string quantizedResNet(const std::string& backend) {
  const std::string out = makeTempDir("optimized-qdq") + "/" + backend;
  const CliResult r =
      runCli("quantize " + std::string(QFORGE_SOURCE_DIR) + "/models/zoo/resnet.onnx --backend " +
             backend + " --calib-batches 2 --calib-batch 32 --out " + out + " --quiet");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return out;
}

const verify::Comparison* find(const verify::VerifyReport& report, const std::string& model,
                               const std::string& reference) {
  for (const verify::Comparison& c : report.comparisons) {
    if (c.model == model && c.reference == reference) return &c;
  }
  return nullptr;
}

pipelines::VerifyPipelineResult verifyWith(const std::string& dir, const OpRegistry& emulation) {
  pipelines::VerifyPipelineOptions o;
  o.dir = dir;
  o.limit = 64;
  o.verify.ort.ort_dir = testOrtDir();
  o.verify.emulation = &emulation;
  return pipelines::runVerify(o);
}

TEST(OptimizedQdqEmulation, AKernelThatFailsOnOrtsGraphHandsOverToTheQOperatorEmulation) {
  const std::string dir = quantizedResNet("TensorRT");
  // As shipped: ORT's graph (FusedConv on MLAS's float SGEMMs) is emulated exactly.
  const auto fine = verifyWith(dir, ortEmulationRegistry());
  const verify::Comparison* exact = find(fine.report, "qdq", "emulation");
  ASSERT_NE(exact, nullptr);
  EXPECT_EQ(exact->exact_fraction, 1.0);
  const verify::Comparison* qop_exact = find(fine.report, "qoperator", "emulation");
  ASSERT_NE(qop_exact, nullptr);
  EXPECT_EQ(qop_exact->exact_fraction, 1.0);
  // A FusedConv kernel that fails at run time.
  OpRegistry broken = ortEmulationRegistry();
  broken.replaceLowering("com.microsoft", "FusedConv", [](const OpContext& ctx) {
    ctx.fail("deliberately broken for the test");
    return std::vector<at::Tensor>{};
  });
  const auto handed = verifyWith(dir, broken);
  EXPECT_TRUE(handed.report.passed);
  const verify::Comparison* fallback = find(handed.report, "qdq", "emulation");
  ASSERT_NE(fallback, nullptr);
  EXPECT_EQ(fallback->samples, 64);  // every step, all against the QOperator model's emulation
  EXPECT_LT(fallback->exact_fraction, 0.99);
  // ORT's graph of the QOperator model fuses its float Conv + Add groups too.
  const verify::Comparison* qop_fallback = find(handed.report, "qoperator", "emulation");
  ASSERT_NE(qop_fallback, nullptr);
  EXPECT_EQ(qop_fallback->samples, 64);  // every step, against its own model's emulation
  bool said = false, qop_said = false;
  for (const std::string& note : handed.report.notes) {
    const bool handed_over =
        note.find("failed in the emulation") != std::string::npos &&
        note.find("deliberately broken") != std::string::npos &&
        note.find("compared with the QOperator model's emulation") != std::string::npos;
    said = said || (handed_over && note.rfind("qdq model", 0) == 0);
    qop_said = qop_said || (handed_over && note.rfind("qoperator model", 0) == 0);
  }
  EXPECT_TRUE(said);
  EXPECT_TRUE(qop_said);
}

}  // namespace
}  // namespace qforge::testing
