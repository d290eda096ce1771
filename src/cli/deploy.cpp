// `qforge deploy PREPARED_DIR --out DIR`: the files a backend's toolchain takes, from a prepared
// model saved by `qforge quantize` (see deploy/deploy.h for the steps).
#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "cli/json_report.h"
#include "deploy/deploy.h"
#include "passes/prepared_io.h"

namespace qforge::cli {

namespace {

struct DeployOptions {
  std::string prepared;
  std::string out;
  bool json = false;
};

int runDeploy(const DeployOptions& o) {
  auto model = passes::loadPreparedModel(o.prepared);
  const deploy::DeployResult result = deploy::deployPreparedModel(*model, o.out);
  if (o.json) {
    std::cout << jsonReportText(nlohmann::json{
        {"backend", model->backend().name}, {"files", result.files}, {"notes", result.notes}});
    return 0;
  }
  std::cout << "backend    " << model->backend().name << " (format "
            << model->backend().deploy_format << ")\n";
  std::cout << "tensors    " << result.manifest["tensors"].size() << " quantized\n";
  for (const std::string& f : result.files)
    std::cout << "wrote      " << f << "\n";
  for (const std::string& n : result.notes)
    std::cout << "note       " << n << "\n";
  return 0;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> addDeployCommand(CLI::App& app) {
  auto o = std::make_shared<DeployOptions>();
  CLI::App* sub = app.add_subcommand(
      "deploy", "Write a prepared model's deploy files: QDQ and QOperator ONNX, backend format");
  sub->add_option("prepared", o->prepared, "Directory written by `qforge quantize --out`")
      ->type_name(value_type::kDir)
      ->required();
  sub->add_option("--out", o->out, "Output directory")->type_name(value_type::kDir)->required();
  sub->add_flag("--json", o->json, "Print the result as JSON");
  return {sub, [o] { return runDeploy(*o); }};
}

}  // namespace qforge::cli
