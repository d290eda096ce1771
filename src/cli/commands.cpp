#include "cli/commands.h"

#include "backends/backend_config.h"
#include "core/strings.h"

namespace qforge::cli {

CommandTable registerCommands(CLI::App& app) {
  CommandTable table;
  table.push_back(addConvertCommand(app));
  table.push_back(addEvalCommand(app));
  table.push_back(addInspectCommand(app));
  table.push_back(addRunCommand(app));
  table.push_back(addQuantizeCommand(app));
  table.push_back(addQatCommand(app));
  table.push_back(addDeployCommand(app));
  table.push_back(addVerifyCommand(app));
  return table;
}

int runSelected(const CLI::App& app, const CommandTable& commands) {
  (void)app;
  for (const auto& [sub, run] : commands) {
    if (sub->parsed()) return run();
  }
  return 1;
}

void addBackendOption(CLI::App* command, std::string& backend) {
  command
      ->add_option("--backend", backend,
                   "Built-in backend (" + join(backends::builtinBackendNames()) +
                       ") or a backend .json file")
      ->required();
}

}  // namespace qforge::cli
