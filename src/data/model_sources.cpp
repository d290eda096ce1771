#include "data/model_sources.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/strings.h"
#include "data/npz.h"

namespace qforge::data {

namespace {

std::string trim(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

std::vector<std::string> splitOn(const std::string& s, char separator) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    const size_t end = s.find(separator, begin);
    parts.push_back(trim(s.substr(begin, end == std::string::npos ? end : end - begin)));
    if (end == std::string::npos) return parts;
    begin = end + 1;
  }
}

double parseNumber(const std::string& text, const std::string& what) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && std::isfinite(v)) return v;
  } catch (const std::exception&) {
  }
  throw Error(what + ": '" + text + "' is not a finite number");
}

int64_t parseCount(const std::string& text, const std::string& what) {
  const double v = parseNumber(text, what);
  require(v >= 0 && v == std::floor(v) && v < 9e15, what + ": '" + text + "' is not a count");
  return static_cast<int64_t>(v);
}

// ---------------------------------------------------------------------------------------------

// Stacked arrays of an .npz, one per model input: sample i is row i of each.
class NpzStackDataset : public Dataset {
 public:
  explicit NpzStackDataset(const std::string& path) : path_(path) {
    const NpzFile npz(path);
    for (const std::string& name : npz.names()) {
      arrays_.emplace_back(name, npz.open(name));
      const auto& shape = arrays_.back().second->shape();
      require(!shape.empty(), "'" + path + "' array '" + name +
                                  "' is a scalar; a stacked .npz needs one sample per row");
      const int64_t rows = shape[0];
      require(arrays_.size() == 1 || rows == size_,
              "'" + path + "': array '" + name + "' has " + std::to_string(rows) + " rows, '" +
                  arrays_.front().first + "' has " + std::to_string(size_) +
                  "; every array needs one row per sample");
      size_ = rows;
    }
    require(size_ > 0, "'" + path + "' holds no samples (empty dataset)");
  }

  int64_t size() const override { return size_; }
  bool hasLabels() const override { return false; }
  std::string describe() const override { return path_; }

  Sample get(int64_t index) override {
    Sample s;
    s.origin = "'" + path_ + "' row " + std::to_string(index);
    for (auto& [name, file] : arrays_) {
      s.inputs[name] = file->readRecord(index);
      s.input_origins[name] = "'" + path_ + "' array '" + name + "' row " + std::to_string(index);
    }
    return s;
  }

 private:
  std::string path_;
  std::vector<std::pair<std::string, std::unique_ptr<NpyFile>>> arrays_;
  int64_t size_ = 0;
};

// ---------------------------------------------------------------------------------------------

struct RandomParams {
  bool normal = true;
  double mean = 0, std = 1, low = 0, high = 1;
  bool bounds_given = false;
  uint64_t seed = 0;
  int64_t count = 64;
  std::vector<int64_t> shape;  // replaces the model's when given
};

RandomParams parseRandom(const std::string& params) {
  const std::string what = "random:" + params;
  std::vector<std::string> items = splitOn(params, ',');
  RandomParams p;
  require(items[0] == "normal" || items[0] == "uniform",
          what + ": the distribution must be normal or uniform, e.g. random:normal,seed=1");
  p.normal = items[0] == "normal";
  for (size_t i = 1; i < items.size(); ++i) {
    const size_t eq = items[i].find('=');
    require(eq != std::string::npos, what + ": '" + items[i] + "' is not KEY=VALUE");
    const std::string key = items[i].substr(0, eq), value = items[i].substr(eq + 1);
    if (key == "seed") {
      p.seed = static_cast<uint64_t>(parseCount(value, what));
    } else if (key == "count") {
      p.count = parseCount(value, what);
      require(p.count > 0, what + ": count must be positive");
    } else if (key == "shape") {
      for (const std::string& d : splitOn(value, 'x'))
        p.shape.push_back(parseCount(d, what));
    } else if (p.normal && (key == "mean" || key == "std")) {
      (key == "mean" ? p.mean : p.std) = parseNumber(value, what);
    } else if (!p.normal && (key == "low" || key == "high")) {
      (key == "low" ? p.low : p.high) = parseNumber(value, what);
      p.bounds_given = true;
    } else {
      throw Error(what + ": unknown key '" + key + "' (" + (p.normal ? "mean, std" : "low, high") +
                  ", seed, count, shape)");
    }
  }
  require(p.std > 0 && p.high > p.low, what + ": needs std > 0 and high > low");
  return p;
}

