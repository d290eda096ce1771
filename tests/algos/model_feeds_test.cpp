// A model's inputs as the data layer sees them, fixed batch dims, and runs that respect them:
// a Reshape to a hard-coded batch of 1 only works one row at a time.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "algos/model_feeds.h"
#include "data/data_test_files.h"

namespace qforge::algos {
namespace {

using testing::expectErrorWith;

// x [1, 4] float -> Reshape to [1, 2, 2] (a batch of 1 written into the graph) -> * Cast(rate)
// with rate an int64 scalar; plus an initializer input w that is not fed.
Graph fixedBatchGraph(int64_t batch = 1) {
  Graph g;
  Value* x = g.addValue("x");
  x->type = TensorType{DType::Float, std::vector<Dim>{Dim::known(batch), Dim::known(4)}};
  g.addInput(x);
  Value* rate = g.addValue("rate");
  rate->type = TensorType{DType::Int64, std::vector<Dim>{}};
  g.addInput(rate);
  Value* shape = g.addInitializer("shape", at::tensor(std::vector<int64_t>{batch, 2, 2}));
  Node* reshape = g.addNode("Reshape", {x, shape}, {"r"}, "reshape");
  Node* cast = g.addNode("Cast", {rate}, {"rate_f"}, "cast");
  cast->attributes.set(Attribute::makeInt("to", 1));
  Node* mul = g.addNode("Mul", {reshape->output(0), cast->output(0)}, {"y"}, "mul");
  g.addOutput(mul->output(0));
  return g;
}

TEST(ModelFeedsTest, InputsShapesDtypesAndTheFixedBatch) {
  const Graph g = fixedBatchGraph();
  const auto inputs = modelInputs(g);
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].name, "x");
  EXPECT_EQ(inputs[0].shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(inputs[0].dtype, at::kFloat);
  EXPECT_TRUE(inputs[0].batched);
  EXPECT_EQ(inputs[1].name, "rate");
  EXPECT_EQ(inputs[1].dtype, at::kLong);
  EXPECT_FALSE(inputs[1].batched);
  EXPECT_EQ(fixedBatch(g), 1);

  Graph conflicting = fixedBatchGraph();
  Value* z = conflicting.addValue("z");
  z->type = TensorType{DType::Float, std::vector<Dim>{Dim::known(2), Dim::known(4)}};
  conflicting.addInput(z);
  expectErrorWith([&] { fixedBatch(conflicting); }, {"different batch sizes", "'x' 1", "'z' 2"});
}

TEST(ModelFeedsTest, RunsAFixedBatchModelOneBatchAtATime) {
  const Graph g = fixedBatchGraph();
  Executor executor(g);
  const at::Tensor x = at::arange(12, at::kFloat).reshape({3, 4});
  const TensorMap feeds = {{"x", x}, {"rate", at::scalar_tensor(3, at::kLong)}};
  // All three rows at once do not fit the graph's Reshape to [1, 2, 2].
  EXPECT_THROW(executor.run(feeds, {"y"}), std::exception);
  const at::Tensor y = runInBatches(executor, feeds, {"y"}, 1).at("y");
  EXPECT_TRUE(at::equal(y, x.reshape({3, 2, 2}) * 3));

  // A batch of 2 that is not split, and rows that do not split into the fixed size.
  const Graph pairs = fixedBatchGraph(2);
  Executor pair_executor(pairs);
  const TensorMap two = {{"x", x.slice(0, 0, 2)}, {"rate", at::scalar_tensor(2, at::kLong)}};
  EXPECT_TRUE(at::equal(runInBatches(pair_executor, two, {"y"}, 2).at("y"),
                        x.slice(0, 0, 2).reshape({2, 2, 2}) * 2));
  const TensorMap three = {{"x", at::zeros({3, 4})}, {"rate", at::scalar_tensor(1, at::kLong)}};
  expectErrorWith([&] { runInBatches(pair_executor, three, {"y"}, 2); },
                  {"3 rows", "fixed batch of 2"});
  // Constants (initializer overrides) go whole to every run, even when their first dim happens
  // to equal the rows.
  const TensorMap bigger = {{"shape", at::tensor(std::vector<int64_t>{1, 4, 1})}};
  EXPECT_EQ(runInBatches(executor, feeds, {"y"}, 1, bigger).at("y").sizes(),
            (std::vector<int64_t>{3, 4, 1}));
}

TEST(ModelFeedsTest, ForEachBatchRunHandsOverEveryRunInOrderAndKeepsNothing) {
  const Graph g = fixedBatchGraph();
  Executor executor(g);
  const at::Tensor x = at::arange(12, at::kFloat).reshape({3, 4});
  const TensorMap feeds = {{"x", x}, {"rate", at::scalar_tensor(3, at::kLong)}};
  std::vector<std::pair<int64_t, int64_t>> seen;
  forEachBatchRun(executor, feeds, {"y"}, 1, {}, [&](int64_t run, int64_t runs, TensorMap&& out) {
    seen.emplace_back(run, runs);
    EXPECT_TRUE(at::equal(out.at("y"), x.slice(0, run, run + 1).reshape({1, 2, 2}) * 3)) << run;
  });
  EXPECT_EQ(seen, (std::vector<std::pair<int64_t, int64_t>>{{0, 3}, {1, 3}, {2, 3}}));

  // No fixed batch: one run of every row.
  const Graph pairs = fixedBatchGraph(2);
  Executor pair_executor(pairs);
  const TensorMap two = {{"x", x.slice(0, 0, 2)}, {"rate", at::scalar_tensor(2, at::kLong)}};
  seen.clear();
  forEachBatchRun(pair_executor, two, {"y"}, 0, {},
                  [&](int64_t run, int64_t runs, TensorMap&& out) {
                    seen.emplace_back(run, runs);
                    EXPECT_EQ(out.at("y").size(0), 2);
                  });
  EXPECT_EQ(seen, (std::vector<std::pair<int64_t, int64_t>>{{0, 1}}));
}

TEST(ModelFeedsTest, FeedsOfABatchWithAndWithoutNamedInputs) {
  data::Batch one;
  one.inputs = at::ones({2, 4});
  Graph single;
  Value* x = single.addValue("image");
  x->type = TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("N"), Dim::known(4)}};
  single.addInput(x);
  const TensorMap f = feedsOf(one, single);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_TRUE(f.at("image").is_same(one.inputs));
  data::Batch named;
  named.feeds = {{"x", at::ones({1, 4})}, {"rate", at::scalar_tensor(2, at::kLong)}};
  EXPECT_EQ(feedsOf(named, fixedBatchGraph()).size(), 2u);
}

