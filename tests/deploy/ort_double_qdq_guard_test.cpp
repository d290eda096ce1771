// Two QuantizeLinear/DequantizeLinear pairs in a row with different parameters round twice, as
// the simulation does; ONNX Runtime merges them into one pair that rounds once
// (DoubleQDQPairsRemover) unless their types differ. The guard writes the second pair in the other
// 8-bit type on the same grid, and ORT then computes what the graph says.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <fstream>
#include <string>

#include "backends/backend_config.h"
#include "deploy/deploy.h"
#include "deploy/ort_double_qdq_guard.h"
#include "deploy/qdq_onnx.h"
#include "ir/onnx_export.h"
#include "ir/onnx_import.h"
#include "ir/parse.h"
#include "passes/prepare.h"
#include "support/checks.h"
#include "support/onnx_builder.h"
#include "support/onnx_validity.h"
#include "support/quant_graphs.h"
#include "verify/deployed_parameters.h"

namespace qforge::testing {
namespace {

constexpr float kFirstScale = 0.0275f;
constexpr float kSecondScale = 0.0264f;

// Relu(x) quantized on its own range, then requantized onto a second one (a Concat's, say).
// `first_zp` and `second_zp` are typed initializer lines' values: "int8[] = {0}".
std::string doublePair(const std::string& first_zp = "int8[] = {0}",
                       const std::string& second_zp = "int8[] = {0}",
                       const std::string& second_scale = "0.0264") {
  return R"(
    graph double_pair
    opset "" 13
    input %x: float32[1,4096]
    init %s1: float32[] = {0.0275}
    init %z1: )" +
         first_zp + R"(
    init %s2: float32[] = {)" +
         second_scale + R"(}
    init %z2: )" +
         second_zp + R"(
    %r = Relu(%x)  # relu
    %q1 = QuantizeLinear(%r, %s1, %z1)  # q1
    %d1 = DequantizeLinear(%q1, %s1, %z1)  # d1
    %q2 = QuantizeLinear(%d1, %s2, %z2)  # q2
    %y = DequantizeLinear(%q2, %s2, %z2)  # d2
    output %y: float32[1,4096]
  )";
}

at::Tensor ramp() {
  return at::linspace(-0.5, 3.4, 4096).reshape({1, 4096});
}

// ONNX's QuantizeLinear twice, written out: saturate(round_half_even(v / s) + z), then
// (q - z) * s, in float32; here with zero points 0 and int8.
at::Tensor roundedTwice(const at::Tensor& x) {
  const at::Tensor first = at::relu(x).div(kFirstScale).round().clamp(-128, 127).mul(kFirstScale);
  return first.div(kSecondScale).round().clamp(-128, 127).mul(kSecondScale);
}

TEST(OrtDoubleQdqGuard, TheSecondPairMovesToTheOtherTypeOnTheSameGrid) {
  Graph g = parseGraph(doublePair());
  EXPECT_EQ(deploy::keepDoubleQdqPairsApart(g), std::vector<std::string>{"q2"});
  const Node* q2 = g.findNode("q2");
  const Node* d2 = g.findNode("d2");
  ASSERT_EQ(q2->input(2), d2->input(2));
  const at::Tensor zp = q2->input(2)->initializer();
  EXPECT_EQ(zp.scalar_type(), at::kByte);
  EXPECT_EQ(zp.item<int64_t>(), 128);
  EXPECT_EQ(q2->output(0)->type.dtype, DType::UInt8);
  EXPECT_EQ(g.findNode("q1")->input(2)->initializer().scalar_type(), at::kChar);

  // Unsigned pairs: the second becomes int8, its zero point 128 lower.
  Graph u = parseGraph(doublePair("uint8[] = {10}", "uint8[] = {3}"));
  EXPECT_EQ(deploy::keepDoubleQdqPairsApart(u), std::vector<std::string>{"q2"});
  const at::Tensor uzp = u.findNode("q2")->input(2)->initializer();
  EXPECT_EQ(uzp.scalar_type(), at::kChar);
  EXPECT_EQ(uzp.item<int64_t>(), 3 - 128);
}

