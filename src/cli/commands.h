// The qforge subcommands. Each lives in its own file and registers itself here explicitly.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace qforge::cli {

// A subcommand and the function that runs it once its options are parsed. Returns the exit code.
using CommandTable = std::vector<std::pair<CLI::App*, std::function<int()>>>;

CommandTable registerCommands(CLI::App& app);
int runSelected(const CLI::App& app, const CommandTable& commands);

// The required --backend option of the commands that prepare a model: a built-in name or a file.
void addBackendOption(CLI::App* command, std::string& backend);

// One registration function per subcommand file.
std::pair<CLI::App*, std::function<int()>> addConvertCommand(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> addEvalCommand(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> addInspectCommand(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> addRunCommand(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> addQuantizeCommand(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> addDeployCommand(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> addVerifyCommand(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> addQatCommand(CLI::App& app);

}  // namespace qforge::cli
