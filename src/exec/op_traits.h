// Questions the quantization layers ask about one node, answered from the OpInfo table
// (exec/op_info.h): its weights and their output channels, whether it folds a following
// BatchNormalization, moves data or computes shapes, the sign of its output. A node the table
// does not know (a custom domain, an opset outside every entry) has no facts, so every answer is
// the conservative one: no weights, computes values, sign unknown.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "exec/op_info.h"
#include "ir/graph.h"

namespace qforge {

// The built-in entry for `node` at the opset `graph` imports for the node's domain; nullptr
// when there is none.
const OpInfo* opInfoFor(const Graph& graph, const Node& node);
// The built-in entry of default-domain `op_type` at `opset`, for code that holds op names.
const OpInfo* opInfoFor(const std::string& op_type, int64_t opset);

// Whether input `slot` holds a weight.
bool isWeightInput(const OpInfo* info, size_t slot);
// A layer: an op whose weights have output channels (Conv, ConvTranspose, Gemm, MatMul and their
// integer forms). PRelu's slope is a weight without output channels, so PRelu is not one.
bool isWeightedOp(const OpInfo* info);

// The output-channel axis of `weight`, read by `node` in input `slot`, for per-channel
// quantization: 0 for Conv and Gemm with transB=1, 1 for ConvTranspose and Gemm with transB=0,
// the last axis for MatMul. -1 when the slot holds no weight with output channels or the weight
// has fewer than 2 dimensions.
int64_t weightChannelAxis(const OpInfo* info, const Node& node, size_t slot,
                          const at::Tensor& weight);
// The node's number of output channels as its weight (slot weight_inputs[0]) gives them: the
// size along weightChannelAxis, times the group for ConvTranspose, whose weight holds
// C_out / group per group. -1 when weightChannelAxis is.
int64_t weightOutputChannels(const OpInfo* info, const Node& node, const at::Tensor& weight);

// What the sign of `node`'s output follows from (see OutputSign).
OutputSign outputSign(const OpInfo* info, const Node& node);

// The boolean facts of exec/op_info.h for one node; false when the table does not know it.
bool combinesActivations(const Graph& graph, const Node& node);
bool movesDataOnly(const Graph& graph, const Node& node);
bool isLayoutOnly(const Graph& graph, const Node& node);
bool movesInt8(const Graph& graph, const Node& node);
bool absorbsBatchNorm(const Graph& graph, const Node& node);
bool isShapeComputation(const Graph& graph, const Node& node);

}  // namespace qforge
