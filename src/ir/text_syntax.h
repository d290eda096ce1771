// The lexical rules of the graph text form that dumpGraph writes and parseGraph reads: how names,
// strings, numbers and types are spelled. Kept in one place so writer and reader cannot drift.
#pragma once

#include <optional>
#include <string>

#include "ir/dtype.h"
#include "ir/graph.h"

namespace qforge::text {

// "..." with \" \\ \n \r \t and \xHH for other control bytes.
std::string quote(const std::string& s);

// A value name after '%': bare when it has no space, control byte or any of ,()[]{}<>"=#% and
// does not end with ':' (the type separator), else quoted ("onnx::Conv_1" stays bare).
std::string valueName(const std::string& name);
bool isBareValueChar(char c);

// A node or graph name at the end of a line: bare unless empty-looking, quoted-looking, padded
// with spaces or holding control bytes.
std::string trailingName(const std::string& name);

// A symbolic dimension: bare when an identifier ([A-Za-z_][A-Za-z0-9_.]*), else quoted.
std::string dimParam(const std::string& param);
bool isIdentifier(const std::string& s);

// "float32[N,3,?]"; "float32" when the rank is unknown; "" when nothing is known at all.
std::string typeText(const TensorType& type);

// The shortest text that reads back to exactly `v` (std::to_chars), e.g. "0.1", "1e-05", "inf".
std::string shortestFloat(float v);
std::string shortestDouble(double v);

// DType by its dtypeName() ("float32", "int64", "undefined", ...); nullopt when unknown.
std::optional<DType> dtypeByName(const std::string& name);

}  // namespace qforge::text
