// A Conv followed by a BatchNormalization and an activation, run by the executor with the
// built-in lowerings: the followers the Conv's kernel computes give what PyTorch's own ops give
// one after another, and they do not run as nodes of their own (the profile counts their
// calls). Followers outside what the kernel computes run themselves, with their own errors.
#include "exec/ops/conv_epilogue.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "exec/executor.h"
#include "support/op_test_helpers.h"

namespace qforge {
namespace {

using testing::expectTensorNear;
using testing::ints;

struct Follower {
  std::string op_type;
  std::vector<Attribute> attributes;
  std::vector<at::Tensor> extra_inputs;  // after the data input (Clip's bounds)
};

// x -> Conv(w, b; 3x3, pads 1) -> BatchNormalization (when `with_bn`) -> `act` -> y.
struct ConvChain {
  Graph g;
  at::Tensor x = at::randn({2, 4, 6, 6}), w = at::randn({5, 4, 3, 3}), b = at::randn({5});
  at::Tensor scale = at::randn({5}), bias = at::randn({5}), mean = at::randn({5}),
             var = at::rand({5}) + 0.5;

  // times_input: 0, or act's output multiplied by act's input in the Mul's slot 1 (1) or 0 (2),
  // as SiLU is written out with a Sigmoid.
  ConvChain(int64_t opset, bool with_bn, const Follower& act, int times_input = 0) {
    g.model.opset_imports = {{"", opset}};
    Value* in = g.addValue("x");
    g.addInput(in);
    Node* conv = g.addNode("Conv", {in, g.addInitializer("w", w), g.addInitializer("b", b)},
                           {"conv_out"}, "conv");
    conv->attributes.set(ints("pads", {1, 1, 1, 1}));
    Value* last = conv->output(0);
    if (with_bn) {
      Node* bn = g.addNode("BatchNormalization",
                           {last, g.addInitializer("scale", scale), g.addInitializer("bias", bias),
                            g.addInitializer("mean", mean), g.addInitializer("var", var)},
                           {"bn_out"}, "bn");
      bn->attributes.set(Attribute::makeFloat("epsilon", 1e-3f));
      last = bn->output(0);
    }
    std::vector<Value*> act_inputs = {last};
    for (size_t i = 0; i < act.extra_inputs.size(); ++i) {
      act_inputs.push_back(
          act.extra_inputs[i].defined()
              ? g.addInitializer("act_in" + std::to_string(i + 1), act.extra_inputs[i])
              : nullptr);
    }
    Node* a = g.addNode(act.op_type, act_inputs, {times_input ? "act_out" : "y"}, "act");
    for (const Attribute& attr : act.attributes)
      a->attributes.set(attr);
    if (times_input != 0) {
      a = g.addNode("Mul",
                    times_input == 1 ? std::vector<Value*>{last, a->output(0)}
                                     : std::vector<Value*>{a->output(0), last},
                    {"y"}, "times_input");
    }
    g.addOutput(a->output(0));
  }

