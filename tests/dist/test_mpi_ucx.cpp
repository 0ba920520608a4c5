// Issue 15 part 4: the mpi backend over Open MPI's UCX transport (pml ucx) instead of its default
// ob1 + shared-memory path. The ranks run the same workers as the ops and list-ops suites (every
// reduce op and dtype, non-contiguous tensors, send / recv, broadcast and barrier, the rooted and
// list forms, receive from any source) with the pml forced to ucx: MPI_Init fails when UCX cannot
// run, so a pass means the job ran over UCX; one job also asks Open MPI to log its selection.
// Open MPI 4.1 takes UCX only for the transports in pml_ucx_tls / pml_ucx_devices (InfiniBand,
// by default); `any` lets it run over shared memory and TCP on a host without such a device.
#include <gtest/gtest.h>

#include <string>

#include "dist_harness.h"

namespace anvil::dist::test {
namespace {

JobOptions over_ucx() {
  JobOptions o;
  o.env["OMPI_MCA_pml"] = "ucx";
  o.env["OMPI_MCA_pml_ucx_tls"] = "any";
  o.env["OMPI_MCA_pml_ucx_devices"] = "any";
  return o;
}

class MpiUcx : public ::testing::TestWithParam<std::string> {};

/// Open MPI's words when no pml it was asked for can run on this host (a UCX without any usable
/// transport): the host lacks UCX, which is no failure of anvil's.
bool no_ucx_here(const JobResult& r) {
  return !r.ok() && r.all_output().find("No components were able to be opened in the pml "
                                        "framework") != std::string::npos;
}

TEST_P(MpiUcx, WorkerRunsOverUcx) {
  if (!backend_available("mpi")) GTEST_SKIP() << "mpi backend not available";
  const JobResult r = run_job("mpi", 2, GetParam(), over_ucx());
  if (no_ucx_here(r)) GTEST_SKIP() << "Open MPI cannot run its UCX pml on this host";
  EXPECT_TRUE(r.ok()) << r.all_output();
}

INSTANTIATE_TEST_SUITE_P(Dist, MpiUcx,
                         ::testing::Values("dtypes_ops", "noncontiguous", "send_recv",
                                           "broadcast_barrier", "gather_scatter",
                                           "all_to_all_list", "recv_any"),
                         [](const auto& info) { return info.param; });

TEST(MpiUcxSelection, OpenMpiReportsUcxSelectedOnThreeRanks) {
  if (!backend_available("mpi")) GTEST_SKIP() << "mpi backend not available";
  JobOptions o = over_ucx();
  o.env["OMPI_MCA_pml_base_verbose"] = "10";
  const JobResult r = run_job("mpi", 3, "reduce_to_root", o);
  if (no_ucx_here(r)) GTEST_SKIP() << "Open MPI cannot run its UCX pml on this host";
  ASSERT_TRUE(r.ok()) << r.all_output();
  const std::string out = r.all_output();
  size_t n = 0;
  for (size_t at = out.find("select: component ucx selected"); at != std::string::npos;
       at = out.find("select: component ucx selected", at + 1))
    ++n;
  EXPECT_EQ(n, 3u) << out;  // one line per rank
}

}  // namespace
}  // namespace anvil::dist::test
