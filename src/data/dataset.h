// Datasets: random access to samples that are read from disk only when asked for, so a dataset
// of any size streams through in batches (see loader.h) with constant memory.
//
// Sources (openDataset's `spec`):
//   fashion-mnist:train | fashion-mnist:test   Debian's dataset-fashion-mnist (the default)
//   idx:IMAGES[,LABELS] or FILE-ubyte[.gz]     IDX images (labels: given, or the sibling file)
//   folder:DIR or DIR                          one sub-folder per class (or no sub-folders:
//                                              unlabelled) of images or .npy samples
//   npy:FILE or FILE.npy                       a stacked array, one sample per first-axis row
//   list:FILE or FILE.txt|.lst|.list           one sample path per line, optionally "PATH LABEL"
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/image.h"

namespace qforge::data {

struct Sample {
  at::Tensor input;    // float32, one sample without the batch axis
  int64_t label = -1;  // class index; -1 when the dataset has no labels
  std::string origin;  // where it came from, for errors: "path/img.png", "file.gz record 17"
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  // Reads and transforms sample `index` (0 <= index < size()).
  virtual Sample get(int64_t index) = 0;
  virtual bool hasLabels() const = 0;
  // What the user named, for reports ("fashion-mnist:test", "images/").
  virtual std::string describe() const = 0;
};

struct DataOptions {
  ImageOptions image;       // applied to image samples (IDX, PNG, JPEG); not to .npy samples
  std::string labels_path;  // labels of an IDX or stacked .npy source, when not found beside it
};

// Directory holding Fashion-MNIST's IDX files: $QFORGE_FASHION_MNIST_DIR, else Debian's
// /usr/share/datasets/fashion-mnist.
std::string fashionMnistDir();

// Opens the source named by `spec` (see the top of this file). Throws qforge::Error naming the
// file for an unreadable or malformed source and for an empty one.
std::shared_ptr<Dataset> openDataset(const std::string& spec, const DataOptions& options = {});

}  // namespace qforge::data
