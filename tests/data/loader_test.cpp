// Batching, shuffling, limits, checks and noise; IDX and stacked .npy sources; and the real
// Fashion-MNIST test split from Debian's dataset-fashion-mnist.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <limits>
#include <numeric>
#include <set>

#include "data/data_test_files.h"
#include "data/dataset.h"
#include "data/loader.h"

namespace qforge::data {
namespace {

using testing::expectErrorWith;
using testing::writeBytes;

// n samples of shape [2], sample i = (i, -i); labels i % 3.
std::string stackedNpy(const std::string& dir, int n) {
  std::vector<float> v;
  std::vector<int64_t> labels;
  for (int i = 0; i < n; ++i) {
    v.push_back(static_cast<float>(i));
    v.push_back(static_cast<float>(-i));
    labels.push_back(i % 3);
  }
  const std::string shape = "(" + std::to_string(n) + ", 2)";
  writeBytes(dir + "/x.npy",
             testing::npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }",
                               v.data(), v.size() * 4));
  writeBytes(dir + "/y.npy", testing::npyBytes("{'descr': '<i8', 'fortran_order': False, "
                                               "'shape': (" +
                                                   std::to_string(n) + ",), }",
                                               labels.data(), labels.size() * 8));
  return dir + "/x.npy";
}

std::shared_ptr<Dataset> stackedDataset(int n) {
  const std::string dir = testing::makeTempDir("stack");
  DataOptions o;
  o.labels_path = dir + "/y.npy";
  return openDataset(stackedNpy(dir, n), o);
}

std::vector<int64_t> allIndices(BatchLoader& loader) {
  std::vector<int64_t> out;
  while (auto b = loader.next())
    out.insert(out.end(), b->indices.begin(), b->indices.end());
  return out;
}

