// `qforge convert` as a user runs it: a TensorRT calibration cache becomes SNPE encodings with
// the right conventions, and a conversion the target cannot express is refused in one line.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "support/cli_runner.h"
#include "support/onnx_builder.h"

namespace qforge::testing {
namespace {

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ConvertCli, CacheToAimetAndRefusalOfAsymmetricToTensorrt) {
  const std::string dir = makeTempDir("convert");
  // 2^-7 as float32 is 0x3c000000: amax 127 * 2^-7.
  std::ofstream(dir + "/calib.cache") << "TRT-8601-EntropyCalibration2\nx: 3c000000\n";
  CliResult r = runCli("convert --from tensorrt_cache --to aimet_v1 " + dir + "/calib.cache " +
                       dir + "/model.encodings --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["tensors"], 1);
  const nlohmann::json enc = nlohmann::json::parse(readText(dir + "/model.encodings"));
  const nlohmann::json& x = enc["activation_encodings"][0];
  EXPECT_EQ(x["name"], "x");
  EXPECT_EQ(x["is_sym"], true);
  EXPECT_EQ(x["scale"][0], 0.0078125);
  EXPECT_EQ(x["offset"][0], -127);  // qmin - zero point on TensorRT's [-127, 127]

  std::ofstream(dir + "/asym.scale") << "x 0.0078125 128\ny 0.0625 16\n";
  r = runCli("convert --from tengine --to tensorrt_cache " + dir + "/asym.scale " + dir +
             "/out.cache");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_EQ(lineCount(r.out), 1u) << r.out;
  EXPECT_NE(r.out.find("'y'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("zero point 16"), std::string::npos) << r.out;

  r = runCli("convert --from nnie --to tengine " + dir + "/asym.scale " + dir + "/o.scale");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("need the model"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace qforge::testing
