// Joining the world: reading the launcher's environment (torchrun-compatible, or MPI's), creating
// the world group with a backend chosen by name, and creating sub-groups.
//
// Environment read by init_world_from_env:
//   RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT   (anvil launch,
//   torchrun); or, under mpirun, OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE (or
//   PMI_RANK / PMI_SIZE). ANVIL_BACKEND picks the backend when none is given (default gloo).
//   ANVIL_DIST_TIMEOUT (seconds) sets the store and op timeouts (default 300); ANVIL_DIST_DEBUG=1
//   turns on the cross-rank consistency check. nccl: rank r uses cuda:LOCAL_RANK;
//   ANVIL_NCCL_EAGER_INIT=1 creates the communicator at init (GroupOptions). Under torchrun
//   (TORCHELASTIC_USE_AGENT_STORE=True) anvil's store takes MASTER_PORT + 1, or ANVIL_STORE_PORT.
//   The process-wide settings (ANVIL_DIST_USE_FUTURE, ANVIL_DIST_HEALTH_CHECK,
//   ANVIL_DIST_TRACE[_DIR], ANVIL_NCCL_BLOCKING_WAIT) are read once, before connecting
//   (settings.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dist/process_group.h"
#include "dist/store.h"

namespace anvil::dist {

/// What the launcher told this process.
struct WorldEnv {
  int rank = -1;
  int world_size = -1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr;  // empty when not given
  int master_port = -1;     // -1 when not given
  std::string source;       // "torchrun" or "mpi"
  /// The port of anvil's TCP store (hosted by rank 0 on MASTER_ADDR): ANVIL_STORE_PORT when set;
  /// else MASTER_PORT + 1 under torchrun's agent store (TORCHELASTIC_USE_AGENT_STORE=True: the
  /// agent already listens on MASTER_PORT with torch's own store protocol); else MASTER_PORT.
  /// -1 when none is given.
  int store_port = -1;
};

/// Reads the environment above. Throws Error naming the missing or malformed variables when
/// neither the torchrun variables nor MPI's are present.
WorldEnv read_world_env();
/// GroupOptions from ANVIL_DIST_TIMEOUT / ANVIL_DIST_DEBUG / ANVIL_NCCL_EAGER_INIT (a malformed
/// value is an Error naming the variable).
GroupOptions group_options_from_env();
/// Backends compiled into this build ("gloo", "mpi", "nccl", "fake").
std::vector<std::string> available_backends();

/// Creates a group with `backend` ("gloo", "mpi", "nccl", "fake"), running the health check
/// first when it is on (health_check.h; a malformed setting fails here). gloo and nccl rendezvous
/// through `store` (nccl loads libanvil_nccl.so now and uses cuda:options.device_index); mpi
/// uses MPI_COMM_WORLD (rank/size must match MPI's when given); fake needs nothing.
std::shared_ptr<ProcessGroup> create_process_group(const std::string& backend,
                                                   std::shared_ptr<Store> store, int rank, int size,
                                                   GroupOptions options = {});

/// Joins the world from the environment (see the file comment) and registers it as group "0".
/// `backend` "" = ANVIL_BACKEND or "gloo". Idempotent: returns the world when already joined
/// (an Error when that world uses another backend).
std::shared_ptr<ProcessGroup> init_world_from_env(const std::string& backend = "");
/// Registers `pg` as the world group "0" (for worlds built by hand, e.g. ranks as threads).
void set_world(std::shared_ptr<ProcessGroup> pg);
/// Forgets the world group and every registered group name (a process that builds worlds by
/// hand one after another, e.g. tests); the groups live on while others hold them.
void clear_world();
/// The world group, or null before init.
std::shared_ptr<ProcessGroup> world();
bool world_initialized();

/// Creates the sub-group of world ranks `ranks` (sorted, unique). Every world rank must call
/// it, in the same order for all sub-groups. It is registered as the next name ("1", "2", ...)
/// on members; returns null on non-members.
std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks);

}  // namespace anvil::dist
