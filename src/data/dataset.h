// Datasets: random access to samples that are read from disk only when asked for, so a dataset
// of any size streams through in batches (see loader.h) with constant memory.
//
// Sources (openDataset's `spec`):
//   fashion-mnist:train | fashion-mnist:test   Debian's dataset-fashion-mnist (the default)
//   idx:IMAGES[,LABELS] or FILE-ubyte[.gz]     IDX images (labels: given, or the sibling file)
//   folder:DIR or DIR                          one sub-folder per class (or no sub-folders:
//                                              unlabelled) of images, .npy or .npz samples
//   npy:FILE or FILE.npy                       a stacked array, one sample per first-axis row
//   npz:FILE or FILE.npz                       stacked arrays keyed by model input name
//   npz:DIR                                    one .npz per sample, keyed by model input name
//   list:FILE or FILE.txt|.lst|.list           one sample path per line, optionally "PATH LABEL"
//   random:normal|uniform[,KEY=VALUE...]       synthetic samples shaped like the model inputs
//                                              (model_sources.h: seed, count, mean, std, ...)
//   NAME=SPEC;NAME=SPEC...                     one source per model input; SPEC may also be
//                                              const:VALUE (the same value for every sample)
// Every sample keeps its file's dtype; the loader converts it to the model input's.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/image.h"

namespace qforge::data {

struct Sample {
  at::Tensor input;    // one sample without the batch axis (images float32, arrays their dtype)
  int64_t label = -1;  // class index; -1 when the dataset has no labels
  std::string origin;  // where it came from, for errors: "path/img.png", "file.gz record 17"
  // A sample of several model inputs (an .npz, one source per input): arrays by input name,
  // with where each came from; `input` is then undefined.
  std::map<std::string, at::Tensor> inputs = {};
  std::map<std::string, std::string> input_origins = {};
};

// A model input as the data layer sees it: what one sample of it must look like.
struct InputSpec {
  std::string name;
  std::vector<int64_t> shape;  // one sample, without the batch axis; -1: any size
  at::ScalarType dtype = at::kFloat;
  bool batched = true;  // false: a rank-0 input (no batch axis), fed once per batch
  // The input has no batch axis although its rank is >= 1 ([3, 320, 320]: torchvision's
  // detectors take one image): each sample has its whole shape and one run takes one sample.
  // The loader sets it when the samples show it (see BatchLoader).
  bool whole = false;
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
  // The model's inputs, in order: random: and const: sources take their shapes and dtypes from
  // them, NAME=SPEC sources are checked against their names. Empty: a one-input model.
  std::vector<InputSpec> inputs;
};

// Directory holding Fashion-MNIST's IDX files: $QFORGE_FASHION_MNIST_DIR, else Debian's
// /usr/share/datasets/fashion-mnist.
std::string fashionMnistDir();

// Opens the source named by `spec` (see the top of this file). Throws qforge::Error naming the
// file for an unreadable or malformed source and for an empty one.
std::shared_ptr<Dataset> openDataset(const std::string& spec, const DataOptions& options = {});

}  // namespace qforge::data
