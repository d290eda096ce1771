// Pieces `qforge eval` and `qforge quantize` share: finding the model's data input, scoring
// batches (top-1/top-5 or PSNR/MSE), and a progress bar with rate and ETA for terminals.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "algos/calibrate.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "ir/graph.h"

namespace qforge::cli {

using Clock = std::chrono::steady_clock;

inline double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The per-sample shape the model input declares (batch axis dropped, unknown dims -1).
inline std::vector<int64_t> sampleShape(const Value& input) {
  std::vector<int64_t> shape;
  if (!input.type.shape || input.type.shape->empty()) return shape;
  for (size_t i = 1; i < input.type.shape->size(); ++i) {
    shape.push_back((*input.type.shape)[i].isKnown() ? (*input.type.shape)[i].value : -1);
  }
  return shape;
}

// The dataset `spec` names, read with as many channels as the model's data input declares.
inline std::shared_ptr<data::Dataset> openFor(const std::string& spec, const Graph& graph) {
  data::DataOptions options;
  const std::vector<int64_t> shape = sampleShape(algos::dataInput(graph));
  if (shape.size() == 3 && shape[0] > 0) options.image.channels = shape[0];
  return data::openDataset(spec, options);
}

// Batches of `batch` samples (the first `limit`; 0 = all) shaped for the model input.
inline data::LoaderOptions loaderOptions(const Graph& graph, int64_t batch, int64_t limit) {
  data::LoaderOptions o;
  o.batch_size = batch;
  o.limit = limit;
  const Value& input = algos::dataInput(graph);
  o.expected_shape = sampleShape(input);
  o.expected_by = "the model input '" + input.name() + "'";
  return o;
}

// Shows "[####......]  41%  4096/10000  1234 img/s  ETA 0:05" on a terminal, redrawn in place.
class ProgressBar {
 public:
  // `unit` names what is counted ("img/s", "it/s").
  ProgressBar(int64_t total, bool enabled, std::string unit = "img")
      : total_(total), enabled_(enabled), unit_(std::move(unit)) {}
  ~ProgressBar() { clear(); }

  // `note` is shown after the ETA (the loss of a reconstruction, say).
  void update(int64_t done, double seconds, const std::string& note = "") {
    if (!enabled_ || (secondsSince(last_) < 0.1 && done < total_)) return;
    last_ = Clock::now();
    const int width = 30;
    const int filled = static_cast<int>(width * done / std::max<int64_t>(total_, 1));
    const double rate = seconds > 0 ? done / seconds : 0;
    const int64_t eta = rate > 0 ? static_cast<int64_t>((total_ - done) / rate + 0.5) : 0;
    char line[160];
    std::snprintf(line, sizeof(line), "\r[%s%s] %3d%%  %lld/%lld  %.0f %s/s  ETA %lld:%02lld",
                  std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(),
                  static_cast<int>(100 * done / std::max<int64_t>(total_, 1)),
                  static_cast<long long>(done), static_cast<long long>(total_), rate, unit_.c_str(),
                  static_cast<long long>(eta / 60), static_cast<long long>(eta % 60));
    std::cerr << line << (note.empty() ? "" : "  " + note) << "\033[K" << std::flush;
    drawn_ = true;
  }
  void clear() {
    if (drawn_) std::cerr << "\r\033[K" << std::flush;
    drawn_ = false;
  }

 private:
  int64_t total_;
  bool enabled_;
  std::string unit_;
  bool drawn_ = false;
  Clock::time_point last_{};
};

struct Scores {
  std::string metric;
  int64_t samples = 0;
  int64_t top1 = 0, top5 = 0;
  bool has_top5 = false;
  double psnr_sum = 0, mse_sum = 0, input_psnr_sum = 0;
  bool has_input_psnr = false;
};

inline double psnrOf(const at::Tensor& per_image_mse, double peak) {
  // An exact reconstruction has no finite PSNR; cap it where float32 noise would be anyway.
  return (10.0 * at::log10(peak * peak / per_image_mse.clamp_min(1e-20))).sum().item<double>();
}

inline void scoreBatch(const data::Batch& batch, const at::Tensor& output, double peak,
                       const std::string& data_name, Scores& s) {
  const int64_t n = batch.inputs.size(0);
  if (s.metric == "top1") {
    require(output.dim() == 2,
            "--metric top1 needs class scores [batch, classes]; the model output has shape " +
                c10::str(output.sizes()));
    const int64_t classes = output.size(1);
    const at::Tensor outside = (batch.labels >= classes).nonzero();
    if (outside.numel() > 0) {
      const int64_t k = outside[0][0].item<int64_t>();
      throw Error(data_name + " sample " + std::to_string(batch.indices[k]) + ": label " +
                  std::to_string(batch.labels[k].item<int64_t>()) + " is outside the model's " +
                  std::to_string(classes) + " classes");
    }
    at::Tensor scores = output.to(at::kFloat);
    s.top1 += (scores.argmax(1) == batch.labels).sum().item<int64_t>();
    if (classes >= 5) {
      s.has_top5 = true;
      at::Tensor top5 = std::get<1>(scores.topk(5, 1));
      s.top5 += (top5 == batch.labels.unsqueeze(1)).any(1).sum().item<int64_t>();
    }
  } else {
    const at::Tensor& target = batch.targets.defined() ? batch.targets : batch.inputs;
    require(output.sizes() == target.sizes(),
            "--metric psnr compares the output with the clean input; output shape " +
                c10::str(output.sizes()) + " differs from the input's " + c10::str(target.sizes()));
    at::Tensor mse = (output.to(at::kDouble) - target.to(at::kDouble)).pow(2).reshape({n, -1});
    mse = mse.mean(1);
    s.mse_sum += mse.sum().item<double>();
    s.psnr_sum += psnrOf(mse, peak);
    if (batch.targets.defined()) {
      at::Tensor in_mse = (batch.inputs.to(at::kDouble) - target.to(at::kDouble)).pow(2);
      s.input_psnr_sum += psnrOf(in_mse.reshape({n, -1}).mean(1), peak);
      s.has_input_psnr = true;
    }
  }
  s.samples += n;
}

inline std::string percent(int64_t part, int64_t whole) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f%%  (%lld / %lld)", 100.0 * part / whole,
                static_cast<long long>(part), static_cast<long long>(whole));
  return buf;
}

}  // namespace qforge::cli
