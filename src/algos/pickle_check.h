// libtorch 1.13's Unpickler trusts the pickle it reads: a 4-byte length allocates that many bytes
// before reading them, a memo index grows its memo table to that index, and a DICT or SETITEMS
// with an odd number of stack items reads past the stack. A damaged or hostile QAT checkpoint of a
// few kilobytes made it ask for 4 GiB (found by fuzzing, issue #22). This walks the pickle first,
// with the same opcodes and the same stack effects, and refuses what the Unpickler would mishandle.
#pragma once

#include <cstddef>
#include <string>

namespace qforge::algos {

// Throws qforge::Error naming `what` and the byte offset when the pickle (protocol 2, the opcodes
// torch::jit::pickle_save writes) has a length past its end, a memo index out of order, an opcode
// libtorch's Unpickler does not read, or a stack or mark that its opcodes would underflow.
void checkTorchPickle(const char* data, size_t size, const std::string& what);

}  // namespace qforge::algos
