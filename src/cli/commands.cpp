#include "cli/commands.h"

#include "backends/backend_config.h"
#include "core/strings.h"

namespace qforge::cli {

CommandTable registerCommands(CLI::App& app) {
  // In the order of the work: look at a model, run it, score it, quantize or train it, deploy
  // and verify it; then the tools around it. `qforge --help` and `qforge help` list them so.
  CommandTable table;
  table.push_back(addInspectCommand(app));
  table.push_back(addRunCommand(app));
  table.push_back(addEvalCommand(app));
  table.push_back(addQuantizeCommand(app));
  table.push_back(addQatCommand(app));
  table.push_back(addDeployCommand(app));
  table.push_back(addVerifyCommand(app));
  table.push_back(addAnalyzeCommand(app));
  table.push_back(addConvertCommand(app));
  table.push_back(addHelpCommand(app));
  table.push_back(addCompletionCommand(app));
  for (const auto& [command, run] : table) {
    const std::string& name = command->get_name();
    if (name != "convert" && name != "help" && name != "completion") addLimitOptions(command);
  }
  return table;
}

int runSelected(const CLI::App& app, const CommandTable& commands) {
  (void)app;
  applyLimitOptions();
  for (const auto& [sub, run] : commands) {
    if (sub->parsed()) return run();
  }
  return 1;
}

std::vector<const CLI::App*> commandsOf(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

std::string commandWordError(const CLI::App& app, int argc, const char* const* argv) {
  std::vector<std::string> names;
  for (const CLI::App* command : commandsOf(app))
    names.push_back(command->get_name());
  const std::string known = "commands: " + join(names) + "; see `qforge help`";
  if (argc < 2) return "no command given; " + known;
  // The top level takes only flags (--help, --version), so the first other word is the command.
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (!word.empty() && word[0] == '-') continue;
    for (const std::string& name : names) {
      if (word == name) return "";
    }
    return "unknown command '" + word + "'; " + known;
  }
  return "";
}

std::string helpCommandFor(const CLI::App& app) {
  for (const CLI::App* command : commandsOf(app)) {
    if (command->parsed()) return "qforge " + command->get_name() + " --help";
  }
  return "qforge --help";
}

void addBackendOption(CLI::App* command, std::string& backend) {
  command
      ->add_option("--backend", backend,
                   "Built-in backend (" + join(backends::builtinBackendNames()) +
                       ") or a backend .json file")
      ->type_name(value_type::kBackend)
      ->required();
}

void addSeedOption(CLI::App* command, const std::string& name, int64_t& seed,
                   const std::string& description) {
  const CLI::Validator whole_from_zero(
      [](std::string& text) -> std::string {
        const bool digits = !text.empty() && text.size() <= 18 &&
                            text.find_first_not_of("0123456789") == std::string::npos;
        return digits ? "" : "a seed is a whole number from 0 up, not '" + text + "'";
      },
      "");
  command->add_option(name, seed, description)->type_name("SEED")->check(whole_from_zero);
}

}  // namespace qforge::cli
