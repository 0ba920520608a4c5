// GroupRegistry, WorkRegistry and the process-exit handler.
#include "dist/registry.h"

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/group_name.h"

namespace anvil::dist {

// ------------------------------------------------------------------------------------------
// GroupRegistry

GroupRegistry& GroupRegistry::instance() {
  static GroupRegistry* r = new GroupRegistry();  // leaked on purpose: see the header
  return *r;
}

void GroupRegistry::register_group(const std::string& name, std::shared_ptr<ProcessGroup> pg) {
  if (!pg) throw Error("cannot register a null group", "GroupRegistry", "a group", "null");
  if (name.empty()) throw Error("a group name must not be empty", "GroupRegistry", "a name", "''");
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = groups_.find(name);
    if (it != groups_.end() && it->second != pg)
      throw Error(str("group name '", name, "' is already registered for another group"),
                  "GroupRegistry::register_group",
                  "an unused name (aliases of the same group are fine)", str("'", name, "' taken"));
    groups_[name] = pg;
  }
  if (pg->name() == "?") pg->set_name(name);
  install_exit_handler();
}

void GroupRegistry::alias(const std::string& alias, const std::string& existing) {
  register_group(alias, resolve(existing));
}


std::string GroupRegistry::legacy_name(const std::string& tag, const std::vector<int64_t>& ranks,
                                       int64_t group_size) {
  return legacy_group_name(tag, ranks, group_size);
}

std::shared_ptr<ProcessGroup> GroupRegistry::find(const std::string& name) const {
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = groups_.find(name);
    if (it != groups_.end()) return it->second;
  }
  std::string tag;
  std::vector<int64_t> ranks;
  int64_t group_size = 0;
  if (!parse_legacy_group_name(name, tag, ranks, group_size)) return nullptr;
  try {
    return find(name_for_ranks(tag, ranks, group_size));
  } catch (const Error&) {
    return nullptr;
  }
}

std::shared_ptr<ProcessGroup> GroupRegistry::resolve(const std::string& name) const {
  if (auto pg = find(name)) return pg;
  std::string tag;
  std::vector<int64_t> ranks;
  int64_t group_size = 0;
  if (parse_legacy_group_name(name, tag, ranks, group_size))  // says why no group matches
    return resolve(name_for_ranks(tag, ranks, group_size));
  const auto known = names();
  std::string list;
  for (const auto& n : known) list += (list.empty() ? "'" : ", '") + n + "'";
  throw Error(str("unknown process group '", name, "'"), "dist::GroupRegistry::resolve",
              known.empty() ? std::string("a registered group (none is: call init_world first)")
                            : str("one of ", list),
              str("'", name, "'"));
}

std::string GroupRegistry::name_for_ranks(const std::string& tag, const std::vector<int64_t>& ranks,
                                          int64_t group_size) const {
  const std::string w = "dist::GroupRegistry::name_for_ranks";
  if (group_size != static_cast<int64_t>(ranks.size()))
    throw Error("group_size does not match the number of ranks", w, std::to_string(ranks.size()),
                std::to_string(group_size));
  if (!tag.empty()) throw Error(str("unknown group tag '", tag, "'"), w, "the empty tag \"\"", tag);
  std::lock_guard<std::mutex> lk(mu_);
  std::string best;
  for (const auto& [name, pg] : groups_) {
    const auto& g = pg->global_ranks();
    if (g.size() != ranks.size() || !std::equal(g.begin(), g.end(), ranks.begin())) continue;
    // Prefer the group's own name (e.g. "0" over the alias "default").
    if (best.empty() || name == pg->name()) best = name;
  }
  if (best.empty()) {
    std::string r;
    for (auto x : ranks) r += (r.empty() ? "" : ", ") + std::to_string(x);
    throw Error("no registered process group has exactly these ranks", w,
                "a group created over these ranks", str("ranks [", r, "]"));
  }
  return best;
}

bool GroupRegistry::unregister(const std::string& name) {
  std::lock_guard<std::mutex> lk(mu_);
  return groups_.erase(name) > 0;
}

