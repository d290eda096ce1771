#include "data/loader.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "core/error.h"
#include "core/strings.h"

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

// The model input's whole shape: its fixed first dim in front of the per-sample shape.
std::vector<int64_t> wholeShape(const InputSpec& in, int64_t batch_multiple) {
  std::vector<int64_t> full = in.shape;
  full.insert(full.begin(), batch_multiple);
  return full;
}

}  // namespace

bool hasWholeShape(const InputSpec& in, const at::Tensor& sample, int64_t batch_multiple) {
  return batch_multiple > 1 && in.batched && sample.defined() &&
         matches(sample.sizes().vec(), wholeShape(in, batch_multiple));
}

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
  require(options_.batch_multiple > 0, "the model's fixed batch size must be positive");
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
  findWholeSampleInputs();
  // A model with a fixed batch dim takes whole multiples of it (of rows: one whole sample is
  // that many rows already).
  const int64_t multiple = wholeSamples() ? 1 : options_.batch_multiple;
  options_.batch_size = std::max(multiple, options_.batch_size / multiple * multiple);
  const int64_t whole = size() / multiple * multiple;
  require(whole > 0, dataset_->describe() + ": " + std::to_string(size()) +
                         " sample(s), fewer than the model's fixed batch of " +
                         std::to_string(multiple));
  order_.resize(whole);
}

// An input whose dims are all fixed may have no batch axis at all ([3, 320, 320]: torchvision's
// detectors take one image) and then reads as a fixed batch of its first dim. Samples of the
// input's whole shape tell the two apart.
void BatchLoader::findWholeSampleInputs() {
  if (options_.batch_multiple <= 1 || options_.inputs.empty()) return;
  const Sample s = dataset_->get(order_.front());
  std::vector<std::string> whole, rows;
  for (InputSpec& in : options_.inputs) {
    if (!in.batched) continue;
    const auto it = s.inputs.find(in.name);
    in.whole =
        hasWholeShape(in, it != s.inputs.end() ? it->second : s.input, options_.batch_multiple);
    (in.whole ? whole : rows).push_back("'" + in.name + "'");
  }
  if (whole.empty() || rows.empty()) return;
  throw Error(s.origin + ": the samples of " + join(whole) +
              " have the whole input shape (one sample per run, no batch axis) but those of " +
              join(rows) + " are rows of a batch of " + std::to_string(options_.batch_multiple) +
              "; give every input one way: whole inputs, or rows of the batch");
}

