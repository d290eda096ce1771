#include "exec/executor.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/checks.h"

namespace qforge {
namespace {

// The executor is tested against its own tiny registry, so these tests do not depend on the
// built-in lowerings (which the conformance suite checks).
const OpRegistry& testRegistry() {
  static const OpRegistry registry = [] {
    OpRegistry r;
    OpInfo mul;
    mul.op_type = "Mul";
    mul.run = [](const OpContext& c) { return std::vector<at::Tensor>{c.input(0) * c.input(1)}; };
    r.add(mul);
    OpInfo add;
    add.op_type = "Add";
    add.run = [](const OpContext& c) { return std::vector<at::Tensor>{c.input(0) + c.input(1)}; };
    r.add(add);
    OpInfo neg_new;  // Neg exists only from opset 13 in this registry
    neg_new.op_type = "Neg";
    neg_new.since_version = 13;
    neg_new.run = [](const OpContext& c) { return std::vector<at::Tensor>{-c.input(0)}; };
    r.add(neg_new);
    OpInfo boom;
    boom.op_type = "Boom";
    boom.run = [](const OpContext& c) -> std::vector<at::Tensor> {
      return {at::matmul(c.input(0), c.input(0).reshape({-1, 7}))};  // ATen throws for bad shapes
    };
    r.add(boom);
    return r;
  }();
  return registry;
}

// y = (x * w) + x ; z = -(x * w)
struct Net {
  Graph g;
  Net(int64_t opset = 13) {
    g.model.opset_imports = {{"", opset}};
    Value* x = g.addValue("x");
    g.addInput(x);
    Value* w = g.addInitializer("w", at::tensor({2.f, 3.f}));
    Node* mul = g.addNode("Mul", {x, w}, {"xw"}, "mul");
    Node* add = g.addNode("Add", {mul->output(0), x}, {"y"}, "add");
    Node* neg = g.addNode("Neg", {mul->output(0)}, {"z"}, "neg");
    g.addOutput(add->output(0));
    g.addOutput(neg->output(0));
  }
};

TEST(ExecutorTest, RunsTheGraphOutputs) {
  Net net;
  Executor ex(net.g, {}, testRegistry());
  TensorMap out = ex.run({{"x", at::tensor({1.f, -1.f})}});
  EXPECT_TRUE(at::equal(out.at("y"), at::tensor({3.f, -4.f})));
  EXPECT_TRUE(at::equal(out.at("z"), at::tensor({-2.f, 3.f})));
}

TEST(ExecutorTest, BatchMayDifferFromAnythingDeclared) {
  Net net;
  Executor ex(net.g, {}, testRegistry());
  TensorMap out = ex.run({{"x", at::ones({5, 2})}});
  EXPECT_EQ(out.at("y").sizes(), (at::IntArrayRef{5, 2}));
}

TEST(ExecutorTest, RunsTheSubgraphAfterAnIntermediateFeed) {
  Net net;
  Executor ex(net.g, {}, testRegistry());
  int mul_calls = 0;
  ex.addHook("xw", [&](const Value&, const at::Tensor& t) {
    ++mul_calls;
    return t;
  });
  // Feeding xw means Mul does not run; only Neg does.
  TensorMap out = ex.run({{"xw", at::tensor({10.f, 20.f})}}, {"z"});
  EXPECT_TRUE(at::equal(out.at("z"), at::tensor({-10.f, -20.f})));
  EXPECT_EQ(out.count("y"), 0u);
  EXPECT_EQ(mul_calls, 1);  // the hook still sees the fed value once
}

TEST(ExecutorTest, HooksObserveAndReplaceValues) {
  Net net;
  Executor ex(net.g, {}, testRegistry());
  at::Tensor seen;
  ex.addHook("xw", [&](const Value& v, const at::Tensor& t) {
    EXPECT_EQ(v.name(), "xw");
    seen = t.clone();
    return t;
  });
  const int64_t replace = ex.addHook("w", [](const Value&, const at::Tensor& t) { return t * 0; });
  TensorMap out = ex.run({{"x", at::tensor({1.f, 1.f})}});
  EXPECT_TRUE(at::equal(seen, at::tensor({0.f, 0.f})));  // weight hook ran first
  EXPECT_TRUE(at::equal(out.at("y"), at::tensor({1.f, 1.f})));
  ex.removeHook(replace);
  out = ex.run({{"x", at::tensor({1.f, 1.f})}});
  EXPECT_TRUE(at::equal(seen, at::tensor({2.f, 3.f})));
}

TEST(ExecutorTest, AFinalHookSeesWhatEveryOtherHookLeaves) {
  Net net;
  Executor ex(net.g, {}, testRegistry());
  std::vector<std::string> order;
  at::Tensor seen;
  // Added first, run last: it reads the value the replacing hooks after it leave.
  ex.addFinalHook("xw", [&](const Value&, const at::Tensor& t) {
    order.push_back("final");
    seen = t.clone();
    return t;
  });
  ex.addHook("xw", [&](const Value&, const at::Tensor& t) {
    order.push_back("add one");
    return t + 1;
  });
  ex.addHook("xw", [&](const Value&, const at::Tensor& t) {
    order.push_back("double");
    return t * 2;
  });
  TensorMap out = ex.run({{"x", at::tensor({1.f, 1.f})}});
  // x * w = [2, 3] with Net's weights; (xw + 1) * 2.
  EXPECT_TRUE(at::equal(seen, at::tensor({6.f, 8.f})));
  EXPECT_EQ(order, (std::vector<std::string>{"add one", "double", "final"}));
}

TEST(ExecutorTest, HookOnUnknownValueIsRefused) {
  Net net;
  Executor ex(net.g, {}, testRegistry());
  EXPECT_THROW(ex.addHook("nope", [](const Value&, const at::Tensor& t) { return t; }), Error);
}

TEST(ExecutorTest, InitializerUpdatesAreSeenWithoutRebuilding) {
  Net net;
  Executor ex(net.g, {}, testRegistry());
  net.g.value("w")->setInitializer(at::tensor({1.f, 1.f}));
  EXPECT_TRUE(at::equal(ex.run({{"x", at::tensor({1.f, 2.f})}}).at("y"), at::tensor({2.f, 4.f})));
}

TEST(ExecutorTest, GradientsFlowToInitializersWhenEnabled) {
  Net net;
  net.g.value("w")->setInitializer(at::tensor({2.f, 3.f}).requires_grad_());
  Executor ex(net.g, ExecutorOptions{true}, testRegistry());
  TensorMap out = ex.run({{"x", at::tensor({4.f, 5.f})}});
  out.at("y").sum().backward();
  // d(sum(x*w + x))/dw = x
  EXPECT_TRUE(at::equal(net.g.value("w")->initializer().grad(), at::tensor({4.f, 5.f})));
}

TEST(ExecutorTest, InferenceRecordsNoAutogradHistory) {
  Net net;
  net.g.value("w")->setInitializer(at::tensor({2.f, 3.f}).requires_grad_());
  Executor ex(net.g, {}, testRegistry());
  EXPECT_FALSE(ex.run({{"x", at::tensor({4.f, 5.f})}}).at("y").requires_grad());
}

TEST(ExecutorTest, UnsupportedOpIsReportedWhenBuiltNamingNodeAndOpset) {
  Net net(11);  // Neg is registered from opset 13 only
  try {
    Executor ex(net.g, {}, testRegistry());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("node 'neg' (Neg)"), std::string::npos) << m;
    EXPECT_NE(m.find("opset 11"), std::string::npos) << m;
    EXPECT_NE(m.find("other opset versions"), std::string::npos) << m;
  }
  const auto missing = Executor::unsupportedOps(net.g, testRegistry());
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0], "Neg (opset 11): neg");
}

