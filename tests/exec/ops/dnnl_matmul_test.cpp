// oneDNN's matmul against the product computed in float64 (an independent closed form), on the
// shapes the executor sends it: a 2-D weight under 2-, 3- and 4-D activations, read in place
// through a transposed view, packed after its second use and rebuilt when it changes; batches of
// small products with transposed operands; and the shapes it must leave to ATen.
#include "exec/ops/dnnl_matmul.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <any>
#include <vector>

#include "support/op_test_helpers.h"

namespace qforge::ops {
namespace {

using testing::expectTensorNear;

// a @ b in float64, rounded once to float32.
at::Tensor exactProduct(const at::Tensor& a, const at::Tensor& b) {
  return at::matmul(a.to(at::kDouble), b.to(at::kDouble)).to(at::kFloat);
}

void expectProduct(const at::Tensor& got, const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor want = exactProduct(a, b);
  ASSERT_EQ(got.sizes(), want.sizes());
  expectTensorNear(got, want, 1e-5, 5e-5);
}

TEST(DnnlMatMul, WeightProductsOverEveryActivationRankEqualTheExactProduct) {
  at::manual_seed(1);
  const at::Tensor w = at::randn({48, 20});
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{7, 48}, {3, 5, 48}, {2, 3, 5, 48}}) {
    const at::Tensor a = at::randn(shape);
    ASSERT_TRUE(dnnlMatMulApplies(a, w));
    std::any state;
    for (int run = 0; run < 3; ++run)  // plain, then packed twice
      expectProduct(dnnlMatMul(&state, a, w), a, w);
  }
}

TEST(DnnlMatMul, ATransposedWeightViewIsReadInPlaceAndItsPackedCopyFollowsChanges) {
  at::manual_seed(2);
  at::Tensor base = at::randn({20, 48});
  const at::Tensor a = at::randn({4, 48});
  std::any state;
  // A Transpose node makes a new view of the weight on every run.
  for (int run = 0; run < 3; ++run)
    expectProduct(dnnlMatMul(&state, a, base.t()), a, base.t());
  base.mul_(-2);  // updated in place (a training step): the packed copy must not be reused
  expectProduct(dnnlMatMul(&state, a, base.t()), a, base.t());
  expectProduct(dnnlMatMul(&state, a, base.t()), a, base.t());
  const at::Tensor other = at::randn({48, 20});  // another tensor of the same shape
  expectProduct(dnnlMatMul(&state, a, other), a, other);
  expectProduct(dnnlMatMul(&state, a, other), a, other);
}

TEST(DnnlMatMul, BatchesOfSmallProductsWithTransposedOperandsEqualTheExactProduct) {
  at::manual_seed(3);
  // Attention: q [B, H, T, D] by k transposed [B, H, D, T], then p [B, H, T, T] by v.
  const at::Tensor q = at::randn({5, 3, 49, 16});
  const at::Tensor k = at::randn({5, 3, 49, 16});
  const at::Tensor v = at::randn({5, 3, 49, 16});
  const at::Tensor kt = k.transpose(-1, -2);
  ASSERT_TRUE(dnnlMatMulApplies(q, kt));
  std::any state;
  const at::Tensor scores = dnnlMatMul(&state, q, kt);
  expectProduct(scores, q, kt);
  EXPECT_TRUE(scores.is_contiguous());
  const at::Tensor p = at::softmax(scores, -1);
  expectProduct(dnnlMatMul(&state, p, v), p, v);
  // A 3-D batch whose left operand is a permuted view.
  const at::Tensor x = at::randn({6, 4, 9}).permute({1, 0, 2});  // [4, 6, 9], not contiguous
  const at::Tensor y = at::randn({4, 9, 5});
  expectProduct(dnnlMatMul(nullptr, x, y), x, y);
}

TEST(DnnlMatMul, LeavesBroadcastBatchesVectorsIntegersAndGradientsToATen) {
  const at::Tensor a = at::randn({2, 3, 4});
  EXPECT_FALSE(dnnlMatMulApplies(a, at::randn({1, 4, 5})));     // broadcast batch
  EXPECT_FALSE(dnnlMatMulApplies(a, at::randn({2, 2, 4, 5})));  // different ranks, b not 2-D
  EXPECT_FALSE(dnnlMatMulApplies(a, at::randn({4})));           // 1-D operand
  EXPECT_FALSE(dnnlMatMulApplies(at::randn({4}), at::randn({4, 5})));
  EXPECT_FALSE(dnnlMatMulApplies(a, at::randn({5, 6})));  // inner dims differ
  EXPECT_FALSE(dnnlMatMulApplies(a.to(at::kDouble), at::randn({4, 5}).to(at::kDouble)));
  EXPECT_FALSE(dnnlMatMulApplies(at::zeros({0, 4}), at::randn({4, 5})));
  const at::Tensor w = at::randn({4, 5}).requires_grad_();
  EXPECT_FALSE(dnnlMatMulApplies(a, w));  // gradients are recorded by default
  at::NoGradGuard no_grad;
  EXPECT_TRUE(dnnlMatMulApplies(a, w));
}

}  // namespace
}  // namespace qforge::ops
