#include "deploy/formats/vitis.h"

#include <gtest/gtest.h>

#include "deploy/formats/format_tables.h"

namespace qforge::deploy::formats {
namespace {

using testing::expectErrorWith;
using testing::tableOf;

TEST(VitisFormat, GoldenAndRoundTrip) {
  const QuantTable t =
      tableOf({testing::encoding("x", TensorRole::Activation, -128, 127, {0.0078125}, {0}),
               testing::encoding("w", TensorRole::Weight, -128, 127, {0.5}, {0})});
  const std::string expected = R"({
    "vitis": {
        "x": {
            "scale": 0.0078125
        },
        "w": {
            "scale": 0.5
        }
    }
}
)";
  EXPECT_EQ(vitisScales(t), expected);
  const QuantTable back = parseVitisScales(expected, "v.json");
  ASSERT_EQ(back.tensors.size(), 2u);
  testing::expectSameEncoding(back.tensors[0], t.tensors[0]);
  EXPECT_TRUE(back.tensors[0].power_of_two);
  // The file does not say which entries are weights.
  EXPECT_EQ(back.tensors[1].role, TensorRole::Activation);
  EXPECT_EQ(back.tensors[1].scale, t.tensors[1].scale);
}

TEST(VitisFormat, Refusals) {
  expectErrorWith([] { vitisScales(tableOf({testing::perChannelWeight("w")})); },
                  {"'w'", "per channel"});
  expectErrorWith([] { vitisScales(tableOf({testing::symmetricActivation("x", 0.3)})); },
                  {"'x'", "power-of-two"});
  expectErrorWith([] { vitisScales(tableOf({testing::asymmetricActivation("y")})); },
                  {"'y'", "zero point 16"});
}

TEST(VitisFormat, MalformedFilesNameKey) {
  expectErrorWith([] { parseVitisScales(R"({"vitis": {"x": {"scale": 0.3}}})", "v.json"); },
                  {"v.json", "vitis.x.scale", "power of two"});
  expectErrorWith([] { parseVitisScales(R"({"vitis": {"x": {}}})", "v.json"); },
                  {"v.json", "vitis.x.scale", "missing"});
  expectErrorWith([] { parseVitisScales(R"({"vitis": []})", "v.json"); },
                  {"v.json", "'vitis'", "object"});
}

}  // namespace
}  // namespace qforge::deploy::formats
