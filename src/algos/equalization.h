// Cross-layer equalization (Nagel et al. 2019, "Data-Free Quantization Through Weight
// Equalization and Bias Correction"), a pre-pass on the float graph before prepare().
//
// For Conv1 -> [Relu] -> Conv2, scaling Conv1's output channel i by 1/s_i and Conv2's input
// channel i by s_i leaves the function unchanged (ReLU is positively homogeneous). Choosing
// s_i = sqrt(r1_i / r2_i), with r1_i = max|W1[i, ...]| and r2_i = max|W2[:, i, ...]|, gives both
// tensors the same range per channel, which is the optimum of the paper's per-channel precision
// objective: per-tensor weight grids stop being wasted on a few wide channels. Chains
// (conv -> conv -> conv) are equalized jointly by iterating over all pairs until the scales
// settle.
//
// High-bias absorption then moves c_i = max(0, beta_i - 3 * |gamma_i|) (the folded
// BatchNormalization's statistics, in the scaled domain) out of Conv1's bias into Conv2's: with
// pre-activations at least c_i (almost always, for a Gaussian), Relu(x - c) = Relu(x) - c.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace qforge::algos {

struct EqualizationOptions {
  // Replace Clip(0, 6) (ReLU6, MobileNetV2) between two equalized layers by Relu, as the paper
  // does: ReLU6 does not commute with scaling. This changes the float model wherever an
  // activation exceeded 6; each replaced node is reported.
  bool relu6_to_relu = false;
  // Absorb high biases through Relu where Conv1's BatchNormalization statistics were folded.
  bool high_bias_absorption = true;
  int max_iterations = 100;
  // Stop when no scale of an iteration differs from 1 by more than this.
  double tolerance = 1e-6;
};

// One equalized Conv1 -> Conv2 pair. Range spreads are max_i r_i / min_i r_i over the shared
// channels: Conv1's per-output-channel ranges, Conv2's per-input-channel ranges.
struct EqualizedPair {
  std::string conv1;  // node names (describe() form when unnamed)
  std::string conv2;
  std::string path;  // the ops between them: "Relu", "Relu (was Clip(0, 6))", "none", ...
  int64_t channels = 0;
  double conv1_spread_before = 0, conv1_spread_after = 0;
  double conv2_spread_before = 0, conv2_spread_after = 0;
  // High-bias absorption: channels with c_i > 0, and the largest c_i moved.
  int64_t absorbed_channels = 0;
  double max_absorbed = 0;
};

// A Conv that is not Conv1 of any pair, and why.
struct SkippedConv {
  std::string conv;
  std::string reason;
};

struct EqualizationReport {
  size_t batchnorms_folded = 0;
  std::vector<EqualizedPair> pairs;  // in topological order of Conv1
  std::vector<SkippedConv> skipped;
  std::vector<std::string> relu6_replaced;  // Clip nodes now Relu
  int iterations = 0;
  bool converged = false;
  double last_max_scale_change = 0;  // max |s_i - 1| of the last iteration
};

// Equalizes every pair of `graph` in place. Runs constantsToInitializers and foldBatchNorm first
// (their statistics kept for high-bias absorption), then finds the pairs: Conv1's output has one
// reader and is not a graph output at every step to Conv2, which reads it as input 0; between
// them at most one activation (Relu, Clip(0, inf), Clip(0, 6) with relu6_to_relu) and any
// MaxPool / AveragePool / GlobalAveragePool / GlobalMaxPool; Conv2 is a Conv with group 1 or
// depthwise (group == input channels), or a Gemm (transA 0) right after Flatten(axis 1). Weights
// must be initializers read by their node alone. Throws qforge::Error for bad options or a
// weight holding NaN/Inf (naming the tensor).
EqualizationReport equalizeCrossLayer(Graph& graph, const EqualizationOptions& options = {});

}  // namespace qforge::algos