// A recurrent model as exported from PyTorch: audio [batch, time] and a state [2, batch, 8]
// whose first dim is the (h, c) pair, not the batch.
Graph recurrentStateGraph() {
  Graph g;
  Value* audio = g.addValue("audio");
  audio->type = TensorType{DType::Float, std::vector<Dim>{Dim::symbolic("batch"), Dim::known(16)}};
  g.addInput(audio);
  Value* state = g.addValue("state");
  state->type = TensorType{DType::Float,
                           std::vector<Dim>{Dim::known(2), Dim::symbolic("batch"), Dim::known(8)}};
  g.addInput(state);
  Node* neg = g.addNode("Neg", {state}, {"state_out"}, "neg");
  g.addOutput(neg->output(0));
  return g;
}

TEST(ModelFeedsTest, AStateTakesItsBatchOnTheAxisItsDimNameSays) {
  const Graph g = recurrentStateGraph();
  EXPECT_EQ(batchAxes(g), (std::map<std::string, int64_t>{{"state", 1}}));
  const auto inputs = modelInputs(g);
  ASSERT_EQ(inputs.size(), 2u);
  EXPECT_EQ(inputs[0].shape, (std::vector<int64_t>{16}));
  EXPECT_EQ(inputs[1].shape, (std::vector<int64_t>{2, 8}));
  // The state's leading 2 is not a fixed batch.
  EXPECT_EQ(fixedBatch(g), 0);
  data::Batch batch;
  const at::Tensor stacked = at::arange(3 * 2 * 8, at::kFloat).reshape({3, 2, 8});
  batch.feeds = {{"audio", at::zeros({3, 16})}, {"state", stacked}};
  const TensorMap feeds = feedsOf(batch, g);
  EXPECT_TRUE(at::equal(feeds.at("state"), stacked.permute({1, 0, 2})));
  EXPECT_EQ(feeds.at("audio").sizes(), (at::IntArrayRef{3, 16}));

  // Without a shared batch name a fixed first dim stays the batch, as before.
  Graph unnamed = recurrentStateGraph();
  unnamed.value("audio")->type.shape->front() = Dim::symbolic("");
  EXPECT_TRUE(batchAxes(unnamed).empty());
  EXPECT_EQ(fixedBatch(unnamed), 2);
}

TEST(ModelFeedsTest, RunsAreConcatenatedScalarsStackedUnlessShared) {
  EXPECT_TRUE(concatenateRuns({at::ones({2, 3}), at::zeros({1, 3})})
                  .equal(at::cat({at::ones({2, 3}), at::zeros({1, 3})})));
  // One scalar per run (a model without batch axis): every one kept, in order.
  EXPECT_TRUE(concatenateRuns({at::scalar_tensor(1.0), at::scalar_tensor(2.0)})
                  .equal(at::tensor({1.0, 2.0}, at::kDouble)));
  // The same scalar from every run (it came from a rank-0 input): one value.
  const at::Tensor shared = concatenateRuns({at::scalar_tensor(7.0), at::scalar_tensor(7.0)});
  EXPECT_EQ(shared.dim(), 0);
  EXPECT_EQ(shared.item<double>(), 7.0);
  EXPECT_TRUE(concatenateRuns({at::ones({4})}).equal(at::ones({4})));
}

}  // namespace
}  // namespace qforge::algos
