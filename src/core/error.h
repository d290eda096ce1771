// The one error type qforge throws. It carries context (file, pass, node, tensor) so the CLI can
// print a single line that says what is wrong, where, and what to do.
#pragma once

#include <stdexcept>
#include <string>

namespace qforge {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}

  // Returns a copy whose message is prefixed with `where` ("model.onnx: node 'conv1' (Conv): ...").
  Error within(const std::string& where) const { return Error(where + ": " + what()); }
};

// Throws qforge::Error with `message` when `condition` is false. Used for input validation, never
// for internal invariants.
inline void require(bool condition, const std::string& message) {
  if (!condition) throw Error(message);
}
// A literal message stays a pointer until the check fails: through the overload above, every
// call on a hot path (a kernel's argument checks, per node and run) built a std::string first.
inline void require(bool condition, const char* message) {
  if (!condition) throw Error(message);
}

// The same for checks on every run of a kernel: `message` is a callable returning the message,
// so nothing is composed unless the check fails (a per-channel check built 2 strings a channel).
template <typename MakeMessage>
inline void requireLazily(bool condition, MakeMessage&& message) {
  if (!condition) throw Error(message());
}

}  // namespace qforge
