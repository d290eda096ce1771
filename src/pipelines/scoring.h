// Scoring a model's outputs over a dataset as `qforge eval` scores them: top-1/top-5 for class
// scores with labels, else PSNR/MSE against the clean input (or the dataset's targets).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>

#include "data/loader.h"
#include "exec/executor.h"
#include "ir/graph.h"
#include "pipelines/progress.h"

namespace qforge::pipelines {

struct Scores {
  std::string metric;  // "top1", "psnr" or "none" (samples counted, nothing scored)
  int64_t samples = 0;
  int64_t top1 = 0, top5 = 0;
  bool has_top5 = false;
  double psnr_sum = 0, mse_sum = 0, input_psnr_sum = 0;
  bool has_input_psnr = false;
};

// Sum over images of 10 log10(peak^2 / mse), with an exact reconstruction capped at 1e-20 MSE.
double psnrOf(const at::Tensor& per_image_mse, double peak);

// Adds one batch's outputs to `s` under its metric; `data_name` names the dataset in errors (a
// label outside the model's classes, an output that cannot be scored that way).
void scoreBatch(const data::Batch& batch, const at::Tensor& output, double peak,
                const std::string& data_name, Scores& s);

// "top-1 91.23%" or "psnr 27.41 dB".
std::string scoreText(const Scores& s);

// Top-1 (or PSNR, when the output is not [batch, classes] with labels but has the input's shape;
// else nothing) of `executor` from the graph's inputs to its first output over the whole loader;
// progress as `stage` in images.
Scores scoreModel(Executor& executor, const Graph& graph, data::BatchLoader& loader,
                  const std::string& data_name, const ProgressCallback& progress = {},
                  const std::string& stage = "evaluate");

// The forward of `executor` from the graph's data input to its first output.
std::function<at::Tensor(const at::Tensor&)> forwardOf(Executor& executor, const Graph& graph);

// Top-1 in percent of `forward` over the whole loader (-1 when it is empty); `flag` names the
// option in the error when the model is not a classifier or the data has no labels.
double top1Percent(data::BatchLoader& loader,
                   const std::function<at::Tensor(const at::Tensor&)>& forward,
                   const std::string& flag = "--eval");

}  // namespace qforge::pipelines
