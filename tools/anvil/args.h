// A small command-line parser for the anvil CLI: long and short options ("--out DIR",
// "--out=DIR", "-o DIR"), flags, repeated options, positional arguments, generated --help text.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace anvil::cli {

/// A mistake on the command line (unknown flag, missing value, ...): exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One option a command accepts.
struct OptionSpec {
  std::string long_name;   // "--input"
  std::string short_name;  // "-i", or empty
  std::string metavar;     // "FILE"; empty for a flag that takes no value
  std::string help;
  bool repeated = false;  // may be given several times
};

/// The parsed command line of one command.
class ParsedArgs {
 public:
  /// True when the flag (or a valued option) was given.
  bool has(const std::string& long_name) const { return values_.count(long_name) > 0; }
  /// The last value of an option, or nullopt.
  std::optional<std::string> value(const std::string& long_name) const;
  /// Every value of a repeated option, in order.
  std::vector<std::string> values(const std::string& long_name) const;
  /// An option's value parsed as an integer in [min, max]; `dflt` when absent. Throws UsageError.
  int64_t int_value(const std::string& long_name, int64_t dflt, int64_t min, int64_t max) const;
  const std::vector<std::string>& positionals() const { return positionals_; }
  /// True when --help / -h was given.
  bool help() const { return help_; }

 private:
  friend class ArgParser;
  std::map<std::string, std::vector<std::string>> values_;
  std::vector<std::string> positionals_;
  bool help_ = false;
};

/// Describes one command's arguments and parses them.
class ArgParser {
 public:
  /// `synopsis`: "inspect MODEL.pt2 [options]"; `summary`: one line for the command list.
  ArgParser(std::string command, std::string synopsis, std::string summary);

  /// A flag without a value.
  ArgParser& flag(const std::string& long_name, const std::string& short_name,
                  const std::string& help);
  /// An option taking a value.
  ArgParser& option(const std::string& long_name, const std::string& short_name,
                    const std::string& metavar, const std::string& help, bool repeated = false);
  /// A required positional argument.
  ArgParser& positional(const std::string& name, const std::string& help);
  /// Free text printed after the options in --help.
  ArgParser& notes(const std::string& text);

  /// Parses the arguments after the command name. Throws UsageError for unknown options,
  /// missing values, repeated single options and a wrong number of positionals (the positional
  /// count is not checked when --help is present).
  ParsedArgs parse(const std::vector<std::string>& args) const;
  /// The --help text.
  std::string help() const;
  const std::string& command() const { return command_; }
  const std::string& summary() const { return summary_; }

 private:
  const OptionSpec* find(const std::string& name) const;

  std::string command_, synopsis_, summary_, notes_;
  std::vector<OptionSpec> options_;
  std::vector<std::pair<std::string, std::string>> positionals_;
};

}  // namespace anvil::cli
