// Control-flow bodies (If, Loop, Scan) may read values of the graph around them by name. qforge
// makes those reads visible in the outer graph: on import each value a body reads from outside
// becomes an extra input of its node, after the node's ONNX inputs, and an internal attribute
// lists the names the body uses for them. Use lists, topological order, dead-code removal and
// passes that rewire a value then see these reads like any other. Export drops the extra inputs
// and, where a pass rewired one, renames the reference inside the body.
#pragma once

#include <onnx/onnx_pb.h>

#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace qforge {

// Strings attribute: the names a node's bodies read from outside, one per extra input, in order.
inline constexpr const char* kCapturedInputsAttribute = "qforge_captured_inputs";

// The bodies an attribute carries (a GRAPH or GRAPHS attribute kept opaque); empty for others.
std::vector<onnx::GraphProto> subgraphsOf(const Attribute& attribute);
bool hasSubgraphs(const Node& node);

// Names `body` (and the bodies nested in it) reads but does not define, in order of first read.
std::vector<std::string> outerReads(const onnx::GraphProto& body);
// The union of outerReads over every body of a node's attributes (`attributes` as imported).
std::vector<std::string> outerReads(const std::vector<Attribute>& attributes);

// The names a node's bodies use for its extra inputs (empty when it has none) and the count of
// its ONNX inputs before them.
std::vector<std::string> capturedNames(const Node& node);
size_t onnxInputCount(const Node& node);

// Renames reads of outer values inside `body` and the bodies nested in it.
void renameOuterReads(onnx::GraphProto& body, const std::map<std::string, std::string>& renames);

}  // namespace qforge