// Synthetic samples shaped like the model inputs (see model_sources.h for the draw).
class RandomDataset : public Dataset {
 public:
  RandomDataset(std::string params, std::vector<InputSpec> inputs)
      : what_("random:" + params), p_(parseRandom(params)), inputs_(std::move(inputs)) {
    require(!inputs_.empty(), what_ + " needs the model's inputs to shape its samples");
    for (InputSpec& in : inputs_) {
      if (!p_.shape.empty()) in.shape = p_.shape;
      require(std::all_of(in.shape.begin(), in.shape.end(), [](int64_t d) { return d >= 0; }),
              what_ + ": the model input '" + in.name + "' has open dims " + shapeText(in.shape) +
                  "; give them, e.g. " + what_ + ",shape=3x224x224");
      if (!at::isFloatingType(in.dtype)) {
        require(!p_.normal && p_.bounds_given,
                what_ + ": the model input '" + in.name + "' is " + c10::toString(in.dtype) +
                    "; give it a source or a constant (" + in.name +
                    "=const:VALUE), or draw integers with random:uniform,low=A,high=B");
      }
    }
  }

  int64_t size() const override { return p_.count; }
  bool hasLabels() const override { return false; }
  std::string describe() const override { return what_; }

  Sample get(int64_t index) override {
    at::Generator gen =
        at::make_generator<at::CPUGeneratorImpl>(p_.seed * 1000003 + static_cast<uint64_t>(index));
    Sample s;
    s.origin = what_ + " sample " + std::to_string(index);
    const auto f32 = at::TensorOptions().dtype(at::kFloat);
    for (const InputSpec& in : inputs_) {
      at::Tensor t = p_.normal ? at::randn(in.shape, gen, f32) * p_.std + p_.mean
                               : at::rand(in.shape, gen, f32) * (p_.high - p_.low) + p_.low;
      if (!at::isFloatingType(in.dtype)) t = t.floor();
      s.inputs[in.name] = t.to(in.dtype);
      s.input_origins[in.name] = s.origin;
    }
    return s;
  }

 private:
  std::string what_;
  RandomParams p_;
  std::vector<InputSpec> inputs_;
};

// ---------------------------------------------------------------------------------------------

// The same value in every sample: an int64 sample rate, a flag.
class ConstantDataset : public Dataset {
 public:
  ConstantDataset(const std::string& value, const InputSpec& input) : what_("const:" + value) {
    const double v = parseNumber(value, what_);
    std::vector<int64_t> shape = input.batched ? input.shape : std::vector<int64_t>{};
    for (int64_t& d : shape)
      d = d < 0 ? 1 : d;
    if (!at::isFloatingType(input.dtype)) {
      require(v == std::floor(v), what_ + ": the model input '" + input.name + "' is " +
                                      c10::toString(input.dtype) + ", give an integer");
    }
    value_ = at::full(shape, v, at::TensorOptions().dtype(input.dtype));
  }

  int64_t size() const override { return 1; }
  bool hasLabels() const override { return false; }
  std::string describe() const override { return what_; }
  Sample get(int64_t) override { return Sample{value_, -1, what_, {}, {}}; }

 private:
  std::string what_;
  at::Tensor value_;
};

// ---------------------------------------------------------------------------------------------

