// qforge's Adam against libtorch's torch::optim::Adam (the C++ twin of torch.optim.Adam) on the
// same parameters and gradients, step for step, with a learning-rate change midway.
#include <gtest/gtest.h>
#include <torch/optim/adam.h>

#include "algos/adam.h"

namespace qforge::testing {
namespace {

TEST(Adam, MatchesTorchOptimAdamStepForStep) {
  at::manual_seed(3);
  const at::Tensor start = at::randn({4, 5});
  at::Tensor mine = start.clone().set_requires_grad(true);
  at::Tensor theirs = start.clone().set_requires_grad(true);
  algos::Adam adam({mine}, 0.01);
  torch::optim::Adam reference({theirs}, torch::optim::AdamOptions(0.01));
  const at::Tensor target = at::randn({4, 5});
  for (int step = 0; step < 20; ++step) {
    if (step == 10) {
      adam.setLearningRate(0.003);
      static_cast<torch::optim::AdamOptions&>(reference.param_groups()[0].options()).lr(0.003);
    }
    (mine - target).pow(3).abs().sum().backward();
    (theirs - target).pow(3).abs().sum().backward();
    adam.step();
    reference.step();
    reference.zero_grad();
  }
  EXPECT_TRUE(at::allclose(mine, theirs, 1e-6, 1e-7)) << (mine - theirs).abs().max();
  EXPECT_FALSE(at::allclose(mine, start));  // it moved
  EXPECT_EQ(adam.steps(), 20);
  EXPECT_FALSE(mine.grad().defined() && mine.grad().abs().sum().item<double>() != 0);
}

TEST(Adam, LeavesParametersWithoutAGradientAlone) {
  at::Tensor used = at::ones({3}).set_requires_grad(true);
  at::Tensor unused = at::ones({3}).set_requires_grad(true);
  algos::Adam adam({used, unused}, 0.1);
  (used * 2).sum().backward();
  adam.step();
  EXPECT_TRUE(at::equal(unused, at::ones({3})));
  EXPECT_FALSE(at::equal(used, at::ones({3})));
}

}  // namespace
}  // namespace qforge::testing