TEST(LoaderTest, BatchesInOrderWithPartialLastBatch) {
  LoaderOptions o;
  o.batch_size = 4;
  BatchLoader loader(stackedDataset(10), o);
  EXPECT_EQ(loader.size(), 10);
  EXPECT_EQ(loader.batches(), 3);
  std::vector<int64_t> sizes;
  while (auto b = loader.next()) {
    sizes.push_back(b->inputs.size(0));
    for (size_t k = 0; k < b->indices.size(); ++k) {
      const int64_t i = b->indices[k];
      EXPECT_EQ(b->inputs[k][0].item<float>(), static_cast<float>(i));
      EXPECT_EQ(b->inputs[k][1].item<float>(), static_cast<float>(-i));
      EXPECT_EQ(b->labels[k].item<int64_t>(), i % 3);
    }
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
  loader.reset();
  EXPECT_EQ(allIndices(loader), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(LoaderTest, ShuffleIsADeterministicPermutationAndLimitTakesItsPrefix) {
  auto ds = stackedDataset(50);
  LoaderOptions o;
  o.batch_size = 7;
  o.shuffle_seed = 42;
  BatchLoader a(ds, o), b(ds, o);
  const auto order_a = allIndices(a);
  EXPECT_EQ(order_a, allIndices(b));
  EXPECT_EQ(std::set<int64_t>(order_a.begin(), order_a.end()).size(), 50u);
  std::vector<int64_t> identity(50);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(order_a, identity);
  o.shuffle_seed = 43;
  BatchLoader c(ds, o);
  EXPECT_NE(allIndices(c), order_a);
  o.shuffle_seed = 42;
  o.limit = 5;
  BatchLoader limited(ds, o);
  EXPECT_EQ(limited.size(), 5);
  EXPECT_EQ(allIndices(limited), std::vector<int64_t>(order_a.begin(), order_a.begin() + 5));
  // Every position is reachable: over many seeds, sample 0 lands first about 1/n of the time.
  int first = 0;
  for (uint64_t seed = 0; seed < 2000; ++seed)
    first += shuffledIndices(4, seed)[0] == 0;
  EXPECT_NEAR(first / 2000.0, 0.25, 0.05);
}

TEST(LoaderTest, ShapeMismatchAndNonFiniteValuesNameTheSample) {
  const std::string dir = testing::makeTempDir("bad");
  const float v[4] = {1, std::numeric_limits<float>::quiet_NaN(), 3,
                      std::numeric_limits<float>::infinity()};
  writeBytes(
      dir + "/nan.npy",
      testing::npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", v, 16));
  LoaderOptions o;
  BatchLoader nan_loader(openDataset(dir + "/nan.npy"), o);
  expectErrorWith([&] { nan_loader.next(); }, {"nan.npy", "row 0", "1 NaN/Inf value"});

  o.expected_shape = {1, 28, 28};
  o.expected_by = "the model input 'image'";
  BatchLoader shaped(stackedDataset(3), o);
  expectErrorWith([&] { shaped.next(); },
                  {"x.npy", "row 0", "sample shape [2]", "input 'image' [1,28,28]"});
  o.expected_shape = {-1};
  BatchLoader wildcard(stackedDataset(3), o);
  EXPECT_TRUE(wildcard.next().has_value());

  // Samples that disagree with each other (a folder of .npy files of different sizes).
  const std::string mixed = testing::makeTempDir("mixed");
  const float ok[2] = {1, 2};
  writeBytes(mixed + "/a.npy",
             testing::npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", ok, 8));
  writeBytes(mixed + "/b.npy",
             testing::npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", ok, 4));
  BatchLoader disagree(openDataset(mixed), LoaderOptions{});
  expectErrorWith([&] { disagree.next(); }, {"b.npy", "differs from [2]"});
  LoaderOptions bad;
  bad.batch_size = 0;
  expectErrorWith([&] { BatchLoader(stackedDataset(2), bad); }, {"--batch"});
}

TEST(LoaderTest, NoiseMatchesPyTorchAndIgnoresBatching) {
  // torch.randn((1, 1, 4), generator=torch.Generator().manual_seed(5))[0, 0] with Debian's
  // python3-torch 1.13 (seed 0 * 1000003 + index 5), and the seed 3, index 7 case.
  const float torch_idx5[4] = {1.8423298597335815f, 0.5188871622085571f, -1.7119213342666626f,
                               -1.7013792991638184f};
  at::Tensor n5 = sampleNoise({1, 28, 28}, 0, 5);
  for (int i = 0; i < 4; ++i)
    EXPECT_FLOAT_EQ(n5[0][0][i].item<float>(), torch_idx5[i]);
  const float torch_s3_i7[6] = {1.8105124235153198f, -2.967244863510132f,  0.3239854574203491f,
                                1.5955864191055298f, -0.7815471291542053f, -0.37113237380981445f};
  at::Tensor n = sampleNoise({2, 3}, 3, 7).flatten();
  for (int i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(n[i].item<float>(), torch_s3_i7[i]);

  auto ds = stackedDataset(9);
  LoaderOptions o;
  o.noise_sigma = 0.5;
  o.batch_size = 9;
  BatchLoader whole(ds, o);
  Batch all = *whole.next();
  ASSERT_TRUE(all.targets.defined());
  EXPECT_FLOAT_EQ(all.targets[4][0].item<float>(), 4.0f);  // the clean sample
  EXPECT_TRUE(at::allclose(all.inputs[4] - all.targets[4], 0.5 * sampleNoise({2}, 0, 4)));
  EXPECT_FALSE(at::allclose(all.inputs[3] - all.targets[3], 0.5 * sampleNoise({2}, 0, 4)));
  o.batch_size = 2;
  o.shuffle_seed = 1;
  BatchLoader shuffled(ds, o);
  while (auto b = shuffled.next()) {
    for (size_t k = 0; k < b->indices.size(); ++k) {
      EXPECT_TRUE(at::equal(b->inputs[k], all.inputs[b->indices[k]]));
    }
  }
}

TEST(IdxDatasetTest, ImagesWithSiblingLabels) {
  const std::string dir = testing::makeTempDir("idxds");
  std::vector<uint8_t> px(2 * 3 * 3);
  for (size_t i = 0; i < px.size(); ++i)
    px[i] = static_cast<uint8_t>(i * 10);
  writeBytes(dir + "/x-images-idx3-ubyte.gz", testing::gzipped(testing::idxBytes({2, 3, 3}, px)));
  writeBytes(dir + "/x-labels-idx1-ubyte", testing::idxBytes({2}, {7, 3}));
  auto ds = openDataset(dir + "/x-images-idx3-ubyte.gz");
  ASSERT_EQ(ds->size(), 2);
  EXPECT_TRUE(ds->hasLabels());
  Sample s = ds->get(1);
  EXPECT_EQ(s.label, 3);
  ASSERT_EQ(s.input.sizes(), at::IntArrayRef({1, 3, 3}));
  EXPECT_FLOAT_EQ(s.input[0][0][2].item<float>(), 110 / 255.0f);

  writeBytes(dir + "/few-labels", testing::idxBytes({1}, {7}));
  expectErrorWith(
      [&] { openDataset("idx:" + dir + "/x-images-idx3-ubyte.gz," + dir + "/few-labels"); },
      {"few-labels", "1 labels for the 2 images"});
  writeBytes(dir + "/none-images-idx3-ubyte", testing::idxBytes({0, 3, 3}, {}));
  expectErrorWith([&] { openDataset(dir + "/none-images-idx3-ubyte"); },
                  {"none-images-idx3-ubyte", "empty"});
}

TEST(FashionMnistTest, TestSplitHasTenThousandImagesAThousandPerClass) {
  auto ds = openDataset("fashion-mnist:test");
  ASSERT_EQ(ds->size(), 10000);
  LoaderOptions o;
  o.batch_size = 1000;
  BatchLoader loader(ds, o);
  at::Tensor counts = at::zeros({10}, at::kLong);
  int64_t seen = 0;
  double first_sum = -1;
  while (auto b = loader.next()) {
    EXPECT_EQ(b->inputs.sizes(), at::IntArrayRef({1000, 1, 28, 28}));
    counts += at::bincount(b->labels, {}, 10);
    if (seen == 0) {
      first_sum = b->inputs[0].sum().item<double>() * 255;
      // The first ten labels (ankle boot, pullover, trouser, trouser, shirt, ...), as NumPy
      // reads them from the same file.
      EXPECT_TRUE(at::equal(b->labels.slice(0, 0, 10),
                            at::tensor({9, 2, 1, 1, 6, 1, 4, 6, 5, 7}, at::kLong)));
      EXPECT_GE(b->inputs.min().item<float>(), 0.0f);
      EXPECT_LE(b->inputs.max().item<float>(), 1.0f);
    }
    seen += b->inputs.size(0);
  }
  EXPECT_EQ(seen, 10000);
  EXPECT_TRUE(at::equal(counts, at::full({10}, 1000, at::kLong))) << counts;
  EXPECT_NEAR(first_sum, 33456, 0.05);  // sum of image 0's bytes, by NumPy
}

TEST(FashionMnistTest, LimitedShuffledTrainSplit) {
  LoaderOptions o;
  o.batch_size = 64;
  o.limit = 100;
  o.shuffle_seed = 7;
  BatchLoader loader(openDataset("fashion-mnist:train"), o);
  EXPECT_EQ(loader.dataset().size(), 60000);
  EXPECT_EQ(loader.size(), 100);
  const auto order = allIndices(loader);
  EXPECT_EQ(order.size(), 100u);
  EXPECT_GT(*std::max_element(order.begin(), order.end()), 1000);  // not just the prefix
}

}  // namespace
}  // namespace qforge::data
