// Batches from a Dataset: deterministic shuffling by seed, a sample limit, optional synthetic
// Gaussian noise (denoising tasks), and the checks every sample passes before a model sees it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace qforge::data {

struct Batch {
  at::Tensor inputs;  // [B, sample shape...]: float32, or with LoaderOptions::inputs the first
                      // floating-point input's (noise, PSNR targets)
  // With LoaderOptions::inputs: every model input by name, in its dtype ([B, ...], or the one
  // value of an input without batch axis).
  std::map<std::string, at::Tensor> feeds;
  at::Tensor labels;             // int64 [B]; undefined when the dataset has no labels
  at::Tensor targets;            // clean inputs when noise is added; undefined otherwise
  std::vector<int64_t> indices;  // dataset index of each sample
};

struct LoaderOptions {
  int64_t batch_size = 32;
  std::optional<uint64_t> shuffle_seed;  // none: dataset order
  int64_t limit = 0;                     // 0: every sample; else the first `limit` (after shuffle)
  // Denoising: input = sample + noise_sigma * N(0,1), target = sample. The noise of dataset
  // sample i comes from ATen's CPU generator seeded with noise_seed * 1000003 + i, so it does not
  // depend on batching or shuffling and a PyTorch script can reproduce it exactly.
  double noise_sigma = 0;
  uint64_t noise_seed = 0;
  // Shape every sample must have (no batch axis; -1 matches any size), with a description of
  // what wants it for the error message ("the model input 'image'"). Empty: samples must only
  // agree with each other.
  std::vector<int64_t> expected_shape;
  std::string expected_by = "the model input";
  // The model's inputs: each sample's arrays are matched to them by name (a one-array sample
  // feeds the one input that has no array), converted to their dtypes (floats into an integer
  // input must be whole numbers) and checked against their shapes; batches carry `feeds`.
  // Overrides expected_shape. Empty: one input, float32.
  std::vector<InputSpec> inputs;
  // The model takes batches of exactly this many samples (a fixed batch dim): batch_size is
  // rounded down to a multiple of it and the pass cut to whole multiples. When the samples have
  // the inputs' whole shapes instead (the fixed first dim is not a batch: InputSpec::whole),
  // every sample is one run: batches concatenate samples along axis 0, so each run of
  // batch_multiple rows is one sample, and batch_size counts samples as given.
  int64_t batch_multiple = 1;
};

class BatchLoader {
 public:
  BatchLoader(std::shared_ptr<Dataset> dataset, LoaderOptions options);

  int64_t size() const { return static_cast<int64_t>(order_.size()); }  // samples per pass
  int64_t batches() const { return (size() + options_.batch_size - 1) / options_.batch_size; }
  const Dataset& dataset() const { return *dataset_; }

  // The next batch, or nullopt at the end of the pass. Throws qforge::Error naming the sample's
  // file for a shape mismatch or NaN/Inf values.
  std::optional<Batch> next();
  // Passes over the next `batches` batches without reading them (another rank's share).
  void skip(int64_t batches) {
    position_ = std::min(size(), position_ + batches * options_.batch_size);
  }
  void reset() { position_ = 0; }
  // True when the samples have the inputs' whole shapes (InputSpec::whole): one run per sample.
  bool wholeSamples() const;

 private:
  void check(const Sample& sample, const std::vector<int64_t>& first_shape) const;
  // Marks the inputs whose samples have their whole shape (InputSpec::whole); throws when only
  // some batched inputs do.
  void findWholeSampleInputs();
  // The sample's arrays by model input, converted and checked (LoaderOptions::inputs).
  std::map<std::string, at::Tensor> arraysOf(const Sample& sample) const;
  void stackFeeds(std::vector<std::map<std::string, at::Tensor>>& samples,
                  const std::vector<std::string>& origins, Batch& batch) const;
  // Denoising with LoaderOptions::inputs: noise on the first floating-point input only.
  void addNoise(Batch& batch) const;

  std::shared_ptr<Dataset> dataset_;
  LoaderOptions options_;
  std::vector<int64_t> order_;
  int64_t position_ = 0;
};

// Whether `sample` of the model input `in` has the input's whole shape: its per-sample shape with
// the model's fixed first dim `batch_multiple` in front (InputSpec::whole: no batch axis).
bool hasWholeShape(const InputSpec& in, const at::Tensor& sample, int64_t batch_multiple);

// The noise LoaderOptions::noise_sigma scales for dataset sample `index` (standard normal).
at::Tensor sampleNoise(at::IntArrayRef shape, uint64_t seed, int64_t index);

// A permutation of 0..n-1 from `seed`: Fisher-Yates on a 64-bit Mersenne Twister with unbiased
// bounded draws, written out so the order is the same with every standard library.
std::vector<int64_t> shuffledIndices(int64_t n, uint64_t seed);

}  // namespace qforge::data
