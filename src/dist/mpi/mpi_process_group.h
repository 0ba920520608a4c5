// The mpi backend: collectives over an MPI library (Debian libopenmpi-dev), for jobs started by
// mpirun (`mpirun -n N prog`; as root add --oversubscribe and OMPI_ALLOW_RUN_AS_ROOT=1,
// OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1). MPI is initialised with MPI_THREAD_MULTIPLE on first use and
// finalised at exit. Each group owns a duplicated communicator; its progress thread issues
// blocking MPI calls, which use MPI's tuned algorithms and its shared-memory transport.
//
// Timeouts: MPI cannot cancel a blocking collective. A watchdog thread tracks every running op;
// when one outlives its timeout it prints which op on which rank and calls MPI_Abort, so the
// whole job ends non-zero within the timeout instead of hanging. Point-to-point ops poll their
// request and fail with an Error at their timeout.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dist/host_process_group.h"

namespace anvil::dist {

/// The world group over MPI_COMM_WORLD. `rank` / `size` (when >= 0) must equal MPI's.
std::shared_ptr<ProcessGroup> make_mpi_world(int rank, int size, GroupOptions options);

/// A process group over one MPI communicator (on the host engine).
class MpiProcessGroup : public HostProcessGroup {
 public:
  struct Comm;  // the communicator (mpi.h stays out of this header)
  MpiProcessGroup(std::unique_ptr<Comm> comm, int rank, int size, std::vector<int> global_ranks,
                  GroupOptions options);
  ~MpiProcessGroup() override;
  std::string backend_name() const override { return "mpi"; }

 protected:
  void run_all_reduce(Tensor& t, ReduceOp op, Millis timeout) override;
  void run_all_gather(Tensor& out, const Tensor& in, Millis timeout) override;
  void run_reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op, Millis timeout) override;
  void run_all_to_all(Tensor& out, const Tensor& in, const std::vector<int64_t>& out_counts,
                      const std::vector<int64_t>& in_counts, Millis timeout) override;
  void run_reduce(Tensor& t, ReduceOp op, int root, Millis timeout) override;
  void run_broadcast(Tensor& t, int src, Millis timeout) override;
  void run_barrier(Millis timeout) override;
  P2PWaiter post_send(const Tensor& t, int dst, int tag) override;
  P2PWaiter post_recv(Tensor& t, int src, int tag) override;
  P2PWaiter post_recv_any(Tensor& t, int tag) override;
  std::shared_ptr<ProcessGroup> make_subgroup(const std::vector<int>& members,
                                              const std::string& name) override;

 private:
  std::unique_ptr<Comm> comm_;
};

}  // namespace anvil::dist
