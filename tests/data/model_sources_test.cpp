// Data for models of several inputs: stacked and per-sample .npz keyed by input name, one
// source per input with constants, synthetic random: samples (checked against PyTorch's draws),
// dtype conversion, fixed batch sizes, and the errors that name input, file and shape.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "data/data_test_files.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "data/model_sources.h"

namespace qforge::data {
namespace {

using testing::expectErrorWith;
using testing::writeBytes;

// The model of these tests: audio [N, 2, 3] float32 and a rank-0 int64 sample rate.
std::vector<InputSpec> audioModel() {
  InputSpec audio{"audio", {2, 3}, at::kFloat, true};
  InputSpec rate{"rate", {}, at::kLong, false};
  return {audio, rate};
}

LoaderOptions loaderFor(std::vector<InputSpec> inputs, int64_t batch) {
  LoaderOptions o;
  o.batch_size = batch;
  o.inputs = std::move(inputs);
  return o;
}

DataOptions dataFor(std::vector<InputSpec> inputs) {
  DataOptions o;
  o.inputs = std::move(inputs);
  return o;
}

std::string floatNpy(const std::string& shape, const std::vector<float>& v) {
  return testing::npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }",
                           v.data(), v.size() * 4);
}
std::string longNpy(const std::string& shape, const std::vector<int64_t>& v) {
  return testing::npyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': " + shape + ", }",
                           v.data(), v.size() * 8);
}

// 4 samples: audio[i] = i * 10 + (0..5), rate[i] = 16000.
std::string stackedNpz(const std::string& dir) {
  std::vector<float> audio;
  for (int i = 0; i < 4; ++i)
    for (int k = 0; k < 6; ++k)
      audio.push_back(static_cast<float>(i * 10 + k));
  const std::string path = dir + "/stack.npz";
  writeBytes(path, testing::zipBytes({{"audio.npy", floatNpy("(4, 2, 3)", audio)},
                                      {"rate.npy", longNpy("(4,)", {16000, 16000, 16000, 16000})}},
                                     true));
  return path;
}

TEST(ModelSourcesTest, StackedNpzFeedsEveryInputInItsDtype) {
  const std::string dir = testing::makeTempDir("msrc");
  auto ds = openDataset("npz:" + stackedNpz(dir), dataFor(audioModel()));
  EXPECT_EQ(ds->size(), 4);
  BatchLoader loader(ds, loaderFor(audioModel(), 3));
  Batch b = *loader.next();
  ASSERT_EQ(b.feeds.size(), 2u);
  EXPECT_EQ(b.feeds.at("audio").sizes(), (std::vector<int64_t>{3, 2, 3}));
  EXPECT_EQ(b.feeds.at("audio")[2][1][2].item<float>(), 25.0f);
  EXPECT_TRUE(b.feeds.at("audio").is_same(b.inputs));  // the first float input
  EXPECT_EQ(b.feeds.at("rate").dim(), 0);
  EXPECT_EQ(b.feeds.at("rate").scalar_type(), at::kLong);
  EXPECT_EQ(b.feeds.at("rate").item<int64_t>(), 16000);
  EXPECT_EQ(loader.next()->indices, (std::vector<int64_t>{3}));
}

