// Pieces the qforge subcommands share: the data and scoring helpers of the pipelines layer under
// the CLI's names, a progress bar with rate and ETA for terminals, and the adapter that draws a
// pipeline's progress events with it.
#pragma once

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "algos/calibrate.h"
#include "core/error.h"
#include "data/dataset.h"
#include "data/loader.h"
#include "ir/graph.h"
#include "pipelines/model_data.h"
#include "pipelines/progress.h"
#include "pipelines/scoring.h"

namespace qforge::cli {

using pipelines::Clock;
using pipelines::psnrOf;
using pipelines::sampleShape;
using pipelines::scoreBatch;
using pipelines::Scores;
using pipelines::secondsSince;

// The dataset `spec` names, read with as many channels as the model's data input declares.
inline std::shared_ptr<data::Dataset> openFor(const std::string& spec, const Graph& graph) {
  return pipelines::openDatasetFor(spec, graph);
}

// Batches of `batch` samples (the first `limit`; 0 = all) shaped for the model input.
inline data::LoaderOptions loaderOptions(const Graph& graph, int64_t batch, int64_t limit) {
  return pipelines::loaderOptionsFor(graph, batch, limit);
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

// Draws a pipeline's progress events on a terminal: one bar per stage, cleared when the stage
// ends or pauses. Disabled, it draws nothing (and the pipeline may skip its events).
class StageProgress {
 public:
  explicit StageProgress(bool enabled) : enabled_(enabled) {}

  void operator()(const pipelines::ProgressEvent& e) {
    if (e.last) {
      bar_.reset();
      return;
    }
    if (!bar_ || e.stage != stage_) {
      bar_ = std::make_unique<ProgressBar>(e.total, enabled_, e.unit);
      stage_ = e.stage;
    }
    bar_->update(e.done, e.seconds, e.note);
  }
  // The callback to hand a pipeline: none when disabled.
  pipelines::ProgressCallback callback() {
    if (!enabled_) return {};
    return [this](const pipelines::ProgressEvent& e) { (*this)(e); };
  }

 private:
  bool enabled_;
  std::string stage_;
  std::unique_ptr<ProgressBar> bar_;
};

inline std::string percent(int64_t part, int64_t whole) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f%%  (%lld / %lld)", 100.0 * part / whole,
                static_cast<long long>(part), static_cast<long long>(whole));
  return buf;
}

}  // namespace qforge::cli
