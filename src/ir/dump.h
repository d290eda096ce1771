// A readable text form of a graph, for tests, debugging and `qforge inspect --dump`. parseGraph
// (ir/parse.h) reads it back.
//
// Grammar, one item per line (leading spaces and blank lines do not matter):
//   graph <name>                          first line
//   opset "<domain>" <version>            only when the opsets differ from {"": 13}
//   input <value>[: <type>]               in graph input order
//   init <value>: <type>[ = {v, v, ...}]  row-major values; written for up to `max_values`
//                                         elements, read back as zeros when absent
//   <value>[: <type>], ... = [<domain>::]<Op>[[<attr>=<attr value>, ...]](<value>|<none>, ...)
//       [  # <node name>]                 nodes, in topological order
//   output <value>[: <type>]              in graph output order
// where
//   <value>      %name, or %"quoted name" when the name has spaces or any of ,()[]{}<>"=#%
//   <type>       float32[N,3,?,224] (a dim: size, symbol, "quoted symbol" or ? for unknown);
//                float32 alone when the rank is unknown; left out (no ':') when nothing is known
//   <attr value> 3 | 0.5 (float32: always has '.', 'e', inf or nan) | "string" | [1,2] |
//                [0.5,1.0] | ["a","b"] | floats[] | strings[] (empty lists; [] is ints) |
//                tensor<int64[2]>{1, 2} (values up to `max_values`, else zeros when read) |
//                tensors[tensor<...>, ...] | <opaque> (subgraphs: written, never read back)
//   strings      "..." with \" \\ \n \r \t \xHH escapes; names at line ends are bare unless
//                they need quoting the same way.
// Not written: ModelInfo apart from graph name and opsets, doc strings, node metadata, attribute
// doc strings and ref_attr_name, the `anonymous` mark, values nothing defines.
#pragma once

#include <cstddef>
#include <string>

#include "ir/graph.h"

namespace qforge {

// e.g. "  %y: float32[1,8,4,4] = Conv[kernel_shape=[3,3], pads=[1,1,1,1]](%x, %w, %b)  # conv1"
std::string dumpGraph(const Graph& graph, size_t max_values = 8);

}  // namespace qforge