  at::Tensor beforeActivation(bool with_bn) const {
    at::Tensor y = at::convolution(x, w, b, {1, 1}, {1, 1}, {1, 1}, false, {0, 0}, 1);
    return with_bn ? at::batch_norm(y, scale, bias, mean, var, false, 0.0, 1e-3, false) : y;
  }
};

// Calls per op type in the profile of one run.
std::map<std::string, int64_t> callsByOp(const Executor& ex) {
  std::map<std::string, int64_t> calls;
  for (const NodeTiming& t : ex.profile())
    calls[t.node->opType()] += t.calls;
  return calls;
}

struct FusedCase {
  const char* what;
  int64_t opset;
  Follower act;
  std::function<at::Tensor(const at::Tensor&)> reference;
};

TEST(ConvEpilogueTest, BatchNormAndActivationRunInsideTheConvKernel) {
  const std::vector<FusedCase> cases = {
      {"Relu", 13, {"Relu", {}, {}}, [](const at::Tensor& y) { return at::relu(y); }},
      {"LeakyRelu",
       13,
       {"LeakyRelu", {Attribute::makeFloat("alpha", 0.2f)}, {}},
       [](const at::Tensor& y) { return at::leaky_relu(y, 0.2); }},
      {"Clip-13 bounds as inputs",
       13,
       {"Clip", {}, {at::scalar_tensor(-0.5f), at::scalar_tensor(1.5f)}},
       [](const at::Tensor& y) { return at::clamp(y, -0.5, 1.5); }},
      {"Clip-13 with only a max",
       13,
       {"Clip", {}, {at::Tensor(), at::scalar_tensor(0.75f)}},
       [](const at::Tensor& y) { return at::clamp_max(y, 0.75); }},
      {"Clip-6 bounds as attributes",
       10,
       {"Clip", {Attribute::makeFloat("min", 0.f), Attribute::makeFloat("max", 6.f)}, {}},
       [](const at::Tensor& y) { return at::clamp(y, 0.0, 6.0); }},
      {"Sigmoid", 13, {"Sigmoid", {}, {}}, [](const at::Tensor& y) { return at::sigmoid(y); }},
      {"HardSigmoid",
       13,
       {"HardSigmoid",
        {Attribute::makeFloat("alpha", 0.3f), Attribute::makeFloat("beta", 0.6f)},
        {}},
       [](const at::Tensor& y) { return at::clamp(y * 0.3 + 0.6, 0.0, 1.0); }},
      {"HardSwish",
       14,
       {"HardSwish", {}, {}},
       [](const at::Tensor& y) { return at::hardswish(y); }},
  };
  for (const FusedCase& c : cases) {
    for (bool with_bn : {false, true}) {
      SCOPED_TRACE(std::string(c.what) + (with_bn ? " after BatchNormalization" : ""));
      at::manual_seed(21);
      ConvChain chain(c.opset, with_bn, c.act);
      Executor ex(chain.g, ExecutorOptions{false, /*profile=*/true});
      const at::Tensor y = ex.run({{"x", chain.x}}).at("y");
      expectTensorNear(y, c.reference(chain.beforeActivation(with_bn)), 1e-4, 1e-4);
      const auto calls = callsByOp(ex);
      EXPECT_EQ(calls.at("Conv"), 1);
      EXPECT_EQ(calls.at(c.act.op_type), 0);
      if (with_bn) {
        EXPECT_EQ(calls.at("BatchNormalization"), 0);
      }
    }
  }
}

TEST(ConvEpilogueTest, SiluWrittenOutAsSigmoidAndMulRunsInsideTheConvKernel) {
  for (int times_input : {1, 2}) {
    for (bool with_bn : {false, true}) {
      SCOPED_TRACE(std::string(times_input == 1 ? "Mul(v, Sigmoid(v))" : "Mul(Sigmoid(v), v)") +
                   (with_bn ? " after BatchNormalization" : ""));
      at::manual_seed(22);
      ConvChain chain(13, with_bn, {"Sigmoid", {}, {}}, times_input);
      Executor ex(chain.g, ExecutorOptions{false, /*profile=*/true});
      const at::Tensor y = ex.run({{"x", chain.x}}).at("y");
      const at::Tensor v = chain.beforeActivation(with_bn);
      expectTensorNear(y, v * at::sigmoid(v), 1e-4, 1e-4);
      const auto calls = callsByOp(ex);
      EXPECT_EQ(calls.at("Sigmoid") + calls.at("Mul"), 0);
    }
  }
  // The Sigmoid's value seen by a hook: the kernel stops before the Sigmoid, which cannot be
  // computed alone there (the Mul still reads the Conv's output).
  at::manual_seed(22);
  ConvChain chain(13, false, {"Sigmoid", {}, {}}, 1);
  Executor ex(chain.g, ExecutorOptions{false, true});
  int64_t seen = 0;
  ex.addHook("act_out", [&](const Value&, const at::Tensor& t) {
    seen += t.numel();
    return t;
  });
  const at::Tensor v = chain.beforeActivation(false);
  expectTensorNear(ex.run({{"x", chain.x}}).at("y"), v * at::sigmoid(v), 1e-4, 1e-4);
  EXPECT_EQ(seen, v.numel());
  EXPECT_EQ(callsByOp(ex).at("Sigmoid"), 1);
  EXPECT_EQ(callsByOp(ex).at("Mul"), 1);
}

// torch.onnx below opset 14 writes Hardswish as v * HardSigmoid(v; alpha = 1/6, beta = 1/2).
TEST(ConvEpilogueTest, HardSwishWrittenOutAsHardSigmoidAndMulRunsInsideTheConvKernel) {
  const std::vector<Attribute> sixth = {Attribute::makeFloat("alpha", 1.f / 6.f),
                                        Attribute::makeFloat("beta", 0.5f)};
  for (int times_input : {1, 2}) {
    for (bool with_bn : {false, true}) {
      SCOPED_TRACE(
          std::string(times_input == 1 ? "Mul(v, HardSigmoid(v))" : "Mul(HardSigmoid(v), v)") +
          (with_bn ? " after BatchNormalization" : ""));
      at::manual_seed(24);
      ConvChain chain(11, with_bn, {"HardSigmoid", sixth, {}}, times_input);
      chain.x = chain.x * 4;  // reach both ends of the gate
      Executor ex(chain.g, ExecutorOptions{false, /*profile=*/true});
      const at::Tensor y = ex.run({{"x", chain.x}}).at("y");
      const at::Tensor v = chain.beforeActivation(with_bn);
      expectTensorNear(y, v * at::clamp(v / 6 + 0.5, 0, 1), 1e-4, 1e-4);
      const auto calls = callsByOp(ex);
      EXPECT_EQ(calls.at("HardSigmoid") + calls.at("Mul"), 0);
    }
  }
  // Other constants are not a hardswish: the gate and the Mul run as nodes.
  at::manual_seed(24);
  ConvChain chain(11, false,
                  {"HardSigmoid",
                   {Attribute::makeFloat("alpha", 0.2f), Attribute::makeFloat("beta", 0.5f)},
                   {}},
                  1);
  Executor ex(chain.g, ExecutorOptions{false, true});
  const at::Tensor v = chain.beforeActivation(false);
  expectTensorNear(ex.run({{"x", chain.x}}).at("y"), v * at::clamp(v * 0.2 + 0.5, 0, 1), 1e-4,
                   1e-4);
  EXPECT_EQ(callsByOp(ex).at("HardSigmoid"), 1);
  EXPECT_EQ(callsByOp(ex).at("Mul"), 1);
}

TEST(ConvEpilogueTest, FollowersOutsideTheKernelRunThemselves) {
  at::manual_seed(22);
  {
    SCOPED_TRACE("Tanh is not computed in the kernel");
    ConvChain chain(13, true, {"Tanh", {}, {}});
    Executor ex(chain.g, ExecutorOptions{false, true});
    expectTensorNear(ex.run({{"x", chain.x}}).at("y"), at::tanh(chain.beforeActivation(true)), 1e-4,
                     1e-4);
    EXPECT_EQ(callsByOp(ex).at("BatchNormalization"), 0);
    EXPECT_EQ(callsByOp(ex).at("Tanh"), 1);
  }
  {
    SCOPED_TRACE("a training-mode BatchNormalization, and the Relu after it");
    ConvChain chain(15, true, {"Relu", {}, {}});
    chain.g.findNode("bn")->attributes.set(Attribute::makeInt("training_mode", 1));
    Executor ex(chain.g, ExecutorOptions{false, true});
    const at::Tensor conv =
        at::convolution(chain.x, chain.w, chain.b, {1, 1}, {1, 1}, {1, 1}, false, {0, 0}, 1);
    const at::Tensor expected =
        at::relu(at::batch_norm(conv, chain.scale, chain.bias, {}, {}, true, 0.0, 1e-3, false));
    expectTensorNear(ex.run({{"x", chain.x}}).at("y"), expected, 1e-4, 1e-4);
    EXPECT_EQ(callsByOp(ex).at("BatchNormalization"), 1);
    EXPECT_EQ(callsByOp(ex).at("Relu"), 1);
  }
}

TEST(ConvEpilogueTest, AFollowerWithBadInputsFailsWithItsOwnError) {
  at::manual_seed(23);
  {
    ConvChain chain(13, false, {"Clip", {}, {at::scalar_tensor(0.0, at::kDouble), at::Tensor()}});
    Executor ex(chain.g);
    try {
      ex.run({{"x", chain.x}});
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'act'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("min has element type"), std::string::npos) << e.what();
    }
  }
  {
    ConvChain chain(13, true, {"Relu", {}, {}});
    chain.g.findValue("scale")->setInitializer(at::ones({3}));
    Executor ex(chain.g);
    try {
      ex.run({{"x", chain.x}});
      FAIL() << "expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'bn'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("scale must have shape"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace qforge
