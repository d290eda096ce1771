// Text from files is printed and written into JSON, both of which need UTF-8: names are checked
// when a model is read, and messages are made printable before they reach a terminal.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace qforge {

// The offset of the first byte of `text` that does not belong to a well-formed UTF-8 sequence
// (overlong forms and surrogates included), or std::string_view::npos when there is none.
size_t invalidUtf8Offset(std::string_view text);

// `text` safe for a terminal: well-formed UTF-8 kept, every other byte and every control
// character but tab and newline written as \xNN.
std::string printable(std::string_view text);
// The same on one line: a name (of a node, value or op) with its newlines escaped as well.
std::string printableName(std::string_view text);

}  // namespace qforge
