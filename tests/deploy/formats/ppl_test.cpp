#include "deploy/formats/ppl.h"

#include <gtest/gtest.h>

#include "deploy/formats/format_tables.h"

namespace qforge::deploy::formats {
namespace {

using testing::expectErrorWith;
using testing::tableOf;

TEST(PplFormat, W8A16Golden) {
  const QuantTable t =
      tableOf({testing::asymmetricActivation("y"), testing::perChannelWeight("w")});
  // step = scale; min/max = (qmin - zp) * step and (qmax - zp) * step; lists per channel.
  const std::string expected = R"({
    "ppl": {
        "y": {
            "step": 0.0625,
            "zero_point": 16,
            "min": -1.0,
            "max": 14.9375,
            "bit": 8,
            "type": "biased"
        },
        "w": {
            "step": [
                0.5,
                0.25
            ],
            "zero_point": [
                0,
                0
            ],
            "min": [
                -64.0,
                -32.0
            ],
            "max": [
                63.5,
                31.75
            ],
            "bit": 8,
            "type": "biased"
        }
    }
}
)";
  EXPECT_EQ(pplParams(t), expected);
  const QuantTable back = parsePplParams(expected, "p.json");
  ASSERT_EQ(back.tensors.size(), 2u);
  testing::expectSameEncoding(back.tensors[0], t.tensors[0]);
  testing::expectSameEncoding(back.tensors[1], t.tensors[1]);
}

TEST(PplFormat, CudaGolden) {
  // One "tensor: amax" line per per-tensor quantized tensor, amax = max(|min|, |max|), written
  // as Python prints floats; per-channel weights are not listed.
  const QuantTable t = tableOf({testing::asymmetricActivation("y"), testing::perChannelWeight("w"),
                                testing::symmetricActivation("x", 0.000000059604644775390625)});
  // 127 * 2^-24, as Python's repr(float) spells it.
  EXPECT_EQ(pplCudaClipRanges(t), "y: 14.9375\nx: 7.569789886474609e-06\n");
}

TEST(PplFormat, CudaRoundTrip) {
  const QuantTable t = tableOf({testing::symmetricActivation("x")});
  const QuantTable back = parsePplCudaClipRanges(pplCudaClipRanges(t), "c.json");
  ASSERT_EQ(back.tensors.size(), 1u);
  testing::expectSameEncoding(back.tensors[0], t.tensors[0]);
}

TEST(PplFormat, MalformedFilesNameWhere) {
  expectErrorWith([] { parsePplParams(R"({"ppl": {"a": {"step": 0.5}}})", "p.json"); },
                  {"p.json", "ppl.a.zero_point", "missing"});
  expectErrorWith(
      [] {
        parsePplParams(
            R"({"ppl": {"a": {"step": 0.5, "zero_point": 0, "min": -1, "max": 1, "bit": 8, "type": "unbiased"}}})",
            "p.json");
      },
      {"p.json", "ppl.a.type"});
  expectErrorWith(
      [] {
        parsePplParams(
            R"({"ppl": {"a": {"step": [0.5, 0.25], "zero_point": [0], "min": [-1, -1], "max": [1, 1], "bit": 8, "type": "biased"}}})",
            "p.json");
      },
      {"p.json", "ppl.a", "same number of channels"});
  expectErrorWith([] { parsePplCudaClipRanges("x: 1.0\ny 2.0\n", "c.json"); }, {"c.json:2"});
  expectErrorWith([] { parsePplCudaClipRanges("x: -1.0\n", "c.json"); },
                  {"c.json:1", "'x'", "positive"});
}

}  // namespace
}  // namespace qforge::deploy::formats
