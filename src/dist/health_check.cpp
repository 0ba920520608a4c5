// The health check at group creation: store check-in, then a bounded barrier.
#include "dist/health_check.h"

#include <chrono>
#include <cstdio>
#include <thread>

#include "core/error.h"

namespace anvil::dist {

namespace {

std::string key(int rank) { return str("health_check/", rank); }
constexpr const char* kFailedKey = "health_check/failed";

std::string rank_list(const std::vector<int>& ranks) {
  std::string r = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) r += (i ? ", " : "") + std::to_string(ranks[i]);
  return r;
}

}  // namespace

void health_check_checkin(Store& store, int rank, int size, Millis timeout,
                          const std::string& where) {
  if (size <= 1) return;
  const std::string w = str(where, " health check");
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(key(r));
  try {
    store.set(key(rank), "1");
    store.wait(keys, timeout);
    return;
  } catch (const Error&) {
    // Timed out (or the store failed): find out who is missing.
  }
  std::vector<int> present, missing;
  try {
    for (int r = 0; r < size; ++r) (store.check({key(r)}) ? present : missing).push_back(r);
  } catch (const std::exception& e) {
    throw Error(str("health check failed: not every rank joined the group within ", timeout.count(),
                    " ms, and the store is unreachable: ", e.what()),
                w, str("all ", size, " ranks"), "unknown");
  }
  if (missing.empty()) return;  // the last one arrived just after the wait gave up
  try {
    store.add(kFailedKey, 1);
    if (rank == 0) {  // keep the store up until every present rank saw the failure
      const auto deadline = std::chrono::steady_clock::now() + timeout;
      while (store.add(kFailedKey, 0) < static_cast<int64_t>(present.size()) &&
             std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  } catch (const std::exception&) {
    // The report below is what matters.
  }
  throw Error(str("health check failed: ", rank_list(missing), " of ", size,
                  " never joined the group within ", timeout.count(), " ms"),
              w, str("all ", size, " ranks"),
              str(rank_list(present), " arrived; missing ", rank_list(missing)));
}

void health_check_verify(ProcessGroup& pg, Millis timeout,
                         std::chrono::steady_clock::time_point started) {
  const std::string w =
      str(pg.backend_name(), " group (rank ", pg.rank(), " of ", pg.size(), ") health check");
  if (pg.size() > 1) {
    try {
      pg.barrier(OpOptions{timeout})->wait(timeout);
    } catch (const std::exception& e) {
      throw Error(str("health check failed: the new group's barrier did not complete within ",
                      timeout.count(), " ms: ", e.what()),
                  w, "every rank to pass the barrier", "failure");
    }
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - started)
                      .count();
  // One write, so the lines of ranks sharing a terminal (mpirun) do not interleave.
  const std::string line =
      str("anvil dist: health check succeeded for ", pg.backend_name(), " group (rank ", pg.rank(),
          " of ", pg.size(), ") on ", pg.device().str(), " in ", ms, " ms",
          pg.size() == 1 ? " (one rank: nothing to check)" : "", "\n");
  std::fputs(line.c_str(), stderr);
}

}  // namespace anvil::dist
