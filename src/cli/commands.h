// The qforge subcommands. Each lives in its own file and registers itself here explicitly.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "algos/distributed.h"

namespace qforge::cli {

// A subcommand and the function that runs it once its options are parsed. Returns the exit code.
using CommandTable = std::vector<std::pair<CLI::App*, std::function<int()>>>;

CommandTable registerCommands(CLI::App& app);
int runSelected(const CLI::App& app, const CommandTable& commands);

// The commands in the order they were registered (the order `qforge help` lists them).
std::vector<const CLI::App*> commandsOf(const CLI::App& app);

// "" when argv names a known command (or asks only for --help or --version); otherwise the
// one-line error for a missing or unknown command. CLI11 alone would take an unknown word for a
// stray argument ("A subcommand is required", exit 106) and answer `qforge analyse --help` (a typo)
// with the top-level help.
std::string commandWordError(const CLI::App& app, int argc, const char* const* argv);

// "qforge COMMAND --help" for the command the command line chose ("qforge --help" before one).
std::string helpCommandFor(const CLI::App& app);

// Value type names (`->type_name(...)`) shown in --help and the man pages. The bash completion
// goes by them (completion.cpp): paths for FILE, DIR, PATH and SOURCE, names for BACKEND, FORMAT,
// TOPIC and SHELL, nothing for other types; so an option taking a path declares one of these.
namespace value_type {
inline const std::string kFile = "FILE";        // a file
inline const std::string kDir = "DIR";          // a directory
inline const std::string kPath = "PATH";        // a file or a directory
inline const std::string kSource = "SOURCE";    // a data source (`qforge help data`), often a path
inline const std::string kBackend = "BACKEND";  // a built-in backend's name or a .json file
inline const std::string kFormat = "FORMAT";    // a quantization parameter file format (convert)
inline const std::string kTopic = "TOPIC";      // a command or a help topic
inline const std::string kShell = "SHELL";      // a shell the completion script is written for
}  // namespace value_type

// Whether an option takes a value: flags (--json) do not.
inline bool takesValue(const CLI::Option& opt) {
  return opt.get_expected_max() > 0;
}

// The required --backend option of the commands that prepare a model: a built-in name or a file.
void addBackendOption(CLI::App* command, std::string& backend);

// A shuffle seed option (`--shuffle`, `--calib-shuffle`): a whole number from 0 up, read into
// `seed`, which keeps its negative default ("not shuffled") when the option is absent. A bad
// value is refused in one line naming the option.
void addSeedOption(CLI::App* command, const std::string& name, int64_t& seed,
                   const std::string& description);

// --world-size, --rank, --master and --timeout of the commands that run data parallel over c10d
// (qat, quantize); `together` says what the processes do together ("training").
void addDistributedOptions(CLI::App* command, algos::DistributedOptions& options,
                           const std::string& together);

// The resource-limit flags (limit_options.cpp) on a command that reads models, and applying what
// they said (after parsing; throws Error for a bad size).
void addLimitOptions(CLI::App* command);
void applyLimitOptions();

// One registration function per subcommand file.
std::pair<CLI::App*, std::function<int()>> addConvertCommand(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> addEvalCommand(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> addInspectCommand(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> addRunCommand(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> addQuantizeCommand(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> addDeployCommand(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> addVerifyCommand(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> addAnalyzeCommand(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> addQatCommand(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> addHelpCommand(CLI::App& app);
std::pair<CLI::App*, std::function<int()>> addCompletionCommand(CLI::App& app);

}  // namespace qforge::cli
