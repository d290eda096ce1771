// `qforge completion bash`: the script completes the commands, options, option values and
// positional arguments the binary defines. It runs in a non-interactive bash with COMP_WORDS and
// COMP_CWORD set as readline sets them, and COMPREPLY is what would be offered.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_runner.h"
#include "support/onnx_builder.h"

namespace qforge {
namespace {

using testing::runCli;
using testing::runShell;

// A folder to complete paths in, and the script.
struct Fixture {
  std::string dir;
  std::string script;
};

const Fixture& fixture() {
  static const Fixture f = [] {
    Fixture made;
    made.dir = testing::makeTempDir("completion");
    for (const char* file : {"model.onnx", "my_chip.json", "my_notes.txt", "sfile"})
      std::ofstream(made.dir + "/" + file) << "x";
    std::filesystem::create_directory(made.dir + "/sub");
    made.script = made.dir + "/qforge.bash";
    const testing::CliResult r = runCli("completion bash > " + made.script);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return made;
  }();
  return f;
}

// COMPREPLY for a command line whose last word is the one being completed: its words sorted
// and joined by spaces.
std::string complete(const std::vector<std::string>& words) {
  std::string line =
      "cd '" + fixture().dir + "' && source '" + fixture().script + "' && COMP_WORDS=(";
  for (const std::string& w : words)
    line += " '" + w + "'";
  line += " ) && COMP_CWORD=" + std::to_string(words.size() - 1) +
          " && _qforge && for w in \"${COMPREPLY[@]}\"; do echo \"$w\"; done | sort";
  const std::string file = fixture().dir + "/case.sh";
  std::ofstream(file) << line << "\n";
  const testing::CliResult r = runShell("bash " + file + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  std::string joined;
  std::istringstream lines(r.out);
  std::string word;
  while (std::getline(lines, word))
    joined += (joined.empty() ? "" : " ") + word;
  return joined;
}

TEST(CompletionTest, TheScriptIsValidBash) {
  const testing::CliResult r = runShell("bash -n " + fixture().script + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(runShell("cat " + fixture().script).out.find("complete -F _qforge qforge"),
            std::string::npos);
}

TEST(CompletionTest, CompletesCommandsOptionsAndValues) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"qforge", "qu"}, "quantize"},
      {{"qforge", "c"}, "completion convert"},
      {{"qforge", "--v"}, "--version"},
      {{"qforge", "quantize", "--back"}, "--backend"},
      {{"qforge", "quantize", "--backend", "Tens"}, "TensorRT TensorRT_NLP"},
      {{"qforge", "quantize", "--backend", "=", "Tens"}, "TensorRT TensorRT_NLP"},
      {{"qforge", "qat", "model.onnx", "--backend", "my"}, "my_chip.json"},
      {{"qforge", "help", "ver"}, "verify"},
      {{"qforge", "help", "al"}, "algorithms"},
      {{"qforge", "help", "--man", "qu"}, "quantize"},
      {{"qforge", "help", "quantize", ""}, ""},
      {{"qforge", "inspect", "mo"}, "model.onnx"},
      {{"qforge", "eval", "--json", "mo"}, "model.onnx"},
      {{"qforge", "eval", "--batch", "8", "mo"}, "model.onnx"},
      {{"qforge", "deploy", "model.onnx", "--out", "s"}, "sub"},
      {{"qforge", "quantize", "--config", "s"}, "sfile sub"},
      {{"qforge", "quantize", "model.onnx", "--calib-batches", ""}, ""},
      {{"qforge", "convert", "--from", "aimet"}, "aimet_legacy aimet_v1"},
      {{"qforge", "convert", "--json", "model.onnx", "s"}, "sfile sub"},
      {{"qforge", "completion", ""}, "bash"},
  };
  for (const auto& [words, expected] : cases) {
    std::string line;
    for (const std::string& w : words)
      line += (line.empty() ? "" : " ") + w;
    EXPECT_EQ(complete(words), expected) << "'" << line << "'";
  }
}

// Every option a command's --help lists, and nothing else, completes after a '-'.
TEST(CompletionTest, EveryCommandOffersExactlyTheOptionsOfItsHelp) {
  for (const std::string& command : testing::kCliCommands) {
    std::set<std::string> listed;
    std::istringstream help(runCli(std::string(command) + " --help").out);
    std::string line;
    while (std::getline(help, line)) {
      if (line.rfind("  -", 0) != 0) continue;
      std::istringstream names(line.substr(2, line.find(' ', 2) - 2));
      std::string name;
      while (std::getline(names, name, ','))
        listed.insert(name);
    }
    std::set<std::string> offered;
    std::istringstream words(complete({"qforge", command, "-"}));
    std::string word;
    while (words >> word)
      offered.insert(word);
    EXPECT_EQ(offered, listed) << command;
  }
}

TEST(CompletionTest, AnotherShellIsOneLineExitTwo) {
  const testing::CliStreams r = testing::runCliStreams("completion zsh");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "qforge: error: completion: no script for the shell 'zsh'; shells: bash\n");
}

}  // namespace
}  // namespace qforge