bool BatchLoader::wholeSamples() const {
  return std::any_of(options_.inputs.begin(), options_.inputs.end(),
                     [](const InputSpec& in) { return in.whole; });
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

std::map<std::string, at::Tensor> BatchLoader::arraysOf(const Sample& s) const {
  std::vector<std::string> unfed;
  for (const InputSpec& in : options_.inputs) {
    if (!s.inputs.count(in.name)) unfed.push_back(in.name);
  }
  for (const auto& entry : s.inputs) {
    // C++17 lambdas cannot capture a structured binding (Clang refuses it), so no [name, array].
    const std::string& name = entry.first;
    const bool known = std::any_of(options_.inputs.begin(), options_.inputs.end(),
                                   [&](const InputSpec& in) { return in.name == name; });
    if (!known) {
      std::vector<std::string> names;
      for (const InputSpec& in : options_.inputs)
        names.push_back(in.name);
      throw Error(s.origin + ": array '" + name + "' is not a model input (inputs: " + join(names) +
                  ")");
    }
  }
  if (s.input.defined() && unfed.size() != 1) {
    throw Error(s.origin + ": one array per sample, but the model has " +
                std::to_string(options_.inputs.size()) + " inputs (" + join(unfed) +
                "): give an .npz keyed by input name, or one source per input (NAME=SPEC;...)");
  }
  if (!s.input.defined() && !unfed.empty()) {
    throw Error(s.origin + ": no array for the model input '" + unfed.front() + "'");
  }
  std::map<std::string, at::Tensor> out;
  for (const InputSpec& in : options_.inputs) {
    const auto it = s.inputs.find(in.name);
    at::Tensor t = it == s.inputs.end() ? s.input : it->second;
    const auto o = s.input_origins.find(in.name);
    const std::string origin = o == s.input_origins.end() ? s.origin : o->second;
    const std::string what = origin + ": input '" + in.name + "'";
    if (!in.batched) {
      require(t.numel() == 1, what + " takes one value (the model input has no batch axis), " +
                                  "the sample has shape " + shapeString(t.sizes().vec()));
      t = t.reshape({});
    } else if (in.whole) {
      const std::vector<int64_t> full = wholeShape(in, options_.batch_multiple);
      if (!matches(t.sizes().vec(), full)) {
        throw Error(origin + ": sample shape " + shapeString(t.sizes().vec()) +
                    " does not match the model input '" + in.name + "' " + shapeString(full) +
                    " (the input has no batch axis: one sample is the whole input, as in the "
                    "first sample)");
      }
    } else if (!matches(t.sizes().vec(), in.shape)) {
      throw Error(origin + ": sample shape " + shapeString(t.sizes().vec()) +
                  " does not match the model input '" + in.name + "' " + shapeString(in.shape) +
                  " (one sample, without the batch axis)");
    }
    if (!at::isFloatingType(in.dtype) && at::isFloatingType(t.scalar_type())) {
      require(at::equal(t, t.floor()) && at::isfinite(t).all().item<bool>(),
              what + " is " + c10::toString(in.dtype) + ", the sample holds non-integer values");
    }
    if (at::isFloatingType(t.scalar_type()) && !at::isfinite(t).all().item<bool>()) {
      const int64_t bad = (~at::isfinite(t)).sum().item<int64_t>();
      throw Error(origin + ": " + std::to_string(bad) + " NaN/Inf value" + (bad == 1 ? "" : "s") +
                  " in the sample of input '" + in.name + "'");
    }
    out[in.name] = t.to(in.dtype).contiguous();
  }
  return out;
}

void BatchLoader::stackFeeds(std::vector<std::map<std::string, at::Tensor>>& samples,
                             const std::vector<std::string>& origins, Batch& batch) const {
  for (const InputSpec& in : options_.inputs) {
    std::vector<at::Tensor> parts;
    for (size_t k = 0; k < samples.size(); ++k) {
      const at::Tensor& t = samples[k].at(in.name);
      const at::Tensor& first = samples.front().at(in.name);
      if (!in.batched) {
        require(at::equal(t, first), origins[k] + ": input '" + in.name +
                                         "' has no batch axis, so every sample of a batch " +
                                         "needs the same value; use --batch 1");
      } else if (t.sizes() != first.sizes()) {
        throw Error(origins[k] + ": input '" + in.name + "' sample shape " +
                    shapeString(t.sizes().vec()) + " differs from " +
                    shapeString(first.sizes().vec()) + " of the samples before it");
      }
      parts.push_back(t);
    }
    batch.feeds[in.name] = in.whole     ? at::cat(parts, 0)
                           : in.batched ? at::stack(parts)
                                        : parts.front();
  }
  for (const InputSpec& in : options_.inputs) {
    if (in.batched && at::isFloatingType(in.dtype)) {
      batch.inputs = batch.feeds.at(in.name);
      break;
    }
  }
}

void BatchLoader::addNoise(Batch& batch) const {
  batch.targets = batch.inputs;
  // One draw per sample, of its shape: a row of the batch, or the whole input.
  const int64_t rows = batch.inputs.size(0) / static_cast<int64_t>(batch.indices.size());
  std::vector<int64_t> shape = batch.inputs.sizes().vec();
  shape.front() = rows;
  std::vector<at::Tensor> noise;
  for (int64_t index : batch.indices)
    noise.push_back(sampleNoise(shape, options_.noise_seed, index));
  batch.inputs = batch.inputs + options_.noise_sigma * at::cat(noise).to(batch.inputs.dtype());
  for (auto& [name, feed] : batch.feeds) {
    if (feed.is_same(batch.targets)) feed = batch.inputs;
  }
}

std::optional<Batch> BatchLoader::next() {
  if (position_ >= size()) return std::nullopt;
  const int64_t end = std::min(size(), position_ + options_.batch_size);
  Batch batch;
  std::vector<at::Tensor> inputs, clean;
  std::vector<int64_t> labels;
  std::vector<int64_t> first_shape;
  std::vector<std::map<std::string, at::Tensor>> arrays;
  std::vector<std::string> origins;
  for (int64_t i = position_; i < end; ++i) {
    const int64_t index = order_[i];
    Sample s = dataset_->get(index);
    if (!options_.inputs.empty()) {
      arrays.push_back(arraysOf(s));
      origins.push_back(s.origin);
      labels.push_back(s.label);
      batch.indices.push_back(index);
      continue;
    }
    require(s.input.defined(),
            s.origin + ": several arrays in one sample, the model has one " + "input");
    s.input = s.input.to(at::kFloat).contiguous();
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
  if (!options_.inputs.empty()) {
    stackFeeds(arrays, origins, batch);
    if (options_.noise_sigma > 0 && batch.inputs.defined()) addNoise(batch);
    if (dataset_->hasLabels()) batch.labels = at::tensor(labels, at::kLong);
    return batch;
  }
  batch.inputs = at::stack(inputs);
  if (dataset_->hasLabels()) batch.labels = at::tensor(labels, at::kLong);
  if (!clean.empty()) batch.targets = at::stack(clean);
  return batch;
}

}  // namespace qforge::data
