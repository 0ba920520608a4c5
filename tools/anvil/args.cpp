#include "args.h"

#include <charconv>
#include <sstream>

namespace anvil::cli {

std::optional<std::string> ParsedArgs::value(const std::string& long_name) const {
  auto it = values_.find(long_name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::vector<std::string> ParsedArgs::values(const std::string& long_name) const {
  auto it = values_.find(long_name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

int64_t ParsedArgs::int_value(const std::string& long_name, int64_t dflt, int64_t min,
                              int64_t max) const {
  auto v = value(long_name);
  if (!v) return dflt;
  int64_t out = 0;
  const char* end = v->data() + v->size();
  auto [p, ec] = std::from_chars(v->data(), end, out);
  if (ec != std::errc() || p != end || out < min || out > max)
    throw UsageError(long_name + " needs an integer in [" + std::to_string(min) + ", " +
                     std::to_string(max) + "], got '" + *v + "'");
  return out;
}

ArgParser::ArgParser(std::string command, std::string synopsis, std::string summary)
    : command_(std::move(command)), synopsis_(std::move(synopsis)), summary_(std::move(summary)) {}

ArgParser& ArgParser::flag(const std::string& long_name, const std::string& short_name,
                           const std::string& help) {
  options_.push_back({long_name, short_name, "", help, false});
  return *this;
}

ArgParser& ArgParser::option(const std::string& long_name, const std::string& short_name,
                             const std::string& metavar, const std::string& help, bool repeated) {
  options_.push_back({long_name, short_name, metavar, help, repeated});
  return *this;
}

ArgParser& ArgParser::positional(const std::string& name, const std::string& help) {
  positionals_.emplace_back(name, help);
  return *this;
}

ArgParser& ArgParser::notes(const std::string& text) {
  notes_ = text;
  return *this;
}

const OptionSpec* ArgParser::find(const std::string& name) const {
  for (const auto& o : options_)
    if (o.long_name == name || (!o.short_name.empty() && o.short_name == name)) return &o;
  return nullptr;
}

ParsedArgs ArgParser::parse(const std::vector<std::string>& args) const {
  ParsedArgs out;
  bool only_positionals = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (only_positionals || a.size() < 2 || a[0] != '-') {
      out.positionals_.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positionals = true;
      continue;
    }
    if (a == "--help" || a == "-h") {
      out.help_ = true;
      continue;
    }
    std::string name = a;
    std::optional<std::string> inline_value;
    if (const size_t eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      name = a.substr(0, eq);
      inline_value = a.substr(eq + 1);
    }
    const OptionSpec* spec = find(name);
    if (!spec) throw UsageError("unknown option '" + name + "' for '" + command_ + "'");
    if (!spec->repeated && out.values_.count(spec->long_name))
      throw UsageError("option " + spec->long_name + " given more than once");
    auto& slot = out.values_[spec->long_name];
    if (spec->metavar.empty()) {
      if (inline_value) throw UsageError("option " + spec->long_name + " takes no value");
      slot.push_back("");
      continue;
    }
    if (inline_value) {
      slot.push_back(*inline_value);
    } else if (i + 1 < args.size()) {
      slot.push_back(args[++i]);
    } else {
      throw UsageError("option " + name + " needs a value (" + spec->metavar + ")");
    }
  }
  if (!out.help_ && out.positionals_.size() != positionals_.size()) {
    if (out.positionals_.size() < positionals_.size())
      throw UsageError("'" + command_ + "' needs " + positionals_[out.positionals_.size()].first);
    throw UsageError("unexpected argument '" + out.positionals_[positionals_.size()] + "'");
  }
  return out;
}

namespace {
constexpr size_t kHelpColumn = 26, kHelpWidth = 100;

/// `left` padded to the help column, then `help` word-wrapped to kHelpWidth.
std::string help_line(const std::string& left, const std::string& help) {
  std::string out = left;
  if (out.size() + 1 > kHelpColumn)
    out += "\n" + std::string(kHelpColumn, ' ');
  else
    out += std::string(kHelpColumn - out.size(), ' ');
  size_t col = kHelpColumn;
  std::istringstream words(help);
  std::string w;
  bool first = true;
  while (words >> w) {
    if (!first && col + 1 + w.size() > kHelpWidth) {
      out += "\n" + std::string(kHelpColumn, ' ');
      col = kHelpColumn;
    } else if (!first) {
      out += ' ';
      ++col;
    }
    out += w;
    col += w.size();
    first = false;
  }
  return out + "\n";
}
}  // namespace

std::string ArgParser::help() const {
  std::ostringstream os;
  os << "usage: anvil " << synopsis_ << "\n\n" << summary_ << "\n";
  if (!positionals_.empty()) {
    os << "\narguments:\n";
    for (const auto& [name, help] : positionals_) os << help_line("  " + name, help);
  }
  os << "\noptions:\n";
  for (const auto& o : options_) {
    std::string left = "  " + (o.short_name.empty() ? "    " : o.short_name + ", ") + o.long_name;
    if (!o.metavar.empty()) left += " " + o.metavar;
    os << help_line(left, o.help + (o.repeated ? " (repeatable)" : ""));
  }
  os << help_line("  -h, --help", "show this help");
  if (!notes_.empty()) os << "\n" << notes_;
  return os.str();
}

}  // namespace anvil::cli