// Opset 21 runs; 22 may have redefined any op, so the whole model is refused in one line that
// says what to do, whichever node comes first.
TEST(ExecutorTest, AnOpsetAboveTheNewestKnownIsRefusedForTheWholeModel) {
  EXPECT_NO_THROW(Executor(Net(21).g, {}, OpRegistry::builtin()));
  EXPECT_EQ(testing::errorOf([] { Executor(Net(22).g, {}, OpRegistry::builtin()); }),
            "the model imports ONNX opset 22; qforge knows ONNX opsets up to 21: convert the "
            "model to opset 21 or lower (its exporter's opset option, or "
            "onnx.version_converter)");
  EXPECT_EQ(OpRegistry::builtin().find("", "Mul", 22), nullptr);
  EXPECT_NE(OpRegistry::builtin().find("", "Mul", 21), nullptr);
}

TEST(ExecutorTest, UnknownOpIsReportedAsNotSupported) {
  Net net;
  net.g.addNode("Frobnicate", {net.g.value("x")}, {"f"}, "frob");
  try {
    Executor ex(net.g, {}, testRegistry());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node 'frob' (Frobnicate)"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("not supported"), std::string::npos);
  }
}

TEST(ExecutorTest, MissingOrUnknownInputsAreClearErrors) {
  Net net;
  Executor ex(net.g, {}, testRegistry());
  EXPECT_THROW(ex.run({}), Error);
  EXPECT_THROW(ex.run({{"x", at::ones({2})}, {"typo", at::ones({2})}}), Error);
  EXPECT_THROW(ex.run({{"x", at::ones({2})}}, {"nothing"}), Error);
}

