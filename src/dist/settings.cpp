// Process-wide dist settings: parsing, validation and the read-once cache.
#include "dist/settings.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>

#include "core/error.h"

namespace anvil::dist {

namespace {

constexpr const char* kWhere = "dist settings (environment)";

std::string trim_lower(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  std::string r = s.substr(b, e - b);
  std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return std::tolower(c); });
  return r;
}

/// A byte count (a non-negative integer); unset or empty = `def`. `zero` says what 0 means.
int64_t parse_bytes(const char* name, const char* v, int64_t def, const char* zero) {
  if (!v || !*v) return def;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v, &end, 10);
  if (errno != 0 || *end != '\0' || n < 0 || !std::isdigit(static_cast<unsigned char>(*v)))
    throw Error(str(name, " is not a byte count: '", v, "'"), "dist settings",
                str("a non-negative integer (", zero, ")"), str("'", v, "'"));
  return n;
}

/// A 0/1 switch; unset or empty = `def`.
bool parse_flag(const char* name, const char* value, bool def) {
  if (!value || !*value) return def;
  const std::string v = trim_lower(value);
  if (v == "0" || v == "1") return v == "1";
  throw Error(str("environment variable ", name, " is not 0 or 1"), kWhere, "0 or 1",
              str("'", value, "'"));
}

/// The op named `n` (op_type_name(): all_gather is the list form, all_gather_into_tensor the
/// tensor one).
std::optional<OpType> op_from_name(const std::string& n) {
  for (OpType op : all_op_types())
    if (n == op_type_name(op)) return op;
  return std::nullopt;
}

OpTypeSet parse_blocking(const char* name, const char* value) {
  OpTypeSet set;
  set.insert(OpType::kBarrier);  // always blocking
  if (!value || !*value) return set;
  const std::string all = trim_lower(value);
  if (all == "none" || all == "0") return set;
  if (all == "all" || all == "1") return OpTypeSet::all();
  size_t start = 0;
  while (start <= all.size()) {
    const size_t comma = std::min(all.find(',', start), all.size());
    const std::string token = trim_lower(all.substr(start, comma - start));
    const auto op = op_from_name(token);
    if (!op)
      throw Error(str("environment variable ", name, " names an unknown op '", token, "'"), kWhere,
                  str("none, all, or a comma list of op names (", OpTypeSet::all().names(), ")"),
                  str("'", value, "'"));
    set.insert(*op);
    start = comma + 1;
  }
  return set;
}

}  // namespace

std::vector<OpType> all_op_types() {
  std::vector<OpType> ops;
  // op_type_name() answers "?" past the last enumerator: the list follows the enum by itself.
  for (int i = 0; i < 64; ++i) {
    const OpType op = static_cast<OpType>(i);
    if (std::string(op_type_name(op)) == "?") break;
    ops.push_back(op);
  }
  return ops;
}

OpTypeSet OpTypeSet::all() {
  OpTypeSet s;
  for (OpType op : all_op_types()) s.insert(op);
  return s;
}

std::string OpTypeSet::names() const {
  std::string r;
  for (OpType op : all_op_types())
    if (contains(op)) r += (r.empty() ? "" : ", ") + std::string(op_type_name(op));
  return r;
}

std::string DistSettings::describe() const {
  return str("ANVIL_DIST_USE_FUTURE=", use_future ? 1 : 0,
             " ANVIL_DIST_HEALTH_CHECK=", health_check ? 1 : 0, " ANVIL_DIST_TRACE=", trace ? 1 : 0,
             " ANVIL_DIST_TRACE_DIR=", trace_dir, " ANVIL_NCCL_BLOCKING_WAIT=",
             blocking_wait == OpTypeSet::all() ? std::string("all") : blocking_wait.names(),
             " ANVIL_NCCL_BLOCKING_COMM=", nccl_blocking_comm ? 1 : 0,
             " ANVIL_NCCL_CALLER_STREAM_BYTES=", nccl_caller_stream_bytes,
             " ANVIL_NCCL_ONE_SHOT_BYTES=", nccl_one_shot_bytes);
}

DistSettings parse_dist_settings(const std::function<const char*(const char*)>& getenv) {
  DistSettings s;
  s.use_future = parse_flag("ANVIL_DIST_USE_FUTURE", getenv("ANVIL_DIST_USE_FUTURE"), true);
  s.health_check = parse_flag("ANVIL_DIST_HEALTH_CHECK", getenv("ANVIL_DIST_HEALTH_CHECK"), false);
  s.trace = parse_flag("ANVIL_DIST_TRACE", getenv("ANVIL_DIST_TRACE"), false);
  if (const char* d = getenv("ANVIL_DIST_TRACE_DIR"); d && *d) s.trace_dir = d;
  s.blocking_wait = parse_blocking("ANVIL_NCCL_BLOCKING_WAIT", getenv("ANVIL_NCCL_BLOCKING_WAIT"));
  s.nccl_blocking_comm =
      parse_flag("ANVIL_NCCL_BLOCKING_COMM", getenv("ANVIL_NCCL_BLOCKING_COMM"), true);
  s.nccl_caller_stream_bytes =
      parse_bytes("ANVIL_NCCL_CALLER_STREAM_BYTES", getenv("ANVIL_NCCL_CALLER_STREAM_BYTES"),
                  s.nccl_caller_stream_bytes, "0: no op on the caller's stream");
  s.nccl_one_shot_bytes = parse_bytes("ANVIL_NCCL_ONE_SHOT_BYTES",
                                      getenv("ANVIL_NCCL_ONE_SHOT_BYTES"), s.nccl_one_shot_bytes,
                                      "0: every all_reduce through NCCL");
  return s;
}

const DistSettings& dist_settings() {
  static std::mutex mu;
  static std::atomic<const DistSettings*> cached{nullptr};  // never freed: groups may outlive
  if (const DistSettings* c = cached.load(std::memory_order_acquire)) return *c;  // main()
  std::lock_guard<std::mutex> lk(mu);
  if (const DistSettings* c = cached.load(std::memory_order_acquire)) return *c;
  const auto* s =
      new DistSettings(parse_dist_settings([](const char* n) { return std::getenv(n); }));
  cached.store(s, std::memory_order_release);
  const char* debug = std::getenv("ANVIL_DIST_DEBUG");
  if (debug && *debug && std::string(debug) != "0")
    std::cerr << "anvil dist: settings: " << s->describe() << "\n";
  return *s;
}

}  // namespace anvil::dist
