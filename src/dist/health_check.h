// The health check run when a group is created (spec A.1.11), on with GroupOptions::health_check
// or ANVIL_DIST_HEALTH_CHECK=1 (settings.h); create_process_group runs it (the world group
// included). A group of one rank skips it (no communication). Otherwise:
//   1. check-in, before the backend connects (when the group has a store): each rank sets
//      "health_check/<rank>" and waits up to the group's timeout for every other rank's key. A
//      rank that never arrives fails every present rank within that timeout with an Error naming
//      the missing ranks (without the check the backend's own rendezvous would wait for the
//      store's timeout and name a key);
//   2. verification, once the backend is connected: a barrier through the new group bounded by
//      the timeout, so a transport that cannot move data fails here rather than on the first op.
// On success one line goes to stderr: "anvil dist: health check succeeded for gloo group (rank 0
// of 4) on cpu in 12 ms".
#pragma once

#include <chrono>
#include <string>

#include "dist/process_group.h"
#include "dist/store.h"

namespace anvil::dist {

/// Step 1. Throws Error naming the ranks that did not check in within `timeout`. Rank 0 (which
/// hosts the world's store) leaves after the other present ranks saw the failure, so each of
/// them reports the missing ranks rather than a lost store.
void health_check_checkin(Store& store, int rank, int size, Millis timeout,
                          const std::string& where);
/// Step 2 and the success line; `started` is when step 1 began (steady clock).
void health_check_verify(ProcessGroup& pg, Millis timeout,
                         std::chrono::steady_clock::time_point started);

}  // namespace anvil::dist
