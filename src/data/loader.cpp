#include "data/loader.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <numeric>
#include <random>

#include "core/error.h"

namespace qforge::data {

namespace {

std::string shapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i ? "," : "") + (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  }
  return s + "]";
}

bool matches(const std::vector<int64_t>& shape, const std::vector<int64_t>& pattern) {
  if (shape.size() != pattern.size()) return false;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (pattern[i] >= 0 && pattern[i] != shape[i]) return false;
  }
  return true;
}

}  // namespace

std::vector<int64_t> shuffledIndices(int64_t n, uint64_t seed) {
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  for (int64_t i = n - 1; i > 0; --i) {
    // Uniform in [0, i] by rejection, not by std::uniform_int_distribution (whose algorithm is
    // left to the library).
    const uint64_t bound = static_cast<uint64_t>(i) + 1;
    const uint64_t limit =
        std::numeric_limits<uint64_t>::max() - std::numeric_limits<uint64_t>::max() % bound;
    uint64_t r;
    do {
      r = rng();
    } while (r >= limit);
    std::swap(order[i], order[r % bound]);
  }
  return order;
}

at::Tensor sampleNoise(at::IntArrayRef shape, uint64_t seed, int64_t index) {
  at::Generator gen =
      at::make_generator<at::CPUGeneratorImpl>(seed * 1000003 + static_cast<uint64_t>(index));
  return at::randn(shape, gen, at::TensorOptions().dtype(at::kFloat));
}

BatchLoader::BatchLoader(std::shared_ptr<Dataset> dataset, LoaderOptions options)
    : dataset_(std::move(dataset)), options_(std::move(options)) {
  require(options_.batch_size > 0, "--batch must be positive");
  require(options_.limit >= 0, "--limit must not be negative");
  require(options_.noise_sigma >= 0 && std::isfinite(options_.noise_sigma),
          "--noise must be a finite non-negative standard deviation");
  const int64_t n = dataset_->size();
  require(n > 0, dataset_->describe() + ": empty dataset");
  if (options_.shuffle_seed) {
    order_ = shuffledIndices(n, *options_.shuffle_seed);
  } else {
    order_.resize(n);
    std::iota(order_.begin(), order_.end(), 0);
  }
  if (options_.limit > 0 && options_.limit < n) order_.resize(options_.limit);
}

void BatchLoader::check(const Sample& s, const std::vector<int64_t>& first_shape) const {
  const std::vector<int64_t> shape = s.input.sizes().vec();
  if (!options_.expected_shape.empty() && !matches(shape, options_.expected_shape)) {
    throw Error(s.origin + ": sample shape " + shapeString(shape) + " does not match " +
                options_.expected_by + " " + shapeString(options_.expected_shape) +
                " (one sample, without the batch axis)");
  }
  if (!first_shape.empty() && shape != first_shape) {
    throw Error(s.origin + ": sample shape " + shapeString(shape) + " differs from " +
                shapeString(first_shape) +
                " of the samples before it; give --resize/--crop to make them agree");
  }
  if (!at::isfinite(s.input).all().item<bool>()) {
    const int64_t bad = (~at::isfinite(s.input)).sum().item<int64_t>();
    throw Error(s.origin + ": " + std::to_string(bad) + " NaN/Inf value" + (bad == 1 ? "" : "s") +
                " in the sample");
  }
}

std::optional<Batch> BatchLoader::next() {
  if (position_ >= size()) return std::nullopt;
  const int64_t end = std::min(size(), position_ + options_.batch_size);
  Batch batch;
  std::vector<at::Tensor> inputs, clean;
  std::vector<int64_t> labels;
  std::vector<int64_t> first_shape;
  for (int64_t i = position_; i < end; ++i) {
    const int64_t index = order_[i];
    Sample s = dataset_->get(index);
    check(s, first_shape);
    if (first_shape.empty()) first_shape = s.input.sizes().vec();
    if (options_.noise_sigma > 0) {
      clean.push_back(s.input);
      s.input =
          s.input + options_.noise_sigma * sampleNoise(s.input.sizes(), options_.noise_seed, index);
    }
    inputs.push_back(s.input);
    labels.push_back(s.label);
    batch.indices.push_back(index);
  }
  position_ = end;
  batch.inputs = at::stack(inputs);
  if (dataset_->hasLabels()) batch.labels = at::tensor(labels, at::kLong);
  if (!clean.empty()) batch.targets = at::stack(clean);
  return batch;
}

}  // namespace qforge::data