TEST(ModelSourcesTest, FolderOfNpzAndPerInputSourcesWithAConstant) {
  const std::string dir = testing::makeTempDir("msrc");
  std::filesystem::create_directories(dir + "/clips");
  std::filesystem::create_directories(dir + "/audio");
  for (int i = 0; i < 3; ++i) {
    std::vector<float> a(6, static_cast<float>(i));
    writeBytes(dir + "/clips/" + std::to_string(i) + ".npz",
               testing::zipBytes({{"audio.npy", floatNpy("(2, 3)", a)},
                                  {"rate.npy", longNpy("()", {8000 + i})}}));
    writeBytes(dir + "/audio/" + std::to_string(i) + ".npy", floatNpy("(2, 3)", a));
  }
  // Samples with different rates cannot share a batch: the input has no batch axis.
  BatchLoader folder(openDataset("folder:" + dir + "/clips", dataFor(audioModel())),
                     loaderFor(audioModel(), 1));
  for (int i = 0; i < 3; ++i) {
    Batch b = *folder.next();
    EXPECT_EQ(b.feeds.at("rate").item<int64_t>(), 8000 + i);
    EXPECT_EQ(b.feeds.at("audio")[0][1][1].item<float>(), static_cast<float>(i));
  }
  BatchLoader mixed(openDataset("npz:" + dir + "/clips", dataFor(audioModel())),
                    loaderFor(audioModel(), 2));
  expectErrorWith([&] { mixed.next(); }, {"input 'rate'", "same value", "--batch 1"});

  const std::string spec = "audio=folder:" + dir + "/audio; rate=const:22050";
  EXPECT_TRUE(isPerInputSpec(spec));
  auto zipped = openDataset(spec, dataFor(audioModel()));
  EXPECT_EQ(zipped->size(), 3);
  BatchLoader loader(zipped, loaderFor(audioModel(), 3));
  Batch b = *loader.next();
  EXPECT_EQ(b.feeds.at("rate").item<int64_t>(), 22050);
  EXPECT_TRUE(at::equal(b.feeds.at("audio")[2], at::full({2, 3}, 2.0f)));

  // Per-input preprocessing: audio * 0.5 - 1.
  auto scaled = openDataset("audio=folder:" + dir + "/audio|scale=0.5|shift=-1;rate=const:22050",
                            dataFor(audioModel()));
  BatchLoader scaled_loader(scaled, loaderFor(audioModel(), 3));
  EXPECT_TRUE(at::equal(scaled_loader.next()->feeds.at("audio")[2], at::full({2, 3}, 0.0f)));
  expectErrorWith(
      [&] {
        openDataset("audio=folder:" + dir + "/audio|gain=2;rate=const:1", dataFor(audioModel()));
      },
      {"'gain=2' is not scale=S or shift=B"});

  expectErrorWith([&] { openDataset("audio=folder:" + dir + "/audio", dataFor(audioModel())); },
                  {"nothing for the model input 'rate'", "rate=const:VALUE"});
  expectErrorWith([&] { openDataset(spec + ";speed=const:1", dataFor(audioModel())); },
                  {"no input 'speed'", "audio, rate"});
  expectErrorWith(
      [&] { openDataset("audio=folder:" + dir + "/audio;rate=const:0.5", dataFor(audioModel())); },
      {"input 'rate'", "const:0.5", "integer"});
  expectErrorWith([&] { splitPerInput("a=x.npy;a=y.npy"); }, {"names input 'a' twice"});
  EXPECT_FALSE(isPerInputSpec("data/a=b.npy"));
  EXPECT_FALSE(isPerInputSpec("a.npy|scale=2"));
  EXPECT_FALSE(isPerInputSpec("random:normal,seed=3"));
}

TEST(ModelSourcesTest, MismatchesNameInputFileAndExpectedShape) {
  const std::string dir = testing::makeTempDir("msrc");
  std::filesystem::create_directories(dir + "/audio");
  writeBytes(dir + "/audio/0.npy", floatNpy("(3, 2)", std::vector<float>(6, 1.0f)));
  auto ds = openDataset("audio=folder:" + dir + "/audio;rate=const:8000", dataFor(audioModel()));
  BatchLoader loader(ds, loaderFor(audioModel(), 1));
  expectErrorWith([&] { loader.next(); },
                  {"0.npy", "sample shape [3,2]", "model input 'audio' [2,3]"});

  // A one-array source for a two-input model says how to give both.
  writeBytes(dir + "/one.npy", floatNpy("(1, 2, 3)", std::vector<float>(6, 1.0f)));
  BatchLoader one(openDataset(dir + "/one.npy"), loaderFor(audioModel(), 1));
  expectErrorWith([&] { one.next(); }, {"one.npy", "2 inputs", "NAME=SPEC"});

  // Non-integer floats for an integer input.
  InputSpec ids{"ids", {2}, at::kLong, true};
  writeBytes(dir + "/ids.npy", floatNpy("(1, 2)", {1.0f, 2.5f}));
  BatchLoader fractional(openDataset(dir + "/ids.npy"), loaderFor({ids}, 1));
  expectErrorWith([&] { fractional.next(); }, {"ids.npy", "input 'ids'", "non-integer"});
  writeBytes(dir + "/ids2.npy", floatNpy("(1, 2)", {1.0f, 2.0f}));
  BatchLoader whole(openDataset(dir + "/ids2.npy"), loaderFor({ids}, 1));
  const at::Tensor fed = whole.next()->feeds.at("ids");
  EXPECT_EQ(fed.scalar_type(), at::kLong);
  EXPECT_EQ(fed[0][1].item<int64_t>(), 2);

  // An .npz array the model does not have.
  writeBytes(dir + "/extra.npz",
             testing::zipBytes({{"audio.npy", floatNpy("(1, 2, 3)", std::vector<float>(6, 0))},
                                {"rate.npy", longNpy("(1,)", {1})},
                                {"speed.npy", longNpy("(1,)", {1})}}));
  BatchLoader extra(openDataset(dir + "/extra.npz"), loaderFor(audioModel(), 1));
  expectErrorWith([&] { extra.next(); }, {"extra.npz", "'speed' is not a model input"});
}

