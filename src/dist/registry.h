// Process-wide registries (spec/collectives.md §2.1, §2.5):
// - GroupRegistry: group name -> ProcessGroup, shared by all threads. The world group is "0";
//   aliases ("default") name the same group. Legacy (tag, ranks, group_size) triples resolve to
//   the registered group over exactly those world ranks.
// - WorkRegistry: tensor storage -> pending Works, so the issue of a collective and its
//   wait_tensor may sit in different code regions. At process exit, unwaited works are reported
//   with a warning naming their count and deliberately leaked (never waited, never destroyed).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"
#include "dist/process_group.h"

namespace anvil::dist {

/// The process-wide name -> group map. Thread-safe.
class GroupRegistry {
 public:
  /// The one registry (never destroyed, so groups outlive static destruction at exit).
  static GroupRegistry& instance();

  /// Registers `pg` as `name`. Re-registering the same group under the same name is a no-op; a
  /// name already naming another group is an Error. Sets the group's name for messages when it
  /// has none yet.
  void register_group(const std::string& name, std::shared_ptr<ProcessGroup> pg);
  /// Makes `alias` name the same group as `existing` (which must be registered).
  void alias(const std::string& alias, const std::string& existing);
  /// The group named `name`; throws Error naming it (and listing the known names) if unknown.
  std::shared_ptr<ProcessGroup> resolve(const std::string& name) const;
  /// The group named `name`, or null.
  std::shared_ptr<ProcessGroup> find(const std::string& name) const;
  /// The registered name of the group whose members are exactly the world ranks `ranks` (legacy
  /// (tag, ranks, group_size) form); tag "" only. Throws Error when group_size != len(ranks) or
  /// no group matches.
  std::string name_for_ranks(const std::string& tag, const std::vector<int64_t>& ranks,
                             int64_t group_size) const;
  /// The name a compiled graph gives a legacy (tag, ranks, group_size) group: the compiler cannot
  /// resolve it (no live groups at compile time), so resolve() / find() map it to
  /// name_for_ranks() at run time. "legacy/<group_size>/<r0,r1,...>/<tag>".
  static std::string legacy_name(const std::string& tag, const std::vector<int64_t>& ranks,
                                 int64_t group_size);
  /// Removes a name (the group lives on while others hold it); true when it existed.
  bool unregister(const std::string& name);
  /// Every registered name, sorted.
  std::vector<std::string> names() const;
  /// Every distinct registered group.
  std::vector<std::shared_ptr<ProcessGroup>> groups() const;

 private:
  GroupRegistry() = default;
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<ProcessGroup>> groups_;
};

/// The process-wide storage -> pending Work map. Thread-safe.
class WorkRegistry {
 public:
  static WorkRegistry& instance();

  /// Records that `t`'s storage is written by `work` (until wait()).
  void register_work(const Tensor& t, std::shared_ptr<Work> work);
  /// Waits for every Work registered on `t`'s storage (rethrowing the first error) and removes
  /// them. No-op when none is pending.
  void wait(const Tensor& t);
  /// True when some Work is registered on `t`'s storage.
  bool has_pending(const Tensor& t) const;
  /// Number of registered, not yet waited Works.
  size_t size() const;
  /// Mode "allow in-flight collective as graph input": while on, non-functional async
  /// collectives register their outputs (register_async).
  void set_allow_inflight_collective_as_graph_input(bool on);
  bool allow_inflight_collective_as_graph_input() const;
  /// register_work when the in-flight mode is on; otherwise nothing.
  void register_async(const Tensor& t, std::shared_ptr<Work> work);
  /// Drops every entry without waiting and returns how many there were (used at exit: the
  /// Works are leaked on purpose, their groups may already be unusable).
  size_t leak_all();

 private:
  WorkRegistry() = default;
  mutable std::mutex mu_;
  std::unordered_map<const Storage*, std::vector<std::shared_ptr<Work>>> pending_;
  bool inflight_mode_ = false;
};

/// Registers the process-exit handler once (called when the first group is registered). At
/// exit it warns on stderr with the number of unwaited works, gives every group a short grace
/// to finish its queue, then runs the exit hooks (e.g. MPI_Finalize).
void install_exit_handler();
/// Adds a function the exit handler runs last (in order of addition).
void add_exit_hook(std::function<void()> hook);

}  // namespace anvil::dist
