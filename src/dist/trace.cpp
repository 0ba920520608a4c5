// The per-op trace: records, the JSON writer and the exit hook.
#include "dist/trace.h"

#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>

#include "core/error.h"
#include "dist/registry.h"
#include "dist/settings.h"

namespace anvil::dist {

namespace {

struct WaitRecord {
  const OpTrace* op;
  int64_t start_ns, end_ns;
  std::string error;
};

/// The records in the order they were made: an op (op != null) or a wait.
struct Entry {
  OpTrace* op = nullptr;
  WaitRecord wait{};
};

struct TraceState {
  std::mutex mu;
  std::deque<std::unique_ptr<OpTrace>> ops;
  std::vector<Entry> entries;
  bool warned_full = false;
  bool hook = false;
};

TraceState& state() {
  static auto* s = new TraceState();  // never freed: Works may outlive main()
  return *s;
}

std::string quote(const std::string& s) {
  std::string r = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      r += '\\';
      r += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      r += buf;
    } else {
      r += static_cast<char>(c);
    }
  }
  return r + "\"";
}

std::string sizes_json(const std::vector<std::vector<int64_t>>& sizes) {
  std::string r = "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    r += i ? ", [" : "[";
    for (size_t j = 0; j < sizes[i].size(); ++j) r += (j ? ", " : "") + std::to_string(sizes[i][j]);
    r += "]";
  }
  return r + "]";
}

std::string time_json(int64_t t, int64_t base) { return t < 0 ? "null" : std::to_string(t - base); }

/// Room for one more record (mu held); warns once when full.
bool has_room(TraceState& st) {
  if (st.entries.size() < kMaxTraceRecords) return true;
  if (!st.warned_full)
    std::cerr << "anvil dist: warning: the trace is full (" << kMaxTraceRecords
              << " records); later ops are not recorded\n";
  st.warned_full = true;
  return false;
}

std::string json_locked(TraceState& st) {
  std::ostringstream os;
  os << "[";
  const int64_t base = st.entries.empty() ? 0
                       : st.entries[0].op ? st.entries[0].op->posted_ns
                                          : st.entries[0].wait.start_ns;
  for (size_t i = 0; i < st.entries.size(); ++i) {
    os << (i ? ",\n " : "\n ");
    const Entry& e = st.entries[i];
    if (e.op) {
      const OpTrace& r = *e.op;
      const int64_t ended = r.ended_ns.load();
      const char* status = !r.error.empty() ? "error" : ended >= 0 ? "ok" : "pending";
      os << "{\"kind\": \"op\", \"op\": " << quote(r.op) << ", \"backend\": " << quote(r.backend)
         << ", \"group\": " << quote(r.group) << ", \"rank\": " << r.rank
         << ", \"size\": " << r.size << ", \"global_rank\": " << r.global_rank
         << ", \"seq\": " << r.seq << ", \"dtype\": " << quote(r.dtype)
         << ", \"in_sizes\": " << sizes_json(r.in_sizes)
         << ", \"out_sizes\": " << sizes_json(r.out_sizes) << ", \"peer\": " << r.peer;
      if (const char* engine = r.engine.load()) os << ", \"engine\": " << quote(engine);
      os << ", \"posted_ns\": " << time_json(r.posted_ns, base)
         << ", \"started_ns\": " << time_json(r.started_ns.load(), base)
         << ", \"ended_ns\": " << time_json(ended, base) << ", \"status\": \"" << status
         << "\", \"error\": " << quote(r.error) << "}";
    } else {
      const WaitRecord& w = e.wait;
      os << "{\"kind\": \"wait\", \"op\": " << quote(w.op->op)
         << ", \"group\": " << quote(w.op->group) << ", \"seq\": " << w.op->seq
         << ", \"start_ns\": " << time_json(w.start_ns, base)
         << ", \"end_ns\": " << time_json(w.end_ns, base) << ", \"status\": \""
         << (w.error.empty() ? "ok" : "error") << "\", \"error\": " << quote(w.error) << "}";
    }
  }
  os << (st.entries.empty() ? "]\n" : "\n]\n");
  return os.str();
}

}  // namespace

int64_t trace_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

OpTrace* trace_publish(std::unique_ptr<OpTrace> rec) {
  TraceState& st = state();
  bool install = false;
  OpTrace* p = nullptr;
  {
    std::lock_guard<std::mutex> lk(st.mu);
    if (!has_room(st)) return nullptr;
    p = rec.get();
    st.ops.push_back(std::move(rec));
    st.entries.push_back(Entry{p, {}});
    install = !st.hook;
    st.hook = true;
  }
  if (install)
    add_exit_hook([] {
      try {
        write_trace();
      } catch (const std::exception& e) {
        std::cerr << "anvil dist: warning: the trace was not written at exit: " << e.what() << "\n";
      }
    });
  return p;
}

void trace_set_error(OpTrace* rec, const std::string& error) {
  if (!rec) return;
  TraceState& st = state();
  std::lock_guard<std::mutex> lk(st.mu);
  if (rec->error.empty()) rec->error = error.empty() ? "unknown error" : error;
}

void trace_add_wait(const OpTrace* rec, int64_t start_ns, int64_t end_ns,
                    const std::string& error) {
  if (!rec) return;
  TraceState& st = state();
  std::lock_guard<std::mutex> lk(st.mu);
  if (!has_room(st)) return;
  st.entries.push_back(Entry{nullptr, WaitRecord{rec, start_ns, end_ns, error}});
}

std::string trace_json() {
  TraceState& st = state();
  std::lock_guard<std::mutex> lk(st.mu);
  return json_locked(st);
}

std::string write_trace() {
  namespace fs = std::filesystem;
  TraceState& st = state();
  std::string text;
  int rank = 0;
  {
    std::lock_guard<std::mutex> lk(st.mu);
    if (st.ops.empty()) return "";
    rank = st.ops.front()->global_rank;
    text = json_locked(st);
  }
  const fs::path dir = dist_settings().trace_dir;
  const fs::path path = dir / str("rank", rank, ".json");
  const std::string where = "dist trace (ANVIL_DIST_TRACE_DIR)";
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    throw Error("cannot create the trace directory", where, "a writable directory",
                str("'", dir.string(), "': ", ec.message()));
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.close();
    if (!f)
      throw Error("cannot write the trace file", where, "a writable file",
                  str("'", tmp.string(), "'"));
  }
  fs::rename(tmp, path, ec);
  if (ec)
    throw Error("cannot rename the trace file into place", where, str("'", path.string(), "'"),
                ec.message());
  return path.string();
}

}  // namespace anvil::dist
