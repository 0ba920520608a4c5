// GlooProcessGroup's failure diagnosis: which peer is behind a failed collective.
//
// gloo's own errors rarely say: a timeout reads "Timed out waiting 3000ms for recv operation to
// complete", and a closed connection names an address, not a rank. When a collective fails,
// every rank that saw the failure writes "anvil/failed/<seq>/<rank>" into the group's store and
// watches for its peers' keys until the diagnosis budget ends. Survivors of a peer that was
// stopped (SIGSTOP), cut off the network or crashed all report, and the silent peer is named;
// a rank whose store does not answer either is most likely the one cut off itself. A survivor
// still waiting in the op on another survivor (which keeps its connections until it exits) is
// silent too, so the note lists the candidates rather than a verdict. The store calls run on a
// detached thread: a store that does not answer costs the budget, not its own timeout.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "dist/gloo/gloo_process_group.h"
#include "dist/work.h"

namespace anvil::dist {

namespace {

using Clock = std::chrono::steady_clock;

/// "rank 1" or "ranks 1, 2".
std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

/// What the store thread found (shared with it: it may outlive the diagnosis).
struct Probe {
  std::mutex mu;
  std::condition_variable cv;
  bool stored = false;      // this rank's report reached the store
  bool done = false;        // the thread finished
  std::vector<bool> seen;   // peers whose report was seen
  std::string store_error;  // the store call's error, when one failed
};

}  // namespace

Millis GlooProcessGroup::diagnosis_budget(Millis timeout) const {
  if (size() < 2) return Millis(0);
  return std::min(Millis(1000), timeout / 5);
}

std::string GlooProcessGroup::diagnose_failure(const Work& work, Millis budget) {
  auto probe = std::make_shared<Probe>();
  probe->seen.assign(static_cast<size_t>(size()), false);
  probe->seen[static_cast<size_t>(rank())] = true;
  const std::string prefix = str("anvil/failed/", work.seq(), "/");
  const auto deadline = Clock::now() + budget;
  std::thread([probe, store = store_, prefix, me = rank(), deadline] {
    try {
      store->set(prefix + std::to_string(me), "1");
      {
        std::lock_guard<std::mutex> lk(probe->mu);
        probe->stored = true;
      }
      while (true) {
        bool all = true;
        for (size_t j = 0; j < probe->seen.size(); ++j) {
          bool seen;
          {
            std::lock_guard<std::mutex> lk(probe->mu);
            seen = probe->seen[j];
          }
          if (!seen && store->check({prefix + std::to_string(j)})) {
            std::lock_guard<std::mutex> lk(probe->mu);
            probe->seen[j] = seen = true;
          }
          all = all && seen;
        }
        if (all || Clock::now() >= deadline) break;
        std::this_thread::sleep_for(Millis(10));
      }
    } catch (const std::exception& e) {  // the store failed too: what was seen so far stands
      std::lock_guard<std::mutex> lk(probe->mu);
      probe->store_error = e.what();
    }
    std::lock_guard<std::mutex> lk(probe->mu);
    probe->done = true;
    probe->cv.notify_all();
  }).detach();
  std::unique_lock<std::mutex> lk(probe->mu);
  probe->cv.wait_until(lk, deadline + Millis(20), [&] { return probe->done; });
  const std::string within = str(" within ", budget.count(), " ms");
  if (!probe->stored && !probe->store_error.empty())
    return str("the group's store failed too (", probe->store_error,
               "): this rank's network path to it is likely down, or the rank hosting it (rank 0 "
               "of the world) stopped or exited");
  if (!probe->stored)
    return str("the group's store did not answer", within,
               " either: this rank's network path to it is likely down, or the rank hosting "
               "it (rank 0 of the world) stopped or exited");
  std::vector<int> silent, reported;
  for (int j = 0; j < size(); ++j)
    if (j != rank()) (probe->seen[static_cast<size_t>(j)] ? reported : silent).push_back(j);
  if (silent.empty()) return str("every peer failed this op too (", rank_list(reported), ")");
  std::string note = str(rank_list(silent), " did not report failing this op", within,
                         " (stopped, cut off, crashed, or still waiting in it on another rank)");
  if (!reported.empty()) note += str("; ", rank_list(reported), " failed it too");
  return note;
}

}  // namespace anvil::dist
