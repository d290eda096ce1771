// Zero biases for Conv/ConvTranspose/Gemm units that keep their BatchNormalization (QAT). Folding
// BN later creates a bias; a backend that quantizes biases needs that bias's quantizer from the
// start (simulateBatchNormFolding, mergeSimulatedBatchNorm), so the producer gets a zero bias now.
// Under BN the zero bias changes nothing: training BN subtracts the batch mean, inference BN the
// running one, after it.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "passes/quant_units.h"

namespace qforge::passes {

// Gives every unit anchored on a Conv, ConvTranspose or Gemm with a BatchNormalization right
// after it, an initializer weight and no bias, a zero bias of one value per output channel (Gemm:
// beta set to 1), and records it as the unit's bias. Returns how many biases were added.
int addZeroBiasesUnderBatchNorm(Graph& graph, std::vector<QuantUnit>& units);

}  // namespace qforge::passes
