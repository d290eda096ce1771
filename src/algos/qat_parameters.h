// What QAT trains in a prepared model, and the per-parameter rules its gradients follow. The
// trainable tensors are the graph's own initializer tensors (set to require grad and updated in
// place, so no copy goes stale): those read at an OpInfo weight or bias slot (looking through
// FakeQuantize and simulated BN folding's W * factor), normalisation scale and bias, and
// multi-element operands of Add/Sub/Mul/Div (positional embeddings, LayerNorm written out); then
// every quantizer's parameters(). BN running statistics are state, listed apart.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "passes/prepare.h"

namespace qforge::algos {

struct QatParameters {
  std::vector<at::Tensor> tensors;  // initializers first, then quantizer parameters
  std::vector<std::string> names;   // initializer name, or "<quantizer>.<index>"
  std::vector<bool> decays;         // weight decay applies (weight-slot initializers only)
  // LSQ and LSQ+ activation scales, whose gradient scale counts the rank's batch (see
  // qat_data_parallel.h's averageGradients).
  std::vector<bool> batch_scaled_grad;
  size_t initializer_count = 0;            // how many of `tensors` are graph initializers
  std::vector<std::string> bn_statistics;  // running mean/var initializers

  size_t size() const { return tensors.size(); }
  int64_t numel() const;           // trainable values in all
  int64_t quantizerNumel() const;  // of which the quantizers'
};

// The trainable tensors of `model` (initializers only when `train_weights`), all set to require
// grad. Throws when nothing would train.
QatParameters collectQatParameters(passes::PreparedModel& model, bool train_weights);

// Replaces the quantizer part of `params` by the quantizers' current parameters() (a quantizer's
// loadState may replace its tensors), set to require grad.
void refreshQuantizerParameters(passes::PreparedModel& model, QatParameters& params);

// Before an optimizer step: quantizer gradients times `quantizer_lr_scale` (with SGD, the
// quantizers' learning rate), then L2 weight decay (decay * p added to the gradient) on the
// decaying parameters. Parameters without a gradient are left alone.
void adjustGradients(QatParameters& params, double quantizer_lr_scale, double weight_decay);

}  // namespace qforge::algos
