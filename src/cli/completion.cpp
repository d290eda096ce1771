// `qforge completion bash`: a bash completion script made from the CLI11 definitions of qforge's
// commands, so it completes exactly the commands and options the binary takes. Values complete
// by the type name their option declares (commands.h, value_type): paths for FILE, PATH, SOURCE
// and DIR, the built-in backends (and .json files) for BACKEND, the formats for FORMAT, the help
// topics for TOPIC. The script needs only bash itself, not the bash-completion package.
#include <iostream>
#include <memory>
#include <sstream>

#include "backends/backend_config.h"
#include "cli/commands.h"
#include "cli/help_topics.h"
#include "core/error.h"
#include "core/strings.h"
#include "deploy/formats/table_formats.h"

namespace qforge::cli {

namespace {

// How a value completes, as the script's _qforge_value names it.
std::string valueKind(const CLI::Option& opt) {
  // Validators append to the type name ("INT:NONNEGATIVE").
  const std::string full = opt.get_type_name();
  const std::string type = full.substr(0, full.find(':'));
  if (type == value_type::kFile || type == value_type::kPath || type == value_type::kSource)
    return "file";
  if (type == value_type::kDir) return "dir";
  if (type == value_type::kBackend) return "backend";
  if (type == value_type::kFormat) return "format";
  if (type == value_type::kTopic) return "topic";
  if (type == value_type::kShell) return "shell";
  // A positional argument of no declared type is most likely a path.
  return opt.get_positional() ? "file" : "none";
}

// The words of the script's case branches, in single quotes: names never hold a quote, but a
// stray one must not end the string early.
std::string quoted(const std::vector<std::string>& words) {
  std::string text = join(words, " ");
  require(text.find('\'') == std::string::npos, "completion: a name holds a quote: " + text);
  return "'" + text + "'";
}

// The case branch of one command: its option names, the options that take a value with the
// kind of that value (OPTION:KIND), and the kinds of its positional arguments in order.
std::string commandBranch(const CLI::App& command) {
  std::vector<std::string> names, values, positionals;
  for (const CLI::Option* opt : command.get_options()) {
    if (opt->get_group().empty()) continue;  // hidden
    if (opt->get_positional()) {
      positionals.push_back(valueKind(*opt));
      continue;
    }
    std::vector<std::string> option_names;
    for (const std::string& s : opt->get_snames())
      option_names.push_back("-" + s);
    for (const std::string& l : opt->get_lnames())
      option_names.push_back("--" + l);
    for (const std::string& name : option_names) {
      names.push_back(name);
      if (takesValue(*opt)) values.push_back(name + ":" + valueKind(*opt));
    }
  }
  return "    " + command.get_name() + ")\n      options=" + quoted(names) +
         "\n      values=" + quoted(values) + "\n      positionals=" + quoted(positionals) +
         "\n      ;;\n";
}

std::vector<std::string> formatNames() {
  std::vector<std::string> names;
  for (const auto& format : deploy::formats::tableFormats())
    names.push_back(format.name);
  return names;
}

std::string bashScript(const CLI::App& app) {
  std::vector<std::string> top = {"-h", "--help", "--version"};
  std::vector<std::string> topics;
  for (const CLI::App* command : commandsOf(app)) {
    top.push_back(command->get_name());
    topics.push_back(command->get_name());
  }
  for (const HelpTopic& topic : conceptTopics())
    topics.push_back(topic.name);
  std::string branches;
  for (const CLI::App* command : commandsOf(app))
    branches += commandBranch(*command);

  std::ostringstream out;
  out << R"BASH(# bash completion for qforge, made by `qforge completion bash` from the commands and
# options the binary defines. Load it into this shell with
#   source <(qforge completion bash)
# or install it as bash-completion/completions/qforge under a data directory.

# The words a value of kind $1 may be.
_qforge_words() {
  case $1 in
    backend) echo )BASH"
      << quoted(backends::builtinBackendNames()) << R"BASH( ;;
    format) echo )BASH"
      << quoted(formatNames()) << R"BASH( ;;
    topic) echo )BASH"
      << quoted(topics) << R"BASH( ;;
    shell) echo 'bash' ;;
  esac
}

