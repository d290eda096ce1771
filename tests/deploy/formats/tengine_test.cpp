#include "deploy/formats/tengine.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "deploy/formats/format_tables.h"

namespace qforge::deploy::formats {
namespace {

using testing::expectErrorWith;
using testing::tableOf;

TEST(TengineFormat, GoldenAndRoundTrip) {
  const QuantTable t = tableOf({testing::asymmetricActivation("y"), testing::perChannelWeight("w"),
                                testing::asymmetricActivation("z")});
  // "tensor scale zero_point", activations only; the scale is the step, not its reciprocal.
  const std::string expected = "y 0.0625 16\nz 0.0625 16\n";
  EXPECT_EQ(tengineScales(t), expected);
  const QuantTable back = parseTengineScales(expected, "m.scale");
  ASSERT_EQ(back.tensors.size(), 2u);
  testing::expectSameEncoding(back.tensors[0], t.tensors[0]);
  testing::expectSameEncoding(back.tensors[1], t.tensors[2]);
}

TEST(TengineFormat, SignedGridIsShiftedOntoUint8) {
  // [-127, 127] with zero point 0 is [0, 254] with zero point 127: same real values.
  EXPECT_EQ(tengineScales(tableOf({testing::symmetricActivation("x")})), "x 0.0078125 127\n");
}

TEST(TengineFormat, FusedConvOutputsRepeatTheRange) {
  // in -> Conv -> c -> Relu -> r -> Conv -> c2 -> Clip(0, 6) -> r6 -> Flatten -> f -> Gemm -> o
  Graph g;
  Value* in = g.addValue("in");
  g.addInput(in);
  Value* w = g.addInitializer("w", at::ones({2, 1, 1, 1}));
  Node* conv = g.addNode("Conv", {in, w}, {"c"}, "conv");
  Node* relu = g.addNode("Relu", {conv->output(0)}, {"r"}, "relu");
  Node* conv2 = g.addNode("Conv", {relu->output(0), w}, {"c2"}, "conv2");
  Value* lo = g.addInitializer("lo", at::zeros({}));
  Value* hi = g.addInitializer("hi", at::full({}, 6.0));
  Node* clip = g.addNode("Clip", {conv2->output(0), lo, hi}, {"r6"}, "relu6");
  Node* flatten = g.addNode("Flatten", {clip->output(0)}, {"f"}, "flatten");
  Value* fc = g.addInitializer("fc", at::ones({3, 2}));
  Node* gemm = g.addNode("Gemm", {flatten->output(0), fc}, {"o"}, "fc");
  g.addOutput(gemm->output(0));
  QuantTable t = tableOf({testing::asymmetricActivation("r"), testing::asymmetricActivation("f")});
  t.tensors[1].zero_point = {0};
  EXPECT_EQ(tengineScales(t, &g),
            "r 0.0625 16\n"
            "f 0.0625 0\n"
            "c 0.0625 16\n"
            "r6 0.0625 0\n");
}

TEST(TengineFormat, RefusalsAndMalformedLines) {
  TensorEncoding wide = testing::asymmetricActivation("a");
  wide.bits = 16;
  wide.qmax = 65535;
  expectErrorWith([&] { tengineScales(tableOf({wide})); }, {"'a'", "16-bit"});
  expectErrorWith([] { parseTengineScales("a 0.5 3\nb 0.5\n", "m.scale"); }, {"m.scale:2"});
  expectErrorWith([] { parseTengineScales("a 0.5x 3\n", "m.scale"); }, {"m.scale:1", "'a'"});
  expectErrorWith([] { parseTengineScales("a 0.5 300\n", "m.scale"); },
                  {"m.scale:1", "'a'", "0..255"});
}

}  // namespace
}  // namespace qforge::deploy::formats
