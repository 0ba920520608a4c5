// Helpers of the compiled-collectives tests (test_compiled*.cpp): fixtures, compiling them into
// packages in a per-process temporary directory, their scheduled programs, and step lookups.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "passes/loop_ir.h"

namespace anvil::dist::test {

/// Path of a fixture: tests/fixtures/NAME.pt2, else tests/fixtures/coll/NAME.pt2.
std::string fixture(const std::string& name);
/// A temporary directory of this test process (removed at exit).
const std::string& temp_dir();
/// Compiles a fixture into a package (cached per process and pass switches); `reorder` /
/// `bucket` switch the collective passes.
std::string compile_fixture(const std::string& name, bool reorder = true, bool bucket = true);
/// A fixture's first output when every rank of a `world`-rank job feeds `x` and its collectives
/// sum equal partial results (tp_mlp_allreduce): the interpreter's result in a 1-rank world
/// (all_reduce the identity) times the world size, in the output's dtype.
Tensor world_scaled_reference(const std::string& name, const Tensor& x, int world);
/// The scheduled program of a fixture (no toolchain, no group).
passes::Program program_of(const std::string& name, bool reorder = true, bool bucket = true);

/// One package test: spec case number, the fixture exported for 2 ranks (`base`), the fixture
/// for `world` ranks (base, base_w3 or base_w4: group sizes are in the graph), backend.
struct CaseRun {
  int number = 0;
  std::string base, fixture, backend;
  int world = 2;
};
/// Prints "case 32: coll_c32_broadcast_w3 on gloo, 3 ranks" in gtest messages.
void PrintTo(const CaseRun& c, std::ostream* os);
/// Each (case number, base fixture) on gloo and mpi with 2, 3 and 4 ranks.
std::vector<CaseRun> runs_on_2_to_4_ranks(const std::vector<std::pair<int, const char*>>& cases);
/// Runs `worker` (a DIST_WORKER) on c.world ranks of c.backend with ANVIL_TEST_PACKAGE (the
/// compiled fixture) and ANVIL_TEST_FIXTURE (its .pt2) set; a gtest failure unless every rank
/// exits 0. Skips when the backend is not available.
void run_package_job(const CaseRun& c, const char* worker);

/// Step i as a collective issue / wait, or null.
const passes::ExternStep* issue_at(const passes::Program& p, size_t i);
const passes::ExternStep* wait_at(const passes::Program& p, size_t i);
/// Every issue step index, in order.
std::vector<size_t> issues(const passes::Program& p);
/// Index of the first wait step of collective `id`, or steps.size().
size_t first_wait(const passes::Program& p, int id);
/// True when step i computes graph node `node`.
bool step_has_node(const passes::Program& p, size_t i, const std::string& node);

}  // namespace anvil::dist::test
