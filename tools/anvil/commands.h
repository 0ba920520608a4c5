// The anvil CLI's commands: each has an ArgParser (its options and --help text) and a handler
// that returns the process exit code. main.cpp dispatches on the command name.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "args.h"
#include "core/tensor.h"
#include "driver/compile.h"

namespace anvil::runtime {
class Model;
struct ModelOptions;
}

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
/// `anvil inspect` on a .anvil package (cmd_inspect_package.cpp).
int inspect_package(const std::string& path, bool as_json);
ArgParser run_parser();
int cmd_run(const ParsedArgs& args);
ArgParser compare_parser();
int cmd_compare(const ParsedArgs& args);
ArgParser compile_parser();
int cmd_compile(const ParsedArgs& args);
ArgParser bench_parser();
int cmd_bench(const ParsedArgs& args);

/// Every command, in the order `anvil --help` lists them.
const std::vector<Command>& commands();

/// Throws Error when `path` does not name an existing regular file (`what`: "model", "input").
void require_file(const std::string& path, const std::string& what);
/// One-line statistics of a tensor: "f32[4, 8]  min -1 max 2 mean 0.5  first [0.1, 0.2, ...]".
std::string tensor_summary(const Tensor& t, size_t first = 6);
/// Human-readable byte count: "1.5 MiB (1572864 bytes)".
std::string bytes_str(size_t bytes);

// Shared by the commands that take a package or a .pt2 (model_source.cpp).

/// The --target names `anvil compile` accepts.
const std::vector<std::string>& target_names();
/// True when `path` is a .anvil package: by extension (.anvil / .pt2), else by looking for a
/// top-level manifest.json in the archive. Throws Error when the file is missing.
bool is_package(const std::string& path);
/// CompileOptions from --target, --cache-dir, --jobs (when the command has them) and `quiet`
/// (no progress). Throws UsageError for an unknown target.
driver::CompileOptions compile_options(const ParsedArgs& args, bool quiet);
/// `model` itself when it is a package; for a .pt2, its cached package (compiled first on a
/// miss, with a note on stderr unless `quiet`).
std::string package_for(const std::string& model, const ParsedArgs& args, bool quiet);
/// Reads the .npy inputs; a float32 array given for a bfloat16/float16 input is converted.
std::vector<Tensor> read_inputs(const std::vector<std::string>& paths, const runtime::Model& model);
/// --dim SYMBOL=VALUE options, by symbol name. Throws UsageError when malformed.
std::map<std::string, int64_t> dim_overrides(const ParsedArgs& args);
/// Random inputs for `model`'s input specs (floats in [-1, 1), integers 0 or 1 so that any
/// embedding table is in range), symbolic dims from `dims` or the lower bound of their range;
/// `notes` says which. Throws Error for an unknown symbol or a value out of its range.
std::vector<Tensor> random_inputs(const runtime::Model& model,
                                  const std::map<std::string, int64_t>& dims,
                                  std::vector<std::string>& notes);
/// ModelOptions for a package: --device when given, else the device it was compiled for.
runtime::ModelOptions model_options(const ParsedArgs& args, const std::string& package);
/// The tensor as it goes into a .npy file (on the host): 16-bit and other non-.npy floats become float32.
Tensor npy_ready(const Tensor& t);
/// Sets an environment variable (used for --backend, --threads). Throws Error on failure.
void set_env(const std::string& name, const std::string& value);
/// --backend NAME (gloo, mpi or nccl) sets ANVIL_BACKEND: the engine a package with collectives
/// joins the world with at load. Throws UsageError for another name.
void apply_backend_option(const ParsedArgs& args);

}  // namespace anvil::cli
