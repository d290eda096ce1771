// Reconstruction units: the pieces of a prepared graph that AdaRound, BRECQ and QDrop optimise one
// at a time. A unit is a single-entry, single-exit region: feeding its entry value and asking for
// its exit value runs exactly its nodes. It includes the fake quantizers on its own inputs (the
// entry value is taken before them), so a unit's loss sees the quantization of what it reads.
//   layer: one weighted node (Conv, ConvTranspose, Gemm, MatMul with an initializer weight), the
//          fake quantizers it reads through, and the chain after it up to the next weighted node,
//          fake quantizer, fork, residual Add or op that may move the samples off axis 0 (a
//          Transpose or Reshape that does not provably keep it there, a reduction...).
//   block: the graph cut at every value that all paths pass through (the only live value
//          between two nodes in topological order). A segment holding a node with two or more
//          activation inputs (a residual Add, attention) is a block; runs of other segments are
//          grouped into blocks of up to `max_block_layers` weighted layers; segments without
//          weights join the block before them (so a block ends with the quantizer the next one
//          reads through), those before the first weighted layer the first block.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace qforge::algos {

enum class ReconGranularity { Layer, Block };

struct ReconUnit {
  std::string name;                // its weighted nodes' names, "a+b+c"
  std::string entry;               // the value fed: the unit's input, before its input quantizers
  std::string exit;                // the value compared with the float model's
  std::vector<const Node*> nodes;  // topological order
  std::vector<const Node*> weight_quantizers;  // FakeQuantize nodes on initializers
  std::vector<const Node*> act_quantizers;     // the other FakeQuantize nodes
  std::vector<const Node*> weighted;           // nodes reading a quantized weight
  bool residual = false;                       // holds a node with two or more activation inputs
};

// The units of a prepared graph in topological order. Throws qforge::Error when the graph has no
// weighted node to reconstruct or more than one data input.
std::vector<ReconUnit> findReconUnits(const Graph& graph, ReconGranularity granularity,
                                      int max_block_layers = 3);

// The nodes that compute `exit` from `entry` (and constants), in topological order; throws
// naming `exit` when some node on the way reads another input of the graph.
std::vector<const Node*> nodesBetween(const Graph& graph, const std::string& entry,
                                      const std::string& exit);

}  // namespace qforge::algos
