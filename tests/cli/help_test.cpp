// `qforge help`: the list of commands and topics, a command's help with examples, a topic, and
// an unknown topic.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "support/cli_runner.h"

namespace qforge {
namespace {

using testing::runCli;
using testing::runCliStreams;

const std::vector<std::string>& kCommands = testing::kCliCommands;
const std::vector<std::string> kTopics = {"data", "backends", "config", "algorithms"};

// The line of `text` that starts with `prefix`, or "".
std::string lineStarting(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

TEST(HelpTest, ListsEveryCommandAndTopicOnALineOfItsOwn) {
  const testing::CliResult r = runCli("help");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  for (const std::vector<std::string>& names : {kCommands, kTopics}) {
    for (const std::string& name : names) {
      const std::string line = lineStarting(r.out, "  " + name + " ");
      EXPECT_FALSE(line.empty()) << name << " missing from:\n" << r.out;
      EXPECT_GT(line.size(), 14u) << "no description: " << line;
    }
  }
  EXPECT_LT(r.out.find("Commands:"), r.out.find("Topics:"));
}

TEST(HelpTest, ACommandsHelpIsItsDashDashHelpThenExamples) {
  for (const std::string& command : kCommands) {
    const testing::CliResult help = runCli("help " + command);
    const testing::CliResult dash = runCli(command + " --help");
    ASSERT_EQ(help.exit_code, 0) << help.out;
    ASSERT_EQ(dash.exit_code, 0) << dash.out;
    std::string options = dash.out;
    while (!options.empty() && options.back() == '\n')
      options.pop_back();
    EXPECT_EQ(help.out.rfind(options + "\n\nExamples:\n  # ", 0), 0u) << command << ":\n"
                                                                      << help.out;
    EXPECT_NE(help.out.find("qforge " + command, help.out.find("Examples:")), std::string::npos)
        << command << " has no example of itself:\n"
        << help.out;
  }
}

TEST(HelpTest, TopicsPrintTheirText) {
  for (const auto& [topic, expect] :
       std::vector<std::pair<std::string, std::string>>{{"data", "random:normal"},
                                                        {"backends", "\"extends\""},
                                                        {"config", "name_regex"},
                                                        {"algorithms", "adaround"}}) {
    const testing::CliStreams r = runCliStreams("help " + topic);
    EXPECT_EQ(r.exit_code, 0) << topic << ": " << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_NE(r.out.find(expect), std::string::npos) << topic << ":\n" << r.out;
    // Fits a terminal.
    std::istringstream lines(r.out);
    std::string line;
    while (std::getline(lines, line))
      EXPECT_LE(line.size(), 79u) << topic << ": " << line;
  }
}

TEST(HelpTest, AnUnknownTopicIsOneLineOnStderrListingTheTopics) {
  const testing::CliStreams r = runCliStreams("help frobnicate");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(
      r.err,
      "qforge: error: unknown help topic 'frobnicate'; topics: inspect, run, eval, "
      "quantize, qat, deploy, verify, analyze, convert, help, completion, data, backends, config, "
      "algorithms\n");
}

}  // namespace
}  // namespace qforge
