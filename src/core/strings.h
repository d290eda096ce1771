// Small string helpers every layer's messages and file-name checks use.
#pragma once

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

namespace qforge {

// "a, b, c" for error messages that list names.
inline std::string join(const std::vector<std::string>& items,
                        const std::string& separator = ", ") {
  std::string out;
  for (const auto& item : items)
    out += (out.empty() ? "" : separator) + item;
  return out;
}

inline std::string toLower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

inline bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace qforge
