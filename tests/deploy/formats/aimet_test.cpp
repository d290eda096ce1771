#include "deploy/formats/aimet.h"

#include <gtest/gtest.h>

#include "deploy/formats/format_tables.h"

namespace qforge::deploy::formats {
namespace {

using testing::expectErrorWith;
using testing::tableOf;

QuantTable snpeTable() {
  return tableOf({testing::asymmetricActivation("y"), testing::perChannelWeight("w")});
}

TEST(AimetFormat, LegacyGolden) {
  // offset = round(min / scale) = qmin - zero point: -16 on [0, 255] with zero point 16,
  // -128 for signed symmetric 8-bit.
  const std::string expected = R"({
    "activation_encodings": {
        "y": [
            {
                "bitwidth": 8,
                "dtype": "int",
                "is_symmetric": "False",
                "max": 14.9375,
                "min": -1.0,
                "offset": -16,
                "scale": 0.0625
            }
        ]
    },
    "param_encodings": {
        "w": [
            {
                "bitwidth": 8,
                "dtype": "int",
                "is_symmetric": "True",
                "max": 63.5,
                "min": -64.0,
                "offset": -128,
                "scale": 0.5
            },
            {
                "bitwidth": 8,
                "dtype": "int",
                "is_symmetric": "True",
                "max": 31.75,
                "min": -32.0,
                "offset": -128,
                "scale": 0.25
            }
        ]
    }
}
)";
  EXPECT_EQ(aimetLegacyEncodings(snpeTable()), expected);
}

TEST(AimetFormat, V1Golden) {
  const std::string expected = R"({
    "version": "1.0.0",
    "activation_encodings": [
        {
            "name": "y",
            "dtype": "INT",
            "enc_type": "PER_TENSOR",
            "is_sym": false,
            "bw": 8,
            "scale": [
                0.0625
            ],
            "offset": [
                -16
            ]
        }
    ],
    "param_encodings": [
        {
            "name": "w",
            "dtype": "INT",
            "enc_type": "PER_CHANNEL",
            "is_sym": true,
            "bw": 8,
            "scale": [
                0.5,
                0.25
            ],
            "offset": [
                -128,
                -128
            ]
        }
    ]
}
)";
  EXPECT_EQ(aimetV1Encodings(snpeTable()), expected);
}

TEST(AimetFormat, RoundTripsBothLayouts) {
  for (const QuantTable& back :
       {parseAimetLegacyEncodings(aimetLegacyEncodings(snpeTable()), "a.json"),
        parseAimetV1Encodings(aimetV1Encodings(snpeTable()), "a.encodings")}) {
    ASSERT_EQ(back.tensors.size(), 2u);
    testing::expectSameEncoding(back.tensors[0], testing::asymmetricActivation("y"));
    testing::expectSameEncoding(back.tensors[1], testing::perChannelWeight("w"));
  }
  // Restricted symmetric grids keep their top at 127 in the 1.0.0 layout (no max there).
  const QuantTable restricted = tableOf({testing::symmetricActivation("x")});
  const QuantTable back = parseAimetV1Encodings(aimetV1Encodings(restricted), "a.encodings");
  testing::expectSameEncoding(back.tensors[0], restricted.tensors[0]);
}

TEST(AimetFormat, ReadsMqbenchSnpeRanges) {
  // MQBench writes bitwidth/min/max only; SNPE derives scale and offset from them.
  const QuantTable t = parseAimetLegacyEncodings(
      R"({"activation_encodings": {"y": [{"bitwidth": 8, "min": -1.0, "max": 14.9375}]},
          "param_encodings": {}})",
      "mq.json");
  ASSERT_EQ(t.tensors.size(), 1u);
  testing::expectSameEncoding(t.tensors[0], testing::asymmetricActivation("y"));
}

TEST(AimetFormat, SkipsFloatEntries) {
  const QuantTable t = parseAimetLegacyEncodings(
      R"({"activation_encodings": {"f": [{"bitwidth": 16, "dtype": "float"}]}})", "f.json");
  EXPECT_TRUE(t.tensors.empty());
}

TEST(AimetFormat, MalformedFilesNameKey) {
  expectErrorWith(
      [] {
        parseAimetLegacyEncodings(R"({"activation_encodings": {"y": [{"bitwidth": 8, "max": 1}]}})",
                                  "bad.json");
      },
      {"bad.json", "activation_encodings.y[0].min", "missing"});
  expectErrorWith(
      [] {
        parseAimetLegacyEncodings(
            R"({"activation_encodings": {"y": [{"bitwidth": 8, "min": 0, "max": 1, "is_symmetric": "maybe"}]}})",
            "bad.json");
      },
      {"bad.json", "activation_encodings.y[0].is_symmetric"});
  expectErrorWith(
      [] {
        parseAimetV1Encodings(
            R"({"version": "1.0.0", "param_encodings": [{"name": "w", "dtype": "INT", "enc_type": "PER_TENSOR", "is_sym": true, "bw": 8, "scale": [0.5], "offset": [-128.5]}]})",
            "bad.encodings");
      },
      {"bad.encodings", "param_encodings[0].offset[0]", "integer"});
  // Integral but past int64_t: converting it was undefined behaviour (UBSan, fuzzed, issue #22).
  expectErrorWith(
      [] {
        parseAimetV1Encodings(
            R"({"version": "1.0.0", "param_encodings": [{"name": "w", "dtype": "INT", "enc_type": "PER_TENSOR", "is_sym": true, "bw": 8, "scale": [0.5], "offset": [3.3e114]}]})",
            "far.encodings");
      },
      {"far.encodings", "param_encodings[0].offset[0]", "out of range"});
  expectErrorWith([] { parseAimetV1Encodings(R"({"version": "0.6.1"})", "old.encodings"); },
                  {"old.encodings", "version", "legacy"});
  expectErrorWith(
      [] {
        parseAimetV1Encodings(
            R"({"version": "1.0.0", "activation_encodings": [{"name": "a", "dtype": "INT", "enc_type": "PER_BLOCK", "is_sym": true, "bw": 4, "scale": [1], "offset": [-8]}]})",
            "b.encodings");
      },
      {"b.encodings", "activation_encodings[0].enc_type", "PER_BLOCK"});
}

TEST(AimetFormat, RefusesNonAffineGrids) {
  TensorEncoding log = testing::symmetricActivation("n");
  log.affine = false;
  expectErrorWith([&] { aimetLegacyEncodings(tableOf({log})); }, {"'n'", "not affine"});
}

}  // namespace
}  // namespace qforge::deploy::formats
