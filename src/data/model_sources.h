// Sources shaped by the model rather than by files alone: several arrays per sample (an .npz
// keyed by input name, or one source per input), synthetic samples drawn to the model inputs'
// shapes, and constants. openDataset (dataset.h) dispatches to these.
//
//   npz:FILE.npz          stacked arrays, one per model input, sample i = row i of each
//   random:normal[,mean=M][,std=S][,seed=N][,count=N][,shape=AxBxC]
//   random:uniform[,low=A][,high=B][,seed=N][,count=N][,shape=AxBxC]
//                         `count` samples (default 64). Sample i comes from ATen's CPU generator
//                         seeded with seed * 1000003 + i, which draws the inputs in model order
//                         (torch.randn / torch.rand with torch.manual_seed reproduce it). Integer
//                         inputs take uniform integers floor(low + (high - low) * U) and need
//                         low and high; `shape` stands in for dims the model leaves open.
//   const:VALUE           VALUE in every element, in the input's dtype and shape (open dims 1)
//   NAME=SPEC;NAME=SPEC   one source per model input, zipped sample by sample: every source but
//                         the constants must have the same number of samples; labels come from
//                         the first labelled one. SPEC|scale=S|shift=B preprocesses that input:
//                         x * S + B (after the image options, which apply to every image input)
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace qforge::data {

// Whether `spec` names per-input sources ("image=folder:imgs;rate=const:16000").
bool isPerInputSpec(const std::string& spec);

// The NAME=SPEC pairs of a per-input spec, in order; throws for an empty or repeated name.
std::vector<std::pair<std::string, std::string>> splitPerInput(const std::string& spec);

std::shared_ptr<Dataset> openPerInput(const std::string& spec, const DataOptions& options);
// `params` is what follows "random:"; `inputs` gives the shapes (all the model's, or one).
std::shared_ptr<Dataset> openRandom(const std::string& params,
                                    const std::vector<InputSpec>& inputs);
// `value` is what follows "const:"; `inputs` holds the one input it feeds.
std::shared_ptr<Dataset> openConstant(const std::string& value,
                                      const std::vector<InputSpec>& inputs);
std::shared_ptr<Dataset> openNpzStack(const std::string& path);

// "[1,3,?,?]": a sample shape for messages, -1 shown as "?".
std::string shapeText(const std::vector<int64_t>& shape);

}  // namespace qforge::data