std::vector<std::string> GroupRegistry::names() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::string> out;
  for (const auto& [n, pg] : groups_) out.push_back(n);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::shared_ptr<ProcessGroup>> GroupRegistry::groups() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<std::shared_ptr<ProcessGroup>> out;
  std::set<ProcessGroup*> seen;
  for (const auto& [n, pg] : groups_)
    if (seen.insert(pg.get()).second) out.push_back(pg);
  return out;
}

// ------------------------------------------------------------------------------------------
// WorkRegistry

WorkRegistry& WorkRegistry::instance() {
  static WorkRegistry* r = new WorkRegistry();  // leaked: unwaited works are leaked at exit
  return *r;
}

void WorkRegistry::register_work(const Tensor& t, std::shared_ptr<Work> work) {
  if (!t.defined() || !t.storage()) {
    std::cerr << "anvil dist: warning: registering a collective for a tensor without storage; "
                 "wait_tensor will not wait for it\n";
    return;
  }
  std::lock_guard<std::mutex> lk(mu_);
  pending_[t.storage().get()].push_back(std::move(work));
}

void WorkRegistry::wait(const Tensor& t) {
  if (!t.defined() || !t.storage()) return;
  std::vector<std::shared_ptr<Work>> works;
  {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = pending_.find(t.storage().get());
    if (it == pending_.end()) return;
    works = std::move(it->second);
    pending_.erase(it);
  }
  std::exception_ptr first;
  for (auto& w : works) {
    try {
      w->wait();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

bool WorkRegistry::has_pending(const Tensor& t) const {
  if (!t.defined() || !t.storage()) return false;
  std::lock_guard<std::mutex> lk(mu_);
  return pending_.count(t.storage().get()) > 0;
}

size_t WorkRegistry::size() const {
  std::lock_guard<std::mutex> lk(mu_);
  size_t n = 0;
  for (const auto& [s, v] : pending_) n += v.size();
  return n;
}

void WorkRegistry::set_allow_inflight_collective_as_graph_input(bool on) {
  std::lock_guard<std::mutex> lk(mu_);
  inflight_mode_ = on;
}

bool WorkRegistry::allow_inflight_collective_as_graph_input() const {
  std::lock_guard<std::mutex> lk(mu_);
  return inflight_mode_;
}

void WorkRegistry::register_async(const Tensor& t, std::shared_ptr<Work> work) {
  if (allow_inflight_collective_as_graph_input()) register_work(t, std::move(work));
}

size_t WorkRegistry::leak_all() {
  std::lock_guard<std::mutex> lk(mu_);
  size_t n = 0;
  for (auto& [s, v] : pending_) {
    n += v.size();
    for (auto& w : v) new std::shared_ptr<Work>(std::move(w));  // leak: never destroyed
  }
  pending_.clear();
  return n;
}

// ------------------------------------------------------------------------------------------
// Exit handling

namespace {

std::mutex& hooks_mutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}
std::vector<std::function<void()>>& hooks() {
  static auto* h = new std::vector<std::function<void()>>();
  return *h;
}

/// Grace given to each group's queue at exit.
constexpr Millis kExitGrace{5000};

void at_exit() {
  const size_t unwaited = WorkRegistry::instance().leak_all();
  if (unwaited > 0)
    std::cerr << "anvil dist: warning: " << unwaited
              << " collective(s) were issued but never waited (wait_tensor); leaking them at "
                 "exit\n";
  bool all_drained = true;
  for (auto& pg : GroupRegistry::instance().groups()) {
    if (!pg->shutdown(kExitGrace)) {
      all_drained = false;
      std::cerr << "anvil dist: warning: group '" << pg->name()
                << "' still had operations in flight at exit\n";
    }
  }
  std::vector<std::function<void()>> hs;
  {
    std::lock_guard<std::mutex> lk(hooks_mutex());
    hs = hooks();
  }
  if (!all_drained) return;  // an engine with ops in flight must not be finalized
  for (auto& h : hs) {
    try {
      h();
    } catch (const std::exception& e) {
      std::cerr << "anvil dist: warning: exit hook failed: " << e.what() << "\n";
    }
  }
}

}  // namespace

void install_exit_handler() {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(&at_exit); });
}

void add_exit_hook(std::function<void()> hook) {
  std::lock_guard<std::mutex> lk(hooks_mutex());
  hooks().push_back(std::move(hook));
}

}  // namespace anvil::dist
