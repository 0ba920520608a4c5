// Scheduling of collective steps (spec/collectives.md §3 C-D): bucketing of small all_reduces,
// all_gathers and reduce_scatters into one coalesced issue per op, issue as early as possible,
// wait as late as possible, all without raising the planned peak memory. Dependencies between
// steps are the buffers they read and write (through alias roots); a collective step reads its
// inputs and writes its outputs (an in-place one lists its buffer in both), and two steps may
// swap unless one writes what the other reads or writes.
#include <algorithm>
#include <cstdlib>
#include <set>

#include "core/error.h"
#include "passes/collectives.h"
#include "passes/lower_internal.h"

namespace anvil::passes {

namespace {

/// The buffer whose memory `b` uses (following alias_of).
int root_of(const Program& p, int b) {
  int guard = 0;
  while (b >= 0 && p.buffers[static_cast<size_t>(b)].alias_of >= 0 && guard++ < 64)
    b = p.buffers[static_cast<size_t>(b)].alias_of;
  return b;
}

/// Root buffers a step reads and writes. Run-time symbols count as pseudo-buffers with ids
/// below -1 (see symbol_id): an "anvil.item" step writes its symbol, and a collective issue
/// whose sizes or split lists use one reads it, so it is never hoisted above the value.
struct Access {
  std::set<int> reads, writes;
};

/// The pseudo-buffer id of run-time symbol `u` (-2, -3, ...), or 0 when `u` is not one.
int symbol_id(const Program& p, const std::string& u) {
  const auto& ub = p.unbacked_symbols;
  const auto it = std::find(ub.begin(), ub.end(), u);
  return it == ub.end() ? 0 : -2 - static_cast<int>(it - ub.begin());
}

/// Adds the run-time symbols an issue step's views and attributes use to `reads`.
void add_symbol_reads(const Program& p, const ExternStep& e, std::set<int>& reads) {
  std::set<std::string> syms;
  for (const auto* list : {&e.inputs, &e.outputs})
    for (const TensorView& v : *list) {
      for (const auto& s : v.sizes) s.collect_symbols(syms);
      for (const auto& s : v.strides) s.collect_symbols(syms);
      v.offset.collect_symbols(syms);
    }
  for (const ExternAttr& a : e.attrs) {
    a.i.collect_symbols(syms);
    for (const auto& s : a.ints) s.collect_symbols(syms);
  }
  for (const auto& u : syms)
    if (const int id = symbol_id(p, u); id != 0) reads.insert(id);
}

Access access(const Program& p, const Step& st) {
  Access out;
  auto add = [&](std::set<int>& to, int b) {
    if (b >= 0 && !p.buffers[static_cast<size_t>(b)].local) to.insert(root_of(p, b));
  };
  if (const auto* e = std::get_if<ExternStep>(&st)) {
    if (e->target == "anvil.item")
      if (const ExternAttr* a = find_attr(*e, "symbol"))
        if (const int id = symbol_id(p, a->s); id != 0) out.writes.insert(id);
    // a run-time assertion checks its symbols before anything uses them
    if (e->target == "anvil.assert")
      if (const ExternAttr* a = find_attr(*e, "symbols"))
        for (const SymInt& u : a->ints)
          if (auto name = u.as_symbol())
            if (const int id = symbol_id(p, *name); id != 0) out.writes.insert(id);
    if (is_collective_issue(*e)) add_symbol_reads(p, *e, out.reads);
  }
  std::set<int> reads, writes;
  step_accesses(p, st, reads, writes);
  for (int b : reads) add(out.reads, b);
  for (int b : writes) add(out.writes, b);
  return out;
}

/// True when the sets share an element.
bool intersects(const std::set<int>& a, const std::set<int>& b) {
  for (int x : a)
    if (b.count(x)) return true;
  return false;
}

/// True when the two steps may not swap: one writes what the other reads or writes (two
/// readers of a buffer, e.g. a GEMM and an all_gather of its operand, may).
bool conflict(const Access& a, const Access& b) {
  return intersects(a.writes, b.reads) || intersects(a.writes, b.writes) ||
         intersects(b.writes, a.reads);
}

/// The step as a collective issue / wait, or null.
const ExternStep* as_issue(const Step& s) {
  const auto* e = std::get_if<ExternStep>(&s);
  return e && is_collective_issue(*e) ? e : nullptr;
}
const ExternStep* as_wait(const Step& s) {
  const auto* e = std::get_if<ExternStep>(&s);
  return e && is_collective_wait(*e) ? e : nullptr;
}
/// Constant byte size of a view's elements, or -1.
int64_t view_bytes(const TensorView& v) {
  SymInt n(1);
  for (const auto& s : v.sizes) n = n * s;
  auto c = n.maybe_constant();
  return c ? *c * static_cast<int64_t>(dtype_size(v.dtype)) : -1;
}

/// Points a wait step at collective `id`.
void set_coll_attr(ExternStep& e, int id) {
  for (auto& a : e.attrs)
    if (a.name == "coll") a.i = SymInt(id);
}

/// The bucket key of a collective issue that may join a bucket (one tensor in, one out, on an
/// op with a coalesced form: all_reduce, all_gather_into_tensor, reduce_scatter_tensor), or "".
/// Members of a bucket share the op, group, reduce op and group size; all_reduces also share
/// the dtype (a coalesced all_gather / reduce_scatter keeps each tensor's dtype: the backends
/// split such a call by dtype).
std::string bucket_key(const ExternStep& e) {
  const std::string op = e.target.substr(std::string(kCollectivePrefix).size());
  const bool coalescable =
      op == "all_reduce" || op == "all_gather_into_tensor" || op == "reduce_scatter_tensor";
  if (!coalescable || e.inputs.size() != 1 || e.outputs.size() != 1) return "";
  std::string k = op + "|" + collective_attr(e, "group") + "|" + collective_attr(e, "reduce_op");
  if (const ExternAttr* gs = find_attr(e, "group_size")) k += "|" + gs->i.str();
  if (op == "all_reduce") k += "|" + std::string(dtype_name(e.inputs[0].dtype));
  return k;
}

/// Merges runs of small bucketable issues (bucket_key: all_reduce, all_gather_into_tensor,
/// reduce_scatter_tensor with equal keys; no other collective step and no wait between them; no
/// step between touching an earlier member's buffers) into the last member's issue, which then
/// lists every member's inputs and outputs in order (the coalesced form). A collective whose
/// input is another's result is never merged with it: the first one's wait sits between them.
/// Returns the number of issues merged away.
int bucket(Program& p, const CollectiveScheduleOptions& o) {
  int merged = 0;
  std::vector<size_t> run;  // step indices of the current bucket
  std::string key;
  int64_t run_bytes = 0;
  std::vector<bool> erase(p.steps.size(), false);
  std::map<int, int> renamed;  // collective id -> id of the bucket's issue
  auto close = [&] {
    if (run.size() >= 2) {
      auto& last = std::get<ExternStep>(p.steps[run.back()]);
      const int id = collective_id(last);
      std::vector<TensorView> ins, outs;
      std::vector<std::string> nodes;
      for (size_t i : run) {
        const auto& e = std::get<ExternStep>(p.steps[i]);
        ins.insert(ins.end(), e.inputs.begin(), e.inputs.end());
        outs.insert(outs.end(), e.outputs.begin(), e.outputs.end());
        nodes.insert(nodes.end(), e.nodes.begin(), e.nodes.end());
        renamed[collective_id(e)] = id;
        if (i != run.back()) {
          erase[i] = true;
          ++merged;
        }
      }
      last.inputs = ins;
      last.outputs = outs;
      last.nodes = nodes;
    }
    run.clear();
    key.clear();
    run_bytes = 0;
  };
  for (size_t i = 0; i < p.steps.size(); ++i) {
    const Step& st = p.steps[i];
    if (const ExternStep* e = as_issue(st)) {
      const std::string k = bucket_key(*e);
      // the larger of the two sides (an all_gather's output, a reduce_scatter's input)
      const int64_t bytes =
          k.empty() ? -1 : std::max(view_bytes(e->inputs[0]), view_bytes(e->outputs[0]));
      if (k.empty() || view_bytes(e->inputs[0]) < 0 || view_bytes(e->outputs[0]) < 0 ||
          bytes > o.bucket_max_tensor_bytes) {
        close();
        continue;
      }
      if (!run.empty() && (k != key || run_bytes + bytes > o.bucket_max_bytes)) close();
      if (!run.empty()) {
        // no step after a member's issue may touch that member's buffers (its issue moves
        // down to here)
        bool clash = false;
        for (size_t m : run) {
          const Access am = access(p, p.steps[m]);
          for (size_t j = m + 1; j < i && !clash; ++j)
            if (conflict(access(p, p.steps[j]), am)) clash = true;
        }
        if (clash) close();
      }
      run.push_back(i);
      key = k;
      run_bytes += bytes;
      continue;
    }
    if (as_wait(st)) close();
  }
  close();
  std::vector<Step> kept;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    if (erase[i]) continue;
    Step st = p.steps[i];
    if (auto* w = std::get_if<ExternStep>(&st); w && is_collective_wait(*w)) {
      auto it = renamed.find(collective_id(*w));
      if (it != renamed.end()) set_coll_attr(*w, it->second);
    }
    kept.push_back(std::move(st));
  }
  p.steps = std::move(kept);
  return merged;
}

/// Issues move up past steps they do not conflict with (never past another issue, so
/// the issue order stays the graph's on every rank); waits move down past steps they do not
/// conflict with (later issues included: waiting later never deadlocks, since every rank
/// issued the same collectives in the same order). Returns the number of moves.
int reorder(Program& p) {
  int moves = 0;
  std::vector<Access> t;
  for (const Step& s : p.steps) t.push_back(access(p, s));
  auto swap_steps = [&](size_t a, size_t b) {
    std::swap(p.steps[a], p.steps[b]);
    std::swap(t[a], t[b]);
    ++moves;
  };
  for (size_t i = 0; i < p.steps.size(); ++i) {
    if (!as_issue(p.steps[i])) continue;
    size_t j = i;
    while (j > 0 && !as_issue(p.steps[j - 1]) && !conflict(t[j - 1], t[j])) {
      swap_steps(j - 1, j);
      --j;
    }
  }
  for (size_t i = p.steps.size(); i-- > 0;) {
    if (!as_wait(p.steps[i])) continue;
    size_t j = i;
    while (j + 1 < p.steps.size() && !conflict(t[j + 1], t[j])) {
      swap_steps(j, j + 1);
      ++j;
    }
  }
  return moves;
}

/// Number of collective issue steps.
int count_issues(const Program& p) {
  int n = 0;
  for (const Step& s : p.steps)
    if (as_issue(s)) ++n;
  return n;
}

}  // namespace

