// Verification as one call, what `qforge verify` runs and what a Python binding calls: the
// deployed models of a directory in ONNX Runtime against qforge's simulation and integer
// emulation on the same data (verify/verify.h), streamed in steps of bounded size.
//
//   pipelines::VerifyPipelineOptions o;
//   o.dir = "out/resnet-trt";
//   o.data = "fashion-mnist:test";
//   o.limit = 1000;
//   nlohmann::json j = pipelines::runVerify(o).json;   // j["passed"]
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "pipelines/model_data.h"
#include "verify/verify.h"

namespace qforge::pipelines {

// The settings, one per `qforge verify` flag; messages about them name the flag.
struct VerifyPipelineOptions {
  std::string dir;       // holds deploy.json (quantize --out, or deploy --out)
  std::string prepared;  // the prepared model's directory when not `dir`
  DataSource data = "fashion-mnist:test";
  int64_t limit = 0;    // samples (0: all)
  int64_t batch = 256;  // samples per step, cut so that one step's inputs stay within 4 MiB
  // Criteria and ONNX Runtime settings; `emulation` is filled in when null.
  verify::VerifyOptions verify;
};

struct VerifyPipelineResult {
  verify::VerifyReport report;
  nlohmann::json json;  // what `qforge verify --json` prints
};

// Throws qforge::Error for a missing directory, bad data or settings; a failed criterion is a
// report with passed == false, not an error.
VerifyPipelineResult runVerify(const VerifyPipelineOptions& options);

}  // namespace qforge::pipelines
