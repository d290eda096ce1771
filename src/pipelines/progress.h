// How a pipeline tells its caller how far a long stage has come (the CLI draws a progress bar;
// a Python binding may forward it), and the clock its timings use.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace qforge::pipelines {

using Clock = std::chrono::steady_clock;

inline double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct ProgressEvent {
  std::string stage;  // "calibrate", "reconstruct", "evaluate float", "evaluate quantized", "train"
  int64_t done = 0;   // of `total`, counted in `unit`s
  int64_t total = 0;
  std::string unit;    // "img", "it", "step"
  double seconds = 0;  // since the stage began (training: without its evaluations)
  std::string note;    // what a status line shows after the rate ("unit 3/12 ... loss 0.012")
  // The stage's last event for now: it ended, or pauses (training, for an evaluation). A display
  // clears its line; the next event of the stage starts it again.
  bool last = false;
};
using ProgressCallback = std::function<void(const ProgressEvent&)>;

}  // namespace qforge::pipelines
