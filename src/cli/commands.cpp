#include "cli/commands.h"

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

}  // namespace qforge::cli
