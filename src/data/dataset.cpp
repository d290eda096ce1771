#include "data/dataset.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/strings.h"
#include "data/idx.h"
#include "data/model_sources.h"
#include "data/npy.h"
#include "data/npz.h"

namespace qforge::data {

namespace fs = std::filesystem;

namespace {

bool startsWith(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

bool isNpyPath(const std::string& path) {
  return endsWith(toLower(path), ".npy");
}

bool isNpzPath(const std::string& path) {
  return endsWith(toLower(path), ".npz");
}

bool isSamplePath(const fs::path& p) {
  static const char* kExtensions[] = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tga",
                                      ".pgm", ".ppm", ".pnm",  ".npy", ".npz"};
  const std::string ext = toLower(p.extension().string());
  return std::any_of(std::begin(kExtensions), std::end(kExtensions),
                     [&](const char* e) { return ext == e; });
}

// Every array of a one-sample .npz, by name, into `s`.
void readNpzSample(const std::string& path, Sample& s) {
  const NpzFile npz(path);
  for (const std::string& name : npz.names()) {
    s.inputs[name] = npz.open(name)->readAll();
    s.input_origins[name] = "'" + path + "' array '" + name + "'";
  }
}

// ---------------------------------------------------------------------------------------------

class IdxDataset : public Dataset {
 public:
  IdxDataset(std::string name, const std::string& images, const std::string& labels,
             ImageOptions image)
      : name_(std::move(name)), images_(images), image_(std::move(image)) {
    const auto& d = images_.dims();
    require(d.size() == 3 || d.size() == 4,
            "'" + images + "': IDX images need 3 dims (count, height, width) or 4 (count, " +
                "height, width, channels), this file has " + std::to_string(d.size()));
    require(images_.count() > 0, "'" + images + "' holds no images (empty dataset)");
    shape_ = {d[1], d[2], d.size() == 4 ? d[3] : 1};
    if (!labels.empty()) {
      labels_ = std::make_unique<IdxFile>(labels);
      require(labels_->dims().size() == 1, "'" + labels +
                                               "': IDX labels need 1 dim, this file has " +
                                               std::to_string(labels_->dims().size()));
      require(labels_->count() == images_.count(),
              "'" + labels + "' has " + std::to_string(labels_->count()) + " labels for the " +
                  std::to_string(images_.count()) + " images of '" + images + "'");
    }
  }

  int64_t size() const override { return images_.count(); }
  bool hasLabels() const override { return labels_ != nullptr; }
  std::string describe() const override { return name_; }

  Sample get(int64_t index) override {
    Sample s;
    s.origin = "'" + images_.path() + "' image " + std::to_string(index);
    at::Tensor pixels = at::empty(shape_, at::kByte);
    images_.read(index, pixels.data_ptr<uint8_t>());
    s.input = transformImage(pixels, image_, s.origin);
    if (labels_) {
      uint8_t label;
      labels_->read(index, &label);
      s.label = label;
    }
    return s;
  }

 private:
  std::string name_;
  IdxFile images_;
  std::unique_ptr<IdxFile> labels_;
  std::vector<int64_t> shape_;
  ImageOptions image_;
};

// ---------------------------------------------------------------------------------------------

class NpyStackDataset : public Dataset {
 public:
  NpyStackDataset(const std::string& path, const std::string& labels_path)
      : path_(path), file_(path) {
    require(!file_.shape().empty(),
            "'" + path + "' holds a scalar; a stacked .npy source needs one sample per row");
    require(file_.shape()[0] > 0, "'" + path + "' holds no samples (empty dataset)");
    if (!labels_path.empty()) {
      NpyFile labels(labels_path);
      require(labels.shape().size() == 1 && labels.shape()[0] == file_.shape()[0],
              "'" + labels_path + "': labels need shape (" + std::to_string(file_.shape()[0]) +
                  ",) to match '" + path + "', not " + c10::str(labels.shape()));
      at::Tensor l = labels.readAll();
      require(
          !at::isFloatingType(l.scalar_type()),
          "'" + labels_path + "': labels must be integers, not " + c10::toString(l.scalar_type()));
      labels_ = l.to(at::kLong);
      require(labels_.min().item<int64_t>() >= 0,
              "'" + labels_path + "': labels must not be negative");
    }
  }

  int64_t size() const override { return file_.shape()[0]; }
  bool hasLabels() const override { return labels_.defined(); }
  std::string describe() const override { return path_; }

