// The parameter-file formats that stand on their own (no graph needed), by name, for
// `qforge convert`: each spells a QuantTable and reads one back as far as it carries it.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "deploy/deploy_model.h"

namespace qforge::deploy::formats {

struct TableFormat {
  std::string name;         // "tensorrt_cache"
  std::string description;  // one line for --help and errors
  std::function<std::string(const QuantTable&)> write;
  std::function<QuantTable(const std::string& text, const std::string& where)> parse;
};

const std::vector<TableFormat>& tableFormats();
// Throws naming the known formats (and why NNIE/STPU are not among them).
const TableFormat& tableFormat(const std::string& name);

}  // namespace qforge::deploy::formats
