// A float weight between quantized values: ONNX Runtime (WeightBiasQuantization, every level
// but disabled) quantizes it to int8 per tensor itself, and a float bias to int32, so the QDQ
// file computes otherwise than its graph says. ortQuantizedWeights gives the values ORT computes
// with; ORT itself is the reference: the file with those values, run unoptimized, is ORT's
// optimized run of the original bit for bit.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

#include "ir/onnx_export.h"
#include "ir/parse.h"
#include "support/onnx_builder.h"
#include "support/onnx_validity.h"
#include "verify/deployed_parameters.h"

namespace qforge::testing {
namespace {

// x (quantized) -> ConvTranspose with float weight and bias -> Relu -> QuantizeLinear.
// `reader` adds a second reader of the ConvTranspose's output, `dq_weight` dequantizes the
// weight from int8 instead.
Graph upsampler(bool second_reader = false, bool dq_weight = false) {
  const std::string weight = dq_weight ? R"(
    init %wq: int8[3,4,2,2]
    init %sw: float32[] = {0.01}
    %w = DequantizeLinear(%wq, %sw)  # w_dq
  )"
                                       : "init %w: float32[3,4,2,2]\n";
  Graph g = parseGraph(std::string(R"(
    graph upsampler
    opset "" 13
    input %x: float32[1,3,5,6]
    init %b: float32[4]
    init %sx: float32[] = {0.03}
    init %zx: uint8[] = {120}
    init %sy: float32[] = {0.05}
    init %zy: uint8[] = {10}
    )") + weight + R"(
    %xq = QuantizeLinear(%x, %sx, %zx)  # x_q
    %xd = DequantizeLinear(%xq, %sx, %zx)  # x_dq
    %c = ConvTranspose(%xd, %w, %b)  # up <strides = [2, 2]>
    %r = Relu(%c)  # relu
    %y = QuantizeLinear(%r, %sy, %zy)  # y_q
    %out = DequantizeLinear(%y, %sy, %zy)  # y_dq
    output %out: float32[1,4,10,12]
  )" + (second_reader ? "%n = Neg(%c)  # neg\noutput %n: float32[1,4,10,12]\n" : ""));
  at::manual_seed(3);
  if (!dq_weight) g.findValue("w")->setInitializer(at::randn({3, 4, 2, 2}) * 0.4 + 0.05);
  if (dq_weight)
    g.findValue("wq")->setInitializer(at::randint(-90, 90, {3, 4, 2, 2}).to(at::kChar));
  g.findValue("b")->setInitializer(at::randn({4}) * 0.3);
  return g;
}

TEST(OrtWeightQuantization, AFloatWeightBetweenQuantizedValuesIsOnTheInt8Grid) {
  const Graph g = upsampler();
  const TensorMap values = verify::ortQuantizedWeights(g);
  ASSERT_EQ(values.count("w"), 1u);
  ASSERT_EQ(values.count("b"), 1u);
  // 255 steps over [min(w, 0), max(w, 0)]: every value a whole number of steps from the zero
  // point, and within half a step of the float weight.
  const at::Tensor w = g.findValue("w")->initializer();
  const double low = std::min(w.min().item<double>(), 0.0);
  const double high = std::max(w.max().item<double>(), 0.0);
  const double step = (high - low) / 255;
  const at::Tensor q = values.at("w");
  EXPECT_LE((q - w).abs().max().item<double>(), step / 2 + 1e-6);
  const at::Tensor levels = q.to(at::kDouble) / step;
  const at::Tensor offset = levels - levels.round();
  EXPECT_LT((offset - offset.flatten()[0]).abs().max().item<double>(), 1e-3);
  // The bias on s_x * s_w.
  const at::Tensor bias_levels = values.at("b").to(at::kDouble) / (0.03 * step);
  EXPECT_LT((bias_levels - bias_levels.round()).abs().max().item<double>(), 1e-3);
}

TEST(OrtWeightQuantization, OtherFormsAreLeftAlone) {
  // The output read twice: no path of one reader to a QuantizeLinear.
  EXPECT_TRUE(verify::ortQuantizedWeights(upsampler(true)).empty());
  // A dequantized weight keeps its integers.
  EXPECT_EQ(verify::ortQuantizedWeights(upsampler(false, true)).count("w"), 0u);
}

TEST(OrtWeightQuantization, OnnxRuntimeComputesWithThoseValues) {
  if (!ortAvailable("the weight quantization test")) GTEST_SKIP();
  const std::string dir = makeTempDir("ort_weight_q");
  Graph g = upsampler();
  exportOnnxFile(g, dir + "/original.onnx");
  for (auto& [name, value] : verify::ortQuantizedWeights(g))
    g.findValue(name)->setInitializer(value);
  exportOnnxFile(g, dir + "/as_ort.onnx");
  at::manual_seed(4);
  const TensorMap feeds = {{"x", at::randn({1, 3, 5, 6}) * 2}};
  const at::Tensor optimized =
      runInOrt(dir + "/original.onnx", feeds, verify::OrtOptimization::All).at("out");
  const at::Tensor as_written =
      runInOrt(dir + "/original.onnx", feeds, verify::OrtOptimization::Disabled).at("out");
  const at::Tensor with_values =
      runInOrt(dir + "/as_ort.onnx", feeds, verify::OrtOptimization::Disabled).at("out");
  EXPECT_TRUE(at::equal(optimized, with_values)) << (optimized - with_values).abs().max();
  // And the rewrite matters: the graph as written computes otherwise (this says if a future
  // ORT stops quantizing such weights).
  EXPECT_FALSE(at::equal(optimized, as_written));
}

}  // namespace
}  // namespace qforge::testing