  Sample get(int64_t index) override {
    Sample s;
    s.origin = "'" + path_ + "' row " + std::to_string(index);
    s.input = file_.readRecord(index);
    if (labels_.defined()) s.label = labels_[index].item<int64_t>();
    return s;
  }

 private:
  std::string path_;
  NpyFile file_;
  at::Tensor labels_;
};

// ---------------------------------------------------------------------------------------------

// Samples that are files (images or .npy), from a class folder or a list file.
class FileListDataset : public Dataset {
 public:
  struct Entry {
    std::string path;
    int64_t label = -1;
    std::string where;  // "list.txt line 7: " or ""
  };

  FileListDataset(std::string name, std::vector<Entry> entries, ImageOptions image)
      : name_(std::move(name)), entries_(std::move(entries)), image_(std::move(image)) {
    labelled_ = !entries_.empty() && entries_.front().label >= 0;
  }

  int64_t size() const override { return static_cast<int64_t>(entries_.size()); }
  bool hasLabels() const override { return labelled_; }
  std::string describe() const override { return name_; }

  Sample get(int64_t index) override {
    const Entry& e = entries_.at(index);
    Sample s;
    s.origin = e.where + "'" + e.path + "'";
    s.label = e.label;
    try {
      if (isNpyPath(e.path)) {
        s.input = NpyFile(e.path).readAll();
      } else if (isNpzPath(e.path)) {
        readNpzSample(e.path, s);
      } else {
        s.input = transformImage(decodeImage(e.path), image_, s.origin);
      }
    } catch (const Error& err) {
      if (e.where.empty()) throw;
      throw err.within(e.where.substr(0, e.where.size() - 2));
    }
    return s;
  }

 private:
  std::string name_;
  std::vector<Entry> entries_;
  ImageOptions image_;
  bool labelled_ = false;
};

std::vector<fs::path> sortedChildren(const fs::path& dir, bool directories) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    if (directories ? it->is_directory() : (it->is_regular_file() && isSamplePath(it->path()))) {
      out.push_back(it->path());
    }
  }
  if (ec) throw Error("cannot list folder '" + dir.string() + "': " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

std::shared_ptr<Dataset> openFolder(const std::string& dir, const ImageOptions& image) {
  std::error_code ec;
  require(fs::is_directory(dir, ec), "'" + dir + "' is not a folder");
  std::vector<FileListDataset::Entry> entries;
  const auto classes = sortedChildren(dir, true);
  if (classes.empty()) {
    // No class sub-folders: unlabelled samples (calibration images, .npy tensors).
    for (const auto& f : sortedChildren(dir, false))
      entries.push_back({f.string(), -1, ""});
  } else {
    for (size_t label = 0; label < classes.size(); ++label) {
      for (const auto& f : sortedChildren(classes[label], false)) {
        entries.push_back({f.string(), static_cast<int64_t>(label), ""});
      }
    }
  }
  require(!entries.empty(), "folder '" + dir +
                                "' has no samples (images .png/.jpg/.jpeg/.bmp/.gif/.tga/.pnm, "
                                ".npy or .npz files, directly or in one sub-folder per class)");
  return std::make_shared<FileListDataset>(dir, std::move(entries), image);
}

std::shared_ptr<Dataset> openList(const std::string& path, const ImageOptions& image) {
  std::ifstream in(path);
  if (!in) throw Error("cannot open list file '" + path + "': " + std::strerror(errno));
  const fs::path base = fs::path(path).parent_path();
  std::vector<FileListDataset::Entry> entries;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
      line.pop_back();
    size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    line = line.substr(first);
    const std::string where = "'" + path + "' line " + std::to_string(line_no) + ": ";
    std::string sample = line;
    int64_t label = -1;
    // "PATH LABEL": the last whitespace-separated word is a label when it is an integer.
    const size_t sep = line.find_last_of(" \t");
    if (sep != std::string::npos) {
      const std::string word = line.substr(sep + 1);
      if (!word.empty() && std::all_of(word.begin(), word.end(), ::isdigit)) {
        label = std::stoll(word);
        sample = line.substr(0, line.find_last_not_of(" \t", sep) + 1);
      }
    }
    if (!entries.empty() && (label >= 0) != (entries.front().label >= 0)) {
      throw Error(where + "every line needs a label, or none does");
    }
    fs::path p(sample);
    if (p.is_relative()) p = base / p;
    entries.push_back({p.string(), label, where});
  }
  require(!entries.empty(), "list file '" + path + "' names no samples (empty dataset)");
  return std::make_shared<FileListDataset>(path, std::move(entries), image);
}

std::string siblingLabels(const std::string& images) {
  const fs::path p(images);
  std::string name = p.filename().string();
  const size_t pos = name.find("images-idx3");
  if (pos == std::string::npos) return "";
  name.replace(pos, 11, "labels-idx1");
  // Either file may be the gzipped one.
  const std::string bare = endsWith(name, ".gz") ? name.substr(0, name.size() - 3) : name;
  for (const std::string& candidate : {name, bare, bare + ".gz"}) {
    std::error_code ec;
    const fs::path labels = p.parent_path() / candidate;
    if (fs::exists(labels, ec)) return labels.string();
  }
  return "";
}

}  // namespace