TEST(OrtDoubleQdqGuard, OnnxRuntimeRoundsTwiceAsTheGraphSays) {
  if (!ortAvailable("the double QDQ guard test")) GTEST_SKIP();
  const std::string dir = makeTempDir("double_qdq");
  Graph original = parseGraph(doublePair());
  exportOnnxFile(original, dir + "/original.onnx");
  Graph guarded = original.clone();
  deploy::keepDoubleQdqPairsApart(guarded);
  guarded.eliminateDeadCode();
  exportOnnxFile(guarded, dir + "/guarded.onnx");
  EXPECT_EQ(onnxCheckerError(dir + "/guarded.onnx"), "");

  const TensorMap feeds{{"x", ramp()}};
  const at::Tensor expected = roundedTwice(ramp());
  const at::Tensor merged =
      runInOrt(dir + "/original.onnx", feeds, verify::OrtOptimization::All).at("y");
  EXPECT_GT(merged.ne(expected).sum().item<int64_t>(), 0)
      << "ONNX Runtime rounded the two pairs twice: its DoubleQDQPairsRemover no longer merges "
         "them in this version, and the guard is not needed";
  const at::Tensor said = runInOrt(dir + "/guarded.onnx", feeds).at("y");
  EXPECT_TRUE(at::equal(said, expected)) << (said - expected).abs().max();
  const at::Tensor optimized =
      runInOrt(dir + "/guarded.onnx", feeds, verify::OrtOptimization::All).at("y");
  EXPECT_TRUE(at::equal(optimized, expected)) << (optimized - expected).abs().max();
}

TEST(OrtDoubleQdqGuard, InAChainOfThreeOnlyTheMiddlePairMoves) {
  Graph g = parseGraph(R"(
    graph chain
    opset "" 13
    input %x: float32[1,8]
    init %s1: float32[] = {0.03}
    init %s2: float32[] = {0.02}
    init %s3: float32[] = {0.01}
    init %z: int8[] = {0}
    %q1 = QuantizeLinear(%x, %s1, %z)  # q1
    %d1 = DequantizeLinear(%q1, %s1, %z)  # d1
    %q2 = QuantizeLinear(%d1, %s2, %z)  # q2
    %d2 = DequantizeLinear(%q2, %s2, %z)  # d2
    %q3 = QuantizeLinear(%d2, %s3, %z)  # q3
    %y = DequantizeLinear(%q3, %s3, %z)  # d3
    output %y: float32[1,8]
  )");
  EXPECT_EQ(deploy::keepDoubleQdqPairsApart(g), std::vector<std::string>{"q2"});
  EXPECT_EQ(g.findNode("q3")->input(2)->initializer().scalar_type(), at::kChar);
}

TEST(OrtDoubleQdqGuard, PairsOnnxRuntimeWouldNotMergeKeepTheirTypes) {
  const struct {
    const char* what;
    std::string text;
  } cases[] = {
      {"the same parameters: merging them changes nothing",
       doublePair("int8[] = {0}", "int8[] = {0}", "0.0275")},
      {"the two pairs are already of different types", doublePair("uint8[] = {0}")},
      {"the first QuantizeLinear has a second reader",
       doublePair() + "%other = DequantizeLinear(%q1, %s1, %z1)  # other\n"
                      "output %other: float32[1,4096]"},
      {"the value between the pairs is a graph output",
       doublePair() + "output %d1: float32[1,4096]"},
      {"the second QuantizeLinear's integers are a graph output",
       doublePair() + "output %q2: int8[1,4096]"},
      {"a per-channel first pair",
       R"(
         graph per_channel
         opset "" 13
         input %x: float32[1,2]
         init %s1: float32[2] = {0.03, 0.05}
         init %z1: int8[2] = {0, 0}
         init %s2: float32[] = {0.02}
         init %z2: int8[] = {0}
         %q1 = QuantizeLinear[axis=1](%x, %s1, %z1)  # q1
         %d1 = DequantizeLinear[axis=1](%q1, %s1, %z1)  # d1
         %q2 = QuantizeLinear(%d1, %s2, %z2)  # q2
         %y = DequantizeLinear(%q2, %s2, %z2)  # d2
         output %y: float32[1,2]
       )"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    Graph g = parseGraph(c.text);
    const Value* zero_point = g.findNode("q2")->input(2);
    EXPECT_TRUE(deploy::keepDoubleQdqPairsApart(g).empty());
    EXPECT_EQ(g.findNode("q2")->input(2), zero_point);
    EXPECT_EQ(g.findNode("d2")->input(2), zero_point);
  }
}

// Two Conv+Relu branches into a Concat: STPU quantizes each Relu output on its own range, then
// requantizes it onto the range the Concat's inputs share (the M-LSD line detector's decoder).
// Branch a has the wider range, which is the shared one; branch b's is narrower.
Graph concatOfReluBranches() {
  Graph g = parseGraph(R"(
    graph two_branches
    opset "" 13
    input %x: float32[N,4,6,6]
    init %wa: float32[4,4,3,3]
    init %wb: float32[4,4,3,3]
    init %wc: float32[4,8,1,1]
    %a = Conv[pads=[1,1,1,1]](%x, %wa)  # conv_a
    %ra = Relu(%a)  # relu_a
    %b = Conv[pads=[1,1,1,1]](%x, %wb)  # conv_b
    %rb = Relu(%b)  # relu_b
    %cat = Concat[axis=1](%ra, %rb)  # concat
    %y = Conv(%cat, %wc)  # conv_c
    output %y: float32[N,4,6,6]
  )");
  at::manual_seed(21);
  g.findValue("wa")->setInitializer(at::randn({4, 4, 3, 3}) * 0.6);
  g.findValue("wb")->setInitializer(at::randn({4, 4, 3, 3}) * 0.3);
  g.findValue("wc")->setInitializer(at::randn({4, 8, 1, 1}) * 0.3);
  return g;
}

