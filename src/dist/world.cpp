// World initialisation from the environment, the backend factory and sub-groups.
#include "dist/world.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/error.h"
#include "dist/fake_process_group.h"
#include "dist/health_check.h"
#include "dist/nccl_backend.h"
#include "dist/registry.h"
#include "dist/settings.h"
#include "dist/tcp_store.h"
#ifdef ANVIL_HAVE_GLOO
#include "dist/gloo/gloo_process_group.h"
#endif
#ifdef ANVIL_HAVE_MPI
#include "dist/mpi/mpi_process_group.h"
#endif

namespace anvil::dist {

namespace {

constexpr const char* kWhere = "dist::init_world_from_env";

/// The value of an environment variable, or null when unset or empty.
const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

/// Parses an integer variable; throws Error naming it when malformed.
int env_int(const char* name, const char* value, int lo) {
  try {
    size_t pos = 0;
    const long v = std::stol(value, &pos);
    if (pos == std::strlen(value) && v >= lo && v <= (1 << 30)) return static_cast<int>(v);
  } catch (const std::exception&) {
  }
  throw Error(str("environment variable ", name, " is not a valid number"), kWhere,
              str("an integer >= ", lo), str("'", value, "'"));
}

/// A 0/1 switch; anything else is an Error naming the variable.
bool env_flag(const char* name) {
  const char* v = env(name);
  if (!v) return false;
  const std::string s = v;
  if (s == "1" || s == "0") return s == "1";
  throw Error(str("environment variable ", name, " is not 0 or 1"), kWhere, "0 or 1",
              str("'", s, "'"));
}

struct WorldState {
  std::mutex mu;
  std::shared_ptr<ProcessGroup> world;
  int next_group = 1;
};
WorldState& state() {
  static WorldState* s = new WorldState();
  return *s;
}

}  // namespace

WorldEnv read_world_env() {
  WorldEnv e;
  if (env("RANK") || env("WORLD_SIZE")) {
    std::string missing;
    for (const char* v : {"RANK", "WORLD_SIZE"})
      if (!env(v)) missing += (missing.empty() ? "" : ", ") + std::string(v);
    if (!missing.empty())
      throw Error("incomplete launcher environment", kWhere, "RANK and WORLD_SIZE both set",
                  str("missing ", missing));
    e.source = "torchrun";
    e.rank = env_int("RANK", env("RANK"), 0);
    e.world_size = env_int("WORLD_SIZE", env("WORLD_SIZE"), 1);
    e.local_rank = env("LOCAL_RANK") ? env_int("LOCAL_RANK", env("LOCAL_RANK"), 0) : e.rank;
    e.local_world_size = env("LOCAL_WORLD_SIZE")
                             ? env_int("LOCAL_WORLD_SIZE", env("LOCAL_WORLD_SIZE"), 1)
                             : e.world_size;
  } else if (env("OMPI_COMM_WORLD_SIZE") || env("PMI_SIZE")) {
    e.source = "mpi";
    const bool ompi = env("OMPI_COMM_WORLD_SIZE") != nullptr;
    const char* rk = ompi ? "OMPI_COMM_WORLD_RANK" : "PMI_RANK";
    const char* sz = ompi ? "OMPI_COMM_WORLD_SIZE" : "PMI_SIZE";
    if (!env(rk)) throw Error("incomplete MPI environment", kWhere, str(rk, " set"), "unset");
    e.rank = env_int(rk, env(rk), 0);
    e.world_size = env_int(sz, env(sz), 1);
    const char* lr = env("OMPI_COMM_WORLD_LOCAL_RANK");
    const char* ls = env("OMPI_COMM_WORLD_LOCAL_SIZE");
    e.local_rank = lr ? env_int("OMPI_COMM_WORLD_LOCAL_RANK", lr, 0) : e.rank;
    e.local_world_size = ls ? env_int("OMPI_COMM_WORLD_LOCAL_SIZE", ls, 1) : e.world_size;
  } else {
    throw Error("this process was not started by a launcher", kWhere,
                "RANK and WORLD_SIZE (+ MASTER_ADDR, MASTER_PORT) from `anvil launch` or "
                "torchrun, or OMPI_COMM_WORLD_RANK/SIZE from mpirun",
                "none of them in the environment");
  }
  if (e.rank >= e.world_size)
    throw Error("rank is not below the world size", kWhere, str("rank < ", e.world_size),
                std::to_string(e.rank));
  if (const char* a = env("MASTER_ADDR")) e.master_addr = a;
  if (const char* p = env("MASTER_PORT")) e.master_port = env_int("MASTER_PORT", p, 1);
  const char* agent = env("TORCHELASTIC_USE_AGENT_STORE");
  if (const char* p = env("ANVIL_STORE_PORT"))
    e.store_port = env_int("ANVIL_STORE_PORT", p, 1);
  else if (e.master_port > 0 && agent && std::string(agent) == "True")
    e.store_port = e.master_port + 1;
  else
    e.store_port = e.master_port;
  return e;
}

GroupOptions group_options_from_env() {
  GroupOptions o;
  if (const char* t = env("ANVIL_DIST_TIMEOUT")) {
    char* end = nullptr;
    const double s = std::strtod(t, &end);
    if (end == t || *end != '\0' || !(s > 0))
      throw Error("ANVIL_DIST_TIMEOUT is not a positive number of seconds", kWhere, "seconds > 0",
                  str("'", t, "'"));
    o.timeout = Millis(static_cast<int64_t>(s * 1000.0 + 0.5));
  }
  if (const char* d = env("ANVIL_DIST_DEBUG")) o.check_consistency = std::string(d) != "0";
  o.eager_init = env_flag("ANVIL_NCCL_EAGER_INIT");
  // ANVIL_NCCL_BLOCKING_WAIT (an op list) is a process setting (settings.h).
  return o;
}

std::vector<std::string> available_backends() {
  std::vector<std::string> b;
#ifdef ANVIL_HAVE_GLOO
  b.push_back("gloo");
#endif
#ifdef ANVIL_HAVE_MPI
  b.push_back("mpi");
#endif
#ifdef ANVIL_HAVE_NCCL
  b.push_back("nccl");  // built; libanvil_nccl.so is loaded when a group is created
#endif
  b.push_back("fake");
  return b;
}

namespace {

std::shared_ptr<ProcessGroup> make_backend(const std::string& backend, std::shared_ptr<Store> store,
                                           int rank, int size, const GroupOptions& options) {
  if (backend == "fake") return std::make_shared<FakeProcessGroup>(rank, size, options);
#ifdef ANVIL_HAVE_GLOO
  if (backend == "gloo") {
    std::string addr;
    if (auto* tcp = dynamic_cast<TCPStore*>(store.get())) addr = tcp->host();
    return std::make_shared<GlooProcessGroup>(std::move(store), rank, size, std::vector<int>{},
                                              options, gloo_device_from_env(addr));
  }
#endif
#ifdef ANVIL_HAVE_MPI
  if (backend == "mpi") return make_mpi_world(rank, size, options);
#endif
#ifdef ANVIL_HAVE_NCCL
  if (backend == "nccl") return create_nccl_process_group(std::move(store), rank, size, options);
#endif
  std::string list;
  for (const auto& b : available_backends()) list += (list.empty() ? "" : ", ") + b;
  const bool known = backend == "gloo" || backend == "mpi" || backend == "nccl";
  throw Error(known ? str("backend '", backend, "' is not built into this anvil")
                    : str("unknown backend '", backend, "'"),
              "dist::create_process_group", str("one of ", list),
              known ? str("'", backend, "' (install ",
                          backend == "gloo"  ? "libgloo-dev"
                          : backend == "mpi" ? "libopenmpi-dev"
                                             : "CUDA + NCCL",
                          " and rebuild)")
                    : str("'", backend, "'"));
}

}  // namespace

std::shared_ptr<ProcessGroup> create_process_group(const std::string& backend,
                                                   std::shared_ptr<Store> store, int rank, int size,
                                                   GroupOptions options) {
  const bool check = dist_settings().health_check || options.health_check;  // validates the env
  const auto started = std::chrono::steady_clock::now();
  if (check && store && size > 1 && rank >= 0 && rank < size)
    health_check_checkin(*store, rank, size, options.timeout,
                         str(backend, " group (rank ", rank, " of ", size, ")"));
  auto pg = make_backend(backend, std::move(store), rank, size, options);
  if (check) health_check_verify(*pg, options.timeout, started);
  return pg;
}

std::shared_ptr<ProcessGroup> init_world_from_env(const std::string& requested) {
  std::string backend = requested;
  if (backend.empty()) backend = env("ANVIL_BACKEND") ? env("ANVIL_BACKEND") : "gloo";
  WorldState& st = state();
  std::lock_guard<std::mutex> lk(st.mu);
  if (st.world) {
    if (st.world->backend_name() != backend)
      throw Error("the world group already exists with another backend", kWhere,
                  str("backend '", backend, "'"), str("'", st.world->backend_name(), "'"));
    return st.world;
  }
  const WorldEnv e = read_world_env();
  dist_settings();  // a malformed setting fails here, before any connection
  GroupOptions opts = group_options_from_env();
  if (opts.device_index < 0) opts.device_index = e.local_rank;  // nccl: rank r on cuda:LOCAL_RANK
  std::shared_ptr<Store> store;
  if (backend == "gloo" || backend == "nccl") {
    if (e.store_port < 0)
      throw Error(str("MASTER_PORT is not set (the ", backend,
                      " backend rendezvous through a TCP store hosted by rank 0 on "
                      "MASTER_ADDR:MASTER_PORT)"),
                  kWhere, "MASTER_PORT", "unset");
    const std::string addr = e.master_addr.empty() ? "127.0.0.1" : e.master_addr;
    auto tcp = std::make_shared<TCPStore>(addr, e.store_port, e.rank == 0, opts.timeout);
    store = std::make_shared<PrefixStore>("anvil/world", tcp);
  } else if (backend == "mpi" && e.source != "mpi") {
    throw Error("the mpi backend must be started by mpirun", kWhere,
                "OMPI_COMM_WORLD_RANK/SIZE (mpirun -n N ...)",
                str("a ", e.source, " environment (use the gloo backend with `anvil launch`)"));
  }
  auto pg = create_process_group(backend, store, e.rank, e.world_size, opts);
  // Nobody leaves init (and rank 0, the store's host, leaves last) before every rank connected.
  if (store) store_barrier(*store, "init", e.rank, e.world_size, opts.timeout);
  GroupRegistry::instance().register_group("0", pg);
  st.world = pg;
  return pg;
}

void set_world(std::shared_ptr<ProcessGroup> pg) {
  WorldState& st = state();
  std::lock_guard<std::mutex> lk(st.mu);
  GroupRegistry::instance().register_group("0", pg);
  st.world = std::move(pg);
}

void clear_world() {
  WorldState& st = state();
  std::lock_guard<std::mutex> lk(st.mu);
  for (const std::string& name : GroupRegistry::instance().names())
    GroupRegistry::instance().unregister(name);
  st.world.reset();
}

std::shared_ptr<ProcessGroup> world() {
  WorldState& st = state();
  std::lock_guard<std::mutex> lk(st.mu);
  return st.world;
}

bool world_initialized() { return world() != nullptr; }

std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks) {
  auto w = world();
  if (!w)
    throw Error("no world group: call init_world_from_env first", "dist::new_group",
                "an initialised world", "none");
  std::string name;
  {
    WorldState& st = state();
    std::lock_guard<std::mutex> lk(st.mu);
    name = std::to_string(st.next_group++);
  }
  auto pg = w->new_subgroup(ranks, name);
  if (pg) GroupRegistry::instance().register_group(name, pg);
  return pg;
}

}  // namespace anvil::dist
