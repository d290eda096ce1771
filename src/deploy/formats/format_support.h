// What the deploy-format files share: numbers spelled the way MQBench's Python spells them, JSON
// that keeps key order, checked reads that name the file and key of a malformed entry, and the
// checks every format makes on a table before writing it.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "deploy/deploy_model.h"

namespace qforge::deploy::formats {

using OrderedJson = nlohmann::ordered_json;

// The shortest decimal that reads back as `value`, spelled like Python's repr(float): "0.5",
// "1.0", "1e-05", "1.5e+16". Text formats written by MQBench use it.
std::string pythonFloat(double value);

// JSON indented by four spaces, keys in insertion order (Python's json.dump(..., indent=4)),
// with a final newline.
std::string dumpJson(const OrderedJson& document);

// Parses JSON keeping key order; a syntax error names `where` and the byte offset.
OrderedJson parseOrderedJson(const std::string& text, const std::string& where);

// Checked reads from a parsed document. `where` names the file, `path` the key ("a.b[0].min");
// each throws qforge::Error "where: key 'path': what is wrong" when the key is missing or of
// the wrong type.
const OrderedJson& member(const OrderedJson& object, const std::string& key,
                          const std::string& where, const std::string& path);
const OrderedJson& objectAt(const OrderedJson& value, const std::string& where,
                            const std::string& path);
const OrderedJson& arrayAt(const OrderedJson& value, const std::string& where,
                           const std::string& path);
double numberAt(const OrderedJson& value, const std::string& where, const std::string& path);
int64_t integerAt(const OrderedJson& value, const std::string& where, const std::string& path);
std::string stringAt(const OrderedJson& value, const std::string& where, const std::string& path);

// A text file's lines with their 1-based numbers; blank lines are dropped, "\r\n" is accepted.
struct TextLine {
  size_t number;
  std::string text;
};
// Throws naming `where` and the line for text that is not UTF-8: names read from it go into JSON
// files and messages (a fuzzed TensorRT cache's name broke the AIMET writer's JSON, issue #22).
std::vector<TextLine> nonBlankLines(const std::string& text, const std::string& where);

// "where:line: message".
[[noreturn]] void failAtLine(const std::string& where, size_t line, const std::string& message);

// Throws unless `e` is an affine grid with a finite positive scale per channel: every format but
// NNIE's describes tensors by scale and zero point.
void requireAffine(const TensorEncoding& e, const std::string& format);
// Throws unless `e` has one scale (formats that hold one number per tensor).
void requirePerTensor(const TensorEncoding& e, const std::string& format);

// A per-tensor encoding read back from a file: scale, zero point and grid.
TensorEncoding perTensorEncoding(const std::string& tensor, TensorRole role, int bits, int64_t qmin,
                                 int64_t qmax, double scale, int64_t zero_point);
// Symmetric signed 8-bit on [-127, 127] from a clip range amax (TensorRT's convention:
// scale = amax / 127).
TensorEncoding symmetricInt8FromAmax(const std::string& tensor, double amax);

// MQBench's post-processing for toolchains that look up a range on the input of Flatten, Reshape
// and Resize: such an input without an entry takes the range found on the input of the first
// reader downstream (through further Flatten/Reshape/Resize). Returns the added entries'
// table: `table` plus copies appended in graph order.
QuantTable withReshapeInputRanges(const QuantTable& table, const Graph& graph);

// "tensor 'x'" for messages.
std::string tensorLabel(const TensorEncoding& e);

}  // namespace qforge::deploy::formats
