#include "deploy/formats/tensorrt.h"

#include <gtest/gtest.h>

#include <cstdint>

#include "deploy/formats/format_support.h"
#include "deploy/formats/format_tables.h"

namespace qforge::deploy::formats {
namespace {

using testing::expectErrorWith;
using testing::tableOf;

QuantTable trtTable() {
  return tableOf({testing::symmetricActivation("x"), testing::perChannelWeight("w"),
                  testing::symmetricActivation("z", 0.25)});
}

TEST(TensorrtFormat, ClipRangesGolden) {
  // MQBench: {"tensorrt": {"blob_range": {name: scale * 127}}}, activations only.
  const std::string expected = R"({
    "tensorrt": {
        "blob_range": {
            "x": 0.9921875,
            "z": 31.75
        }
    }
}
)";
  EXPECT_EQ(tensorrtClipRanges(trtTable()), expected);
}

TEST(TensorrtFormat, CalibrationCacheGolden) {
  // 2^-7 as float32: exponent 127 - 7 = 0x78, mantissa 0 -> 0x3c000000; 0.25 -> 0x3e800000.
  const std::string expected =
      "TRT-8601-EntropyCalibration2\n"
      "x: 3c000000\n"
      "z: 3e800000\n";
  EXPECT_EQ(tensorrtCalibrationCache(trtTable()), expected);
  EXPECT_EQ(tensorrtCalibrationCache(trtTable(), 100).substr(0, 34),
            "TRT-100-EntropyCalibration2\nx: 3c0");
}

TEST(TensorrtFormat, CacheHexMatchesClosedForm) {
  // 1/127 lies in [2^-7, 2^-6): biased exponent 120, mantissa round(2^23 / 127) = 66052.
  const uint32_t expected_bits = (uint32_t{120} << 23) | uint32_t{66052};
  EXPECT_EQ(expected_bits, 0x3C010204u);
  EXPECT_EQ(float32Hex(1.0 / 127.0), "3c010204");
  const QuantTable t = tableOf({testing::symmetricActivation("a", 1.0 / 127.0)});
  EXPECT_EQ(tensorrtCalibrationCache(t), "TRT-8601-EntropyCalibration2\na: 3c010204\n");
}

TEST(TensorrtFormat, ClipRangesRoundTrip) {
  const QuantTable back = parseTensorrtClipRanges(tensorrtClipRanges(trtTable()), "r.json");
  ASSERT_EQ(back.tensors.size(), 2u);
  testing::expectSameEncoding(back.tensors[0], testing::symmetricActivation("x"));
  testing::expectSameEncoding(back.tensors[1], testing::symmetricActivation("z", 0.25));
}

TEST(TensorrtFormat, CacheRoundTrip) {
  const QuantTable back =
      parseTensorrtCalibrationCache(tensorrtCalibrationCache(trtTable()), "c.cache");
  ASSERT_EQ(back.tensors.size(), 2u);
  testing::expectSameEncoding(back.tensors[0], testing::symmetricActivation("x"));
  testing::expectSameEncoding(back.tensors[1], testing::symmetricActivation("z", 0.25));
  // Upper-case hex, CRLF and names with ": " are read too.
  const QuantTable other = parseTensorrtCalibrationCache(
      "TRT-8510-EntropyCalibration2\r\n(Unnamed: 0): 3C010204\r\n", "c.cache");
  ASSERT_EQ(other.tensors.size(), 1u);
  EXPECT_EQ(other.tensors[0].tensor, "(Unnamed: 0)");
  EXPECT_EQ(other.tensors[0].scale[0], static_cast<double>(1.0f / 127.0f));
}

TEST(TensorrtFormat, RefusesAsymmetricAndWideActivations) {
  const QuantTable asym =
      tableOf({testing::symmetricActivation("x"), testing::asymmetricActivation("y")});
  expectErrorWith([&] { tensorrtClipRanges(asym); }, {"'y'", "zero point", "symmetric"});
  expectErrorWith([&] { tensorrtCalibrationCache(asym); }, {"'y'"});
  TensorEncoding wide = testing::symmetricActivation("v");
  wide.bits = 16;
  wide.qmin = -32767;
  wide.qmax = 32767;
  expectErrorWith([&] { tensorrtClipRanges(tableOf({wide})); }, {"'v'", "16-bit"});
  // uint8 with zero point 128 is int8 with zero point 0: accepted.
  TensorEncoding shifted = testing::asymmetricActivation("u");
  shifted.zero_point = {128};
  EXPECT_EQ(tensorrtCalibrationCache(tableOf({shifted})),
            "TRT-8601-EntropyCalibration2\nu: 3d800000\n");
  TensorEncoding log = testing::symmetricActivation("n");
  log.affine = false;
  expectErrorWith([&] { tensorrtClipRanges(tableOf({log})); }, {"'n'", "not affine"});
}

TEST(TensorrtFormat, MalformedFilesNameWhere) {
  expectErrorWith([] { parseTensorrtCalibrationCache("TRT-abc-X\nx: 3c000000\n", "m.cache"); },
                  {"m.cache:1", "header"});
  expectErrorWith(
      [] {
        parseTensorrtCalibrationCache("TRT-8601-EntropyCalibration2\n\nx: 3c0g0000\n", "m.cache");
      },
      {"m.cache:3", "'x'", "hex"});
  expectErrorWith(
      [] { parseTensorrtCalibrationCache("TRT-8601-EntropyCalibration2\nnocolon\n", "m.cache"); },
      {"m.cache:2"});
  expectErrorWith(
      [] {
        parseTensorrtCalibrationCache("TRT-8601-EntropyCalibration2\nx: 00000000\n", "m.cache");
      },
      {"m.cache:2", "positive"});
  expectErrorWith(
      [] { parseTensorrtClipRanges(R"({"tensorrt": {"blob_range": {"x": "a"}}})", "r.json"); },
      {"r.json", "tensorrt.blob_range.x", "number"});
  expectErrorWith([] { parseTensorrtClipRanges(R"({"trt": {}})", "r.json"); },
                  {"r.json", "'tensorrt'", "missing"});
  expectErrorWith([] { parseTensorrtClipRanges("{", "r.json"); }, {"r.json", "not valid JSON"});
  // A name that is not UTF-8 would break the JSON formats it is converted to (issue #22).
  expectErrorWith(
      [] {
        parseTensorrtCalibrationCache("TRT-8601-EntropyCalibration2\nx\xff: 3c000000\n", "m.cache");
      },
      {"m.cache:2", "not UTF-8 text (byte 2 of the line)"});
}

TEST(FormatSupport, PythonFloatSpelling) {
  EXPECT_EQ(pythonFloat(0.5), "0.5");
  EXPECT_EQ(pythonFloat(1.0), "1.0");
  EXPECT_EQ(pythonFloat(-2.5), "-2.5");
  EXPECT_EQ(pythonFloat(0.1), "0.1");
  EXPECT_EQ(pythonFloat(123456.0), "123456.0");
  EXPECT_EQ(pythonFloat(0.0001), "0.0001");
  EXPECT_EQ(pythonFloat(1e-05), "1e-05");
  EXPECT_EQ(pythonFloat(1.5e-07), "1.5e-07");
  EXPECT_EQ(pythonFloat(1e15), "1000000000000000.0");
  EXPECT_EQ(pythonFloat(1e16), "1e+16");
  EXPECT_EQ(pythonFloat(1.0 / 3.0), "0.3333333333333333");
  EXPECT_EQ(pythonFloat(0.0), "0.0");
}

}  // namespace
}  // namespace qforge::deploy::formats
