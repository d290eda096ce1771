// One sample run for facts the declared types lack: open image sizes are tried at 1, 64 and 224
// pixels, so a network that downsamples an image of open size still runs once.
#include "passes/sample_run.h"

#include <gtest/gtest.h>

#include "ir/parse.h"

namespace qforge::passes {
namespace {

// A 5x5 max pool without padding needs at least 5 pixels a side.
Graph pooling(const std::string& kernel, const std::string& input_shape) {
  return parseGraph(R"(
    graph g
    opset "" 13
    input %x: float32)" +
                    input_shape + R"(
    %y = MaxPool[kernel_shape=)" +
                    kernel + R"(](%x)  # pool
    output %y: float32
  )");
}

TEST(SampleRun, OpenImageSizesGrowUntilTheGraphRuns) {
  const SampleRun run = runOnSample(pooling("[5,5]", "[N,2,H,W]"), {"y"});
  EXPECT_EQ(run.failure, "");
  ASSERT_EQ(run.values.count("y"), 1u);
  // 64 pixels was the first size that ran: 60 after the pool.
  EXPECT_EQ(run.values.at("y").sizes(), (at::IntArrayRef{1, 2, 60, 60}));
}

TEST(SampleRun, AGraphNoSampleFitsGivesTheFirstReasonAndNoValues) {
  const SampleRun run = runOnSample(pooling("[300,300]", "[N,2,H,W]"), {"y"});
  EXPECT_TRUE(run.values.empty());
  EXPECT_NE(run.failure.find("'pool' (MaxPool)"), std::string::npos) << run.failure;
  // With only the batch open, one size is tried and fixed dims are kept.
  const SampleRun fixed = runOnSample(pooling("[5,5]", "[N,2,3,3]"), {"y"});
  EXPECT_TRUE(fixed.values.empty());
  EXPECT_NE(fixed.failure.find("'pool' (MaxPool)"), std::string::npos) << fixed.failure;
  const SampleRun fits = runOnSample(pooling("[2,2]", "[N,2,3,3]"), {"y"});
  EXPECT_EQ(fits.values.at("y").sizes(), (at::IntArrayRef{1, 2, 2, 2}));
}

}  // namespace
}  // namespace qforge::passes
