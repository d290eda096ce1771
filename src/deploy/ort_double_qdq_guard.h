// ONNX Runtime (1.30, every optimization level from "basic", so also its default) collapses
// QuantizeLinear -> DequantizeLinear -> QuantizeLinear -> DequantizeLinear into one pair when the
// two pairs are of one 8-bit type and their parameters differ (DoubleQDQPairsRemover): it keeps
// the intersection of the two ranges, a new scale (range / 255) and zero point, and rounds once.
// The graph, and the simulation, round twice: a Relu output quantized on its own range and then
// requantized onto the range of the Concat it feeds. On the M-LSD line detector for STPU, values
// of one convolution were up to 5 steps off after the collapse.
//
// The second pair of such a chain is written in the other 8-bit type instead: int8 with zero
// point z becomes uint8 with z + 128 (uint8: int8 with z - 128), the same grid in another
// container. ORT leaves pairs of different types alone, and on x86 its later int8 -> uint8
// conversion gives every activation pair one type again, so its integer kernels fuse as before.
// TensorRT takes int8 QuantizeLinear only, so a TensorRT file keeps its types (and verify's trace
// names the collapse).
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace qforge::deploy {

// Rewrites `g` (a lowered QDQ graph) in place; returns the outputs of the QuantizeLinear nodes
// it retyped, in graph order.
std::vector<std::string> keepDoubleQdqPairsApart(Graph& g);

}  // namespace qforge::deploy
