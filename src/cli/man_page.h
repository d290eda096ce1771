// Man pages in troff (man(7) macros), made from the CLI11 definitions of qforge and its commands
// (so a page lists exactly the options the binary takes, with their types and defaults) and from
// the examples and topics of `qforge help` (help_topics.h).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

namespace qforge::cli {

// qforge(1): the commands, the help topics, exit status and environment.
std::string manPage(const CLI::App& app);
// qforge-COMMAND(1) for `command`, a subcommand of `app`.
std::string manPage(const CLI::App& app, const CLI::App& command);

}  // namespace qforge::cli
