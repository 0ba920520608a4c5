// The anvil CLI's commands: each has an ArgParser (its options and --help text) and a handler
// that returns the process exit code. main.cpp dispatches on the command name.
#pragma once

#include <string>
#include <vector>

#include "args.h"
#include "core/tensor.h"

namespace anvil::cli {

/// Exit codes: success, a runtime failure (bad model, bad input, mismatch), a usage mistake.
constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

/// One CLI command.
struct Command {
  const char* name;
  ArgParser (*parser)();
  int (*handler)(const ParsedArgs& args);
};

ArgParser inspect_parser();
int cmd_inspect(const ParsedArgs& args);
ArgParser run_parser();
int cmd_run(const ParsedArgs& args);
ArgParser compare_parser();
int cmd_compare(const ParsedArgs& args);

/// Every command, in the order `anvil --help` lists them.
const std::vector<Command>& commands();

/// Throws Error when `path` does not name an existing regular file (`what`: "model", "input").
void require_file(const std::string& path, const std::string& what);
/// One-line statistics of a tensor: "f32[4, 8]  min -1 max 2 mean 0.5  first [0.1, 0.2, ...]".
std::string tensor_summary(const Tensor& t, size_t first = 6);
/// Human-readable byte count: "1.5 MiB (1572864 bytes)".
std::string bytes_str(size_t bytes);

}  // namespace anvil::cli
