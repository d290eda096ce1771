// `qforge deploy` and `qforge verify` as a user runs them: the zoo ResNet quantized, deployed and
// run in ONNX Runtime (installed by scripts/install-ort.sh into build/ort, or $QFORGE_ORT_DIR),
// a deliberately broken layer caught and named, and missing runtimes explained.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ir/onnx_export.h"
#include "ir/onnx_import.h"
#include "support/cli_json.h"
#include "support/cli_runner.h"
#include "support/onnx_builder.h"
#include "support/ort_dir.h"

namespace qforge::testing {
namespace {

std::string zoo(const std::string& name) {
  return std::string(QFORGE_SOURCE_DIR) + "/models/zoo/" + name + ".onnx";
}

// Quantizes the zoo ResNet for `backend` into a new directory (2 calibration batches).
std::string quantized(const std::string& backend) {
  const std::string out = makeTempDir("deploy_verify") + "/" + backend;
  const CliResult r = runCli("quantize " + zoo("resnet") + " --backend " + backend +
                             " --calib-batches 2 --calib-batch 32 --out " + out + " --quiet");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return out;
}

nlohmann::json verifyJson(const std::string& args, int expected_exit) {
  const CliResult r = runCli("verify " + args + " --json", ortEnv());
  EXPECT_EQ(r.exit_code, expected_exit) << r.out;
  return nlohmann::json::parse(r.out.substr(r.out.find('{')));
}

// The activation quantizers deploy.json in `dir` lists with an exported tensor, in its order.
std::vector<std::string> activationQuantizers(const std::string& dir) {
  std::ifstream manifest_file(dir + "/deploy.json");
  const nlohmann::json manifest = nlohmann::json::parse(manifest_file);
  std::vector<std::string> out;
  for (const auto& t : manifest["tensors"]) {
    if (t["role"] == "activation" && manifest["quantized_values"].contains(t["quantizer"]))
      out.push_back(t["quantizer"]);
  }
  return out;
}

// Multiplies the scale of the QuantizeLinear writing `quantizer`'s tensor in dir's QDQ model by
// `factor`; returns that tensor's name.
std::string scaleQuantizeLinear(const std::string& dir, const std::string& quantizer,
                                float factor) {
  std::ifstream manifest_file(dir + "/deploy.json");
  const std::string tensor = nlohmann::json::parse(manifest_file)["quantized_values"][quantizer];
  Graph g = importOnnxFile(dir + "/model.qdq.onnx");
  Value* scale = g.value(tensor)->producer()->input(1);
  scale->setInitializer(scale->initializer() * factor);
  exportOnnxFile(g, dir + "/model.qdq.onnx");
  return tensor;
}

TEST(DeployVerifyCli, IntegerEmulationPredictsOnnxRuntimeOnTheZooResNet) {
  const std::string dir = quantized("ONNX_QNN");
  EXPECT_TRUE(std::filesystem::exists(dir + "/model.qoperator.onnx"));
  const nlohmann::json report = verifyJson(dir + " --limit 200", 0);
  EXPECT_TRUE(report["passed"].get<bool>());
  EXPECT_EQ(report["samples"], 200);
  const nlohmann::json* emu = verifyComparison(report, "qoperator", "emulation");
  ASSERT_NE(emu, nullptr) << report.dump(2);
  EXPECT_EQ((*emu)["top1_agree"], 200);
  EXPECT_GE((*emu)["exact_fraction"].get<double>(), 0.999);
  EXPECT_LE((*emu)["max_steps"].get<double>(), 1.0);
  const nlohmann::json* sim = verifyComparison(report, "qdq", "simulation");
  ASSERT_NE(sim, nullptr);
  EXPECT_EQ((*sim)["top1_agree"], 200);
  // Every path's accuracy is reported, and they agree on these 200 images.
  const auto& acc = report["accuracy"];
  EXPECT_EQ(acc.size(), 4u);
  EXPECT_DOUBLE_EQ(acc["qforge simulation"].get<double>(),
                   acc["ONNX Runtime, QDQ model"].get<double>());
  // The 0.05-point accuracy limit is judged in whole samples: one image of these 200.
  bool gap_judged = false;
  for (const auto& c : report["criteria"]) {
    if (c["metric"] != "accuracy_gap") continue;
    gap_judged = true;
    EXPECT_DOUBLE_EQ(c["threshold"].get<double>(), 1.0 / 200) << c.dump();
  }
  EXPECT_TRUE(gap_judged) << report["criteria"].dump(2);
}

// TensorRT's QDQ model leaves every Conv to ORT's float kernels (no quantizer right after them):
// ORT fuses Conv + Add + Relu into FusedConv and runs MLAS's SGEMM-based convolutions. The
// emulation runs the graph ORT optimized the QDQ model into, with those kernels restated, and
// equals ORT on every logit; the QOperator model's emulation (integer kernels where ORT's QDQ
// model has float ones) was exact on about 79% of them. The QOperator model likewise: ORT fuses
// its float Conv + Add groups too, and its optimized graph is what the emulation runs.
TEST(DeployVerifyCli, TheQdqModelIsEmulatedOnTheGraphOnnxRuntimeOptimizedItInto) {
  const std::string dir = quantized("TensorRT");
  const nlohmann::json report = verifyJson(dir + " --limit 200", 0);
  const nlohmann::json* emu = verifyComparison(report, "qdq", "emulation");
  ASSERT_NE(emu, nullptr) << report.dump(2);
  EXPECT_EQ((*emu)["exact_fraction"].get<double>(), 1.0) << emu->dump(2);
  EXPECT_EQ((*emu)["max_steps"].get<double>(), 0.0);
  const nlohmann::json* qop = verifyComparison(report, "qoperator", "emulation");
  ASSERT_NE(qop, nullptr) << report.dump(2);
  EXPECT_EQ((*qop)["exact_fraction"].get<double>(), 1.0) << qop->dump(2);
  bool named = false, qop_named = false;
  for (const auto& note : report["notes"]) {
    const std::string text = note.get<std::string>();
    named = named || text.find("FusedConv x7") != std::string::npos;
    qop_named = qop_named || text.rfind(
                                 "qoperator model vs emulation: the emulation runs the "
                                 "graph ONNX Runtime optimized the QOperator model into",
                                 0) == 0;
  }
  EXPECT_TRUE(named) << report["notes"].dump(2);
  EXPECT_TRUE(qop_named) << report["notes"].dump(2);
  // Without ORT's optimizations there is no fused graph to read: the QOperator emulation stands
  // in, and it does not compute what ORT's float kernels do.
  const nlohmann::json plain = verifyJson(dir + " --limit 200 --ort-optimization disabled", 0);
  const nlohmann::json* fallback = verifyComparison(plain, "qdq", "emulation");
  ASSERT_NE(fallback, nullptr);
  EXPECT_LT((*fallback)["exact_fraction"].get<double>(), 0.99);
  for (const auto& note : plain["notes"])
    EXPECT_EQ(note.get<std::string>().find("optimized the QOperator model"), std::string::npos);
}

TEST(DeployVerifyCli, ABrokenLayerScaleInTheExportedModelIsCaughtAndNamed) {
  const std::string dir = quantized("TensorRT");
  // A quantizer in the middle of the network: its QuantizeLinear's scale grows by half.
  const std::vector<std::string> activations = activationQuantizers(dir);
  ASSERT_GT(activations.size(), 4u);
  const std::string victim = activations[activations.size() / 2];
  const std::string tensor = scaleQuantizeLinear(dir, victim, 1.5f);

  const nlohmann::json report = verifyJson(dir + " --limit 64", 1);
  EXPECT_FALSE(report["passed"].get<bool>());
  const nlohmann::json* sim = verifyComparison(report, "qdq", "simulation");
  ASSERT_NE(sim, nullptr);
  // The broken tensor is the first beyond one level and the one with the most elements off.
  ASSERT_TRUE(sim->contains("first_divergence")) << sim->dump(2);
  EXPECT_EQ((*sim)["first_divergence"]["quantizer"], victim);
  EXPECT_EQ((*sim)["largest_tensor_difference"]["tensor"], tensor);
  EXPECT_GT((*sim)["largest_tensor_difference"]["share_off"].get<double>(), 0.05);
  ASSERT_EQ(report["failures"].size(), 1u) << report.dump(2);
  EXPECT_NE(report["failures"][0].get<std::string>().find(tensor), std::string::npos);
  // The values entering the broken quantizer are ORT's and the simulation's alike (less than
  // half a step apart); its levels are not: verify says the quantization itself differs.
  EXPECT_EQ((*sim)["first_divergence"]["cause"], "quantizer_differs");
  EXPECT_LT((*sim)["first_divergence"]["float_gap_steps"].get<double>(), 0.5);
  // Fed ORT's inputs, it is still off by many levels: the first tensor to differ on its own.
  ASSERT_TRUE(sim->contains("first_own_difference")) << sim->dump(2);
  EXPECT_EQ((*sim)["first_own_difference"]["quantizer"], victim);
  EXPECT_GT((*sim)["first_own_difference"]["rerun_max_steps"].get<double>(), 1.0);

  // With room for one tensor at a time the trace runs a chunk per tensor, and finds the same.
  const nlohmann::json chunked = verifyJson(dir + " --limit 64 --trace-memory 1", 1);
  const nlohmann::json* one_by_one = verifyComparison(chunked, "qdq", "simulation");
  ASSERT_NE(one_by_one, nullptr);
  for (const char* key : {"first_difference", "first_divergence", "largest_tensor_difference"}) {
    EXPECT_EQ((*one_by_one).value(key, nlohmann::json()), (*sim).value(key, nlohmann::json()))
        << key;
  }
}

// Unbroken, ONNX Runtime's QDQ model and the simulation still differ by a level here and there:
// the two runtimes add a convolution's products in different orders, and a value within that
// noise of a rounding boundary lands on either side. Verify says so, with how close the values
// entering the quantizer are.
TEST(DeployVerifyCli, RoundingNoiseAtTiesIsToldApart) {
  const std::string dir = quantized("TensorRT");
  const nlohmann::json report = verifyJson(dir + " --limit 64", 0);
  const nlohmann::json* sim = verifyComparison(report, "qdq", "simulation");
  ASSERT_NE(sim, nullptr);
  ASSERT_TRUE(sim->contains("first_difference"))
      << "no level differs on these samples; pick samples where one does\n"
      << sim->dump(2);
  const auto& first = (*sim)["first_difference"];
  EXPECT_EQ(first["max_steps"].get<double>(), 1.0);
  EXPECT_EQ(first["cause"], "rounding_ties") << first.dump();
  EXPECT_LT(first["float_gap_steps"].get<double>(), 0.01);
  const CliResult text = runCli("verify " + dir + " --limit 64", ortEnv());
  EXPECT_NE(text.out.find("why: float rounding noise"), std::string::npos) << text.out;
}

// Where every difference is rounding carried through the graph (the first at ties, no tensor
// differing on its own on ORT's inputs), a failing element-wise criterion (here a top-1 agreement
// of more than 100%, which nothing meets) is waived and the model judged by its quality against
// the float model instead, which then decides the verdict.
TEST(DeployVerifyCli, CarriedRoundingIsJudgedByQualityAgainstTheFloatModel) {
  const std::string dir = quantized("TensorRT");
  const nlohmann::json report = verifyJson(dir + " --limit 64 --min-agreement 1.01", 0);
  const nlohmann::json* sim = verifyComparison(report, "qdq", "simulation");
  ASSERT_NE(sim, nullptr);
  ASSERT_TRUE(sim->contains("first_difference")) << sim->dump(2);
  EXPECT_EQ((*sim)["first_difference"]["cause"], "rounding_ties");
  EXPECT_FALSE(sim->contains("first_own_difference"));
  bool waived = false, quality = false;
  for (const auto& c : report["criteria"]) {
    if (c["metric"] == "top1_agreement" && c["comparison"] == "qdq model vs simulation") {
      EXPECT_FALSE(c["passed"].get<bool>());
      waived = c["waived"].get<bool>();
    }
    if (c["metric"] == "quality_gap_db") {
      quality = true;
      EXPECT_TRUE(c["passed"].get<bool>()) << c.dump();
    }
  }
  EXPECT_TRUE(waived) << report["criteria"].dump(2);
  EXPECT_TRUE(quality) << report["criteria"].dump(2);
  ASSERT_EQ(report["quality"].size(), 1u);
  const double ort_db = report["quality"][0]["ort_sqnr_db"].get<double>();
  const double sim_db = report["quality"][0]["simulation_sqnr_db"].get<double>();
  EXPECT_NEAR(ort_db, sim_db, 1.0);
  EXPECT_GT(ort_db, 10.0);  // W8A8 on the zoo ResNet is no noise
  // The gap and its spread over the 64 samples drawn again: an interval holding the gap.
  const nlohmann::json& q = report["quality"][0];
  EXPECT_EQ(q["samples"], 64);
  EXPECT_NEAR(q["gap_db"].get<double>(), ort_db - sim_db, 1e-9);
  ASSERT_EQ(q["gap_interval_db"].size(), 2u);
  EXPECT_LE(q["gap_interval_db"][0].get<double>(), q["gap_db"].get<double>());
  EXPECT_GE(q["gap_interval_db"][1].get<double>(), q["gap_db"].get<double>());
  EXPECT_LT(q["gap_interval_db"][0].get<double>(), q["gap_interval_db"][1].get<double>());
  // Judged by quality, the verdict follows it: a gap no figure can meet fails.
  const nlohmann::json strict =
      verifyJson(dir + " --limit 64 --min-agreement 1.01 --max-quality-gap -1", 1);
  EXPECT_NE(strict["failures"].dump().find("SQNR against the float model"), std::string::npos)
      << strict["failures"].dump();
}

// With the QDQ trace finding only carried rounding, the QOperator model's exactness against the
// emulation (its integer kernels are emulated bit for bit) is reported, not judged: what is not
// exact comes from ORT's float kernels. Its largest difference is still judged, and --strict
// judges exactness too.
TEST(DeployVerifyCli, QOperatorExactnessIsReportedWhenTheDifferencesAreCarriedRounding) {
  // QNN deploys the QOperator model, so its comparisons are judged (TensorRT's are diagnostics).
  const std::string dir = quantized("ONNX_QNN");
  // No share of exact elements can reach 101%.
  const nlohmann::json report = verifyJson(dir + " --limit 64 --min-exact 1.01", 0);
  const nlohmann::json* sim = verifyComparison(report, "qdq", "simulation");
  ASSERT_NE(sim, nullptr);
  ASSERT_TRUE(sim->contains("first_difference")) << sim->dump(2);
  EXPECT_FALSE(sim->contains("first_own_difference"));
  // Traced in the graph ORT runs: its levels come from one of ORT's fused integer kernels.
  EXPECT_EQ((*sim)["first_difference"].value("ort_writer", "").rfind("QLinear", 0), 0u)
      << sim->dump(2);
  bool exact_waived = false, steps_judged = false;
  for (const auto& c : report["criteria"]) {
    if (c["comparison"] != "qoperator model vs emulation") continue;
    if (c["metric"] == "exact_fraction") exact_waived = c["waived"].get<bool>();
    if (c["metric"] == "max_steps") {
      steps_judged = !c["waived"].get<bool>();
      EXPECT_TRUE(c["passed"].get<bool>()) << c.dump();
    }
  }
  EXPECT_TRUE(exact_waived) << report["criteria"].dump(2);
  EXPECT_TRUE(steps_judged) << report["criteria"].dump(2);
  EXPECT_NE(report["notes"].dump().find("exactness waived"), std::string::npos)
      << report["notes"].dump();

  const nlohmann::json strict = verifyJson(dir + " --limit 64 --min-exact 1.01 --strict", 1);
  EXPECT_NE(strict["failures"].dump().find("qoperator model vs emulation"), std::string::npos)
      << strict["failures"].dump();

  // With the QOperator model taken as the emulation (no exact share asked), its comparison with
  // the simulation is the QDQ model's: an impossible top-1 agreement is waived for both, as
  // carried rounding, and --strict judges it.
  const nlohmann::json as_qdq =
      verifyJson(dir + " --limit 64 --min-exact 0 --min-agreement 1.01", 0);
  bool qop_waived = false;
  for (const auto& c : as_qdq["criteria"]) {
    if (c["comparison"] == "qoperator model vs simulation" && c["metric"] == "top1_agreement")
      qop_waived = c["waived"].get<bool>();
  }
  EXPECT_TRUE(qop_waived) << as_qdq["criteria"].dump(2);
  EXPECT_NE(as_qdq["notes"].dump().find("the QOperator model equals"), std::string::npos)
      << as_qdq["notes"].dump();
  const nlohmann::json judged =
      verifyJson(dir + " --limit 64 --min-exact 0 --min-agreement 1.01 --strict", 1);
  EXPECT_NE(judged["failures"].dump().find("qoperator model vs simulation"), std::string::npos)
      << judged["failures"].dump();
}

// A scale off by 0.3%: levels move by at most one, as at ties, but for values far from any rounding
// boundary. Verify does not take it for rounding noise.
TEST(DeployVerifyCli, ASlightlyWrongScaleIsNotTakenForRoundingNoise) {
  const std::string dir = quantized("TensorRT");
  // The first activation quantizer after the stem's: nothing before it differs.
  const std::vector<std::string> activations = activationQuantizers(dir);
  ASSERT_GT(activations.size(), 2u);
  const std::string tensor = scaleQuantizeLinear(dir, activations[1], 1.003f);

  const nlohmann::json report = verifyJson(dir + " --limit 64", 1);
  const nlohmann::json* sim = verifyComparison(report, "qdq", "simulation");
  ASSERT_NE(sim, nullptr);
  ASSERT_TRUE(sim->contains("first_difference")) << sim->dump(2);
  const auto& first = (*sim)["first_difference"];
  ASSERT_EQ(first["tensor"], tensor) << first.dump();
  EXPECT_LE(first["max_steps"].get<double>(), 1.0);
  EXPECT_EQ(first["cause"], "quantizer_differs") << first.dump();
  EXPECT_GT(first["unfused_boundary_distance_steps"].get<double>(), 0.05);
}

// A float op computing differently in ONNX Runtime: the stem convolution's float bias in the QDQ
// model moved by one. The first quantizer after it differs at once, with its inputs whole steps
// apart, and verify blames an op before it, not rounding or the quantizer.
TEST(DeployVerifyCli, AFloatOpThatComputesDifferentlyIsToldFromRoundingNoise) {
  const std::string dir = quantized("TensorRT");
  Graph g = importOnnxFile(dir + "/model.qdq.onnx");
  Value* bias = nullptr;
  for (const Node* n : g.topologicalOrder()) {
    if (n->opType() == "Conv" && n->inputs().size() > 2 && n->input(2)->isInitializer()) {
      bias = n->input(2);
      break;
    }
  }
  ASSERT_NE(bias, nullptr) << "the QDQ model keeps float biases for TensorRT";
  bias->setInitializer(bias->initializer() + 1.0f);
  exportOnnxFile(g, dir + "/model.qdq.onnx");

  const nlohmann::json report = verifyJson(dir + " --limit 64", 1);
  const nlohmann::json* sim = verifyComparison(report, "qdq", "simulation");
  ASSERT_NE(sim, nullptr);
  ASSERT_TRUE(sim->contains("first_difference")) << sim->dump(2);
  const auto& first = (*sim)["first_difference"];
  EXPECT_GE(first["float_gap_steps"].get<double>(), 0.5);
  // Rerun on ORT's own levels of what it reads (the input's quantizer), the simulation's stem
  // convolution still differs by whole steps: verify names the op, not what came before.
  EXPECT_EQ(first["cause"], "op_differs") << first.dump();
  EXPECT_GT(first["rerun_max_steps"].get<double>(), 1.0);
  ASSERT_FALSE(first["rerun_ops"].empty());
  EXPECT_EQ(first["rerun_ops"][0].get<std::string>().rfind("Conv ", 0), 0u) << first.dump();
  // It is also the first tensor to differ on its own.
  ASSERT_TRUE(sim->contains("first_own_difference")) << sim->dump(2);
  EXPECT_EQ((*sim)["first_own_difference"]["tensor"], first["tensor"]);
  const CliResult text = runCli("verify " + dir + " --limit 64", ortEnv());
  EXPECT_NE(text.out.find("so an op among them computes differently in ONNX Runtime"),
            std::string::npos)
      << text.out;
}

// One quantizer's QuantizeLinear in the QDQ model writes every level one higher (its zero point
// moved by one, its DequantizeLinear's kept): that tensor is one level off everywhere, and the
// next quantized tensor, computed from the shifted values, diverges by more. Fed ORT's own levels,
// the simulation's ops give ORT's: verify says the divergence was carried, not made there.
TEST(DeployVerifyCli, ADivergenceCarriedFromAnEarlierTensorIsToldFromAnOpThatDiffers) {
  const std::string dir = quantized("TensorRT");
  const std::vector<std::string> activations = activationQuantizers(dir);
  ASSERT_GT(activations.size(), 2u);
  std::ifstream manifest_file(dir + "/deploy.json");
  const std::string tensor =
      nlohmann::json::parse(manifest_file)["quantized_values"][activations[1]];
  Graph g = importOnnxFile(dir + "/model.qdq.onnx");
  Node* q = g.value(tensor)->producer();
  ASSERT_EQ(q->opType(), "QuantizeLinear");
  const at::Tensor zero_point = q->input(2)->initializer();
  g.setInput(q, 2, g.addInitializer(tensor + "_zero_point_plus_one", zero_point + 1));
  exportOnnxFile(g, dir + "/model.qdq.onnx");

  const nlohmann::json report = verifyJson(dir + " --limit 64", 1);
  const nlohmann::json* sim = verifyComparison(report, "qdq", "simulation");
  ASSERT_NE(sim, nullptr);
  ASSERT_TRUE(sim->contains("first_divergence")) << sim->dump(2);
  EXPECT_EQ((*sim)["first_difference"]["tensor"], tensor);
  const auto& divergence = (*sim)["first_divergence"];
  EXPECT_NE(divergence["tensor"], tensor);
  EXPECT_GE(divergence["float_gap_steps"].get<double>(), 0.5) << divergence.dump();
  EXPECT_EQ(divergence["cause"], "carried") << divergence.dump();
  EXPECT_LE(divergence["rerun_max_steps"].get<double>(), 1.0);
  EXPECT_GE(divergence["rerun_fed"].get<int64_t>(), 1);
  // Each tensor fed ORT's inputs is within a level of ORT's (the shifted one by exactly one): no
  // op differs on its own.
  EXPECT_GT((*sim)["rerun_tensors"].get<int64_t>(), 2);
  EXPECT_FALSE(sim->contains("first_own_difference")) << sim->dump(2);
  // A quantizer that differs is no rounding at ties: nothing is waived, ORT's quality against
  // the float model is reported.
  for (const auto& criterion : report["criteria"])
    EXPECT_FALSE(criterion["waived"].get<bool>()) << criterion.dump();
  ASSERT_EQ(report["quality"].size(), 1u);
  EXPECT_LT(report["quality"][0]["ort_sqnr_db"].get<double>(),
            report["quality"][0]["simulation_sqnr_db"].get<double>());
  // And the file check names what was changed: the zero point, not the (equal) scale.
  const std::string failures = report["failures"].dump();
  EXPECT_NE(failures.find("'" + tensor + "' (quantizer '" + activations[1] +
                          "') is written with zero point 1, the prepared model's is 0"),
            std::string::npos)
      << failures;
  const CliResult text = runCli("verify " + dir + " --limit 64", ortEnv());
  EXPECT_NE(text.out.find("carried from the differences before it: rerun on ONNX Runtime's own"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("is within one step of it: what differs by more was carried"),
            std::string::npos)
      << text.out;
}

// A verify report on a file whose quantizer `victim` (writing `tensor`) was broken: that tensor
// is the first beyond one level, among more than `compared` tensors, and since the values
// entering it are the same in both runtimes, the quantization itself is what differs.
void expectBrokenQuantizerNamed(const nlohmann::json& report, const std::string& victim,
                                const std::string& tensor, int64_t compared) {
  const nlohmann::json* sim = verifyComparison(report, "qdq", "simulation");
  ASSERT_NE(sim, nullptr);
  ASSERT_TRUE(sim->contains("first_divergence")) << sim->dump(2);
  const nlohmann::json& d = (*sim)["first_divergence"];
  EXPECT_EQ(d["quantizer"], victim);
  EXPECT_EQ(d["tensor"], tensor);
  EXPECT_GT(d["compared"].get<int64_t>(), compared);
  EXPECT_EQ(d["cause"], "quantizer_differs") << d.dump();
  EXPECT_LT(d["float_gap_steps"].get<double>(), 0.5);
}

TEST(DeployVerifyCli, AFourBitActivationWrittenAsArithmeticIsTracedAndNamed) {
  // W4A4 Academic: 4-bit activations are Div/Round/Add/Clip/Sub/Mul in the QDQ model, not
  // QuantizeLinear, and verify compares their Clip (the integers) too.
  const std::string dir = makeTempDir("deploy_verify") + "/w4a4";
  const CliResult q = runCli("quantize " + zoo("resnet") + " --backend Academic --config " +
                             std::string(QFORGE_SOURCE_DIR) + "/bench/configs/w4a4_qat.yaml" +
                             " --calib-batches 2 --calib-batch 32 --out " + dir + " --quiet");
  ASSERT_EQ(q.exit_code, 0) << q.out;
  std::ifstream manifest_file(dir + "/deploy.json");
  const nlohmann::json manifest = nlohmann::json::parse(manifest_file);
  Graph g = importOnnxFile(dir + "/model.qdq.onnx");
  // The first 4-bit activation: nothing before it but the 8-bit first layer, so it is the first
  // tensor beyond one level once its scale is broken.
  std::string victim;
  for (const auto& t : manifest["tensors"]) {
    if (t["role"] == "activation" && t["bits"] == 4) {
      victim = t["quantizer"];
      break;
    }
  }
  ASSERT_FALSE(victim.empty());
  ASSERT_TRUE(manifest["quantized_values"].contains(victim)) << manifest["quantized_values"];
  const std::string tensor = manifest["quantized_values"][victim];
  const Node* clip = g.value(tensor)->producer();
  ASSERT_EQ(clip->opType(), "Clip");
  const Node* div = clip->input(0)->producer()->input(0)->producer()->input(0)->producer();
  ASSERT_EQ(div->opType(), "Div");
  Value* scale = div->input(1);
  scale->setInitializer(scale->initializer() * 1.5);
  exportOnnxFile(g, dir + "/model.qdq.onnx");

  // The float value entering the chain (the Div's input) is read as a QuantizeLinear's would be.
  expectBrokenQuantizerNamed(verifyJson(dir + " --limit 64", 1), victim, tensor, 2);
}

// NNIE's logarithmic grid is float arithmetic in the QDQ model (no QuantizeLinear); verify traces
// its tensors in codes. Unbroken, the zoo ResNet verifies; with one activation's log2 computed
// a fifth short (its Div by ln 2 scaled by 1.25), that tensor is the first beyond one code, and the
// values entering it being the same in both runtimes, verify says the quantization itself differs.
TEST(DeployVerifyCli, ALogGridActivationIsTracedInCodesAndABrokenOneNamed) {
  const std::string dir = quantized("NNIE");
  const nlohmann::json fine = verifyJson(dir + " --limit 64", 0);
  EXPECT_TRUE(fine["passed"].get<bool>()) << fine["failures"];

  std::ifstream manifest_file(dir + "/deploy.json");
  const nlohmann::json manifest = nlohmann::json::parse(manifest_file);
  const std::vector<std::string> activations = activationQuantizers(dir);
  ASSERT_GT(activations.size(), 4u);
  const std::string victim = activations[activations.size() / 2];
  const std::string tensor = manifest["quantized_values"][victim];
  Graph g = importOnnxFile(dir + "/model.qdq.onnx");
  // Where(Not(Less(x, .)), .) is the grid's value; Div(Log(Abs(x)), ln2) its log2.
  const Node* where = g.value(tensor)->producer();
  ASSERT_EQ(where->opType(), "Where");
  const Value* x = where->input(0)->producer()->input(0)->producer()->input(0);
  Value* ln2 = nullptr;
  for (const Use& abs : x->uses()) {
    if (abs.node->opType() != "Abs") continue;
    const Node* log = abs.node->output(0)->uses().at(0).node;
    ln2 = log->output(0)->uses().at(0).node->input(1);
  }
  ASSERT_NE(ln2, nullptr);
  ln2->setInitializer(ln2->initializer() * 1.25);
  exportOnnxFile(g, dir + "/model.qdq.onnx");

  expectBrokenQuantizerNamed(verifyJson(dir + " --limit 64", 1), victim, tensor, 4);
}

// TensorRT's activations are on [-127, 127], written as int8 QuantizeLinear, which takes -128 too:
// a value far below the calibrated range is -127 in the simulation and -128 in ONNX Runtime.
// Inputs five times wider than the calibration data show it at the model's input, whose values
// are the same in both runs: the trace names the quantizer's range (it took the file's int8
// range for the simulation's and blamed ORT's kernel before).
// TensorRT scales activations by amax / 127 but clamps them to [-128, 127], as the file's int8
// QuantizeLinear does. Inputs five times wider than calibration's reach -128 at the graph input.
TEST(DeployVerifyCli, ValuesPastTheNarrowRangeClampWhereTheInt8FileClamps) {
  const std::string dir = quantized("TensorRT");
  const nlohmann::json report = verifyJson(dir + " --data random:normal,std=5 --limit 64", 0);
  const nlohmann::json* sim = verifyComparison(report, "qdq", "simulation");
  ASSERT_NE(sim, nullptr);
  EXPECT_FALSE(sim->contains("first_difference")) << sim->dump(2);
  EXPECT_LT((*sim)["max_steps"].get<double>(), 0.5) << sim->dump(2);

  // The same grid clamped at -127 (a chip described so) is not what the file computes, and the
  // trace names the quantizer at the graph input.
  const std::string custom = makeTempDir("deploy_verify") + "/narrow_clamp";
  std::filesystem::create_directories(custom);
  std::ofstream(custom + "/backend.json") << R"({"name": "TensorRTNarrowClamp",
      "extends": "TensorRT", "activation": {"full_range_clamp": false}})";
  const CliResult q =
      runCli("quantize " + zoo("resnet") + " --backend " + custom +
             "/backend.json --calib-batches 2 --calib-batch 32 --out " + custom + "/out --quiet");
  ASSERT_EQ(q.exit_code, 0) << q.out;
  const nlohmann::json narrow =
      verifyJson(custom + "/out --data random:normal,std=5 --limit 64", 0);
  const nlohmann::json* narrow_sim = verifyComparison(narrow, "qdq", "simulation");
  ASSERT_NE(narrow_sim, nullptr);
  ASSERT_TRUE(narrow_sim->contains("first_difference")) << narrow_sim->dump(2);
  const auto& first = (*narrow_sim)["first_difference"];
  EXPECT_EQ(first["index"], 0) << first.dump();
  EXPECT_EQ(first["max_steps"].get<double>(), 1.0);
  EXPECT_EQ(first["cause"], "quantizer_differs") << first.dump();
  EXPECT_EQ(first["float_gap_steps"].get<double>(), 0.0);
  EXPECT_GT(first["unfused_boundary_distance_steps"].get<double>(), 1.0);
}

TEST(DeployVerifyCli, AQuantizerSharedByValuesOfDifferentShapesIsTracedOnce) {
  // STPU shares one quantizer between a Concat's inputs; in the zoo U-Net those are a skip
  // connection and an upsampled map with different channel counts. Verify's trace compared each
  // of them with the one tensor the QDQ model names for the quantizer, and stopped with an
  // internal error ("size of tensor a (24) must match ... (48)").
  const std::string dir = makeTempDir("deploy_verify") + "/unet_stpu";
  const CliResult q =
      runCli("quantize " + zoo("unet") +
             " --backend STPU --calib-batches 2 --calib-batch 16 --out " + dir + " --quiet");
  ASSERT_EQ(q.exit_code, 0) << q.out;
  const nlohmann::json report = verifyJson(dir + " --limit 16", 0);
  EXPECT_TRUE(report["passed"].get<bool>()) << report.dump(2);
  const nlohmann::json* sim = verifyComparison(report, "qdq", "simulation");
  ASSERT_NE(sim, nullptr);
  EXPECT_GE((*sim)["exact_fraction"].get<double>(), 0.99) << sim->dump(2);
}

TEST(DeployVerifyCli, DeployWritesElsewhereAndVerifyReadsThePreparedModelFromItsDirectory) {
  const std::string dir = quantized("ONNX_QNN");
  const std::string out = makeTempDir("deploy_elsewhere") + "/out";
  const CliResult r = runCli("deploy " + dir + " --out " + out + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const char* f : {"model.qdq.onnx", "model.qoperator.onnx", "deploy.json"})
    EXPECT_TRUE(std::filesystem::exists(out + "/" + f)) << f;
  EXPECT_FALSE(std::filesystem::exists(out + "/prepared.json"));
  const nlohmann::json report = verifyJson(out + " --prepared " + dir + " --limit 32", 0);
  EXPECT_TRUE(report["passed"].get<bool>());
}

TEST(DeployVerifyCli, MissingOnnxRuntimeOrNodeSaysHowToInstallIt) {
  const std::string dir = quantized("QDQ");
  CliResult r = runCli("verify " + dir + " --limit 8 --ort-dir /nonexistent/ort");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(lineCount(r.out), 1u) << r.out;
  EXPECT_NE(r.out.find("npm install --ignore-scripts --prefix /nonexistent/ort onnxruntime-node@"),
            std::string::npos)
      << r.out;
  r = runCli("verify " + dir + " --limit 8", "PATH=/nonexistent " + ortEnv());
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("apt install nodejs npm"), std::string::npos) << r.out;
}

TEST(DeployVerifyCli, DeployRefusesADirectoryWithoutAPreparedModel) {
  const std::string empty = makeTempDir("deploy_empty");
  const CliResult r = runCli("deploy " + empty + " --out " + empty + "/out");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(lineCount(r.out), 1u) << r.out;
  EXPECT_NE(r.out.find("not a prepared model directory"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace qforge::testing
