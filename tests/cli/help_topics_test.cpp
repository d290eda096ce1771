// The texts of `qforge help` (src/cli/help_topics.cpp) against the code they describe: every flag
// an example or a topic names is an option of its command, every observer, fake quantizer, PTQ
// and QAT algorithm and built-in backend is described under the name the code knows it by, and
// the example backend file and config load.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "algos/reconstruction.h"
#include "backends/backend_config.h"
#include "passes/quant_config.h"
#include "pipelines/qat_pipeline.h"
#include "quant/registry.h"
#include "support/cli_runner.h"
#include "support/onnx_builder.h"

namespace qforge {
namespace {

using testing::runCli;

const std::vector<std::string>& kCommands = testing::kCliCommands;
const std::vector<std::string> kTopics = {"data", "backends", "config", "algorithms"};

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    lines.push_back(line);
  return lines;
}

// The option names `qforge COMMAND --help` lists ("--calib", "-q"); each command asked once.
const std::set<std::string>& optionsOf(const std::string& command) {
  static std::map<std::string, std::set<std::string>> cache;
  if (cache.count(command)) return cache[command];
  std::set<std::string>& names = cache[command];
  for (const std::string& line : linesOf(runCli(command + " --help").out)) {
    if (line.rfind("  -", 0) != 0) continue;
    std::istringstream parts(line.substr(2, line.find(' ', 2) - 2));
    std::string name;
    while (std::getline(parts, name, ','))
      names.insert(name);
  }
  return names;
}

// The "--flag" words of `text` (not "bash-completion" or "x--y").
std::vector<std::string> longFlags(const std::string& text) {
  static const std::regex flag(R"((?:^|[\s'(\[])(--[a-z0-9][a-z0-9-]*))");
  std::vector<std::string> flags;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), flag); it != std::sregex_iterator();
       ++it)
    flags.push_back((*it)[1]);
  return flags;
}

// Checks a command line of an example: every --flag after `qforge X` is an option of X.
void expectFlagsOfItsCommand(const std::string& line, const std::string& where) {
  static const std::regex invocation(R"(qforge ([a-z]+)(.*))");
  std::smatch m;
  if (!std::regex_search(line, m, invocation)) return;
  const std::set<std::string>& options = optionsOf(m[1]);
  ASSERT_FALSE(options.empty()) << where << ": no command '" << m[1] << "': " << line;
  for (const std::string& flag : longFlags(m[2]))
    EXPECT_EQ(options.count(flag), 1u) << where << ": qforge " << m[1] << " has no " << flag;
}

// Lines continued with " \" joined into one.
std::vector<std::string> commandLines(const std::string& text) {
  std::string joined = text;
  for (size_t at; (at = joined.find("\\\n")) != std::string::npos;)
    joined.replace(at, 2, " ");
  return linesOf(joined);
}

TEST(HelpTopicsTest, EveryExampleUsesOptionsItsCommandHas) {
  for (const std::string& command : kCommands) {
    const std::string help = runCli("help " + command).out;
    const size_t examples = help.find("\nExamples:\n");
    ASSERT_NE(examples, std::string::npos) << command;
    for (const std::string& line : commandLines(help.substr(examples))) {
      if (line.rfind("  #", 0) != 0) expectFlagsOfItsCommand(line, "help " + command);
    }
  }
}

TEST(HelpTopicsTest, EveryFlagATopicNamesIsAnOption) {
  std::set<std::string> all;
  for (const std::string& command : kCommands) {
    const std::set<std::string>& options = optionsOf(command);
    all.insert(options.begin(), options.end());
  }
  for (const std::string& topic : kTopics) {
    const std::string text = runCli("help " + topic).out;
    for (const std::string& flag : longFlags(text))
      EXPECT_EQ(all.count(flag), 1u) << "help " << topic << " names " << flag;
    // Its command lines (indented by four) use the options of their own command.
    for (const std::string& line : commandLines(text)) {
      if (line.rfind("    qforge ", 0) == 0) expectFlagsOfItsCommand(line, "help " + topic);
    }
  }
}