# The kind of value option $1 takes among the OPTION:KIND words $2; nothing for a flag.
_qforge_kind() {
  local pair
  for pair in $2; do
    if [[ ${pair%%:*} == "$1" ]]; then
      echo "${pair#*:}"
      return 0
    fi
  done
}

# COMPREPLY: the values of kind $1 (file, dir, backend, none, or a list of words) that start
# with $2. Paths are completed as file names (quoted, '/' after folders).
_qforge_value() {
  COMPREPLY=()
  case $1 in
    file)
      compopt -o filenames 2>/dev/null
      mapfile -t COMPREPLY < <(compgen -f -- "$2")
      ;;
    dir)
      compopt -o filenames 2>/dev/null
      mapfile -t COMPREPLY < <(compgen -d -- "$2")
      ;;
    backend)
      # A built-in's name, or a backend .json file of one's own (and folders on the way).
      compopt -o filenames 2>/dev/null
      mapfile -t COMPREPLY < <(
        compgen -W "$(_qforge_words backend)" -- "$2"
        compgen -f -X '!*.json' -- "$2"
        compgen -d -- "$2"
      )
      ;;
    none) ;;
    *) mapfile -t COMPREPLY < <(compgen -W "$(_qforge_words "$1")" -- "$2") ;;
  esac
}

_qforge() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
  local i command='' at=0
  COMPREPLY=()
  # The command is the first word after qforge that is not an option.
  for ((i = 1; i < COMP_CWORD; i++)); do
    if [[ ${COMP_WORDS[i]} != -* ]]; then
      command=${COMP_WORDS[i]} at=$i
      break
    fi
  done
  if [[ -z $command ]]; then
    mapfile -t COMPREPLY < <(compgen -W )BASH"
      << quoted(top) << R"BASH( -- "$cur")
    return 0
  fi
  local options values positionals
  case $command in
)BASH" << branches
      << R"BASH(    *) return 0 ;;
  esac
  # bash splits --option=value at '=' (COMP_WORDBREAKS): the option is then a word further back.
  local option=$prev
  if [[ $cur == '=' ]]; then
    cur=''
  elif [[ $prev == '=' ]]; then
    option=${COMP_WORDS[COMP_CWORD - 2]}
  fi
  local kind
  if [[ $option == -* ]]; then
    kind=$(_qforge_kind "$option" "$values")
    if [[ -n $kind ]]; then
      _qforge_value "$kind" "$cur"
      return 0
    fi
  fi
  if [[ $cur == -* ]]; then
    mapfile -t COMPREPLY < <(compgen -W "$options" -- "$cur")
    return 0
  fi
  # A positional argument: count those before this word, skipping options and their values.
  local n=0 word
  for ((i = at + 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    if [[ $word == -* ]]; then
      if [[ -n $(_qforge_kind "$word" "$values") ]]; then
        i=$((i + 1))
        if [[ ${COMP_WORDS[i]} == '=' ]]; then i=$((i + 1)); fi
      fi
    elif [[ $word != '=' ]]; then
      n=$((n + 1))
    fi
  done
  local kinds
  read -r -a kinds <<<"$positionals"
  if ((n < ${#kinds[@]})); then _qforge_value "${kinds[n]}" "$cur"; fi
  return 0
}

complete -F _qforge qforge
)BASH";
  return out.str();
}

struct CompletionOptions {
  std::string shell;
};

int runCompletion(const CLI::App& app, const CompletionOptions& o) {
  require(o.shell == "bash", "completion: no script for the shell '" + o.shell + "'; shells: bash");
  std::cout << bashScript(app);
  return 0;
}

}  // namespace

std::pair<CLI::App*, std::function<int()>> addCompletionCommand(CLI::App& app) {
  auto o = std::make_shared<CompletionOptions>();
  CLI::App* sub = app.add_subcommand(
      "completion", "Print a shell completion script for qforge's commands and options");
  sub->add_option("shell", o->shell, "The shell: bash")->type_name(value_type::kShell)->required();
  const CLI::App* root = &app;
  return {sub, [root, o] { return runCompletion(*root, *o); }};
}

}  // namespace qforge::cli
