// Resource limits: sizes parsed and printed, byte counts that saturate instead of overflowing,
// the environment's overrides, and the allocation check that holds inside a scope only.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstdlib>
#include <limits>
#include <string>

#include "core/resource_limits.h"
#include "support/checks.h"
#include "support/scoped_limits.h"

namespace qforge {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

using testing::errorOf;
using testing::ScopedLimits;

TEST(ResourceLimits, SizesParseAndPrint) {
  EXPECT_EQ(parseByteSize("100", "--x"), 100);
  EXPECT_EQ(parseByteSize("512M", "--x"), int64_t{512} << 20);
  EXPECT_EQ(parseByteSize("1.5GiB", "--x"), int64_t{3} << 29);
  EXPECT_EQ(parseByteSize("2T", "--x"), int64_t{2} << 40);
  for (const std::string bad : {"", "lots", "-1", "4Q", "1e30", "nan", "inf"}) {
    EXPECT_EQ(errorOf([&] { parseByteSize(bad, "--max-tensor-bytes"); }),
              "--max-tensor-bytes '" + bad + "' is not a size; write bytes or e.g. 512M, 4G")
        << bad;
  }
  EXPECT_EQ(byteSizeText(999), "999 bytes");
  EXPECT_EQ(byteSizeText(int64_t{8} << 30), "8.0 GiB");
  EXPECT_EQ(byteSizeText(int64_t{3} << 39), "1.5 TiB");
}

TEST(ResourceLimits, ByteCountsSaturateInsteadOfOverflowing) {
  EXPECT_EQ(tensorBytes({2, 3, 4}, 4), 96);
  EXPECT_EQ(tensorBytes({}, 8), 8);  // a scalar
  EXPECT_EQ(tensorBytes({5, 0, kMax}, 4), 0);
  EXPECT_EQ(tensorBytes({-1, 7}, 4), 0);
  EXPECT_EQ(tensorBytes({int64_t{1} << 32, int64_t{1} << 31}, 4), kMax);  // 2^65 bytes
  EXPECT_EQ(tensorBytes({kMax, kMax, kMax}, 1), kMax);
}

TEST(ResourceLimits, OneTensorAboveTheLimitIsNamed) {
  ResourceLimits small;
  small.max_tensor_bytes = 1024;
  ScopedLimits scope(small);
  EXPECT_NO_THROW(requireTensorBytes(1024, "initializer 'w'"));
  EXPECT_EQ(errorOf([] { requireTensorBytes(4096, "initializer 'w'"); }),
            "initializer 'w' would take 4.0 KiB, above the limit of 1.0 KiB for one tensor; if "
            "the model really needs it, raise the limit with --max-tensor-bytes (or "
            "QFORGE_MAX_TENSOR_BYTES)");
  EXPECT_NE(errorOf([] { requireTensorBytes(kMax, "x"); }).find("more than 8 EiB"),
            std::string::npos);
}

TEST(ResourceLimits, TheEnvironmentOverridesTheDefaults) {
  setenv("QFORGE_MAX_TENSOR_BYTES", "3G", 1);
  setenv("QFORGE_MAX_NODES", "77", 1);
  const ResourceLimits l = resourceLimitsFromEnvironment();
  EXPECT_EQ(l.max_tensor_bytes, int64_t{3} << 30);
  EXPECT_EQ(l.max_nodes, 77);
  EXPECT_EQ(l.max_model_bytes, ResourceLimits{}.max_model_bytes);
  setenv("QFORGE_MAX_NODES", "many", 1);
  EXPECT_EQ(errorOf([] { resourceLimitsFromEnvironment(); }),
            "QFORGE_MAX_NODES='many' is not a positive count");
  setenv("QFORGE_MAX_TENSOR_BYTES", "big", 1);
  EXPECT_NE(errorOf([] { resourceLimitsFromEnvironment(); }).find("QFORGE_MAX_TENSOR_BYTES 'big'"),
            std::string::npos);
  unsetenv("QFORGE_MAX_TENSOR_BYTES");
  unsetenv("QFORGE_MAX_NODES");
}

TEST(ResourceLimits, AllocationsAreCheckedInsideAScopeOnly) {
  ResourceLimits small;
  small.max_tensor_bytes = 1 << 20;
  ScopedLimits scope(small);
  {
    TensorAllocationLimit limit;
    EXPECT_NO_THROW(at::empty({1 << 18}, at::kFloat));  // exactly 1 MiB
    const std::string error = errorOf([] { at::empty({1 << 18, 2}, at::kFloat); });
    EXPECT_EQ(error.rfind("a tensor would take 2.0 MiB, above the limit of 1.0 MiB", 0), 0u)
        << error;
    {
      TensorAllocationLimit nested;  // scopes nest; the outer one still holds after
    }
    EXPECT_THROW(at::zeros({1 << 20}, at::kDouble), ResourceLimitError);
  }
  // Outside a scope (a host program's own torch code) nothing is checked.
  EXPECT_EQ(at::empty({1 << 20}, at::kDouble).numel(), 1 << 20);
}

}  // namespace
}  // namespace qforge
