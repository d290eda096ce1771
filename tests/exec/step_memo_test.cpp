#include "exec/step_memo.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "exec/executor.h"

namespace qforge {
namespace {

// --- which nodes are remembered -------------------------------------------------------------

struct OneNode {
  Graph g;
  Node* node;
  OneNode(const std::string& op, size_t inputs, const std::string& domain = "") {
    std::vector<Value*> in;
    for (size_t i = 0; i < inputs; ++i)
      in.push_back(g.addValue("in" + std::to_string(i)));
    node = g.addNode(op, in, {"out"}, "n", domain);
  }
};

TEST(StepMemoKeyTest, ShapeAndSizeAreKeyedByTheirInputsSizesWhateverProducesIt) {
  EXPECT_EQ(StepMemo::keyFor(*OneNode("Shape", 1).node, {false}), StepMemo::Key::InputSizes);
  EXPECT_EQ(StepMemo::keyFor(*OneNode("Size", 1).node, {false}), StepMemo::Key::InputSizes);
}

TEST(StepMemoKeyTest, APureOpIsRememberedOnlyWhenEveryInputIsStable) {
  EXPECT_EQ(StepMemo::keyFor(*OneNode("Gather", 2).node, {true, true}), StepMemo::Key::InputValues);
  EXPECT_EQ(StepMemo::keyFor(*OneNode("Gather", 2).node, {true, false}), StepMemo::Key::None);
  EXPECT_EQ(StepMemo::keyFor(*OneNode("Constant", 0).node, {}), StepMemo::Key::InputValues);
}

TEST(StepMemoKeyTest, RandomStatefulAndCustomDomainOpsAreNeverRemembered) {
  EXPECT_EQ(StepMemo::keyFor(*OneNode("RandomNormal", 0).node, {}), StepMemo::Key::None);
  EXPECT_EQ(StepMemo::keyFor(*OneNode("Dropout", 1).node, {true}), StepMemo::Key::None);
  EXPECT_EQ(StepMemo::keyFor(*OneNode("Conv", 2).node, {true, true}), StepMemo::Key::None);
  EXPECT_EQ(StepMemo::keyFor(*OneNode("Mul", 2, "com.qforge").node, {true, true}),
            StepMemo::Key::None);
  EXPECT_EQ(StepMemo::keyFor(*OneNode("Shape", 1, "com.qforge").node, {true}), StepMemo::Key::None);
}

// --- lookup and remember --------------------------------------------------------------------

TEST(StepMemoTest, SizesKeyHitsForAnyTensorOfTheSameSizes) {
  StepMemo memo(StepMemo::Key::InputSizes);
  const at::Tensor shape = at::tensor({2, 3}, at::kLong);
  EXPECT_EQ(memo.lookup({at::zeros({2, 3})}), nullptr);
  memo.remember({at::zeros({2, 3})}, {shape});
  const auto* hit = memo.lookup({at::rand({2, 3})});
  ASSERT_NE(hit, nullptr);
  EXPECT_TRUE(hit->at(0).is_same(shape));
  EXPECT_EQ(memo.lookup({at::rand({3, 2})}), nullptr);
  EXPECT_EQ(memo.lookup({at::rand({2, 3, 1})}), nullptr);
}

TEST(StepMemoTest, ValuesKeyHitsForEqualValuesAndMissesForAnyChange) {
  StepMemo memo(StepMemo::Key::InputValues);
  at::Tensor a = at::tensor({1, 2}, at::kLong);
  memo.remember({a, at::Tensor()}, {a + 1});
  ASSERT_NE(memo.lookup({a, at::Tensor()}), nullptr);
  EXPECT_NE(memo.lookup({a.clone(), at::Tensor()}), nullptr);
  EXPECT_EQ(memo.lookup({a.to(at::kInt), at::Tensor()}), nullptr);
  EXPECT_EQ(memo.lookup({a.reshape({2, 1}), at::Tensor()}), nullptr);
  EXPECT_EQ(memo.lookup({a, a}), nullptr);
  EXPECT_EQ(memo.lookup({a}), nullptr);
  a.add_(1);
  EXPECT_EQ(memo.lookup({a, at::Tensor()}), nullptr);
  // A kernel writing through the data pointer counts no version: the bytes still differ.
  a.sub_(1);
  ASSERT_NE(memo.lookup({a, at::Tensor()}), nullptr);
  a.data_ptr<int64_t>()[1] = 5;
  EXPECT_EQ(memo.lookup({a, at::Tensor()}), nullptr);
}

TEST(StepMemoTest, AnOutputModifiedInPlaceByItsReaderIsNotHandedOutAgain) {
  StepMemo memo(StepMemo::Key::InputValues);
  const at::Tensor a = at::tensor({1, 2}, at::kLong);
  memo.remember({a}, {a * 2});
  const auto* hit = memo.lookup({a});
  ASSERT_NE(hit, nullptr);
  at::Tensor handed_out = hit->at(0);
  handed_out.mul_(0);
  EXPECT_EQ(memo.lookup({a}), nullptr);
}

TEST(StepMemoTest, LargeNonContiguousTrainableAndInferenceTensorsAreNotRemembered) {
  StepMemo memo(StepMemo::Key::InputValues);
  const at::Tensor large = at::zeros({StepMemo::kMaxElements + 1});
  memo.remember({large}, {at::zeros({1})});
  EXPECT_EQ(memo.lookup({large}), nullptr);

  // A small slice still holds all of its storage.
  const at::Tensor slice = at::zeros({StepMemo::kMaxElements * 8}).slice(0, 0, 2);
  memo.remember({slice}, {at::zeros({1})});
  EXPECT_EQ(memo.lookup({slice}), nullptr);

  const at::Tensor transposed = at::ones({2, 3}).t();
  memo.remember({transposed}, {at::zeros({1})});
  EXPECT_EQ(memo.lookup({transposed}), nullptr);

  const at::Tensor trainable = at::ones({2}).requires_grad_();
  memo.remember({trainable}, {at::zeros({1})});
  EXPECT_EQ(memo.lookup({trainable}), nullptr);

  const at::Tensor small = at::ones({2});
  memo.remember({small}, {at::zeros({StepMemo::kMaxElements + 1})});
  EXPECT_EQ(memo.lookup({small}), nullptr);

  // An output without a version counter could be changed unseen.
  at::Tensor inference;
  {
    c10::InferenceMode guard;
    inference = at::ones({2});
  }
  memo.remember({small}, {inference});
  EXPECT_EQ(memo.lookup({small}), nullptr);
}

// --- in the executor ------------------------------------------------------------------------

// The built-in registry with Gather's lowering counting its calls.
struct CountingRegistry {
  std::shared_ptr<int> gathers = std::make_shared<int>(0);
  OpRegistry registry = OpRegistry::builtin();
  CountingRegistry() {
    const Lowering gather = registry.find("", "Gather", 13)->run;
    auto count = gathers;
    registry.replaceLowering("", "Gather", [gather, count](const OpContext& ctx) {
      ++*count;
      return gather(ctx);
    });
  }
};

// y = Reshape(x, Concat(Unsqueeze(Gather(Shape(x), idx)), [-1])): x flattened after the axis
// `idx` names, as torch.onnx writes `x.view(x.size(0), -1)`.
struct FlattenBySize {
  Graph g;
  FlattenBySize() {
    g.model.opset_imports = {{"", 13}};
    Value* x = g.addValue("x");
    g.addInput(x);
    Value* idx = g.addInitializer("idx", at::scalar_tensor(0, at::kLong));
    Value* axes = g.addInitializer("axes", at::tensor({0}, at::kLong));
    Value* rest = g.addInitializer("rest", at::tensor({-1}, at::kLong));
    Node* shape = g.addNode("Shape", {x}, {"shape"}, "shape");
    Node* gather = g.addNode("Gather", {shape->output(0), idx}, {"n"}, "gather");
    Node* unsqueeze = g.addNode("Unsqueeze", {gather->output(0), axes}, {"n1"}, "unsqueeze");
    Node* concat = g.addNode("Concat", {unsqueeze->output(0), rest}, {"target"}, "concat");
    concat->attributes.set(Attribute::makeInt("axis", 0));
    Node* reshape = g.addNode("Reshape", {x, concat->output(0)}, {"y"}, "reshape");
    g.addOutput(reshape->output(0));
  }
};

TEST(ExecutorMemoTest, AShapeChainRunsOncePerInputShapeAndTheDataPathEveryTime) {
  FlattenBySize net;
  CountingRegistry counting;
  Executor ex(net.g, {}, counting.registry);
  const at::Tensor a = at::rand({2, 3, 4});
  EXPECT_TRUE(at::equal(ex.run({{"x", a}}).at("y"), a.reshape({2, 12})));
  EXPECT_EQ(*counting.gathers, 1);
  const at::Tensor b = at::rand({2, 3, 4});
  EXPECT_TRUE(at::equal(ex.run({{"x", b}}).at("y"), b.reshape({2, 12})));
  EXPECT_EQ(*counting.gathers, 1);
  const at::Tensor c = at::rand({5, 3, 4});
  EXPECT_TRUE(at::equal(ex.run({{"x", c}}).at("y"), c.reshape({5, 12})));
  EXPECT_EQ(*counting.gathers, 2);
}

TEST(ExecutorMemoTest, AnInitializerChangedInPlaceReplacedOrWrittenThroughItsPointerIsSeen) {
  FlattenBySize net;
  CountingRegistry counting;
  Executor ex(net.g, {}, counting.registry);
  const at::Tensor x = at::rand({2, 3, 4});
  ex.run({{"x", x}});
  // Flatten after axis 1 now: [3, 8] -- the Gather reads index 1.
  net.g.value("idx")->initializer().fill_(1);
  EXPECT_TRUE(at::equal(ex.run({{"x", x}}).at("y"), x.reshape({3, 8})));
  net.g.value("idx")->setInitializer(at::scalar_tensor(2, at::kLong));
  EXPECT_TRUE(at::equal(ex.run({{"x", x}}).at("y"), x.reshape({4, 6})));
  // As ATen's batch norm updates its running statistics: no version counted.
  net.g.value("idx")->initializer().data_ptr<int64_t>()[0] = 0;
  EXPECT_TRUE(at::equal(ex.run({{"x", x}}).at("y"), x.reshape({2, 12})));
  EXPECT_EQ(*counting.gathers, 4);
}

TEST(ExecutorMemoTest, AFedIntermediateReplacesTheRememberedValue) {
  FlattenBySize net;
  Executor ex(net.g);
  const at::Tensor x = at::rand({2, 3, 4});
  ex.run({{"x", x}});
  const at::Tensor target = at::tensor({6, 4}, at::kLong);
  EXPECT_TRUE(at::equal(ex.run({{"x", x}, {"target", target}}).at("y"), x.reshape({6, 4})));
  EXPECT_TRUE(at::equal(ex.run({{"x", x}}).at("y"), x.reshape({2, 12})));
}

TEST(ExecutorMemoTest, ACallerModifyingARequestedShapeValueDoesNotSpoilTheNextRun) {
  FlattenBySize net;
  Executor ex(net.g);
  const at::Tensor x = at::rand({2, 3, 4});
  TensorMap out = ex.run({{"x", x}}, {"target", "y"});
  out.at("target").fill_(7);
  out = ex.run({{"x", x}}, {"target", "y"});
  EXPECT_TRUE(at::equal(out.at("target"), at::tensor({2, -1}, at::kLong)));
  EXPECT_TRUE(at::equal(out.at("y"), x.reshape({2, 12})));
}

TEST(ExecutorMemoTest, HooksOnARememberedValueRunEveryTime) {
  FlattenBySize net;
  Executor ex(net.g);
  int calls = 0;
  ex.addHook("n", [&](const Value&, const at::Tensor& t) {
    ++calls;
    return t;
  });
  const at::Tensor x = at::rand({2, 3, 4});
  ex.run({{"x", x}});
  ex.run({{"x", x}});
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace qforge
