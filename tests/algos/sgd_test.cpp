// qforge's SGD against libtorch's torch::optim::SGD (torch.optim.SGD's C++ twin) step for step,
// with momentum, a learning-rate change and weight decay added to the gradient as torch's L2 does;
// and its state surviving a save and load.
#include <gtest/gtest.h>
#include <torch/optim/sgd.h>

#include "algos/sgd.h"
#include "core/error.h"

namespace qforge::testing {
namespace {

TEST(Sgd, MatchesTorchOptimSgdWithMomentumAndWeightDecay) {
  at::manual_seed(3);
  const at::Tensor start = at::randn({4, 5});
  at::Tensor mine = start.clone().set_requires_grad(true);
  at::Tensor theirs = start.clone().set_requires_grad(true);
  algos::Sgd sgd({mine}, 0.05, 0.9);
  torch::optim::SGD reference({theirs},
                              torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-2));
  const at::Tensor target = at::randn({4, 5});
  for (int step = 0; step < 20; ++step) {
    if (step == 10) {
      sgd.setLearningRate(0.01);
      static_cast<torch::optim::SGDOptions&>(reference.param_groups()[0].options()).lr(0.01);
    }
    (mine - target).pow(3).abs().sum().backward();
    (theirs - target).pow(3).abs().sum().backward();
    {
      at::NoGradGuard no_grad;
      mine.mutable_grad().add_(mine, 1e-2);  // the caller's weight decay
    }
    sgd.step();
    reference.step();
    reference.zero_grad();
  }
  EXPECT_TRUE(at::allclose(mine, theirs, 1e-6, 1e-7)) << (mine - theirs).abs().max();
  EXPECT_FALSE(at::allclose(mine, start));
}

TEST(Sgd, StateRoundTripsAndContinuesExactly) {
  at::manual_seed(4);
  const at::Tensor start = at::randn({6});
  const auto loss = [](const at::Tensor& p) { return (p * p * p).sum(); };
  at::Tensor a = start.clone().set_requires_grad(true);
  algos::Sgd first({a}, 0.1, 0.9);
  for (int i = 0; i < 3; ++i) {
    loss(a).backward();
    first.step();
  }
  // A second optimizer over a copy, loaded from the first's state, takes the same next steps.
  at::Tensor b = a.detach().clone().set_requires_grad(true);
  algos::Sgd second({b}, 0.1, 0.9);
  second.loadState(first.state());
  for (int i = 0; i < 3; ++i) {
    loss(a).backward();
    first.step();
    loss(b).backward();
    second.step();
  }
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_THROW(second.loadState({{"buf.7", at::zeros({6})}}), Error);
  EXPECT_THROW(second.loadState({{"buf.0", at::zeros({5})}}), Error);
  EXPECT_THROW(second.loadState({{"velocity", at::zeros({6})}}), Error);
}

TEST(Sgd, LeavesParametersWithoutAGradientAlone) {
  at::Tensor used = at::ones({3}).set_requires_grad(true);
  at::Tensor unused = at::ones({3}).set_requires_grad(true);
  algos::Sgd sgd({used, unused}, 0.1);
  (used * 2).sum().backward();
  sgd.step();
  EXPECT_TRUE(at::equal(unused, at::ones({3})));
  EXPECT_TRUE(at::allclose(used, at::full({3}, 0.8)));
  EXPECT_TRUE(sgd.state().count("buf.0"));
  EXPECT_FALSE(sgd.state().count("buf.1"));
}

}  // namespace
}  // namespace qforge::testing
