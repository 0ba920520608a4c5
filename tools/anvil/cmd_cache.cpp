// `anvil cache info|prune|clear`: the compile cache's location, size and contents, pruning it
// to a size limit and emptying it (src/codegen/cache.h does the work).
#include <iostream>

#include "codegen/toolchain.h"
#include "commands.h"
#include "core/error.h"
#include "codegen/cache.h"

namespace anvil::cli {

namespace {

/// "N (size)" for one kind of entry.
std::string count_str(int64_t n, int64_t bytes) {
  return std::to_string(n) + " (" + bytes_str(static_cast<size_t>(bytes)) + ")";
}

std::string limit_str(int64_t max_bytes) {
  return max_bytes == 0 ? std::string("none") : bytes_str(static_cast<size_t>(max_bytes));
}

}  // namespace

/// The options and --help text of `anvil cache`.
ArgParser cache_parser() {
  ArgParser p("cache", "cache info|prune|clear [--max-mb N] [--cache-dir D]",
              "Show, prune or clear the compile cache (objects, libraries, packages).");
  p.positional("ACTION",
               "info: location, size, counts and limit; prune: delete least-recently-used "
               "entries down to 90% of the limit; clear: delete every entry")
      .option("--max-mb", "", "N",
              "size limit in MiB for prune (default $ANVIL_CACHE_MAX_MB, else 2048; 0: none)")
      .option("--cache-dir", "", "D",
              "cache folder (default $ANVIL_CACHE_DIR, else ~/.cache/anvil)")
      .notes(
          "Compiles prune the cache automatically after every insert once it holds more than\n"
          "$ANVIL_CACHE_MAX_MB (entries used in the last 15 minutes are kept). `prune` and\n"
          "`clear` delete regardless of recent use; a compile running meanwhile in another\n"
          "process may then have to be rerun. Temporary files of running writers are kept.\n");
  return p;
}

int cmd_cache(const ParsedArgs& args) {
  const std::string action = args.positionals().at(0);
  if (action != "info" && action != "prune" && action != "clear")
    throw UsageError("unknown cache action '" + action + "' (actions: info, prune, clear)");
  if (args.has("--max-mb") && action != "prune")
    throw UsageError("--max-mb goes with 'prune' only");
  const std::string dir = args.value("--cache-dir").value_or(codegen::default_cache_dir());
  if (dir.empty()) throw UsageError("--cache-dir needs a folder");
  const int64_t max_bytes = args.has("--max-mb")
                                ? args.int_value("--max-mb", 0, 0, int64_t{1} << 40) << 20
                                : codegen::cache_max_bytes();
  if (action == "info") {
    const codegen::CacheUsage u = codegen::cache_usage(dir);
    std::cout << "cache:     " << dir << "\n"
              << "size:      " << bytes_str(static_cast<size_t>(u.total_bytes)) << "\n"
              << "limit:     " << limit_str(max_bytes) << "\n"
              << "packages:  " << count_str(u.packages, u.package_bytes) << "\n"
              << "objects:   " << count_str(u.objects, u.object_bytes) << "\n"
              << "libraries: " << count_str(u.libraries, u.library_bytes) << "\n"
              << "probes:    " << count_str(u.probes, u.probe_bytes) << "\n"
              << "temporary: " << count_str(u.temp_files, u.temp_bytes) << "\n";
    return kExitOk;
  }
  const codegen::PruneResult r = action == "clear"
                                    ? codegen::clear_cache(dir)
                                    : codegen::prune_cache(dir, max_bytes, "", /*keep_recent_s=*/0);
  if (r.skipped) {
    std::cout << "another process is pruning " << dir << "; nothing done\n";
    return kExitOk;
  }
  std::cout << (action == "clear" ? "cleared " : "pruned ") << dir << ": removed "
            << r.removed_files << " entries (" << bytes_str(static_cast<size_t>(r.removed_bytes))
            << "), " << bytes_str(static_cast<size_t>(r.bytes_after)) << " left";
  if (action == "prune") std::cout << " (limit " << limit_str(max_bytes) << ")";
  std::cout << "\n";
  return kExitOk;
}

}  // namespace anvil::cli
