// If, Loop and Scan against closed-form results (sums, products, ATen's cumsum on the same
// numbers), gradients through a branch, and the errors a malformed node gets.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "data/data_test_files.h"
#include "exec/executor.h"
#include "ir/onnx_import.h"
#include "support/control_flow_models.h"

namespace qforge {
namespace {

using testing::addGraphAttribute;
using testing::addIntAttribute;
using testing::addIntsAttribute;
using testing::expectErrorWith;
using testing::ifModel;
using testing::OnnxBuilder;

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;
constexpr int32_t kInt64 = onnx::TensorProto::INT64;
constexpr int32_t kBool = onnx::TensorProto::BOOL;

Graph load(onnx::ModelProto proto) {
  return importOnnxModel(proto, "");
}

TEST(ControlFlowTest, IfRunsTheBranchTheConditionPicks) {
  Graph g = load(ifModel());
  Executor run(g);
  const at::Tensor x = at::tensor({-1.f, 0.5f, 2.f, 3.f, -4.f, 1.f}).reshape({2, 3});
  const at::Tensor taken = run({at::scalar_tensor(true, at::kBool), x})[0];
  EXPECT_TRUE(at::equal(taken, at::relu(x) * 2));
  const at::Tensor other = run({at::scalar_tensor(false, at::kBool), x})[0];
  EXPECT_TRUE(at::equal(other, at::relu(x) - 1));
  // A one-element condition of rank 1 is a condition too.
  EXPECT_TRUE(at::equal(run({at::zeros({1}, at::kBool), x})[0], at::relu(x) - 1));
}

TEST(ControlFlowTest, GradientsFlowThroughTheBranchTaken) {
  Graph g = load(ifModel());
  ExecutorOptions options;
  options.enable_grad = true;
  Executor run(g, options);
  const at::Tensor x = at::tensor({-1.f, 0.5f, 2.f}).reshape({1, 3}).requires_grad_();
  run({at::scalar_tensor(true, at::kBool), x})[0].sum().backward();
  EXPECT_TRUE(at::equal(x.grad(), at::tensor({0.f, 2.f, 2.f}).reshape({1, 3})));
}

// Loop(M, cond, s0): body s = s + i (i the iteration number, as float), keep going while
// i < stop_after; scan output: s after each iteration.
onnx::ModelProto loopModel(bool with_stop) {
  OnnxBuilder body;
  body.input("i", kInt64, {}).input("c", kBool, {}).input("s", kFloat, {2});
  body.output("c_out", kBool, {}).output("s_out", kFloat, {2}).output("scan", kFloat, {2});
  body.node("Cast", {"i"}, {"i_f"}, "cast");
  addIntAttribute(body.model().mutable_graph()->mutable_node()->at(0), "to", kFloat);
  body.node("Add", {"s", "i_f"}, {"s_out"}, "add");
  body.node("Identity", {"s_out"}, {"scan"}, "scan_out");
  if (with_stop) {
    body.node("Less", {"i", "stop_after"}, {"c_out"}, "less");  // stop_after: an outer value
  } else {
    body.node("Identity", {"c"}, {"c_out"}, "keep");
  }
  OnnxBuilder b;
  b.input("m", kInt64, {}).input("cond", kBool, {}).input("s0", kFloat, {2});
  b.output("s_final", kFloat, {2}).output("partials", kFloat, {-1, 2});
  b.initializer("stop_after", at::scalar_tensor(2, at::kLong));
  onnx::NodeProto& loop = b.node("Loop", {"m", "cond", "s0"}, {"s_final", "partials"}, "loop");
  addGraphAttribute(loop, "body", body.model().graph());
  return b.model();
}

TEST(ControlFlowTest, LoopCarriesValuesAndStacksScanOutputs) {
  Graph g = load(loopModel(false));
  Executor run(g);
  const at::Tensor s0 = at::tensor({10.f, -1.f});
  const auto out = run({at::scalar_tensor(4, at::kLong), at::scalar_tensor(true, at::kBool), s0});
  // After iteration k the state is s0 + 0 + 1 + ... + k.
  EXPECT_TRUE(at::equal(out[0], s0 + 6));
  const at::Tensor expected = at::stack({s0 + 0, s0 + 1, s0 + 3, s0 + 6});
  EXPECT_TRUE(at::equal(out[1], expected));
  // A false condition runs no iteration; the state comes back as it went in. The scan output
  // has no iterations to collect.
  expectErrorWith(
      [&] {
        run({at::scalar_tensor(4, at::kLong), at::scalar_tensor(false, at::kBool), s0});
      },
      {"'loop' (Loop)", "there were none"});
}

TEST(ControlFlowTest, LoopStopsWhenTheBodySaysSo) {
  Graph g = load(loopModel(true));
  Executor run(g);
  const at::Tensor s0 = at::zeros({2});
  // The body's condition is i < 2: iterations 0, 1, 2 run, although M allows 100.
  const auto out = run({at::scalar_tensor(100, at::kLong), at::scalar_tensor(true, at::kBool), s0});
  EXPECT_TRUE(at::equal(out[0], s0 + 3));
  EXPECT_EQ(out[1].size(0), 3);
}

// Scan with one state (running sum) and two sequences: x [T, 2] forward and w [T, 2] backward;
// outputs the final sum, the running sums, and w as the body saw it.
onnx::ModelProto scanModel(int64_t opset) {
  OnnxBuilder body(opset);
  body.input("sum", kFloat, {2}).input("x_t", kFloat, {2}).input("w_t", kFloat, {2});
  body.output("sum_out", kFloat, {2}).output("sum_scan", kFloat, {2}).output("w_seen", kFloat, {2});
  body.node("Add", {"sum", "x_t"}, {"sum_out"}, "add");
  body.node("Identity", {"sum_out"}, {"sum_scan"}, "copy");
  body.node("Identity", {"w_t"}, {"w_seen"}, "copy_w");
  OnnxBuilder b(opset);
  const bool batched = opset == 8;
  std::vector<std::string> inputs = {"sum0", "x", "w"};
  if (batched) inputs.insert(inputs.begin(), "");
  b.input("sum0", kFloat, batched ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{2});
  b.input("x", kFloat, batched ? std::vector<int64_t>{1, 4, 2} : std::vector<int64_t>{4, 2});
  b.input("w", kFloat, batched ? std::vector<int64_t>{1, 4, 2} : std::vector<int64_t>{4, 2});
  b.output("total", kFloat, {}).output("running", kFloat, {}).output("w_order", kFloat, {});
  onnx::NodeProto& scan = b.node("Scan", inputs, {"total", "running", "w_order"}, "scan");
  addGraphAttribute(scan, "body", body.model().graph());
  addIntAttribute(scan, "num_scan_inputs", 2);
  addIntsAttribute(scan, batched ? "directions" : "scan_input_directions", {0, 1});
  return b.model();
}

TEST(ControlFlowTest, ScanRunsItsSequencesEachInItsDirection) {
  Graph g = load(scanModel(11));
  Executor run(g);
  const at::Tensor x = at::arange(8, at::kFloat).reshape({4, 2});
  const at::Tensor w = at::arange(8, at::kFloat).reshape({4, 2}) * 10;
  const at::Tensor sum0 = at::tensor({1.f, 2.f});
  const auto out = run({sum0, x, w});
  EXPECT_TRUE(at::equal(out[0], sum0 + x.sum(0)));
  EXPECT_TRUE(at::equal(out[1], sum0 + at::cumsum(x, 0)));
  // w was read back to front, and the outputs are stacked in iteration order.
  EXPECT_TRUE(at::equal(out[2], w.flip(0)));
}

TEST(ControlFlowTest, Scan8ScansEveryBatchEntryAlongAxisOne) {
  Graph g = load(scanModel(8));
  Executor run(g);
  const at::Tensor x = at::arange(16, at::kFloat).reshape({2, 4, 2});
  const at::Tensor w = -x;
  const at::Tensor sum0 = at::tensor({1.f, 2.f, 3.f, 4.f}).reshape({2, 2});
  const auto out = run({sum0, x, w});
  EXPECT_TRUE(at::equal(out[0], sum0 + x.sum(1)));
  EXPECT_TRUE(at::equal(out[1], sum0.unsqueeze(1) + at::cumsum(x, 1)));
  EXPECT_TRUE(at::equal(out[2], w.flip(1)));
}

TEST(ControlFlowTest, ScanSequencesOfDifferentLengthsAreRefused) {
  Graph g = load(scanModel(11));
  Executor run(g);
  expectErrorWith(
      [&] {
        run({at::zeros({2}), at::zeros({4, 2}), at::zeros({3, 2})});
      },
      {"'scan' (Scan", "scan input 1 has 3 steps", "first has 4"});
}

TEST(ControlFlowTest, AConditionOfSeveralValuesIsRefused) {
  Graph g = load(ifModel());
  Executor run(g);
  expectErrorWith(
      [&] {
        run({at::ones({2}, at::kBool), at::zeros({1, 3})});
      },
      {"'if' (If", "condition must hold one value", "[2]"});
}

TEST(ControlFlowTest, AnOpTheBodyCannotRunIsReportedBeforeAnyRun) {
  onnx::ModelProto proto = ifModel();
  for (auto& n : *proto.mutable_graph()->mutable_node()) {
    if (n.op_type() == "If")
      n.mutable_attribute(1)->mutable_g()->mutable_node(0)->set_op_type("Frobnicate");
  }
  Graph g = load(proto);
  expectErrorWith([&] { Executor run(g); },
                  {"'if' (If)", "body 'else_branch'", "Frobnicate", "not supported"});
  const auto missing = Executor::unsupportedOps(g);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_NE(missing[0].find("Frobnicate (opset 13): if/else_sub"), std::string::npos) << missing[0];
}

}  // namespace
}  // namespace qforge
