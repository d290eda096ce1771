// The man pages `qforge help --man-dir` writes (what the build installs, cmake/docs.cmake): each
// renders without a warning from groff, fits an 80-column terminal, and lists every option and
// argument its command's --help lists. groff comes with man-db (scripts/install-deps.sh installs
// groff-base where neither is).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_runner.h"
#include "support/onnx_builder.h"

namespace qforge {
namespace {

using testing::runCli;
using testing::runShell;

const std::vector<std::string>& kCommands = testing::kCliCommands;

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The pages, written once for all tests.
const std::string& manDir() {
  static const std::string dir = [] {
    const std::string d = testing::makeTempDir("man");
    const testing::CliResult r = runCli("help --man-dir " + d);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    return d;
  }();
  return dir;
}

// A page as plain text, 78 columns wide (what man uses for an 80-column terminal), without
// overstriking, and with the typographic hyphen and minus groff may print written as '-'.
std::string rendered(const std::string& page) {
  std::string text =
      runShell("groff -man -Tutf8 -rLL=78n -P-cbou " + manDir() + "/" + page + ".1").out;
  for (const std::string dash : {"\u2010", "\u2212"}) {
    for (size_t at; (at = text.find(dash)) != std::string::npos;)
      text.replace(at, dash.size(), "-");
  }
  return text;
}

std::vector<std::string> pages() {
  std::vector<std::string> names = {"qforge"};
  for (const std::string& command : kCommands)
    names.push_back("qforge-" + command);
  return names;
}

TEST(ManPageTest, EveryPageRendersWithoutWarningsWithin80Columns) {
  ASSERT_EQ(runShell("command -v groff").exit_code, 0)
      << "groff is missing: scripts/install-deps.sh installs groff-base";
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(manDir()))
    files += entry.path().extension() == ".1";
  EXPECT_EQ(files, pages().size());
  for (const std::string& page : pages()) {
    const std::string file = manDir() + "/" + page + ".1";
    ASSERT_TRUE(std::filesystem::exists(file)) << file;
    const testing::CliResult warnings = runShell("groff -man -ww -z -Tutf8 " + file + " 2>&1");
    EXPECT_EQ(warnings.exit_code, 0) << page;
    EXPECT_EQ(warnings.out, "") << page;
    const std::string text = rendered(page);
    EXPECT_NE(text.find("NAME"), std::string::npos) << page;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
      // Columns, not bytes: count the UTF-8 lead bytes.
      const size_t columns =
          static_cast<size_t>(std::count_if(line.begin(), line.end(), [](char c) {
            return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
          }));
      EXPECT_LE(columns, 80u) << page << ": " << line;
    }
    // And man itself shows it.
    if (runShell("command -v man").exit_code == 0) {
      const testing::CliResult shown = runShell("MANWIDTH=80 man -l " + file + " 2>/dev/null");
      EXPECT_EQ(shown.exit_code, 0) << page;
      EXPECT_NE(shown.out.find(page == "qforge" ? "QFORGE(1)" : "SYNOPSIS"), std::string::npos)
          << page;
    }
  }
}

// Whether `name` occurs in `text` as a word of its own ("--calib", not "--calib-batches").
bool hasWord(const std::string& text, const std::string& name) {
  const auto part = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-'; };
  for (size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    const size_t end = at + name.size();
    if ((at == 0 || !part(text[at - 1])) && (end == text.size() || !part(text[end]))) return true;
  }
  return false;
}

TEST(ManPageTest, EachPageListsEveryOptionItsHelpLists) {
  for (const std::string& command : kCommands) {
    const std::string page = rendered("qforge-" + command);
    const size_t options = page.find("\nOPTIONS\n");
    ASSERT_NE(options, std::string::npos) << command;
    std::istringstream help(runCli(command + " --help").out);
    std::string line, section;
    size_t listed = 0;
    while (std::getline(help, line)) {
      if (!line.empty() && line[0] != ' ') section = line;
      if (section != "Options:" && section != "Positionals:") continue;
      if (line.rfind("  ", 0) != 0 || line.size() < 3 || line[2] == ' ') continue;
      const std::string names = line.substr(2, line.find(' ', 2) - 2);
      std::istringstream parts(names);
      std::string name;
      while (std::getline(parts, name, ',')) {
        ++listed;
        if (section == "Positionals:") {
          const std::string arguments = page.substr(0, options);
          EXPECT_TRUE(hasWord(arguments.substr(arguments.find("\nARGUMENTS\n")), name))
              << command << ": argument " << name;
        } else {
          EXPECT_TRUE(hasWord(page.substr(options), name)) << command << ": option " << name;
        }
      }
    }
    EXPECT_GT(listed, 1u) << command;
  }
}

TEST(ManPageTest, TheQuantizePageShowsTypesDefaultsAndExamples) {
  const std::string page = rendered("qforge-quantize");
  EXPECT_NE(page.find("--calib SOURCE\n"), std::string::npos) << page;
  EXPECT_NE(page.find("--calib-batches INT\n"), std::string::npos) << page;
  EXPECT_NE(page.find("Number of calibration batches. Default: 32.\n"), std::string::npos) << page;
  EXPECT_NE(page.find("--out DIR\n"), std::string::npos) << page;
  EXPECT_NE(page.find("EXAMPLES"), std::string::npos) << page;
  EXPECT_NE(page.find("qforge quantize models/zoo/resnet.onnx --backend TensorRT"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("qforge(1)"), std::string::npos);
}

TEST(ManPageTest, QforgesPageHasTheCommandsAndTopics) {
  const std::string page = rendered("qforge");
  for (const std::string& command : kCommands)
    EXPECT_NE(page.find("qforge-" + command + "(1)"), std::string::npos) << command;
  for (const std::string section :
       {"DATA SOURCES", "BACKENDS", "QUANTIZATION CONFIG", "ALGORITHMS", "EXIT STATUS"})
    EXPECT_NE(page.find("\n" + section + "\n"), std::string::npos) << section;
}

TEST(ManPageTest, ManPrintsThePageTheDirectoryHolds) {
  EXPECT_EQ(runCli("help --man").out, readText(manDir() + "/qforge.1"));
  EXPECT_EQ(runCli("help --man quantize").out, readText(manDir() + "/qforge-quantize.1"));
  const testing::CliStreams topic = testing::runCliStreams("help --man data");
  EXPECT_EQ(topic.exit_code, 2);
  EXPECT_EQ(topic.out, "");
  EXPECT_EQ(testing::lineCount(topic.err), 1u) << topic.err;
}

}  // namespace
}  // namespace qforge
