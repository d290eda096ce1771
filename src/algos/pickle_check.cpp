#include "algos/pickle_check.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace qforge::algos {

namespace {

// Python's pickle opcodes that libtorch 1.13's Unpickler reads (torch/csrc/jit/serialization).
enum Op : uint8_t {
  kMark = '(',
  kStop = '.',
  kBinFloat = 'G',
  kBinInt = 'J',
  kBinInt1 = 'K',
  kBinInt2 = 'M',
  kNone = 'N',
  kBinPersId = 'Q',
  kReduce = 'R',
  kBinUnicode = 'X',
  kAppends = 'e',
  kBuild = 'b',
  kGlobal = 'c',
  kDict = 'd',
  kEmptyDict = '}',
  kBinGet = 'h',
  kLongBinGet = 'j',
  kList = 'l',
  kEmptyList = ']',
  kBinPut = 'q',
  kLongBinPut = 'r',
  kSetItem = 's',
  kTuple = 't',
  kEmptyTuple = ')',
  kSetItems = 'u',
  kProto = 0x80,
  kNewObj = 0x81,
  kTuple1 = 0x85,
  kTuple2 = 0x86,
  kTuple3 = 0x87,
  kNewTrue = 0x88,
  kNewFalse = 0x89,
  kLong1 = 0x8a,
};

class PickleWalk {
 public:
  PickleWalk(const char* data, size_t size, const std::string& what)
      : data_(reinterpret_cast<const uint8_t*>(data)), size_(size), what_(what) {}

  void run() {
    require(take(1) == kProto, "does not start with a pickle protocol opcode");
    require(take(1) == 2, "is not pickle protocol 2");
    while (true) {
      op_at_ = pos_;
      const uint8_t op = static_cast<uint8_t>(take(1));
      if (op == kStop) return;
      step(op);
    }
  }

 private:
  // One opcode: its argument bytes and what it does to the stack and the marks.
  void step(uint8_t op) {
    switch (op) {
      case kEmptyList:
      case kEmptyTuple:
      case kEmptyDict:
      case kNone:
      case kNewTrue:
      case kNewFalse:
        push();
        break;
      case kBinInt1:
        take(1), push();
        break;
      case kBinInt2:
        take(2), push();
        break;
      case kBinInt:
        take(4), push();
        break;
      case kBinFloat:
        take(8), push();
        break;
      case kLong1:
        require(take(1) == 8, "has an integer that is not 8 bytes long");
        take(8), push();
        break;
      case kBinUnicode:
        skip(take(4)), push();
        break;
      case kGlobal:
        line(), line(), push();  // module and name; the Unpickler pushes the global's index
        break;
      case kBinPut:
        put(take(1));
        break;
      case kLongBinPut:
        put(take(4));
        break;
      case kBinGet:
        get(take(1));
        break;
      case kLongBinGet:
        get(take(4));
        break;
      case kMark:
        marks_.push_back(stack_);
        break;
      case kTuple1:
        need(1);
        break;
      case kTuple2:
        need(2), stack_ -= 1;
        break;
      case kTuple3:
        need(3), stack_ -= 2;
        break;
      case kTuple:
      case kList:
        stack_ = popMark() + 1;
        break;
      case kAppends:
        stack_ = popMarkAfterContainer();
        break;
      case kDict:
        stack_ = popPairsMark() + 1;
        break;
      case kSetItems:
        stack_ = popPairsMark();
        require(stack_ > 0, "adds dictionary items with no dictionary below them");
        break;
      case kSetItem:
        need(3), stack_ -= 2;
        break;
      case kNewObj:
        need(1), stack_ -= 1;
        break;
      // The functor index and its argument; every global the Unpickler knows replaces the argument
      // with its result.
      case kReduce:
      case kBuild:
        need(2), stack_ -= 1;
        break;
      case kBinPersId:
        need(1);
        break;
      default:
        fail("has opcode " + std::to_string(op) + ", which libtorch's unpickler does not read");
    }
  }

  // The next `n` bytes (1 to 8) as a little-endian number, refusing a pickle that ends first.
  uint64_t take(size_t n) {
    require(size_ - pos_ >= n, "ends in the middle of an opcode");
    uint64_t value = 0;
    for (size_t i = 0; i < n; ++i)
      value |= uint64_t{data_[pos_ + i]} << (8 * i);
    pos_ += n;
    return value;
  }

  // A declared length of bytes.
  void skip(uint64_t n) {
    require(n <= size_ - pos_, "declares " + std::to_string(n) + " bytes where " +
                                   std::to_string(size_ - pos_) + " are left");
    pos_ += static_cast<size_t>(n);
  }

  void line() {
    const void* end = std::memchr(data_ + pos_, '\n', size_ - pos_);
    require(end != nullptr, "has a global name without its end of line");
    pos_ = static_cast<size_t>(static_cast<const uint8_t*>(end) - data_) + 1;
  }

  void push() { ++stack_; }

  void need(size_t n) {
    require(stack_ >= n, "takes " + std::to_string(n) + (n == 1 ? " value" : " values") +
                             " from a stack of " + std::to_string(stack_));
  }

  // Memo indices are written in order from 0 (torch's Pickler): one past those seen is the next.
  void put(uint64_t id) {
    need(1);
    require(id <= memo_, "memoizes at index " + std::to_string(id) + " after " +
                             std::to_string(memo_) + " entries");
    if (id == memo_) ++memo_;
  }

  void get(uint64_t id) {
    require(id < memo_, "reads memo entry " + std::to_string(id) + " of " + std::to_string(memo_));
    push();
  }

  size_t popMark() {
    require(!marks_.empty(), "closes a mark that was not set");
    const size_t start = marks_.back();
    marks_.pop_back();
    require(start <= stack_, "closes a mark above the stack");
    return start;
  }

  // APPENDS: the list the items go into is below the mark.
  size_t popMarkAfterContainer() {
    const size_t start = popMark();
    require(start > 0, "appends items with no list below them");
    return start;
  }

  // DICT and SETITEMS: key, value, key, value ... above the mark.
  size_t popPairsMark() {
    const size_t start = popMark();
    require((stack_ - start) % 2 == 0, "has a dictionary key without its value");
    return start;
  }

  void require(bool ok, const std::string& problem) {
    if (!ok) fail(problem);
  }

  [[noreturn]] void fail(const std::string& problem) {
    throw Error(what_ + " " + problem + " (opcode at byte " + std::to_string(op_at_) +
                "); it was not written by qforge, or is damaged");
  }

  const uint8_t* data_;
  size_t size_;
  const std::string& what_;
  size_t pos_ = 0;
  size_t op_at_ = 0;
  size_t stack_ = 0;
  size_t memo_ = 0;
  std::vector<size_t> marks_;
};

}  // namespace

void checkTorchPickle(const char* data, size_t size, const std::string& what) {
  PickleWalk(data, size, what).run();
}

}  // namespace qforge::algos
