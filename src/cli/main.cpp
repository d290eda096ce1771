// qforge command-line entry point: parses arguments, dispatches to a subcommand, and maps every
// error to one line on stderr and a non-zero exit code.
#include <CLI/CLI.hpp>

#include <iostream>
#include <string>

#include "cli/commands.h"
#include "core/allocator.h"
#include "core/error.h"
#include "core/threads.h"
#include "core/utf8.h"

int main(int argc, char** argv) {
  CLI::App app{"qforge: hardware-aware quantization of ONNX models", "qforge"};
  app.set_version_flag("--version", std::string("qforge ") + QFORGE_VERSION);
  app.require_subcommand(1);
  qforge::cli::CommandTable commands = qforge::cli::registerCommands(app);
  const std::string command_error = qforge::cli::commandWordError(app, argc, argv);
  if (!command_error.empty()) {
    std::cerr << "qforge: error: " << command_error << "\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" that exit 0; the rest are usage errors: one line, exit 2,
    // like every other bad input.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "qforge: error: " << qforge::printable(e.what()) << "; see `"
              << qforge::cli::helpCommandFor(app) << "`\n";
    return 2;
  }
  try {
    qforge::configureThreads();
    qforge::configureAllocator();
    return qforge::cli::runSelected(app, commands);
  } catch (const qforge::Error& e) {
    // Messages quote names and paths from files: escaped, they cannot garble a terminal.
    std::cerr << "qforge: error: " << qforge::printable(e.what()) << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::string what = e.what();
    std::cerr << "qforge: internal error: " << qforge::printable(what.substr(0, what.find('\n')))
              << " (please report this with the command you ran)\n";
    return 3;
  }
}
