// Memory planning (KERNELS.md §4): every intermediate buffer that needs memory gets an offset
// in one arena. Lifetimes are [first step touching it, last step touching it]; buffers whose
// lifetimes overlap never overlap in memory. Greedy best-fit by size: the largest buffers are
// placed first, each in the smallest free gap among the buffers it conflicts with.
//
// Symbolic sizes: when every symbol has a finite maximum and every size grows with the symbols
// (checked at the range corners), the plan is made at the maximum sizes; its offsets are then
// valid for every allowed size, and the arena size is one constant (the planned peak). Otherwise
// buffers share slots (greedy colouring of the lifetime-conflict graph, largest first): a slot is
// as large as its largest member and slots are stacked, so each offset is a sum of flat Max
// terms and the plan holds for any sizes.
#include <algorithm>
#include <set>

#include "core/error.h"
#include "passes/lower_internal.h"

namespace anvil::passes::detail {

namespace {

constexpr int64_t kAlign = 64;

/// Steps reading or writing each buffer.
std::map<int, std::pair<size_t, size_t>> lifetimes(const Program& p) {
  std::map<int, std::pair<size_t, size_t>> life;
  auto touch = [&](int b, size_t s) {
    if (b < 0) return;
    auto it = life.find(b);
    if (it == life.end())
      life[b] = {s, s};
    else
      it->second = {std::min(it->second.first, s), std::max(it->second.second, s)};
  };
  for (size_t si = 0; si < p.steps.size(); ++si) {
    std::set<int> reads, writes;
    step_accesses(p, p.steps[si], reads, writes);
    for (int b : reads) touch(b, si);
    for (int b : writes) touch(b, si);
  }
  return life;
}

SymInt align_up(const SymInt& x) {
  return (x + SymInt(kAlign - 1)).floordiv(SymInt(kAlign)) * SymInt(kAlign);
}

/// The buffer whose memory `b` uses (following alias_of).
int root_of(const Program& p, int b) {
  int guard = 0;
  while (p.buffers[static_cast<size_t>(b)].alias_of >= 0 && guard++ < 64)
    b = p.buffers[static_cast<size_t>(b)].alias_of;
  return b;
}

}  // namespace

void plan_memory(Program& p) {
  const auto life = lifetimes(p);
  // Group buffers by their memory root; only arena roots are planned.
  struct Item {
    int root;
    size_t first, last;
    SymInt bytes;
    int64_t max_bytes = 0;
  };
  std::map<int, Item> items;
  // Buffers sized by run-time values are allocated during the run, before their first step.
  std::map<int, size_t> run_first;
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    const Buffer& buf = p.buffers[b];
    if (!buf.run_time_sized || buf.local || buf.alias_of >= 0) continue;
    ANVIL_CHECK(buf.kind == BufferKind::kArena || buf.kind == BufferKind::kOutput,
                "plan_memory(" + buf.name + ")", "a run-time-sized buffer of the wrong kind",
                "an intermediate or an output", buffer_kind_name(buf.kind));
    run_first[static_cast<int>(b)] = p.steps.size();
  }
  for (const auto& [b, lt] : life) {
    const int r = root_of(p, b);
    if (auto it = run_first.find(r); it != run_first.end())
      it->second = std::min(it->second, lt.first);
  }
  p.run_allocs.clear();
  int dyn_slots = 0;
  for (const auto& [b, first] : run_first) {
    Buffer& buf = p.buffers[static_cast<size_t>(b)];
    if (buf.kind == BufferKind::kArena) buf.dyn_slot = dyn_slots++;
    p.run_allocs.emplace_back(first, b);
  }
  std::stable_sort(p.run_allocs.begin(), p.run_allocs.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [b, lt] : life) {
    const Buffer& buf = p.buffers[static_cast<size_t>(b)];
    if (buf.kind != BufferKind::kArena || buf.local) continue;
    const int r = root_of(p, b);
    if (p.buffers[static_cast<size_t>(r)].kind != BufferKind::kArena) continue;
    if (run_first.count(r)) continue;
    auto it = items.find(r);
    if (it == items.end()) {
      const Buffer& rb = p.buffers[static_cast<size_t>(r)];
      // run-time counts (nonzero / mask indexing) are planned at their capacity
      const SymInt numel = rb.numel.substitute(p.unbacked_capacity);
      Item item{r, lt.first, lt.second,
                align_up(numel * SymInt(static_cast<int64_t>(dtype_size(rb.dtype)))), 0};
      items.emplace(r, item);
    } else {
      it->second.first = std::min(it->second.first, lt.first);
      it->second.last = std::max(it->second.last, lt.second);
    }
  }
  // Can the plan be made at the symbols' maxima?
  bool bounded = true;
  SymEnv at_max;
  for (const auto& s : p.symbols) {
    const SymRange& r = p.symbol_ranges.at(s);
    if (r.max == SymRange::kSymMax || r.max > (int64_t{1} << 40)) bounded = false;
    at_max[s] = r.max;
  }
  std::vector<SymEnv> corners;
  for (const auto& s : p.symbols) {
    SymEnv e = at_max;
    e[s] = std::max<int64_t>(p.symbol_ranges.at(s).min, 0);
    corners.push_back(e);
  }
  if (bounded) {
    SymEnv all_min;
    for (const auto& s : p.symbols) all_min[s] = std::max<int64_t>(p.symbol_ranges.at(s).min, 0);
    corners.push_back(all_min);
  }
  for (auto& [r, it] : items) {
    if (!bounded) break;
    try {
      it.max_bytes = it.bytes.evaluate(at_max);
      for (const auto& c : corners)
        if (it.bytes.evaluate(c) > it.max_bytes) bounded = false;
    } catch (const Error&) {
      bounded = false;
    }
  }
  std::vector<Item*> order;
  for (auto& [r, it] : items) order.push_back(&it);
  auto probe = [&](const Item* it) -> int64_t {
    if (bounded) return it->max_bytes;
    SymEnv e;
    std::set<std::string> syms;
    it->bytes.collect_symbols(syms);
    for (const auto& s : syms) e[s] = 64;
    try {
      return it->bytes.evaluate(e);
    } catch (const Error&) {
      return 0;
    }
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](const Item* a, const Item* b) { return probe(a) > probe(b); });
  struct Placed {
    const Item* item;
    int64_t off;
    SymInt sym_off;
  };
  std::vector<Placed> placed;
  int64_t peak = 0;
  SymInt arena(0);
  if (!bounded) {
    // Unbounded symbols: slots. Each buffer (largest probe first) joins the first slot whose
    // buffers all have disjoint lifetimes from it; a slot is as large as its largest member
    // (a flat Max) and slots are stacked, so an offset is a sum of flat Max terms. (Stacking
    // each buffer on Max(ends of the buffers it conflicts with) nests those Max expressions,
    // which grew to megabytes of generated code on a BLOOM export with unbounded batch and
    // sequence.)
    struct Slot {
      std::vector<const Item*> members;
      SymInt bytes{0};
    };
    std::vector<Slot> slots;
    std::map<const Item*, size_t> slot_of;
    for (const Item* it : order) {
      size_t k = 0;
      for (; k < slots.size(); ++k) {
        bool free = true;
        for (const Item* q : slots[k].members)
          if (!(q->last < it->first || it->last < q->first)) free = false;
        if (free) break;
      }
      if (k == slots.size()) slots.emplace_back();
      slots[k].members.push_back(it);
      slots[k].bytes =
          slots[k].members.size() == 1 ? it->bytes : SymInt::max(slots[k].bytes, it->bytes);
      slot_of[it] = k;
    }
    std::vector<SymInt> slot_off;
    SymInt cursor(0);
    for (const Slot& sl : slots) {
      slot_off.push_back(cursor);
      cursor = cursor + sl.bytes;
    }
    for (const Item* it : order) placed.push_back({it, 0, slot_off[slot_of.at(it)]});
    arena = cursor;
  }
  for (const Item* it : order) {
    if (!bounded) break;
    std::vector<const Placed*> conflicts;
    for (const Placed& q : placed)
      if (!(q.item->last < it->first || it->last < q.item->first)) conflicts.push_back(&q);
    Placed me{it, 0, SymInt(0)};
    {
      std::sort(conflicts.begin(), conflicts.end(),
                [](const Placed* a, const Placed* b) { return a->off < b->off; });
      int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
      for (const Placed* q : conflicts) {
        const int64_t gap = q->off - cursor;
        if (gap >= it->max_bytes && gap < best_gap) {
          best = cursor;
          best_gap = gap;
        }
        cursor = std::max(cursor, q->off + q->item->max_bytes);
      }
      me.off = best >= 0 ? best : cursor;
      me.sym_off = SymInt(me.off);
      peak = std::max(peak, me.off + it->max_bytes);
    }
    placed.push_back(me);
  }
  for (const Placed& q : placed) p.buffers[static_cast<size_t>(q.item->root)].offset = q.sym_off;
  // aliases share their root's offset
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    Buffer& buf = p.buffers[b];
    if (buf.kind != BufferKind::kArena || buf.local) continue;
    const int r = root_of(p, static_cast<int>(b));
    if (r != static_cast<int>(b)) {
      buf.offset = p.buffers[static_cast<size_t>(r)].offset;
      buf.dyn_slot = p.buffers[static_cast<size_t>(r)].dyn_slot;
    }
  }
  if (bounded) {
    p.arena_bytes = SymInt(peak);
    p.planned_peak_bytes = peak;
  } else {
    p.arena_bytes = arena;
    p.planned_peak_bytes = -1;
  }
}

}  // namespace anvil::passes::detail
