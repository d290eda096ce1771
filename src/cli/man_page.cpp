#include "cli/man_page.h"

#include <cctype>
#include <sstream>
#include <vector>

#include "cli/commands.h"
#include "cli/help_topics.h"
#include "core/strings.h"

namespace qforge::cli {

namespace {

// `text` for troff to print as it is: backslashes escaped, every '-' written \- (the ASCII
// hyphen-minus that option names need: a plain '-' may print as a typographic hyphen, which
// does not paste into a shell), a '.' or '\'' at the start of a line kept from being read as a
// request, and a break point (\:, zero width) after each comma that no space follows, so that
// lists such as "fold-bn,find-units,..." can wrap.
std::string escape(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    line_start = c == '\n';
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else if (c == ',' && i + 1 < text.size() && text[i + 1] != ' ' && text[i + 1] != '\n') {
      out += ",\\:";
    } else {
      out += c;
    }
  }
  return out;
}

std::string bold(const std::string& s) {
  return "\\fB" + escape(s) + "\\fR";
}

std::string italic(const std::string& s) {
  return "\\fI" + escape(s) + "\\fR";
}

std::string upper(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string sentence(std::string s) {
  if (!s.empty() && s.back() != '.') s += '.';
  return s;
}

// As `--help` shows them: hidden options (no group) are left out.
std::vector<const CLI::Option*> shownOptions(const CLI::App& app, bool positional) {
  return app.get_options([positional](const CLI::Option* opt) {
    return !opt->get_group().empty() && opt->get_positional() == positional;
  });
}

bool repeatable(const CLI::Option& opt) {
  return opt.get_expected_max() >= CLI::detail::expected_max_vector_size;
}

// The .TP tag of an option: its names, then the type of its value ("FILE", "INT"), if any.
std::string optionTag(const CLI::Option& opt) {
  std::vector<std::string> names;
  for (const std::string& name : opt.get_snames())
    names.push_back(bold("-" + name));
  for (const std::string& name : opt.get_lnames())
    names.push_back(bold("--" + name));
  std::string tag = join(names, ", ");
  if (takesValue(opt) && !opt.get_type_name().empty()) tag += " " + italic(opt.get_type_name());
  if (repeatable(opt)) tag += " ...";
  return tag;
}

std::string optionBody(const CLI::Option& opt) {
  std::string text = sentence(opt.get_description());
  if (opt.get_required()) text += " Required.";
  if (!opt.get_default_str().empty()) text += " Default: " + opt.get_default_str() + ".";
  if (repeatable(opt)) text += " May be given more than once.";
  return escape(text);
}

void writeOptions(std::ostream& out, const CLI::App& app) {
  const std::vector<const CLI::Option*> positionals = shownOptions(app, true);
  if (!positionals.empty()) {
    out << ".SH ARGUMENTS\n";
    for (const CLI::Option* opt : positionals) {
      out << ".TP\n"
          << italic(opt->get_name(true)) << " (" << escape(opt->get_type_name()) << ")\n"
          << optionBody(*opt) << "\n";
    }
  }
  out << ".SH OPTIONS\n";
  for (const CLI::Option* opt : shownOptions(app, false))
    out << ".TP\n" << optionTag(*opt) << "\n" << optionBody(*opt) << "\n";
}

void writeBlocks(std::ostream& out, const std::vector<HelpBlock>& blocks) {
  for (const HelpBlock& b : blocks) {
    switch (b.kind) {
      case HelpBlock::Kind::Paragraph:
        out << ".PP\n" << escape(b.text) << "\n";
        break;
      case HelpBlock::Kind::Item:
        out << ".TP\n" << bold(b.term) << "\n" << escape(b.text) << "\n";
        break;
      case HelpBlock::Kind::Code:
        out << ".PP\n.RS 4\n.nf\n" << escape(b.text) << "\n.fi\n.RE\n";
        break;
    }
  }
}

void writeHeader(std::ostream& out, const std::string& title) {
  // Left-adjusted and unhyphenated: option names and file names must print as they are typed.
  out << ".\\\" Made by `qforge help --man` from qforge's own command-line definitions.\n"
      << ".TH \"" << title << "\" 1 \"\" \"qforge " << QFORGE_VERSION << "\" \"qforge manual\"\n"
      << ".ad l\n.nh\n";
}

// A command's footer (convert's list of formats): its indented lines as an indented list that
// wraps within the page, the others as paragraphs.
void writeFooter(std::ostream& out, const std::string& footer) {
  std::istringstream lines(footer);
  std::string line;
  bool in_list = false;
  while (std::getline(lines, line)) {
    const size_t text = line.find_first_not_of(' ');
    if (text == std::string::npos) continue;
    if (text > 0) {
      out << (in_list ? "" : ".PD 0\n") << ".IP \"\" 4\n" << escape(line.substr(text)) << "\n";
      in_list = true;
    } else {
      out << (in_list ? ".PD\n" : "") << ".PP\n" << escape(line) << "\n";
      in_list = false;
    }
  }
  if (in_list) out << ".PD\n";
}

void writeSeeAlso(std::ostream& out, const CLI::App& app, const CLI::App* command) {
  std::vector<std::string> pages;
  if (command != nullptr) pages.push_back("qforge");
  for (const CLI::App* other : commandsOf(app)) {
    if (other != command) pages.push_back("qforge-" + other->get_name());
  }
  out << ".SH \"SEE ALSO\"\n";
  for (size_t i = 0; i < pages.size(); ++i)
    out << ".BR " << escape(pages[i]) << " (1)" << (i + 1 < pages.size() ? "," : "") << "\n";
}

// Where the values of the types that have a help topic are explained.
void writeTypeReferences(std::ostream& out, const CLI::App& command) {
  const struct {
    const std::string& type;
    const char* topic;
    const char* section;
  } kReferences[] = {{value_type::kSource, "data", "DATA SOURCES"},
                     {value_type::kBackend, "backends", "BACKENDS"}};
  for (const auto& r : kReferences) {
    const bool used =
        !command
             .get_options([&r](const CLI::Option* opt) { return opt->get_type_name() == r.type; })
             .empty();
    if (!used) continue;
    out << ".PP\n"
        << italic(r.type) << escape(" values are explained by ")
        << bold(std::string("qforge help ") + r.topic) << " and under " << escape(r.section)
        << " in " << bold("qforge") << "(1).\n";
  }
}

}  // namespace

std::string manPage(const CLI::App& app, const CLI::App& command) {
  const std::string name = app.get_name() + " " + command.get_name();
  std::ostringstream out;
  writeHeader(out, upper(app.get_name() + "-" + command.get_name()));
  out << ".SH NAME\n"
      << escape(app.get_name() + "-" + command.get_name()) << " \\- "
      << escape(command.get_description()) << "\n";

  out << ".SH SYNOPSIS\n.B " << name << "\n";
  for (const CLI::Option* opt : shownOptions(command, true))
    out << (opt->get_required() ? italic(opt->get_name(true))
                                : "[" + italic(opt->get_name(true)) + "]")
        << "\n";
  for (const CLI::Option* opt : shownOptions(command, false)) {
    if (opt->get_required()) out << optionTag(*opt) << "\n";
  }
  out << "[" << italic("OPTIONS") << "]\n";

  out << ".SH DESCRIPTION\n" << escape(sentence(command.get_description())) << "\n";
  writeFooter(out, command.get_footer());
  out << ".PP\n"
      << bold(name + " --help") << " and " << bold("qforge help " + command.get_name())
      << " print these options; the latter with the examples below.\n";
  writeTypeReferences(out, command);
  writeOptions(out, command);

  const std::vector<HelpExample> examples = commandExamples(command.get_name());
  if (!examples.empty()) {
    out << ".SH EXAMPLES\n";
    for (const HelpExample& e : examples)
      out << ".PP\n" << escape(e.what) << ":\n.RS 4\n.nf\n" << escape(e.command) << "\n.fi\n.RE\n";
  }
  writeSeeAlso(out, app, &command);
  return out.str();
}

std::string manPage(const CLI::App& app) {
  std::ostringstream out;
  writeHeader(out, upper(app.get_name()));
  // "qforge: hardware-aware quantization of ONNX models" names the program first.
  std::string description = app.get_description();
  const std::string prefix = app.get_name() + ": ";
  if (description.rfind(prefix, 0) == 0) description = description.substr(prefix.size());
  out << ".SH NAME\n" << escape(app.get_name()) << " \\- " << escape(description) << "\n";
  out << ".SH SYNOPSIS\n.B " << app.get_name() << "\n"
      << italic("COMMAND") << " [" << italic("OPTIONS") << "] [" << italic("ARGUMENTS") << "]\n"
      << ".br\n.B " << app.get_name() << " help\n[" << italic("TOPIC") << "]\n";
  out << ".SH DESCRIPTION\n"
      << escape(
             "qforge quantizes neural networks for the hardware that will run them: ONNX "
             "in, fake quantization placed where the target hardware quantizes, calibration "
             "or training, and the files the hardware's tools take.")
      << "\n.PP\nEach command has a page of its own, " << bold("qforge-") << italic("COMMAND")
      << "(1); " << bold("qforge help") << " " << italic("COMMAND")
      << escape(" prints the same options with examples, and ") << bold("qforge help") << " "
      << italic("TOPIC") << escape(" the topics below.") << "\n";

  out << ".SH COMMANDS\n";
  for (const CLI::App* command : commandsOf(app)) {
    out << ".TP\n"
        << bold(command->get_name()) << "\n"
        << escape(sentence(command->get_description())) << " See "
        << bold("qforge-" + command->get_name()) << "(1).\n";
  }
  writeOptions(out, app);
  for (const std::vector<HelpTopic>& sections : {conceptTopics(), referenceSections()}) {
    for (const HelpTopic& topic : sections) {
      out << ".SH \"" << topic.title << "\"\n";
      writeBlocks(out, topic.blocks());
    }
  }
  writeSeeAlso(out, app, nullptr);
  return out.str();
}

}  // namespace qforge::cli