// One source per model input, zipped sample by sample.
class PerInputDataset : public Dataset {
 public:
  struct Source {
    std::string name;
    std::string spec;
    std::shared_ptr<Dataset> dataset;
    bool constant = false;
  };

  PerInputDataset(std::string describe, std::vector<Source> sources)
      : describe_(std::move(describe)), sources_(std::move(sources)) {
    const Source* sized = nullptr;
    for (const Source& s : sources_) {
      if (s.constant) continue;
      if (sized == nullptr) {
        sized = &s;
        size_ = s.dataset->size();
      }
      require(s.dataset->size() == size_,
              s.name + "=" + s.spec + " has " + std::to_string(s.dataset->size()) + " samples, " +
                  sized->name + "=" + sized->spec + " has " + std::to_string(size_) +
                  "; every input's source needs one per sample");
      if (labelled_ == nullptr && s.dataset->hasLabels()) labelled_ = s.dataset.get();
    }
    require(sized != nullptr, describe_ + ": every source is a constant; give at least one input " +
                                  "samples (a folder, an array, random:normal)");
  }

  int64_t size() const override { return size_; }
  bool hasLabels() const override { return labelled_ != nullptr; }
  std::string describe() const override { return describe_; }

  Sample get(int64_t index) override {
    Sample out;
    for (const Source& source : sources_) {
      Sample s = source.dataset->get(source.constant ? 0 : index);
      if (!s.input.defined() && s.inputs.size() == 1) s.input = s.inputs.begin()->second;
      require(s.input.defined(), s.origin + ": " + source.name + "=" + source.spec +
                                     " gives several arrays per sample; a per-input source " +
                                     "needs one");
      out.inputs[source.name] = s.input;
      out.input_origins[source.name] = s.origin;
      if (out.origin.empty() && !source.constant) out.origin = s.origin;
      if (source.dataset.get() == labelled_) out.label = s.label;
    }
    return out;
  }

 private:
  std::string describe_;
  std::vector<Source> sources_;
  int64_t size_ = 0;
  const Dataset* labelled_ = nullptr;
};

// Per-input preprocessing: x * scale + shift on every sample of one input's source.
class AffineDataset : public Dataset {
 public:
  AffineDataset(std::shared_ptr<Dataset> inner, double scale, double shift)
      : inner_(std::move(inner)), scale_(scale), shift_(shift) {}
  int64_t size() const override { return inner_->size(); }
  bool hasLabels() const override { return inner_->hasLabels(); }
  std::string describe() const override { return inner_->describe(); }
  Sample get(int64_t index) override {
    Sample s = inner_->get(index);
    const auto apply = [&](at::Tensor& t) { t = t.to(at::kFloat) * scale_ + shift_; };
    if (s.input.defined()) apply(s.input);
    for (auto& [name, t] : s.inputs)
      apply(t);
    return s;
  }

 private:
  std::shared_ptr<Dataset> inner_;
  double scale_, shift_;
};

// "SPEC|scale=S|shift=B": the source and its preprocessing.
std::shared_ptr<Dataset> openWithPreprocessing(const std::string& spec,
                                               const DataOptions& options) {
  const std::vector<std::string> parts = splitOn(spec, '|');
  double scale = 1, shift = 0;
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    const std::string key = eq == std::string::npos ? parts[i] : parts[i].substr(0, eq);
    require(eq != std::string::npos && (key == "scale" || key == "shift"),
            "'" + spec + "': '" + parts[i] + "' is not scale=S or shift=B");
    (key == "scale" ? scale : shift) = parseNumber(parts[i].substr(eq + 1), "'" + spec + "'");
  }
  auto dataset = openDataset(parts[0], options);
  if (parts.size() == 1) return dataset;
  return std::make_shared<AffineDataset>(std::move(dataset), scale, shift);
}

const InputSpec* findInput(const std::vector<InputSpec>& inputs, const std::string& name) {
  for (const InputSpec& in : inputs) {
    if (in.name == name) return &in;
  }
  return nullptr;
}

