// A metric of the user's own for autotune and mixed precision (`--metric-script FILE`): an
// executable run without a shell as `FILE DIR`, once on the float model's outputs and once per
// trial on the quantized model's. DIR holds
//   outputs.json   {"model": "float" | "quantized", "samples": N,
//                   "outputs": {OUTPUT_NAME: FILE.npy, ...}, "labels": "labels.npy" | null}
//   FILE.npy       each output over the evaluation samples, stacked along the first axis
//   labels.npy     the samples' labels (int64), when the data has them
// and the script prints the metric, higher is better, as the last line of its stdout. DIR is
// removed afterwards.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "exec/executor.h"

namespace qforge::pipelines {

// Throws qforge::Error (naming --metric-script) unless `script` is an executable file.
void checkMetricScript(const std::string& script);

// Runs the script on the outputs of every batch (`outputs[i]` holds each of `names` for batch
// i) and the batches' labels (undefined tensors when the data has none); `model` is "float" or
// "quantized". Throws qforge::Error in one line when the script fails, prints no number, or an
// output cannot be stacked.
double runMetricScript(const std::string& script, const std::vector<TensorMap>& outputs,
                       const std::vector<std::string>& names, const std::vector<at::Tensor>& labels,
                       const std::string& model);

}  // namespace qforge::pipelines
