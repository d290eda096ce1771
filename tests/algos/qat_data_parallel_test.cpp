// The data-parallel parts of QAT: each rank's rows of a global batch; alone, every collective is
// the identity; over two real ranks (processes on loopback), gradients and BN statistics come out
// as the closed-form means, LSQ's activation scales times 1/sqrt(2), sums summed, one rank's stop
// stops both, rank 0's values everywhere.
#include <gtest/gtest.h>

#include <cmath>

#include "algos/distributed.h"
#include "algos/qat_data_parallel.h"
#include "support/rank_processes.h"

namespace qforge::testing {
namespace {

data::Batch globalBatch() {
  data::Batch b;
  b.inputs = at::arange(24, at::kFloat).view({6, 2, 2});
  b.labels = at::arange(6, at::kLong) * 10;
  b.targets = -b.inputs;
  b.indices = {100, 101, 102, 103, 104, 105};
  return b;
}

TEST(QatDataParallel, EachRankTakesItsOwnRowsOfTheGlobalBatch) {
  const data::Batch global = globalBatch();
  for (int rank = 0; rank < 3; ++rank) {
    const data::Batch b = algos::rankShard(global, rank, 2);
    const at::Tensor rows = at::arange(2 * rank, 2 * rank + 2, at::kLong);
    EXPECT_TRUE(at::equal(b.inputs, at::arange(24, at::kFloat).view({6, 2, 2}).index({rows})));
    EXPECT_TRUE(at::equal(b.labels, rows * 10));
    EXPECT_TRUE(at::equal(b.targets, -b.inputs));
    EXPECT_EQ(b.indices, (std::vector<int64_t>{100 + 2 * rank, 101 + 2 * rank}));
  }
  data::Batch unlabelled = globalBatch();
  unlabelled.labels = at::Tensor();
  unlabelled.targets = at::Tensor();
  const data::Batch b = algos::rankShard(unlabelled, 1, 3);
  EXPECT_FALSE(b.labels.defined());
  EXPECT_FALSE(b.targets.defined());
  EXPECT_EQ(b.inputs.size(0), 3);
}

// Two parameters with gradients (one an LSQ activation scale) and one without.
algos::QatParameters threeParameters(double rank) {
  algos::QatParameters p;
  p.tensors = {at::zeros({3}), at::zeros({1}), at::zeros({2})};
  p.names = {"w", "act.0", "unused"};
  p.decays = {true, false, false};
  p.batch_scaled_grad = {false, true, false};
  p.initializer_count = 1;
  p.tensors[0].mutable_grad() = at::full({3}, rank + 1);
  p.tensors[1].mutable_grad() = at::full({1}, 2 * rank + 2);
  return p;
}

TEST(QatDataParallel, AloneEveryCollectiveIsTheIdentity) {
  for (algos::ProcessGroup* group : {static_cast<algos::ProcessGroup*>(nullptr)}) {
    algos::QatParameters p = threeParameters(0);
    algos::averageGradients(group, p);
    EXPECT_TRUE(at::equal(p.tensors[0].grad(), at::full({3}, 1.0)));
    EXPECT_TRUE(at::equal(p.tensors[1].grad(), at::full({1}, 2.0)));  // no 1/sqrt(world) alone
    EXPECT_FALSE(p.tensors[2].grad().defined());
    const at::Tensor stats = at::full({2}, 3.0);
    algos::averageBatchNormStatistics(group, {stats});
    algos::broadcastFromRankZero(group, {stats});
    EXPECT_TRUE(at::equal(stats, at::full({2}, 3.0)));
    EXPECT_TRUE(at::equal(algos::sumOverRanks(group, at::ones({4}, at::kDouble)),
                          at::ones({4}, at::kDouble)));
    EXPECT_TRUE(algos::anyRankStops(group, true));
    EXPECT_FALSE(algos::anyRankStops(group, false));
  }
  algos::ProcessGroup alone(algos::DistributedOptions{});  // a world of one: no networking
  algos::QatParameters p = threeParameters(0);
  algos::averageGradients(&alone, p);
  EXPECT_TRUE(at::equal(p.tensors[1].grad(), at::full({1}, 2.0)));
  EXPECT_FALSE(algos::anyRankStops(&alone, false));
}

TEST(QatDataParallel, TwoRanksAverageGradientsStatisticsAndAgreeToStop) {
  const auto options = spawnedRankOptions();
  if (!options) return runThisTestAsRanks(2);
  algos::ProcessGroup group(*options);
  const double r = group.rank();

  algos::QatParameters p = threeParameters(r);
  algos::averageGradients(&group, p);
  // Means over ranks: (1 + 2) / 2 and (2 + 4) / 2, the LSQ activation scale's times 1/sqrt(2);
  // the parameter without a gradient contributes zeros.
  EXPECT_TRUE(at::allclose(p.tensors[0].grad(), at::full({3}, 1.5)));
  EXPECT_NEAR(p.tensors[1].grad().item<double>(), 3.0 / std::sqrt(2.0), 1e-6);
  EXPECT_TRUE(at::equal(p.tensors[2].grad(), at::zeros({2})));

  const at::Tensor mean = at::full({4}, 2 * r), var = at::full({4}, 1 + r);
  algos::averageBatchNormStatistics(&group, {mean, var});
  EXPECT_TRUE(at::allclose(mean, at::full({4}, 1.0)));
  EXPECT_TRUE(at::allclose(var, at::full({4}, 1.5)));

  const at::Tensor sums = algos::sumOverRanks(&group, at::tensor({r, 1.0, 10 * r}, at::kDouble));
  EXPECT_TRUE(at::equal(sums, at::tensor({1.0, 2.0, 10.0}, at::kDouble)));

  EXPECT_TRUE(algos::anyRankStops(&group, r == 1));
  EXPECT_FALSE(algos::anyRankStops(&group, false));

  at::Tensor weights = at::full({2}, 5 + r).set_requires_grad(true);
  algos::broadcastFromRankZero(&group, {weights});
  EXPECT_TRUE(at::equal(weights, at::full({2}, 5.0)));
  EXPECT_TRUE(weights.requires_grad());
}

}  // namespace
}  // namespace qforge::testing
