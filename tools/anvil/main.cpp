// anvil: the command-line tool. `anvil --help` lists the commands; each has its own --help.
// Exit codes: 0 success, 1 runtime failure, 2 usage mistake. No exception escapes main().
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "core/error.h"

namespace anvil::cli {

// `anvil launch` (cmd_launch.cpp): dispatched to launch_main, which takes the raw arguments
// because everything after "--" belongs to the launched command.
ArgParser launch_parser();
int cmd_launch(const ParsedArgs& args);
int launch_main(const std::vector<std::string>& args);
// `anvil cache` (cmd_cache.cpp).
ArgParser cache_parser();
int cmd_cache(const ParsedArgs& args);
// `anvil ops` (cmd_ops.cpp).
ArgParser ops_parser();
// `anvil check` (cmd_check.cpp).
ArgParser check_parser();
int cmd_check(const ParsedArgs& args);
int cmd_ops(const ParsedArgs& args);

const std::vector<Command>& commands() {
  // clang-format off
  static const std::vector<Command> kCommands = {
      {"compile", &compile_parser, &cmd_compile},
      {"run", &run_parser, &cmd_run},
      {"bench", &bench_parser, &cmd_bench},
      {"inspect", &inspect_parser, &cmd_inspect},
      {"compare", &compare_parser, &cmd_compare},
      {"check", &check_parser, &cmd_check},
      {"launch", &launch_parser, &cmd_launch},
      {"cache", &cache_parser, &cmd_cache},
      {"ops", &ops_parser, &cmd_ops},
  };
  // clang-format on
  return kCommands;
}

void require_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw Error(what + " file not found", path, "an existing file", "no such file");
  if (!std::filesystem::is_regular_file(path, ec))
    throw Error(what + " is not a regular file", path, "a file", "a directory or device");
}

std::string bytes_str(size_t bytes) {
  std::ostringstream os;
  const double b = static_cast<double>(bytes);
  if (bytes >= (size_t{1} << 30))
    os << std::fixed << std::setprecision(2) << b / (1 << 30) << " GiB";
  else if (bytes >= (size_t{1} << 20))
    os << std::fixed << std::setprecision(2) << b / (1 << 20) << " MiB";
  else if (bytes >= 1024)
    os << std::fixed << std::setprecision(1) << b / 1024 << " KiB";
  else
    return std::to_string(bytes) + " bytes";
  os << " (" << bytes << " bytes)";
  return os.str();
}

namespace {

/// `anvil --help`: the command list, then every command's own help.
std::string global_help() {
  std::ostringstream os;
  os << "anvil: ahead-of-time compiler and runtime for torch.export models (.pt2)\n\n"
     << "usage: anvil <command> [options]\n       anvil help [command]\n\ncommands:\n";
  for (const auto& c : commands()) {
    const ArgParser p = c.parser();
    os << "  " << std::left << std::setw(10) << c.name << p.summary() << "\n";
  }
  os << "  " << std::left << std::setw(10) << "help"
     << "show help for every command or one\n";
  os << "\nexit codes: 0 success, 1 runtime error, 2 usage error\n";
  for (const auto& c : commands()) os << "\n" << c.parser().help();
  return os.str();
}

const Command* find_command(const std::string& name) {
  for (const auto& c : commands())
    if (name == c.name) return &c;
  return nullptr;
}

std::string command_names() {
  std::string s;
  for (const auto& c : commands()) s += std::string(s.empty() ? "" : ", ") + c.name;
  return s + ", help";
}

int usage_error(const std::string& msg, const std::string& cmd) {
  std::cerr << "anvil: error: " << msg << "\n"
            << "(run 'anvil " << (cmd.empty() ? "" : cmd + " ") << "--help' for usage)\n";
  return kExitUsage;
}

int dispatch(const std::vector<std::string>& argv) {
  if (argv.empty()) {
    std::cerr << "anvil: error: no command given (commands: " << command_names() << ")\n"
              << "(run 'anvil --help' for usage)\n";
    return kExitUsage;
  }
  const std::string& cmd = argv[0];
  if (cmd == "--help" || cmd == "-h") {
    std::cout << global_help();
    return kExitOk;
  }
  if (cmd == "--version") {
    std::cout << "anvil " << driver::anvil_version() << "\n";
    return kExitOk;
  }
  if (cmd == "help") {
    if (argv.size() == 1) {
      std::cout << global_help();
      return kExitOk;
    }
    const Command* c = find_command(argv[1]);
    if (!c || argv.size() > 2)
      return usage_error(
          c ? "help takes one command name"
            : "unknown command '" + argv[1] + "' (commands: " + command_names() + ")",
          "");
    std::cout << c->parser().help();
    return kExitOk;
  }
  const Command* c = find_command(cmd);
  if (!c) {
    if (!cmd.empty() && cmd[0] == '-') return usage_error("unknown option '" + cmd + "'", "");
    return usage_error("unknown command '" + cmd + "' (commands: " + command_names() + ")", "");
  }
  if (cmd == "launch") return launch_main({argv.begin() + 1, argv.end()});
  const ArgParser parser = c->parser();
  ParsedArgs args;
  try {
    args = parser.parse({argv.begin() + 1, argv.end()});
  } catch (const UsageError& e) {
    return usage_error(e.what(), cmd);
  }
  if (args.help()) {
    std::cout << parser.help();
    return kExitOk;
  }
  try {
    return c->handler(args);
  } catch (const UsageError& e) {
    return usage_error(e.what(), cmd);
  }
}

}  // namespace
}  // namespace anvil::cli

int main(int argc, char** argv) {
  try {
    return anvil::cli::dispatch({argv + 1, argv + argc});
  } catch (const anvil::Error& e) {
    std::cerr << "anvil: error: " << e.what() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "anvil: error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "anvil: error: unknown failure\n";
  }
  return anvil::cli::kExitFailure;
}
