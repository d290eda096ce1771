// Detector-like models: an input without batch axis ([3, 4] fixed, as torchvision's detectors
// take one [3, 320, 320] image), whose samples of the whole input shape are fed one per run
// through quantize, eval and verify (ONNX Runtime included), its [3, 5] output not taken for
// class scores; and an output whose size depends on the data (NonZero), which verify judges by
// its shape when ONNX Runtime keeps other elements than the simulation.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>

#include "data/npy.h"
#include "ir/onnx_export.h"
#include "ir/onnx_import.h"
#include "support/cli_json.h"
#include "support/cli_runner.h"
#include "support/onnx_builder.h"
#include "support/ort_dir.h"

namespace qforge::testing {
namespace {

// x [3,4] -> MatMul [4,5] -> Relu -> y [3,5]; s = ReduceSum(x) over everything, a scalar that
// only a whole sample gives: three rows of three samples would sum other values.
std::string unbatchedModel(const std::string& dir) {
  OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {3, 4})
      .output("y", onnx::TensorProto::FLOAT, {3, 5})
      .output("s", onnx::TensorProto::FLOAT, {});
  b.initializer("w", at::linspace(-1, 1, 20).reshape({4, 5}));
  b.node("MatMul", {"x", "w"}, {"m"}, "matmul");
  b.node("Relu", {"m"}, {"y"}, "relu");
  addIntAttribute(b.node("ReduceSum", {"x"}, {"s"}, "sum"), "keepdims", 0);
  const std::string path = dir + "/unbatched.onnx";
  b.save(path);
  return path;
}

// Six samples [3, 4]; sample i holds i + 0.01 k for k = 0..11.
std::string samples(const std::string& dir) {
  const std::string folder = dir + "/samples";
  std::filesystem::create_directories(folder);
  for (int i = 0; i < 6; ++i) {
    const at::Tensor x = (at::arange(12, at::kFloat) * 0.01 + i).reshape({3, 4});
    data::writeNpy(folder + "/s" + std::to_string(i) + ".npy", x);
  }
  return "folder:" + folder;
}

TEST(UnbatchedInputCli, SamplesOfTheWholeInputShapeRunOnePerRun) {
  const std::string dir = makeTempDir("unbatched");
  const std::string model = unbatchedModel(dir);
  const std::string data = samples(dir);
  const std::string out = dir + "/q";
  CliResult r = runCli("quantize " + model + " --backend TensorRT --calib " + data +
                       " --calib-batch 4 --calib-batches 2 --out " + out + " --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.out;

  // The float model's outputs, one run per sample: s of sample i is the sum of its 12 values.
  r = runCli("eval " + model + " --data " + data +
             " --metric none --batch 4 --json --dump-outputs " + dir + "/y.npy");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(jsonOf(r)["samples"], 6);
  const at::Tensor y = data::NpyFile(dir + "/y.npy").readAll();
  EXPECT_EQ(y.sizes(),
            (std::vector<int64_t>{18, 5}));  // three rows per run, runs one after another
  const at::Tensor w = at::linspace(-1, 1, 20).reshape({4, 5});
  for (int i = 0; i < 6; ++i) {
    const at::Tensor x = (at::arange(12, at::kFloat) * 0.01 + i).reshape({3, 4});
    EXPECT_TRUE(at::allclose(y.narrow(0, 3 * i, 3), at::relu(x.matmul(w)), 1e-5, 1e-5)) << i;
  }

  // verify: ONNX Runtime runs each sample as the model's whole input, and neither [3,5] per run
  // nor the scalar is scored as class scores.
  r = runCli("verify " + out + " --data " + data + " --batch 4 --json", ortEnv());
  const nlohmann::json j = jsonOf(r);
  EXPECT_EQ(r.exit_code, 0) << j.dump(2);
  EXPECT_EQ(j["samples"], 6);
  EXPECT_EQ(j["one_sample_per_run"], true);
  EXPECT_FALSE(j.contains("fixed_batch"));
  ASSERT_FALSE(j["comparisons"].empty());
  for (const auto& c : j["comparisons"]) {
    for (const auto& o : c["outputs"]) {
      EXPECT_FALSE(o["classifier"].get<bool>()) << o.dump();
      EXPECT_EQ(o["samples"], 6) << o.dump();
    }
  }
  for (const auto& c : j["criteria"])
    EXPECT_NE(c["metric"], "top1_agreement");

  // The text report says so too, and a step of one sample is not rounded up to the input's
  // first dim of 3 (a step of 3 samples).
  r = runCli("verify " + out + " --data " + data + " --limit 2 --batch 1", ortEnv());
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("samples    2 (steps of 1, one per run: the model input has no batch axis"),
            std::string::npos)
      << r.out;
}

// x [N,4] -> MatMul [4,3] -> Greater 0.3 -> NonZero -> z [2, K]: K counts the values above the
// threshold, so it depends on the data and on the MatMul's quantized output.
std::string thresholdModel(const std::string& dir) {
  OnnxBuilder b;
  b.input("x", onnx::TensorProto::FLOAT, {-1, 4}).output("z", onnx::TensorProto::INT64, {2, -1});
  b.initializer("w", at::linspace(-1, 1, 12).reshape({4, 3}));
  b.initializer("t", at::tensor(0.3f));
  b.node("MatMul", {"x", "w"}, {"y"}, "matmul");
  b.node("Greater", {"y", "t"}, {"above"}, "greater");
  b.node("NonZero", {"above"}, {"z"}, "nonzero");
  const std::string path = dir + "/threshold.onnx";
  b.save(path);
  return path;
}

TEST(UnbatchedInputCli, AnOutputWhoseSizeDependsOnTheDataIsJudgedByItsShape) {
  const std::string dir = makeTempDir("unbatched");
  const std::string model = thresholdModel(dir);
  const std::string data = "random:normal,count=16,seed=3";
  const std::string out = dir + "/q";
  CliResult r = runCli("quantize " + model + " --backend ONNXRuntime --calib " + data +
                       " --calib-batch 8 --calib-batches 2 --out " + out + " --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  // The threshold lowered to -1e9 in the QDQ model: every product passes it in ONNX Runtime,
  // fewer in the simulation, and NonZero keeps more.
  Graph g = importOnnxFile(out + "/model.qdq.onnx");
  ASSERT_NE(g.value("t"), nullptr);
  g.value("t")->setInitializer(at::tensor(-1e9f));
  exportOnnxFile(g, out + "/model.qdq.onnx");

  r = runCli("verify " + out + " --data " + data + " --batch 8 --json", ortEnv());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  const nlohmann::json j = jsonOf(r);
  bool judged = false;
  for (const auto& c : j["criteria"]) {
    if (c["metric"] != "shape_mismatches" || c["comparison"] != "qdq model vs simulation") continue;
    judged = true;
    EXPECT_EQ(c["output"], "z");
    EXPECT_EQ(c["value"], 2);  // both steps of 8
    EXPECT_FALSE(c["passed"].get<bool>());
  }
  EXPECT_TRUE(judged) << j.dump(2);
  ASSERT_FALSE(j["failures"].empty());
  EXPECT_NE(j["failures"][0].get<std::string>().find("depends on the data"), std::string::npos)
      << j["failures"].dump(2);
}

}  // namespace
}  // namespace qforge::testing