TEST(ModelSourcesTest, RandomSamplesAreTorchsDrawsPerSampleSeed) {
  // torch.randn with torch.Generator().manual_seed(seed * 1000003 + index), python3-torch 1.13:
  // the values loader_test checks for the noise (seed 0, index 5, 784 elements; seed 3,
  // index 7, 6 elements).
  const float torch_idx5[4] = {1.8423298597335815f, 0.5188871622085571f, -1.7119213342666626f,
                               -1.7013792991638184f};
  const float torch_s3_i7[6] = {1.8105124235153198f, -2.967244863510132f,  0.3239854574203491f,
                                1.5955864191055298f, -0.7815471291542053f, -0.37113237380981445f};
  InputSpec image{"image", {1, 28, 28}, at::kFloat, true};
  auto normal = openDataset("random:normal", dataFor({image}));
  EXPECT_EQ(normal->size(), 64);
  const at::Tensor s5 = normal->get(5).inputs.at("image");
  for (int i = 0; i < 4; ++i)
    EXPECT_FLOAT_EQ(s5[0][0][i].item<float>(), torch_idx5[i]);
  InputSpec small{"x", {2, 3}, at::kFloat, true};
  auto scaled = openDataset("random:normal,seed=3,mean=1,std=2,count=8", dataFor({small}));
  EXPECT_EQ(scaled->size(), 8);
  const at::Tensor s7 = scaled->get(7).inputs.at("x").flatten();
  for (int i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(s7[i].item<float>(), 1 + 2 * torch_s3_i7[i]);

  // Uniform: every value inside [low, high), mean near (low + high) / 2 over many draws.
  InputSpec open_dims{"y", {-1, 50}, at::kFloat, true};
  auto uniform =
      openDataset("random:uniform,low=-2,high=6,shape=40x50,count=4,seed=9", dataFor({open_dims}));
  const at::Tensor u = uniform->get(3).inputs.at("y");
  EXPECT_EQ(u.sizes(), (std::vector<int64_t>{40, 50}));
  EXPECT_GE(u.min().item<float>(), -2.0f);
  EXPECT_LT(u.max().item<float>(), 6.0f);
  EXPECT_NEAR(u.mean().item<double>(), 2.0, 8.0 / std::sqrt(12.0 * 2000) * 5);
  EXPECT_TRUE(at::equal(u, uniform->get(3).inputs.at("y")));  // the same sample again

  InputSpec ids{"ids", {4}, at::kLong, true};
  auto ints = openDataset("random:uniform,low=0,high=5,count=2", dataFor({ids}));
  const at::Tensor t = ints->get(0).inputs.at("ids");
  EXPECT_EQ(t.scalar_type(), at::kLong);
  EXPECT_TRUE(((t >= 0) & (t < 5)).all().item<bool>());

  expectErrorWith([&] { openDataset("random:normal", dataFor({open_dims})); },
                  {"'y'", "open dims [?,50]", "shape="});
  expectErrorWith([&] { openDataset("random:normal", dataFor(audioModel())); },
                  {"'rate'", "Long", "rate=const:VALUE"});
  expectErrorWith([&] { openDataset("random:gaussian", dataFor({small})); }, {"normal or uniform"});
  expectErrorWith([&] { openDataset("random:normal,low=1", dataFor({small})); },
                  {"unknown key 'low'"});
  expectErrorWith([&] { openDataset("random:normal"); }, {"needs the model's inputs"});
}

TEST(ModelSourcesTest, AFixedBatchCutsBatchesAndThePassToItsMultiple) {
  const std::string dir = testing::makeTempDir("msrc");
  std::vector<float> v(7 * 2);
  writeBytes(dir + "/x.npy", floatNpy("(7, 2)", v));
  InputSpec x{"x", {2}, at::kFloat, true};
  LoaderOptions o = loaderFor({x}, 5);
  o.batch_multiple = 2;
  BatchLoader loader(openDataset(dir + "/x.npy"), o);
  EXPECT_EQ(loader.size(), 6);  // 7 samples, whole pairs only
  std::vector<int64_t> sizes;
  while (auto b = loader.next())
    sizes.push_back(b->feeds.at("x").size(0));
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 2}));  // batch 5 rounded down to 4
  o.batch_multiple = 8;
  expectErrorWith([&] { BatchLoader(openDataset(dir + "/x.npy"), o); },
                  {"7 sample(s)", "fixed batch of 8"});
}

