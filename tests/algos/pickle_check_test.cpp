// The pickle walk in front of libtorch's Unpickler: what torch::jit::pickle_save writes passes,
// whatever would make the Unpickler allocate from a declared length, grow its memo table past its
// entries or read past its stack is refused with the byte offset.
#include "algos/pickle_check.h"

#include <ATen/ATen.h>
#include <ATen/core/Dict.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <string>
#include <vector>

#include "support/checks.h"

namespace qforge::testing {
namespace {

std::string walkError(const std::string& pickle) {
  return errorOf([&] { algos::checkTorchPickle(pickle.data(), pickle.size(), "data.pkl"); });
}

// Pickled by libtorch's own Pickler (no tensors: those are the checkpoint tests').
std::string torchPickle(const c10::IValue& value) {
  const std::vector<char> bytes = torch::jit::pickle(value);
  return std::string(bytes.begin(), bytes.end());
}

TEST(PickleCheck, WhatTorchsPicklerWritesPasses) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("int", int64_t{1} << 40);
  dict.insert("small", int64_t{7});
  dict.insert("double", 2.5);
  dict.insert("flag", true);
  dict.insert("none", c10::IValue());
  dict.insert("text", std::string(300, 'x'));
  dict.insert("ints", c10::List<int64_t>({1, 2, 3}));
  dict.insert("tuple", c10::ivalue::Tuple::create({c10::IValue(1), c10::IValue(2.0),
                                                   c10::IValue(std::string("a")), c10::IValue()}));
  // More than 256 memoized strings: the memo indices go past one byte (LONG_BINPUT, LONG_BINGET).
  c10::impl::GenericDict many(c10::StringType::get(), c10::StringType::get());
  for (int i = 0; i < 300; ++i)
    many.insert("key" + std::to_string(i), std::string("value"));
  dict.insert("many", many);
  const std::string pickle = torchPickle(dict);
  ASSERT_NE(pickle.find('r'), std::string::npos);
  EXPECT_EQ(walkError(pickle), "(no error)");
  // The Unpickler agrees that this pickle is whole.
  EXPECT_EQ(torch::jit::unpickle(pickle.data(), pickle.size()).toGenericDict().size(), dict.size());
}

// Hand-written pickles (protocol 2, opcodes from Python's pickletools), each one defect.
TEST(PickleCheck, DeclaredLengthsPastTheEndAreRefused) {
  // BINUNICODE of 0xFFFFFFFF bytes followed by 3: the Unpickler reserved 4 GiB before reading.
  const std::string error =
      walkError(std::string("\x80\x02X\xff\xff\xff\xff"
                            "abc.",
                            11));
  EXPECT_NE(error.find("declares 4294967295 bytes where 4 are left"), std::string::npos) << error;
  EXPECT_NE(error.find("byte 2"), std::string::npos) << error;
  // Without its STOP, and whole.
  EXPECT_NE(walkError(std::string("\x80\x02X\x02\x00\x00\x00"
                                  "ab",
                                  9))
                .find("ends in the middle"),
            std::string::npos);
  EXPECT_EQ(walkError(std::string("\x80\x02X\x02\x00\x00\x00"
                                  "ab.",
                                  10)),
            "(no error)");
  EXPECT_NE(walkError(std::string("\x80\x02J\x01\x00", 5)).find("ends in the middle of an opcode"),
            std::string::npos);
  EXPECT_NE(walkError(std::string("\x80\x02\x8a\x04\x01\x02\x03\x04.", 9)).find("not 8 bytes"),
            std::string::npos);
  EXPECT_NE(walkError(std::string("\x80\x02"
                                  "ctorch\nFloatStorage",
                                  20))
                .find("end of line"),
            std::string::npos);
}

TEST(PickleCheck, MemoIndicesOutOfOrderAreRefused) {
  // LONG_BINPUT 0xFF000000 on an empty memo: the Unpickler grew its table to 2^32 entries.
  EXPECT_NE(walkError(std::string("\x80\x02N"
                                  "r\x00\x00\x00\xff.",
                                  9))
                .find("memoizes at index 4278190080 after 0 entries"),
            std::string::npos);
  EXPECT_EQ(walkError(std::string("\x80\x02N"
                                  "q\x00N"
                                  "q\x01"
                                  "h\x00"
                                  "q\x00.",
                                  13)),
            "(no error)");
  EXPECT_NE(walkError(std::string("\x80\x02"
                                  "h\x00.",
                                  5))
                .find("reads memo entry 0 of 0"),
            std::string::npos);
  EXPECT_NE(walkError(std::string("\x80\x02"
                                  "q\x00.",
                                  5))
                .find("takes 1 value from a stack of 0"),
            std::string::npos);
}

TEST(PickleCheck, StackAndMarkUnderflowsAreRefused) {
  // A dictionary with a key and no value: DICT read one IValue past the stack.
  EXPECT_NE(walkError(std::string("\x80\x02(K\x01"
                                  "d.",
                                  7))
                .find("key without its value"),
            std::string::npos);
  EXPECT_EQ(walkError(std::string("\x80\x02(K\x01K\x02"
                                  "d.",
                                  9)),
            "(no error)");
  EXPECT_NE(walkError(std::string("\x80\x02}(K\x01u.", 8)).find("key without its value"),
            std::string::npos);
  EXPECT_NE(walkError(std::string("\x80\x02(K\x01K\x02u.", 9)).find("no dictionary below"),
            std::string::npos);
  EXPECT_NE(walkError(std::string("\x80\x02K\x01t.", 6)).find("mark that was not set"),
            std::string::npos);
  EXPECT_NE(walkError(std::string("\x80\x02(e.", 5)).find("no list below"), std::string::npos);
  EXPECT_NE(
      walkError(std::string("\x80\x02K\x01\x87.", 6)).find("takes 3 values from a stack of 1"),
      std::string::npos);
  EXPECT_NE(walkError(std::string("\x80\x02}K\x01s.", 7)).find("takes 3 values"),
            std::string::npos);
  EXPECT_NE(walkError(std::string("\x80\x02K\x01R.", 6)).find("takes 2 values"), std::string::npos);
}

TEST(PickleCheck, OtherProtocolsAndOpcodesAreRefused) {
  EXPECT_NE(walkError("").find("ends in the middle"), std::string::npos);
  EXPECT_NE(walkError(std::string("\x80\x03N.", 4)).find("not pickle protocol 2"),
            std::string::npos);
  EXPECT_NE(walkError("N.").find("does not start with a pickle protocol opcode"),
            std::string::npos);
  // UNICODE ('V', protocol 0): Python writes it, libtorch's Unpickler does not read it.
  EXPECT_NE(walkError(std::string("\x80\x02Vabc\n.", 8)).find("opcode 86"), std::string::npos);
}

}  // namespace
}  // namespace qforge::testing
