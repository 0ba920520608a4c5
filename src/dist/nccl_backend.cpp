// Loading the nccl backend library on demand (dist/nccl_backend.h).
#include "dist/nccl_backend.h"

#include <dlfcn.h>

#include <mutex>

#include "core/error.h"
#include "core/shared_library.h"

// This copy of the dist layer, as the nccl backend must see it: the backend links
// libanvil_dist.so, so in a program of anvil's layer libraries (the CLI, the tests) it resolves
// this very symbol. The libanvil_rt that programs link (cmake/anvil_install.cmake) holds a copy
// of dist whose symbols are local; the backend would bring a second copy, and is refused.
extern "C" __attribute__((visibility("default"))) const int anvil_dist_self = 1;

namespace anvil::dist {

void require_same_dist(void* handle, const std::string& library) {
  const void* theirs = ::dlsym(handle, "anvil_dist_self");
  if (theirs == &anvil_dist_self) return;
  throw Error(str(library,
                  " was built against anvil's dist library, and this program holds "
                  "another copy of it (a program linked to the public libanvil_rt: it runs "
                  "packages with gloo and mpi collectives, not nccl ones; run nccl jobs with "
                  "the anvil CLI or a program linked to anvil's layer libraries)"),
              "dist::create_process_group(\"nccl\")",
              "the backend resolving this process's dist layer",
              theirs ? "another copy of it" : "no anvil dist layer");
}

namespace {

/// The library's entry point, loaded once (never unloaded: its groups live until exit).
NcclCreateFn entry_point() {
  static std::mutex mu;
  static NcclCreateFn fn = nullptr;
  std::lock_guard<std::mutex> lk(mu);
  if (fn) return fn;
  std::string looked, error;
  void* handle = open_anvil_library(kNcclBackendLibrary, looked, error);
  if (!handle)
    throw Error(str("the nccl backend (", kNcclBackendLibrary,
                    ") cannot be loaded: it is not installed beside anvil's libraries, or a "
                    "library it needs (libnccl.so.2, the CUDA runtime) is missing; set "
                    "ANVIL_DEVICE_BACKEND_DIR to its folder"),
                "dist::create_process_group(\"nccl\")", str("a loadable ", kNcclBackendLibrary),
                str("looked in ", looked, error.empty() ? "" : "; dlopen: " + error));
  require_same_dist(handle, kNcclBackendLibrary);
  auto f = reinterpret_cast<NcclCreateFn>(::dlsym(handle, kNcclBackendSymbol));
  if (!f)
    throw Error(str(kNcclBackendLibrary, " does not export the backend entry point"),
                "dist::create_process_group(\"nccl\")", kNcclBackendSymbol, "no such symbol");
  fn = f;
  return fn;
}

}  // namespace

std::shared_ptr<ProcessGroup> create_nccl_process_group(std::shared_ptr<Store> store, int rank,
                                                        int size, const GroupOptions& options) {
  if (!store)
    throw Error("the nccl backend needs a rendezvous store (rank 0's unique id goes through it)",
                "dist::create_process_group(\"nccl\")", "a store (e.g. a TCPStore)", "null");
  NcclGroupArgs args;
  args.abi = kNcclBackendAbi;
  args.store = std::move(store);
  args.rank = rank;
  args.size = size;
  args.options = options;
  entry_point()(&args);
  ANVIL_INTERNAL_ASSERT(args.group != nullptr, "the nccl entry point returned no group");
  return args.group;
}

}  // namespace anvil::dist
