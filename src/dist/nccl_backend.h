// The nccl backend as anvil_dist sees it. The backend itself (src/dist/nccl/) is a shared library
// of its own, libanvil_nccl.so, linking NCCL and the CUDA runtime; anvil_dist dlopens it (through
// core/shared_library.h, the search the device backends use) only when an nccl group is created,
// so a CPU-only program never loads CUDA or NCCL.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dist/process_group.h"
#include "dist/store.h"

namespace anvil::dist {

/// What the library's entry point gets. Built by this anvil only: `abi` guards against a stale
/// library from another build.
struct NcclGroupArgs {
  int abi = 0;
  std::shared_ptr<Store> store;  // the rendezvous store (the unique id goes through it)
  int rank = 0;
  int size = 1;
  std::vector<int> global_ranks;  // empty: 0..size-1
  GroupOptions options;
  std::shared_ptr<ProcessGroup> group;  // set by the entry point
};

inline constexpr int kNcclBackendAbi = 3;  // 2: ProcessGroup's rooted / list forms; 3: all_reduce_into
inline constexpr const char* kNcclBackendLibrary = "libanvil_nccl.so";
inline constexpr const char* kNcclBackendSymbol = "anvil_nccl_create_group";
/// The entry point: creates the group into args->group, or throws Error.
using NcclCreateFn = void (*)(NcclGroupArgs* args);

/// Throws Error unless the library `handle` (dlopen's) resolves anvil's dist layer to the copy
/// this code belongs to: the nccl backend shares dist's C++ objects with its caller, which a
/// second copy of the layer in the process (the public libanvil_rt holds one) would break.
void require_same_dist(void* handle, const std::string& library);

/// Loads libanvil_nccl.so (once) and creates a world-style nccl group over `store`. Throws Error
/// naming the library and where it was looked for when it cannot be loaded, and the backend's
/// Error (no GPU, a bad device index, a missing rank) otherwise.
std::shared_ptr<ProcessGroup> create_nccl_process_group(std::shared_ptr<Store> store, int rank,
                                                        int size, const GroupOptions& options);

}  // namespace anvil::dist
