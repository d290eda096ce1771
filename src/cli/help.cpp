// `qforge help [TOPIC]`: the commands and topics, one line each; a command's full help (what
// `qforge COMMAND --help` prints) followed by worked examples; or a concept topic (data sources,
// backends, configs, algorithms). `--man [COMMAND]` prints a man page instead and `--man-dir DIR`
// writes all of them (what the build installs).
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/help_topics.h"
#include "cli/man_page.h"
#include "core/error.h"
#include "core/files.h"
#include "core/strings.h"

namespace qforge::cli {

namespace {

constexpr size_t kWidth = 79;

struct HelpOptions {
  std::string topic;
  bool man = false;
  std::string man_dir;
};

// `text` filled into lines of at most kWidth columns, each starting with `indent` spaces.
std::string wrap(const std::string& text, size_t indent) {
  std::istringstream words(text);
  std::string word, line, out;
  while (words >> word) {
    if (!line.empty() && indent + line.size() + 1 + word.size() > kWidth) {
      out += std::string(indent, ' ') + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += std::string(indent, ' ') + line + "\n";
  return out;
}

std::string indentLines(const std::string& lines, size_t indent) {
  std::istringstream in(lines);
  std::string line, out;
  while (std::getline(in, line))
    out += std::string(indent, ' ') + line + "\n";
  return out;
}

std::string blocksText(const std::vector<HelpBlock>& blocks) {
  std::string out;
  for (size_t i = 0; i < blocks.size(); ++i) {
    const HelpBlock& b = blocks[i];
    switch (b.kind) {
      case HelpBlock::Kind::Paragraph:
        out += (i == 0 ? "" : "\n") + wrap(b.text, 0);
        break;
      case HelpBlock::Kind::Item:
        // A run of items reads as a list: a blank line before its first one only.
        if (i > 0 && blocks[i - 1].kind != HelpBlock::Kind::Item) out += "\n";
        out += wrap(b.term, 2) + wrap(b.text, 6);
        break;
      case HelpBlock::Kind::Code:
        out += "\n" + indentLines(b.text, 4);
        break;
    }
  }
  return out;
}

std::string examplesText(const std::vector<HelpExample>& examples) {
  std::string out = "\nExamples:\n";
  for (size_t i = 0; i < examples.size(); ++i)
    out += (i == 0 ? "" : "\n") + wrap("# " + examples[i].what, 2) +
           indentLines(examples[i].command, 2);
  return examples.empty() ? "" : out;
}

// What `qforge COMMAND --help` prints, then the examples.
std::string commandHelp(const CLI::App& app, const CLI::App& command) {
  // `help` takes the name the usage line starts with, as CLI11 passes it for --help.
  std::string text = command.help(app.get_name());
  while (endsWith(text, "\n\n"))
    text.pop_back();
  return text + examplesText(commandExamples(command.get_name()));
}

std::vector<std::string> topicNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* command : commandsOf(app))
    names.push_back(command->get_name());
  for (const HelpTopic& topic : conceptTopics())
    names.push_back(topic.name);
  return names;
}

std::string pad(const std::string& s, size_t width) {
  return s.size() < width ? s + std::string(width - s.size(), ' ') : s + " ";
}

std::string overview(const CLI::App& app) {
  std::string out = app.get_description() + "\n\nUsage: qforge COMMAND [OPTIONS] [ARGUMENTS]\n\n";
  out += "Commands:\n";
  for (const CLI::App* command : commandsOf(app))
    out += "  " + pad(command->get_name(), 12) + command->get_description() + "\n";
  out += "\nTopics:\n";
  for (const HelpTopic& topic : conceptTopics())
    out += "  " + pad(topic.name, 12) + topic.summary + "\n";
  out +=
      "\n`qforge help TOPIC` shows a command's options with examples, or a topic;\n"
      "`qforge help --man COMMAND | man -l -` its man page.\n";
  return out;
}

const CLI::App* findCommand(const CLI::App& app, const std::string& name) {
  for (const CLI::App* command : commandsOf(app)) {
    if (command->get_name() == name) return command;
  }
  return nullptr;
}

// qforge.1 and qforge-COMMAND.1 for every command into `dir`.
void writeManPages(const CLI::App& app, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  require(!ec, "--man-dir: cannot create '" + dir + "': " + ec.message());
  writeFileAtomically(dir + "/qforge.1", manPage(app));
  for (const CLI::App* command : commandsOf(app))
    writeFileAtomically(dir + "/qforge-" + command->get_name() + ".1", manPage(app, *command));
}

int runHelp(const CLI::App& app, const HelpOptions& o) {
  if (!o.man_dir.empty()) {
    require(o.topic.empty() && !o.man, "--man-dir writes every page; give no TOPIC or --man");
    writeManPages(app, o.man_dir);
    return 0;
  }
  if (o.topic.empty()) {
    std::cout << (o.man ? manPage(app) : overview(app));
    return 0;
  }
  if (const CLI::App* command = findCommand(app, o.topic)) {
    std::cout << (o.man ? manPage(app, *command) : commandHelp(app, *command));
    return 0;
  }
  for (const HelpTopic& topic : conceptTopics()) {
    if (topic.name != o.topic) continue;
    require(!o.man, "--man takes a command; the topic '" + o.topic + "' is in qforge(1)");
    std::cout << blocksText(topic.blocks());
    return 0;
  }
  throw Error("unknown help topic '" + o.topic + "'; topics: " + join(topicNames(app)));
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> addHelpCommand(CLI::App& app) {
  auto o = std::make_shared<HelpOptions>();
  CLI::App* sub = app.add_subcommand(
      "help", "List the commands and topics, or show one: a command's options with examples");
  std::vector<std::string> topics;
  for (const HelpTopic& topic : conceptTopics())
    topics.push_back(topic.name);
  sub->add_option("topic", o->topic, "A command, or one of the topics " + join(topics))
      ->type_name(value_type::kTopic);
  sub->add_flag("--man", o->man,
                "Print the man page (troff) of TOPIC, a command, or of qforge itself");
  sub->add_option("--man-dir", o->man_dir,
                  "Write qforge.1 and qforge-COMMAND.1 for every command into this directory")
      ->type_name(value_type::kDir);
  const CLI::App* root = &app;
  return {sub, [root, o] { return runHelp(*root, *o); }};
}

}  // namespace qforge::cli