std::string inputNames(const std::vector<InputSpec>& inputs) {
  std::vector<std::string> names;
  for (const InputSpec& in : inputs)
    names.push_back(in.name);
  return join(names);
}

}  // namespace

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + (shape[i] < 0 ? std::string("?") : std::to_string(shape[i]));
  return s + "]";
}

bool isPerInputSpec(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) return false;
  for (const char* prefix :
       {"random:", "const:", "npz:", "npy:", "idx:", "list:", "folder:", "fashion-mnist:"}) {
    if (spec.rfind(prefix, 0) == 0) return false;
  }
  // A path with '=' in a file name keeps its '/' before it.
  return spec.substr(0, eq).find_first_of("/,;| ") == std::string::npos;
}

std::vector<std::pair<std::string, std::string>> splitPerInput(const std::string& spec) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const std::string& item : splitOn(spec, ';')) {
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    require(eq != std::string::npos && eq > 0,
            "data source '" + spec + "': '" + item +
                "' is not NAME=SPEC (one source per model input, separated by ';')");
    const std::string name = trim(item.substr(0, eq));
    for (const auto& [seen, _] : pairs) {
      require(seen != name, "data source '" + spec + "' names input '" + name + "' twice");
    }
    pairs.emplace_back(name, trim(item.substr(eq + 1)));
    require(!pairs.back().second.empty(),
            "data source '" + spec + "': input '" + name + "' has no source after '='");
  }
  require(!pairs.empty(), "data source '" + spec + "' names no input");
  return pairs;
}

std::shared_ptr<Dataset> openPerInput(const std::string& spec, const DataOptions& options) {
  const auto pairs = splitPerInput(spec);
  std::vector<PerInputDataset::Source> sources;
  for (const auto& [name, sub_spec] : pairs) {
    DataOptions sub = options;
    sub.inputs.clear();
    if (!options.inputs.empty()) {
      const InputSpec* in = findInput(options.inputs, name);
      require(in != nullptr, "data source '" + spec + "': the model has no input '" + name +
                                 "' (its inputs: " + inputNames(options.inputs) + ")");
      sub.inputs = {*in};
      const size_t c = options.image.nhwc ? 2 : 0;
      if (in->shape.size() == 3 && in->shape[c] > 0) sub.image.channels = in->shape[c];
    }
    require(!isPerInputSpec(sub_spec), "data source '" + spec + "': input '" + name +
                                           "' has a nested NAME=SPEC; separate inputs with ';'");
    const bool constant = sub_spec.rfind("const:", 0) == 0;
    try {
      sources.push_back({name, sub_spec, openWithPreprocessing(sub_spec, sub), constant});
    } catch (const Error& e) {
      throw e.within("input '" + name + "'");
    }
  }
  for (const InputSpec& in : options.inputs) {
    const bool given =
        std::any_of(pairs.begin(), pairs.end(), [&](const auto& p) { return p.first == in.name; });
    require(given, "data source '" + spec + "' gives nothing for the model input '" + in.name +
                       "': add " + in.name + "=SPEC (" + in.name +
                       "=const:VALUE for a fixed value)");
  }
  return std::make_shared<PerInputDataset>(spec, std::move(sources));
}

std::shared_ptr<Dataset> openRandom(const std::string& params,
                                    const std::vector<InputSpec>& inputs) {
  return std::make_shared<RandomDataset>(params, inputs);
}

std::shared_ptr<Dataset> openConstant(const std::string& value,
                                      const std::vector<InputSpec>& inputs) {
  require(inputs.size() == 1,
          "const:" + value + " feeds one model input: give it per input, NAME=const:VALUE");
  return std::make_shared<ConstantDataset>(value, inputs.front());
}

std::shared_ptr<Dataset> openNpzStack(const std::string& path) {
  return std::make_shared<NpzStackDataset>(path);
}

}  // namespace qforge::data
