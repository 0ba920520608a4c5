// Loading the nccl backend library on demand (dist/nccl_backend.h).
#include "dist/nccl_backend.h"

#include <dlfcn.h>

#include <mutex>

#include "core/error.h"
#include "core/shared_library.h"

namespace anvil::dist {

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