TEST(ModelSourcesTest, AnInputWithoutBatchAxisIsToldFromAFixedBatch) {
  // The model input is [3, 4] with both dims fixed: a batch of 3 rows of 4, or one sample of
  // [3, 4]. Samples of shape [3, 4] say it is the latter: each is one run of the model, and a
  // batch of them is their rows one after the other.
  const std::string dir = testing::makeTempDir("msrc");
  for (int i = 0; i < 5; ++i) {
    std::vector<float> v(12);
    for (int k = 0; k < 12; ++k)
      v[k] = static_cast<float>(100 * i + k);
    writeBytes(dir + "/s" + std::to_string(i) + ".npy", floatNpy("(3, 4)", v));
  }
  InputSpec image{"image", {4}, at::kFloat, true};
  LoaderOptions o = loaderFor({image}, 2);
  o.batch_multiple = 3;
  BatchLoader loader(openDataset("folder:" + dir), o);
  EXPECT_EQ(loader.size(), 5);  // not cut to a multiple of 3: every sample is a whole run
  std::vector<int64_t> rows;
  std::vector<float> firsts;
  while (auto b = loader.next()) {
    const at::Tensor x = b->feeds.at("image");
    rows.push_back(x.size(0));
    for (int64_t r = 0; r < x.size(0); r += 3)
      firsts.push_back(x[r][0].item<float>());
    EXPECT_TRUE(x.equal(b->inputs));
  }
  EXPECT_EQ(rows, (std::vector<int64_t>{6, 6, 3}));  // batch 2 = two samples of 3 rows
  EXPECT_EQ(firsts, (std::vector<float>{0, 100, 200, 300, 400}));
  // Noise is drawn per sample, of the sample's shape: sample 1 of a batch gets what it gets alone.
  o.noise_sigma = 1;
  o.noise_seed = 5;
  BatchLoader noisy(openDataset("folder:" + dir), o);
  const data::Batch b = *noisy.next();
  const at::Tensor expected = b.targets.narrow(0, 3, 3) + sampleNoise({3, 4}, 5, 1);
  EXPECT_TRUE(at::allclose(b.inputs.narrow(0, 3, 3), expected));

  // Samples of one row are a fixed batch's rows, as before.
  const std::string rows_dir = testing::makeTempDir("msrc");
  for (int i = 0; i < 3; ++i)
    writeBytes(rows_dir + "/r" + std::to_string(i) + ".npy",
               floatNpy("(4,)", std::vector<float>(4)));
  EXPECT_EQ(BatchLoader(openDataset("folder:" + rows_dir), o).size(), 3);
  // A later sample of another shape is named.
  writeBytes(dir + "/s9.npy", floatNpy("(4,)", std::vector<float>(4)));
  expectErrorWith(
      [&] {
        LoaderOptions m = loaderFor({image}, 8);
        m.batch_multiple = 3;
        BatchLoader l(openDataset("folder:" + dir), m);
        l.next();
      },
      {"s9.npy", "[3,4]", "no batch axis", "first sample"});
}

TEST(ModelSourcesTest, InputsMustAllBeWholeOrAllBeRows) {
  const std::string dir = testing::makeTempDir("msrc");
  auto write = [&](const std::string& file, const std::string& a_shape, int a_n) {
    // An .npz of two arrays: 'a' of a_shape, 'b' one row of 2.
    writeBytes(dir + "/" + file,
               testing::zipBytes({{"a.npy", floatNpy(a_shape, std::vector<float>(a_n))},
                                  {"b.npy", floatNpy("(2,)", std::vector<float>(2))}},
                                 true));
  };
  write("s0.npz", "(3, 4)", 12);
  InputSpec a{"a", {4}, at::kFloat, true}, b{"b", {2}, at::kFloat, true};
  LoaderOptions o = loaderFor({a, b}, 1);
  o.batch_multiple = 3;
  expectErrorWith(
      [&] {
        BatchLoader(openDataset("npz:" + dir, dataFor({a, b})), o);
      },
      {"s0.npz", "'a'", "whole input shape", "'b'", "rows of a batch of 3"});
}

}  // namespace
}  // namespace qforge::data