TEST(ExecutorTest, AtenFailuresBecomeOneLineErrorsNamingTheNode) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  g.addOutput(g.addNode("Boom", {x}, {"y"}, "boom")->output(0));
  Executor ex(g, {}, testRegistry());
  try {
    ex.run({{"x", at::ones({3, 3})}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("node 'boom' (Boom), opset", 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
}

TEST(ExecutorTest, PositionalCallMatchesNamedRun) {
  Net net;
  Executor ex(net.g, {}, testRegistry());
  std::vector<at::Tensor> out = ex({at::tensor({1.f, -1.f})});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(at::equal(out[0], at::tensor({3.f, -4.f})));
  EXPECT_THROW(ex({}), Error);
}

}  // namespace
}  // namespace qforge

namespace qforge {
namespace {

// In-place reuse of released inputs (OpContext::mayOverwriteInput) with the built-in lowerings:
// it must happen where nothing can observe it and never anywhere else.
class ExecutorInPlaceTest : public ::testing::Test {
 protected:
  Graph g;
  Value* x = nullptr;
  void SetUp() override {
    x = g.addValue("x");
    g.addInput(x);
  }
  Value* add(const std::string& op, std::vector<Value*> in, const std::string& out) {
    return g.addNode(op, in, {out}, out)->output(0);
  }
};

TEST_F(ExecutorInPlaceTest, ReleasedIntermediateIsReused) {
  Value* n = add("Neg", {x}, "n");
  g.addOutput(add("Relu", {n}, "r"));
  Executor ex(g);
  const void* neg_data = nullptr;
  ex.addHook("n", [&](const Value&, const at::Tensor& t) {
    neg_data = t.data_ptr();
    return t;
  });
  at::Tensor input = at::tensor({1.f, -2.f, 3.f});
  at::Tensor out = ex.run({{"x", input}}).at("r");
  EXPECT_TRUE(at::equal(out, at::tensor({0.f, 2.f, 0.f})));
  EXPECT_EQ(out.data_ptr(), neg_data);  // Relu wrote into Neg's buffer
  EXPECT_TRUE(at::equal(input, at::tensor({1.f, -2.f, 3.f})));
}

TEST_F(ExecutorInPlaceTest, FeedsAndInitializersSeenThroughIdentityStayIntact) {
  Value* w = g.addInitializer("w", at::tensor({-1.f, 5.f}));
  Value* fx = add("Identity", {x}, "fx");
  Value* fw = add("Identity", {w}, "fw");
  g.addOutput(add("Relu", {fx}, "rx"));
  g.addOutput(add("Clip", {fw}, "cw"));
  g.addOutput(add("Add", {add("Identity", {x}, "fx2"), add("Identity", {w}, "fw2")}, "s"));
  g.model.opset_imports = {{"", 13}};
  Executor ex(g);
  at::Tensor input = at::tensor({-3.f, 4.f});
  TensorMap out = ex.run({{"x", input}});
  EXPECT_TRUE(at::equal(input, at::tensor({-3.f, 4.f})));
  EXPECT_TRUE(at::equal(g.value("w")->initializer(), at::tensor({-1.f, 5.f})));
  EXPECT_TRUE(at::equal(out.at("rx"), at::tensor({0.f, 4.f})));
  EXPECT_TRUE(at::equal(out.at("s"), at::tensor({-4.f, 9.f})));
}

TEST_F(ExecutorInPlaceTest, ValuesWithLaterReadersOrOutputsOrStashesAreNotOverwritten) {
  Value* n = add("Neg", {x}, "n");
  Value* r = add("Relu", {n}, "r");    // n is read again below, so Relu must not overwrite it
  Value* s = add("Add", {r, n}, "s");  // r is a graph output, so Add must not overwrite it
  g.addOutput(r);
  g.addOutput(s);
  Executor ex(g);
  at::Tensor stashed;
  ex.addHook("n", [&](const Value&, const at::Tensor& t) {
    stashed = t;  // an observer that keeps the tensor itself
    return t;
  });
  TensorMap out = ex.run({{"x", at::tensor({1.f, -2.f})}});
  EXPECT_TRUE(at::equal(out.at("r"), at::tensor({0.f, 2.f})));
  EXPECT_TRUE(at::equal(out.at("s"), at::tensor({-1.f, 4.f})));
  EXPECT_TRUE(at::equal(stashed, at::tensor({-1.f, 2.f})));
}

TEST_F(ExecutorInPlaceTest, BroadcastingOperandIsNotReusedForALargerResult) {
  Value* small = add("Neg", {x}, "small");  // shape [2]
  Value* big = g.addInitializer("big", at::ones({3, 2}));
  g.addOutput(add("Add", {small, big}, "s"));
  Executor ex(g);
  at::Tensor out = ex.run({{"x", at::tensor({1.f, 2.f})}}).at("s");
  EXPECT_EQ(out.sizes(), (at::IntArrayRef{3, 2}));
  EXPECT_TRUE(at::equal(out, at::tensor({0.f, -1.f}).expand({3, 2})));
  EXPECT_TRUE(at::equal(g.value("big")->initializer(), at::ones({3, 2})));
}

TEST_F(ExecutorInPlaceTest, NothingIsOverwrittenWhenRecordingGradients) {
  Value* w = g.addInitializer("w", at::tensor({2.f, -3.f}).requires_grad_());
  Value* m = add("Mul", {x, w}, "m");
  g.addOutput(add("Relu", {m}, "r"));
  Executor ex(g, ExecutorOptions{true});
  at::Tensor out = ex.run({{"x", at::tensor({1.f, 1.f})}}).at("r");
  out.sum().backward();
  EXPECT_TRUE(at::equal(g.value("w")->initializer().grad(), at::tensor({1.f, 0.f})));
}

}  // namespace
}  // namespace qforge

namespace qforge {
namespace {

// A float16 Conv: ATen 1.13 has no float16 convolution on the CPU, so the executor runs it as
// ONNX Runtime's CPU provider does, in float32 with the result rounded back to float16.
TEST(ExecutorTest, AFloat16OpWithoutAHalfKernelRunsInFloat32AndGivesFloat16) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  at::manual_seed(1);
  const at::Tensor w = at::randn({4, 3, 3, 3}).to(at::kHalf);
  Node* conv = g.addNode("Conv", {x, g.addInitializer("w", w)}, {"y"}, "conv");
  Node* relu = g.addNode("Relu", {conv->output(0)}, {"r"}, "relu");
  g.addOutput(relu->output(0));
  const at::Tensor input = at::randn({2, 3, 8, 8}).to(at::kHalf);
  Executor ex(g);
  for (int run = 0; run < 2; ++run) {  // the second run takes the float32 path directly
    const at::Tensor r = ex.run({{"x", input}}).at("r");
    EXPECT_EQ(r.scalar_type(), at::kHalf);
    const at::Tensor want =
        at::relu(at::conv2d(input.to(at::kFloat), w.to(at::kFloat))).to(at::kHalf);
    EXPECT_TRUE(at::equal(r, want));
  }
}

// Other failures keep their message: a float16 fallback never hides a real error.
TEST(ExecutorTest, AFloat16OpThatFailsForAnotherReasonStillFailsNamingTheNode) {
  Graph g;
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* conv = g.addNode("Conv", {x, g.addInitializer("w", at::randn({4, 5, 3, 3}).to(at::kHalf))},
                         {"y"}, "conv");
  g.addOutput(conv->output(0));
  const std::string e = testing::errorOf([&] {
    Executor(g).run({{"x", at::randn({1, 3, 8, 8}).to(at::kHalf)}});
  });
  EXPECT_NE(e.find("node 'conv' (Conv)"), std::string::npos) << e;
  EXPECT_EQ(e.find("Half"), std::string::npos) << e;
}

// --- Followers computed inside a node's kernel (OpInfo::fusable_followers, OpContext::tail) ---

// "Double" absorbs as many of its offered followers ("Neg", "Add") as `absorb_limit` allows,
// computing them itself; every lowering counts its calls, so a test sees which nodes ran alone.
struct TailRegistry {
  OpRegistry registry;
  std::map<std::string, int> calls;
  std::vector<size_t> offered;  // tail sizes offered to Double, one entry per run
  size_t absorb_limit = 10;

  TailRegistry() {
    OpInfo twice;
    twice.op_type = "Double";
    twice.fusable_followers = {"Neg", "Add"};
    twice.run = [this](const OpContext& c) {
      ++calls["Double"];
      offered.push_back(c.tail().size());
      at::Tensor y = c.input(0) * 2;
      size_t n = 0;
      for (; n < c.tail().size() && n < absorb_limit; ++n) {
        // The previous node's output is not materialized: its slot is undefined.
        const OpContext& f = c.tail()[n];
        if (f.node().opType() == "Neg") {
          EXPECT_FALSE(f.hasInput(0));
          y = -y;
        } else {
          EXPECT_NE(f.hasInput(0), f.hasInput(1));
          y = y + (f.hasInput(0) ? f.input(0) : f.input(1));
        }
      }
      c.absorb(n);
      return std::vector<at::Tensor>{y};
    };
    registry.add(twice);
    OpInfo neg;
    neg.op_type = "Neg";
    neg.run = [this](const OpContext& c) {
      ++calls["Neg"];
      return std::vector<at::Tensor>{-c.input(0)};
    };
    registry.add(neg);
    OpInfo add;
    add.op_type = "Add";
    add.run = [this](const OpContext& c) {
      ++calls["Add"];
      return std::vector<at::Tensor>{c.input(0) + c.input(1)};
    };
    registry.add(add);
    OpInfo constant;
    constant.op_type = "Constant";
    constant.run = [](const OpContext&) {
      return std::vector<at::Tensor>{at::tensor({100.f, 200.f})};
    };
    registry.add(constant);
  }
};

// x -> Double -> Neg -> Add(., c) -> y, with c an initializer: y = -2x + c.
struct TailNet {
  Graph g;
  TailNet() {
    g.model.opset_imports = {{"", 13}};
    Value* x = g.addValue("x");
    g.addInput(x);
    Value* c = g.addInitializer("c", at::tensor({10.f, 20.f}));
    Node* twice = g.addNode("Double", {x}, {"x2"}, "double");
    Node* neg = g.addNode("Neg", {twice->output(0)}, {"n"}, "neg");
    Node* add = g.addNode("Add", {neg->output(0), c}, {"y"}, "add");
    g.addOutput(add->output(0));
  }
};

const at::Tensor kTailInput = at::tensor({1.f, 2.f});
const at::Tensor kTailResult = at::tensor({8.f, 16.f});  // -2x + c

TEST(ExecutorTailTest, FollowersAreComputedInTheFirstNodesKernel) {
  TailRegistry r;
  TailNet net;
  Executor ex(net.g, {}, r.registry);
  EXPECT_TRUE(at::equal(ex.run({{"x", kTailInput}}).at("y"), kTailResult));
  EXPECT_EQ(r.offered, std::vector<size_t>{2});
  EXPECT_EQ(r.calls["Neg"] + r.calls["Add"], 0);
}

TEST(ExecutorTailTest, TheChainsValueMayBeAnyInputOfAFollower) {
  TailRegistry r;
  Graph g;
  g.model.opset_imports = {{"", 13}};
  Value* x = g.addValue("x");
  g.addInput(x);
  Value* c = g.addInitializer("c", at::tensor({10.f, 20.f}));
  Node* twice = g.addNode("Double", {x}, {"x2"}, "double");
  g.addOutput(g.addNode("Add", {c, twice->output(0)}, {"y"}, "add")->output(0));
  Executor ex(g, {}, r.registry);
  EXPECT_TRUE(at::equal(ex.run({{"x", kTailInput}}).at("y"), at::tensor({12.f, 24.f})));
  EXPECT_EQ(r.offered, std::vector<size_t>{1});
  EXPECT_EQ(r.calls["Add"], 0);
}

TEST(ExecutorTailTest, AFollowerTheKernelDeclinesRunsItself) {
  TailRegistry r;
  r.absorb_limit = 1;
  TailNet net;
  Executor ex(net.g, {}, r.registry);
  EXPECT_TRUE(at::equal(ex.run({{"x", kTailInput}}).at("y"), kTailResult));
  EXPECT_EQ(r.calls["Neg"], 0);
  EXPECT_EQ(r.calls["Add"], 1);
}

// Anything that can see a value between the nodes keeps them apart from there on: a hook (an
// observer or a quantizer), a request for the value, a feed of it, or gradients being recorded.
TEST(ExecutorTailTest, NothingIsAbsorbedPastAValueSomethingObserves) {
  {
    TailRegistry r;
    TailNet net;
    Executor ex(net.g, {}, r.registry);
    at::Tensor seen;
    ex.addHook("n", [&](const Value&, const at::Tensor& t) {
      seen = t;
      return t;
    });
    EXPECT_TRUE(at::equal(ex.run({{"x", kTailInput}}).at("y"), kTailResult));
    EXPECT_TRUE(at::equal(seen, at::tensor({-2.f, -4.f})));
    EXPECT_EQ(r.offered, std::vector<size_t>{1});  // Neg, whose output the hook then sees
    EXPECT_EQ(r.calls["Neg"], 0);
    EXPECT_EQ(r.calls["Add"], 1);
  }
  {
    TailRegistry r;
    TailNet net;
    Executor ex(net.g, {}, r.registry);
    ex.addHook("x2", [](const Value&, const at::Tensor& t) { return t; });
    EXPECT_TRUE(at::equal(ex.run({{"x", kTailInput}}).at("y"), kTailResult));
    EXPECT_EQ(r.offered, std::vector<size_t>{0});
    EXPECT_EQ(r.calls["Neg"], 1);
  }
  {
    TailRegistry r;
    TailNet net;
    Executor ex(net.g, {}, r.registry);
    const TensorMap out = ex.run({{"x", kTailInput}}, {"x2", "y"});
    EXPECT_TRUE(at::equal(out.at("x2"), at::tensor({2.f, 4.f})));
    EXPECT_TRUE(at::equal(out.at("y"), kTailResult));
    EXPECT_EQ(r.offered, std::vector<size_t>{0});
  }
  {
    TailRegistry r;
    TailNet net;
    net.g.value("c")->setInitializer(at::tensor({10.f, 20.f}).requires_grad_());
    Executor ex(net.g, ExecutorOptions{true}, r.registry);
    EXPECT_TRUE(at::allclose(ex.run({{"x", kTailInput}}).at("y"), kTailResult));
    EXPECT_EQ(r.offered, std::vector<size_t>{0});
    EXPECT_EQ(r.calls["Add"], 1);
  }
  {
    TailRegistry r;
    TailNet net;
    Executor ex(net.g, {}, r.registry);
    EXPECT_TRUE(at::equal(ex.run({{"x", kTailInput}, {"n", at::tensor({1.f, 1.f})}}).at("y"),
                          at::tensor({11.f, 21.f})));
    EXPECT_EQ(r.calls["Double"], 0);
    EXPECT_EQ(r.calls["Add"], 1);
  }
}

TEST(ExecutorTailTest, AValueWithTwoReadersEndsTheChain) {
  TailRegistry r;
  TailNet net;
  net.g.addOutput(net.g.addNode("Neg", {net.g.value("x2")}, {"other"}, "other")->output(0));
  Executor ex(net.g, {}, r.registry);
  const TensorMap out = ex.run({{"x", kTailInput}});
  EXPECT_TRUE(at::equal(out.at("y"), kTailResult));
  EXPECT_TRUE(at::equal(out.at("other"), at::tensor({-2.f, -4.f})));
  EXPECT_EQ(r.offered, std::vector<size_t>{0});
}

// A follower's other input must exist when the first node runs: one computed from the graph
// after it ends the chain; a Constant placed after it is moved first, as inputs-free nodes are.
TEST(ExecutorTailTest, AFollowersOtherInputsMustBeReadyWhenTheFirstNodeRuns) {
  {
    TailRegistry r;
    Graph g;
    g.model.opset_imports = {{"", 13}};
    Value* x = g.addValue("x");
    g.addInput(x);
    Node* twice = g.addNode("Double", {x}, {"x2"}, "double");
    Node* later = g.addNode("Neg", {x}, {"nx"}, "later");
    g.addOutput(g.addNode("Add", {twice->output(0), later->output(0)}, {"y"}, "add")->output(0));
    Executor ex(g, {}, r.registry);
    EXPECT_TRUE(at::equal(ex.run({{"x", kTailInput}}).at("y"), at::tensor({1.f, 2.f})));
    EXPECT_EQ(r.offered, std::vector<size_t>{0});
  }
  {
    TailRegistry r;
    Graph g;
    g.model.opset_imports = {{"", 13}};
    Value* x = g.addValue("x");
    g.addInput(x);
    Node* twice = g.addNode("Double", {x}, {"x2"}, "double");
    Node* constant = g.addNode("Constant", {}, {"c"}, "constant");
    g.addOutput(g.addNode("Add", {twice->output(0), constant->output(0)}, {"y"}, "add")->output(0));
    Executor ex(g, {}, r.registry);
    EXPECT_TRUE(at::equal(ex.run({{"x", kTailInput}}).at("y"), at::tensor({102.f, 204.f})));
    EXPECT_EQ(r.offered, std::vector<size_t>{1});
    EXPECT_EQ(r.calls["Add"], 0);
  }
}

// --- Followers that read a value computed two or more nodes back (a closed region) ---

// "Square" offers "Neg" and "Mul": x -> Square(a) -> Neg(n); Mul(a, n) -> y, so y = -x^4. Its
// lowering absorbs `absorb` followers when that many are offered and the Mul reads both values.
struct RegionRegistry {
  OpRegistry registry;
  std::map<std::string, int> calls;
  size_t absorb = 2;

  RegionRegistry() {
    OpInfo square;
    square.op_type = "Square";
    square.fusable_followers = {"Neg", "Mul"};
    square.run = [this](const OpContext& c) {
      ++calls["Square"];
      const at::Tensor a = c.input(0) * c.input(0);
      if (c.tail().size() < absorb) return std::vector<at::Tensor>{a};
      EXPECT_TRUE(c.followerReads(0, 0, 0));  // Neg reads Square's value
      EXPECT_FALSE(c.tail()[0].hasInput(0));
      if (absorb == 2) {
        EXPECT_TRUE(c.followerReads(1, 0, 0));  // Mul reads Square's value...
        EXPECT_TRUE(c.followerReads(1, 1, 1));  // ...and Neg's
        EXPECT_FALSE(c.followerReads(1, 0, 1));
        EXPECT_FALSE(c.tail()[1].hasInput(0) || c.tail()[1].hasInput(1));
      }
      c.absorb(absorb);
      return std::vector<at::Tensor>{absorb == 2 ? -(a * a) : -a};
    };
    registry.add(square);
    for (const char* name : {"Neg", "Mul"}) {
      OpInfo info;
      info.op_type = name;
      const bool neg = std::string(name) == "Neg";
      info.run = [this, neg, name](const OpContext& c) {
        ++calls[name];
        return std::vector<at::Tensor>{neg ? -c.input(0) : c.input(0) * c.input(1)};
      };
      registry.add(info);
    }
  }
};

Graph regionGraph() {
  Graph g;
  g.model.opset_imports = {{"", 13}};
  Value* x = g.addValue("x");
  g.addInput(x);
  Node* square = g.addNode("Square", {x}, {"a"}, "square");
  Node* neg = g.addNode("Neg", {square->output(0)}, {"n"}, "neg");
  g.addOutput(g.addNode("Mul", {square->output(0), neg->output(0)}, {"y"}, "mul")->output(0));
  return g;
}

const at::Tensor kRegionInput = at::tensor({1.f, 2.f, -3.f});
const at::Tensor kRegionResult = at::tensor({-1.f, -16.f, -81.f});  // -x^4

TEST(ExecutorTailTest, AFollowerMayReadAValueComputedFurtherBack) {
  RegionRegistry r;
  Graph g = regionGraph();
  Executor ex(g, {}, r.registry);
  EXPECT_TRUE(at::equal(ex.run({{"x", kRegionInput}}).at("y"), kRegionResult));
  EXPECT_EQ(r.calls["Square"], 1);
  EXPECT_EQ(r.calls["Neg"] + r.calls["Mul"], 0);
}

// Square's value is read by the Mul too, so stopping after the Neg would leave the Mul without
// it: the executor refuses such a count as a bug of the lowering.
TEST(ExecutorTailTest, ALoweringMayNotStopWhereAComputedValueIsStillRead) {
  RegionRegistry r;
  r.absorb = 1;
  Graph g = regionGraph();
  Executor ex(g, {}, r.registry);
  const std::string e = testing::errorOf([&] { ex.run({{"x", kRegionInput}}); });
  EXPECT_NE(e.find("square"), std::string::npos) << e;
  EXPECT_NE(e.find("also read elsewhere"), std::string::npos) << e;
}

TEST(ExecutorTailTest, ARegionIsOfferedOnlyWhileNoValueInsideIsSeen) {
  {
    RegionRegistry r;
    Graph g = regionGraph();
    Executor ex(g, {}, r.registry);
    ex.addHook("n", [](const Value&, const at::Tensor& t) { return t; });
    EXPECT_TRUE(at::equal(ex.run({{"x", kRegionInput}}).at("y"), kRegionResult));
    EXPECT_EQ(r.calls["Neg"], 1);
    EXPECT_EQ(r.calls["Mul"], 1);
  }
  {
    // Another reader of Square's value outside the region: nothing is planned.
    RegionRegistry r;
    Graph g = regionGraph();
    g.addOutput(g.addNode("Neg", {g.value("a")}, {"other"}, "other")->output(0));
    Executor ex(g, {}, r.registry);
    const TensorMap out = ex.run({{"x", kRegionInput}});
    EXPECT_TRUE(at::equal(out.at("y"), kRegionResult));
    EXPECT_TRUE(at::equal(out.at("other"), -kRegionInput * kRegionInput));
    EXPECT_EQ(r.calls["Mul"], 1);
  }
}

}  // namespace
}  // namespace qforge