std::unique_ptr<passes::PreparedModel> calibratedFor(const std::string& backend) {
  auto m = passes::prepare(concatOfReluBranches(), backends::loadBackend(backend));
  at::manual_seed(22);
  calibrateOn(*m, at::randn({8, 4, 6, 6}));
  return m;
}

TEST(OrtDoubleQdqGuard, AnStpuConcatOfReluOutputsIsWrittenApartAndStillMatchesItsModel) {
  auto m = calibratedFor("STPU");
  const std::string dir = makeTempDir("double_qdq_stpu");
  const deploy::DeployResult result = deploy::writeDeployFiles(*m, dir);
  const nlohmann::json& manifest = result.manifest;
  ASSERT_TRUE(manifest.contains("retyped_pairs")) << manifest.dump(2);
  ASSERT_EQ(manifest["retyped_pairs"].size(), 1u) << "branch b: a's range is the shared one";
  const Graph qdq = importOnnxFile(dir + "/model.qdq.onnx");
  for (const auto& name : manifest["retyped_pairs"]) {
    const Value* levels = qdq.findValue(name.get<std::string>());
    ASSERT_NE(levels, nullptr) << name;
    EXPECT_EQ(levels->producer()->input(2)->initializer().scalar_type(), at::kByte);
    EXPECT_EQ(levels->producer()->input(2)->initializer().item<int64_t>(), 128)
        << "STPU is symmetric: zero point 0 in int8";
  }
  EXPECT_EQ(verify::parameterMismatches(*m, manifest, dir + "/model.qdq.onnx"),
            std::vector<std::string>{});
  // Here verify compares the Concat's output for the shared quantizer; pointed at the retyped
  // copy, it reads the same grid in the other type as the prepared model's parameters.
  const std::string retyped_q = manifest["retyped_pairs"][0].get<std::string>();
  nlohmann::json at_retyped = manifest;
  ASSERT_TRUE(manifest["quantized_values"].contains("ra")) << "the Concat's quantizer";
  at_retyped["quantized_values"]["ra"] = retyped_q;
  ASSERT_NE(at_retyped["quantized_values"], manifest["quantized_values"]);
  EXPECT_EQ(verify::parameterMismatches(*m, at_retyped, dir + "/model.qdq.onnx"),
            std::vector<std::string>{});

  // A zero point one level off is still caught.
  onnx::ModelProto model;
  {
    std::ifstream in(dir + "/model.qdq.onnx", std::ios::binary);
    ASSERT_TRUE(model.ParseFromIstream(&in));
  }
  std::string zero_point;
  for (const onnx::NodeProto& n : model.graph().node()) {
    if (n.output(0) == retyped_q) zero_point = n.input(2);
  }
  for (onnx::TensorProto& t : *model.mutable_graph()->mutable_initializer()) {
    if (t.name() != zero_point) continue;
    t.clear_int32_data();
    t.set_raw_data(std::string(1, static_cast<char>(129)));
  }
  {
    std::ofstream out(dir + "/broken.onnx", std::ios::binary);
    ASSERT_TRUE(model.SerializeToOstream(&out));
  }
  const std::vector<std::string> broken =
      verify::parameterMismatches(*m, at_retyped, dir + "/broken.onnx");
  ASSERT_EQ(broken.size(), 1u);
  EXPECT_NE(broken[0].find("zero point 129, the prepared model's is 128"), std::string::npos)
      << broken[0];
}

TEST(OrtDoubleQdqGuard, TensorRtFilesKeepInt8Pairs) {
  // STPU's placement with TensorRT's file format: TensorRT parses int8 QuantizeLinear only.
  backends::BackendConfig backend = backends::loadBackend("STPU");
  backend.deploy_format = "tensorrt";
  auto m = passes::prepare(concatOfReluBranches(), backend);
  at::manual_seed(22);
  calibrateOn(*m, at::randn({8, 4, 6, 6}));
  deploy::QdqDetails details;
  const Graph qdq = deploy::toQdqGraph(*m, &details);
  EXPECT_TRUE(details.retyped_pairs.empty());
  int requantized = 0;  // QuantizeLinear reading a DequantizeLinear: the chains are there
  for (const Node* n : qdq.nodes()) {
    if (n->opType() != "QuantizeLinear") continue;
    EXPECT_EQ(n->input(2)->initializer().scalar_type(), at::kChar) << n->name();
    const Node* before = n->input(0)->producer();
    requantized += before != nullptr && before->opType() == "DequantizeLinear";
  }
  EXPECT_EQ(requantized, 1);
}

}  // namespace
}  // namespace qforge::testing
