// What `qforge help` says beyond the flags: worked examples for each command, and the topics the
// flags only hint at (data sources, backends, quantization configs, algorithms). Kept as data,
// written once and rendered twice: as text for a terminal (help.cpp) and as troff for the man
// pages (man_page.cpp).
#pragma once

#include <string>
#include <vector>

namespace qforge::cli {

// One block of a topic: a paragraph, a term with what it means, or lines printed as they are.
struct HelpBlock {
  enum class Kind { Paragraph, Item, Code };
  Kind kind = Kind::Paragraph;
  std::string term;  // Item only
  std::string text;  // Code: its lines, '\n'-separated
};

struct HelpTopic {
  std::string name;     // `qforge help NAME`
  std::string title;    // its section in qforge(1): "DATA SOURCES"
  std::string summary;  // its line in `qforge help`
  // The text, made when asked for: the backends topic loads every built-in backend.
  std::vector<HelpBlock> (*blocks)();
};

// The topics that are not commands, in the order `qforge help` lists them.
std::vector<HelpTopic> conceptTopics();

// The sections of qforge(1) beyond the commands and the topics: exit status, environment.
std::vector<HelpTopic> referenceSections();

// A worked example: what it does, and the command line (continued over lines ending in " \").
struct HelpExample {
  std::string what;
  std::string command;
};

// The examples of a command ("quantize"); empty for a name that is not a command.
std::vector<HelpExample> commandExamples(const std::string& command);

}  // namespace qforge::cli