// The item terms of a topic: lines indented by two ("  Mse {p: 2, ...}" -> "Mse").
std::set<std::string> termsOf(const std::string& text) {
  std::set<std::string> terms;
  for (const std::string& line : linesOf(text)) {
    if (line.size() < 3 || line.rfind("  ", 0) != 0 || line[2] == ' ') continue;
    terms.insert(line.substr(2, line.find(' ', 2) - 2));
  }
  return terms;
}

TEST(HelpTopicsTest, AlgorithmsDescribesEveryObserverFakeQuantizerAndAlgorithm) {
  const std::string text = runCli("help algorithms").out;
  const std::set<std::string> terms = termsOf(text);
  for (const std::string& kind : quant::builtinObservers().kinds())
    EXPECT_EQ(terms.count(kind), 1u) << "observer " << kind;
  EXPECT_EQ(terms.count("none"), 1u);
  for (const std::string& kind : quant::builtinFakeQuantizers().kinds())
    EXPECT_EQ(terms.count(kind), 1u) << "fake quantizer " << kind;
  for (const std::string algo : {"adaround", "brecq", "qdrop"}) {
    EXPECT_EQ(terms.count(algo), 1u) << algo;
    EXPECT_NO_THROW(algos::reconstructionPreset(algo)) << algo;
  }
  // The QAT algorithms: the items after the paragraph that introduces them.
  const size_t qat = text.find("Quantization-aware training");
  ASSERT_NE(qat, std::string::npos);
  const std::set<std::string> qat_terms = termsOf(text.substr(qat));
  EXPECT_EQ(qat_terms.size(), 6u);
  for (const std::string& algo : qat_terms) {
    passes::QuantConfig config;
    EXPECT_NO_THROW(pipelines::applyQatAlgorithm(algo, config)) << algo;
  }
}

// The lines of the first code block (indented by four) that starts with `first`.
std::string codeBlock(const std::string& text, const std::string& first) {
  std::string block;
  bool in = false;
  for (const std::string& line : linesOf(text)) {
    if (!in && line == "    " + first) in = true;
    if (in && line.rfind("    ", 0) != 0) break;
    if (in) block += line.substr(4) + "\n";
  }
  return block;
}

TEST(HelpTopicsTest, BackendsListsTheBuiltinsAndItsExampleFileLoads) {
  const std::string text = runCli("help backends").out;
  const std::set<std::string> terms = termsOf(text);
  for (const std::string& name : backends::builtinBackendNames()) {
    EXPECT_EQ(terms.count(name), 1u) << name;
    const std::string deploy_format = backends::loadBackend(name).deploy_format;
    EXPECT_NE(text.find("  " + name + " (" + deploy_format + ")\n"), std::string::npos) << name;
  }
  const std::string file = testing::makeTempDir("help-backend") + "/my_chip.json";
  std::ofstream(file) << codeBlock(text, "{");
  const backends::BackendConfig chip = backends::loadBackend(file);
  const backends::BackendConfig qdq = backends::loadBackend("QDQ");
  EXPECT_EQ(chip.name, "MyChip");
  EXPECT_EQ(chip.weight.scheme.bits, 4);
  EXPECT_EQ(chip.weight.observer, "Mse");
  EXPECT_EQ(chip.trait("Mul"), nullptr);
  ASSERT_NE(qdq.trait("Mul"), nullptr);
  EXPECT_EQ(chip.activation.scheme.bits, qdq.activation.scheme.bits);
}

TEST(HelpTopicsTest, ConfigsExampleLoads) {
  const std::string text = runCli("help config").out;
  const std::string file = testing::makeTempDir("help-config") + "/config.yaml";
  std::ofstream(file) << codeBlock(text, "weight: {bits: 4, observer: Mse}");
  const passes::QuantConfig config = passes::loadQuantConfig(file);
  EXPECT_EQ(config.weight["bits"], 4);
  EXPECT_EQ(config.extra_quantizable, std::vector<std::string>{"Mul"});
  ASSERT_EQ(config.overrides.size(), 3u);
  EXPECT_TRUE(config.overrides[1].skip);
  EXPECT_EQ(config.overrides[2].activation["observer_options"]["percentile"], 99.99);
}

}  // namespace
}  // namespace qforge
