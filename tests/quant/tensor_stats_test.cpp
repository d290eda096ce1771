// finiteMinMax against ATen's own reductions, in the AVX2 and the baseline build, over sizes that
// leave every tail length and chunk boundary, and with a NaN or infinity anywhere.
#include "quant/tensor_stats.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <string>

#include "quant/affine_kernels.h"

namespace qforge::quant {
namespace {

TEST(TensorStatsTest, FiniteMinMaxEqualsAtenInBothBuilds) {
  for (bool avx2 : {true, false}) {
    const bool previous = setAvx2Allowed(avx2);
    // 31-33 and 1000: the four-accumulator loop with every kind of remainder after it.
    for (int64_t n : {1, 7, 8, 9, 15, 31, 32, 33, 47, 1000, 65537, 200003}) {
      SCOPED_TRACE("n " + std::to_string(n) + (avx2 ? " avx2" : " baseline"));
      at::manual_seed(n);
      const at::Tensor x = at::randn({n}) * 3 + 1;
      const MinMax stats = finiteMinMax(x);
      EXPECT_TRUE(stats.finite);
      EXPECT_EQ(stats.min, x.min().item<float>());
      EXPECT_EQ(stats.max, x.max().item<float>());
      for (float bad :
           {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
            -std::numeric_limits<float>::infinity()}) {
        for (int64_t at_index : {int64_t{0}, n / 2, n - 1}) {
          at::Tensor y = x.clone();
          y[at_index] = bad;
          EXPECT_FALSE(finiteMinMax(y).finite) << bad << " at " << at_index;
        }
      }
    }
    setAvx2Allowed(previous);
  }
}

// A channels-last activation and a transposed matrix are dense without being contiguous: scanned
// where they sit. A channel slice has gaps between its values and is refused, not misread.
TEST(TensorStatsTest, FiniteMinMaxReadsDenseTensorsInAnyLayout) {
  at::manual_seed(3);
  const at::Tensor nchw = at::randn({2, 5, 7, 3});
  const at::Tensor channels_last = nchw.contiguous(at::MemoryFormat::ChannelsLast);
  ASSERT_FALSE(channels_last.is_contiguous());
  MinMax stats = finiteMinMax(channels_last);
  EXPECT_EQ(stats.min, nchw.min().item<float>());
  EXPECT_EQ(stats.max, nchw.max().item<float>());
  const at::Tensor transposed = at::randn({33, 17}).t();
  stats = finiteMinMax(transposed);
  EXPECT_EQ(stats.min, transposed.min().item<float>());
  EXPECT_EQ(stats.max, transposed.max().item<float>());
  at::Tensor with_inf = channels_last.clone();
  with_inf.index_put_({1, 4, 6, 2}, std::numeric_limits<float>::infinity());
  EXPECT_FALSE(finiteMinMax(with_inf).finite);
  EXPECT_THROW(finiteMinMax(channels_last.slice(1, 0, 3)), std::exception);
}

}  // namespace
}  // namespace qforge::quant