CollectiveScheduleOptions collective_options_from_env(CollectiveScheduleOptions base) {
  auto flag = [](const char* name, bool& v) {
    const char* e = std::getenv(name);
    if (e && *e) v = std::string(e) != "0";
  };
  flag("ANVIL_COLLECTIVE_REORDER", base.reorder);
  flag("ANVIL_COLLECTIVE_BUCKET", base.bucket);
  return base;
}

CollectiveScheduleStats schedule_collectives(Program& program,
                                             const CollectiveScheduleOptions& options) {
  CollectiveScheduleStats stats;
  Program base = program;
  detail::plan_memory(base);
  stats.collectives = count_issues(base);
  if (stats.collectives == 0 || (!options.reorder && !options.bucket)) {
    program = std::move(base);
    return stats;
  }
  struct Variant {
    bool bucket, reorder;
  };
  std::vector<Variant> variants;
  if (options.bucket && options.reorder) variants.push_back({true, true});
  if (options.reorder) variants.push_back({false, true});
  if (options.bucket) variants.push_back({true, false});
  for (const Variant& v : variants) {
    Program cand = program;
    // Reordering first moves waits below later issues, so that collectives the graph waits
    // for one by one (issue, wait, issue, wait) still meet in one bucket; a second reordering
    // then lifts each bucket's issue as high as its members allow.
    int moves = v.reorder ? reorder(cand) : 0;
    const int merged = v.bucket ? bucket(cand, options) : 0;
    if (v.reorder && merged > 0) moves += reorder(cand);
    detail::plan_memory(cand);
    const bool ok = base.planned_peak_bytes >= 0 && cand.planned_peak_bytes >= 0 &&
                    cand.planned_peak_bytes <= base.planned_peak_bytes;
    if (!ok) continue;
    program = std::move(cand);
    stats.bucketed = merged;
    stats.moved = moves;
    stats.reorder_kept = v.reorder;
    stats.collectives = count_issues(program);
    return stats;
  }
  program = std::move(base);
  return stats;
}

}  // namespace anvil::passes
