// File helpers shared by every writer: nothing half-written ever appears under the final name.
#pragma once

#include <string>

namespace qforge {

// Reads a whole file; throws qforge::Error naming the path and the OS reason when it cannot.
std::string readFile(const std::string& path);

// Writes `content` to a temporary file beside `path`, then renames it over `path`.
void writeFileAtomically(const std::string& path, const std::string& content);

}  // namespace qforge