std::string fashionMnistDir() {
  const char* env = std::getenv("QFORGE_FASHION_MNIST_DIR");
  return env && *env ? env : "/usr/share/datasets/fashion-mnist";
}

std::shared_ptr<Dataset> openDataset(const std::string& spec, const DataOptions& options) {
  options.image.validate();
  require(!spec.empty(), "no data source given");
  if (isPerInputSpec(spec)) return openPerInput(spec, options);
  if (startsWith(spec, "random:")) return openRandom(spec.substr(7), options.inputs);
  if (startsWith(spec, "const:")) return openConstant(spec.substr(6), options.inputs);
  if (startsWith(spec, "npz:") || (isNpzPath(spec) && !startsWith(spec, "folder:"))) {
    const std::string path = startsWith(spec, "npz:") ? spec.substr(4) : spec;
    std::error_code ec;
    if (fs::is_directory(path, ec)) return openFolder(path, options.image);
    return openNpzStack(path);
  }
  if (startsWith(spec, "fashion-mnist:")) {
    const std::string split = spec.substr(14);
    require(split == "train" || split == "test",
            "unknown split '" + split + "': use fashion-mnist:train or fashion-mnist:test");
    const std::string prefix = fashionMnistDir() + "/" + (split == "train" ? "train" : "t10k");
    const std::string images = prefix + "-images-idx3-ubyte.gz";
    std::error_code ec;
    require(fs::exists(images, ec), spec + ": '" + images +
                                        "' not found (install Debian's dataset-fashion-mnist, or "
                                        "set QFORGE_FASHION_MNIST_DIR)");
    return std::make_shared<IdxDataset>(spec, images, prefix + "-labels-idx1-ubyte.gz",
                                        options.image);
  }
  if (startsWith(spec, "idx:") || endsWith(spec, "-ubyte") || endsWith(spec, "-ubyte.gz") ||
      endsWith(spec, ".idx") || endsWith(spec, ".idx.gz")) {
    std::string images = startsWith(spec, "idx:") ? spec.substr(4) : spec;
    std::string labels = options.labels_path;
    const size_t comma = images.find(',');
    if (comma != std::string::npos) {
      labels = images.substr(comma + 1);
      images = images.substr(0, comma);
    }
    if (labels.empty()) labels = siblingLabels(images);
    return std::make_shared<IdxDataset>(spec, images, labels, options.image);
  }
  if (startsWith(spec, "npy:") || (isNpyPath(spec) && !startsWith(spec, "folder:"))) {
    return std::make_shared<NpyStackDataset>(startsWith(spec, "npy:") ? spec.substr(4) : spec,
                                             options.labels_path);
  }
  // Class folders and list files carry their own labels.
  require(options.labels_path.empty(),
          "--labels applies to IDX and stacked .npy sources, not to '" + spec + "'");
  if (startsWith(spec, "list:") || endsWith(spec, ".txt") || endsWith(spec, ".lst") ||
      endsWith(spec, ".list")) {
    return openList(startsWith(spec, "list:") ? spec.substr(5) : spec, options.image);
  }
  const std::string dir = startsWith(spec, "folder:") ? spec.substr(7) : spec;
  std::error_code ec;
  if (fs::is_directory(dir, ec)) return openFolder(dir, options.image);
  if (!fs::exists(dir, ec)) {
    throw Error("data source '" + spec +
                "' not found: no such file or folder, and no known prefix (fashion-mnist:, idx:, "
                "npy:, npz:, list:, folder:, random:, const:); see `qforge help data`");
  }
  throw Error("cannot tell what kind of data '" + spec +
              "' is: name it idx:FILE, npy:FILE, npz:FILE, list:FILE, folder:DIR or random:normal");
}

}  // namespace qforge::data
