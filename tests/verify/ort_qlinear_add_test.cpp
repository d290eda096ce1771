// com.microsoft QLinearAdd in ONNX Runtime itself against the emulation, on every pair of uint8
// inputs, with the scales and zero points of a ViT residual Add where ORT's fixed part
// c_zp - (ra * a_zp + rb * b_zp) is computed with one fused multiply-add (the compiler contracts
// MLAS's C++ expression): the unfused form, computed here in closed form, lands one level off on
// some pairs.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include <ATen/ExpandUtils.h>

#include "exec/executor.h"
#include "exec/ort_emulation.h"
#include "ir/onnx_import.h"
#include "support/onnx_builder.h"
#include "support/ort_dir.h"
#include "verify/ort_runner.h"

namespace qforge::testing {
namespace {

const float a_scale = 0.01935313269495964f, b_scale = 0.01307358592748642f,
            c_scale = 0.024832624942064285f;
const int64_t a_zp = 140, b_zp = 126, c_zp = 121;

// c = QLinearAdd(a, b) with the scales above, in ORT and in the emulation.
std::pair<at::Tensor, at::Tensor> runBoth(const at::Tensor& a, const at::Tensor& b) {
  constexpr int32_t kU8 = onnx::TensorProto::UINT8;
  OnnxBuilder builder;
  auto* domain = builder.model().add_opset_import();
  domain->set_domain("com.microsoft");
  domain->set_version(1);
  const std::vector<int64_t> out = at::infer_size(a.sizes(), b.sizes());
  builder.input("a", kU8, a.sizes().vec()).input("b", kU8, b.sizes().vec()).output("c", kU8, out);
  auto scalar = [](double v, at::ScalarType t) { return at::scalar_tensor(v, t); };
  builder.initializer("as", scalar(a_scale, at::kFloat)).initializer("az", scalar(a_zp, at::kByte));
  builder.initializer("bs", scalar(b_scale, at::kFloat)).initializer("bz", scalar(b_zp, at::kByte));
  builder.initializer("cs", scalar(c_scale, at::kFloat)).initializer("cz", scalar(c_zp, at::kByte));
  builder.node("QLinearAdd", {"a", "as", "az", "b", "bs", "bz", "cs", "cz"}, {"c"})
      .set_domain("com.microsoft");
  const std::string model = makeTempDir("ort-qladd") + "/model.onnx";
  builder.save(model);

  verify::OrtRunnerOptions options;
  options.ort_dir = testOrtDir();
  const at::Tensor ort = verify::OrtRunner(options).run(model, {{"a", a}, {"b", b}}).at("c");
  Graph g = importOnnxFile(model);
  const at::Tensor emulated =
      Executor(g, {}, ortEmulationRegistry()).run({{"a", a}, {"b", b}}).at("c");
  return {ort, emulated};
}

TEST(OrtQLinearAddLive, EveryUint8PairMatchesOnnxRuntimeWithAFusedFixedPart) {
  const at::Tensor grid = at::arange(256, at::kInt);
  const at::Tensor a = grid.repeat_interleave(256).to(at::kByte).reshape({1, -1});
  const at::Tensor b = grid.repeat({256}).to(at::kByte).reshape({1, -1});
  const auto [ort, emulated] = runBoth(a, b);
  EXPECT_TRUE(at::equal(emulated, ort)) << emulated.ne(ort).sum().item<int64_t>() << " differ";

  // The same arithmetic with the two zero-point products rounded separately.
  const float ra = a_scale / c_scale, rb = b_scale / c_scale;
  const float fixed =
      static_cast<float>(c_zp) - (ra * static_cast<float>(a_zp) + rb * static_cast<float>(b_zp));
  int64_t unfused_off = 0;
  const uint8_t* pa = a.data_ptr<uint8_t>();
  const uint8_t* pb = b.data_ptr<uint8_t>();
  const uint8_t* po = ort.contiguous().data_ptr<uint8_t>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    const float t = std::fmaf(pa[i], ra, std::fmaf(pb[i], rb, fixed));
    const auto q = std::min<int64_t>(255, std::max<int64_t>(0, std::nearbyint(t)));
    unfused_off += q != po[i];
  }
  EXPECT_GT(unfused_off, 0) << "these scales no longer tell the two forms apart";
}

// One operand broadcast along the innermost axis: MLAS folds it into the fixed part first.
TEST(OrtQLinearAddLive, ABroadcastOperandMatchesOnnxRuntimeOnEveryPair) {
  const at::Tensor grid = at::arange(256, at::kInt).to(at::kByte);
  const at::Tensor rows = grid.reshape({1, 256}).expand({256, 256}).contiguous();
  const at::Tensor column = grid.reshape({256, 1});
  for (bool scalar_a : {false, true}) {
    SCOPED_TRACE(scalar_a ? "A broadcast" : "B broadcast");
    const auto [ort, emulated] = scalar_a ? runBoth(column, rows) : runBoth(rows, column);
    EXPECT_TRUE(at::equal(emulated, ort)) << emulated.ne(ort).sum().item<int64_t>() << " differ";
  }
}

}  // namespace
}  // namespace qforge::testing
