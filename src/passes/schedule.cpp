// Fusion (KERNELS.md §3): consecutive pointwise / reduction SNodes with the same iteration
// shape become one loop kernel. A kernel has an outer domain (the kept dims, parallel) and an
// inner domain (the reduced dims, or the last dim for pointwise work); its members run in
// passes over the inner domain: a reduction finishes at the end of its pass, and whatever reads
// it runs in a later pass of the same outer iteration. A member may read what another member
// of the kernel writes only at the element that member writes for the same loop indices (so no
// outer iteration depends on another), and two members store into one buffer at one index or
// into elements provably apart (a concatenation's pieces). Values that never leave their kernel
// become local (registers, no memory).
#include <algorithm>
#include <set>

#include "core/error.h"
#include "passes/collectives.h"
#include "passes/lower_internal.h"

namespace anvil::passes::detail {

namespace {

bool same_shape(const std::vector<SymInt>& a, const std::vector<SymInt>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i])) return false;
  return true;
}

/// Role of a kernel member.
enum class Role { kInner, kReduce, kScalar };

struct Member {
  size_t snode;
  Role role;
  int expr = -1;
  SymInt index;   // store index
  int stage = 0;  // 3p: before pass p's loop, 3p+1: in it, 3p+2: after it
};

/// A kernel being formed.
struct Group {
  std::vector<SymInt> sizes;  // full iteration shape
  std::vector<bool> reduced;  // inner dims
  bool fixed = false;         // has a reduction: `reduced` cannot change
  std::vector<Member> members;
};

/// Loop variables for a full index of `sizes` split by `reduced`.
Index full_index(const std::vector<bool>& reduced) {
  Index idx;
  int o = 0, r = 0;
  for (bool red : reduced)
    idx.push_back(SymInt::symbol(red ? "r" + std::to_string(r++) : "o" + std::to_string(o++)));
  return idx;
}

/// Outer loop variables as an index of the scalar shape `sizes` (kept dims, or keepdim shape).
std::optional<Index> scalar_index(const Group& g, const std::vector<SymInt>& sizes) {
  std::vector<SymInt> kept;
  for (size_t d = 0; d < g.sizes.size(); ++d)
    if (!g.reduced[d]) kept.push_back(g.sizes[d]);
  Index idx;
  if (same_shape(sizes, kept)) {
    for (size_t k = 0; k < kept.size(); ++k) idx.push_back(SymInt::symbol("o" + std::to_string(k)));
    return idx;
  }
  if (sizes.size() == g.sizes.size()) {
    int o = 0;
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (g.reduced[d]) {
        if (!is_const(sizes[d], 1)) return std::nullopt;
        idx.push_back(SymInt(0));
      } else {
        if (!(sizes[d] == g.sizes[d])) return std::nullopt;
        idx.push_back(SymInt::symbol("o" + std::to_string(o++)));
      }
    }
    return idx;
  }
  return std::nullopt;
}

SymInt store_index(const SNode& s, const Index& idx) {
  SymInt off = s.offset;
  for (size_t d = 0; d < s.sizes.size(); ++d)
    if (!is_const(s.sizes[d], 1)) off = off + idx[d] * s.strides[d];
  return off;
}

/// Default inner dims of a pointwise iteration shape: the last dim.
std::vector<bool> default_reduced(size_t rank) {
  std::vector<bool> r(rank, false);
  if (rank > 0) r[rank - 1] = true;
  return r;
}

class Scheduler {
 public:
  Scheduler(Program& p, std::vector<SNode>& sn) : p_(p), sn_(sn) {}

  void run(bool fuse) {
    for (size_t i = 0; i < sn_.size(); ++i) {
      const SNode& s = sn_[i];
      if (s.kind == SNode::Kind::kGemm || s.kind == SNode::Kind::kExtern) {
        flush();
        if (s.kind == SNode::Kind::kGemm) {
          GemmStep g = *s.gemm;
          g.name = "gemm" + std::to_string(n_gemm_++);
          p_.steps.push_back(g);
        } else {
          ExternStep e = *s.ext;
          if (is_collective_issue(e))
            e.name = "coll" + std::to_string(collective_id(e));
          else if (is_collective_wait(e))
            e.name = "wait" + std::to_string(collective_id(e));
          else
            e.name = "ext" + std::to_string(n_ext_++);
          p_.steps.push_back(e);
        }
        continue;
      }
      if (!fuse || !try_add(i)) {
        flush();
        start(i);
      }
    }
    flush();
    mark_locals();
  }

 private:
  /// Instantiates member `m` of snode `i` for group naming; returns false when it cannot join.
  bool instantiate(const Group& g, size_t i, Member& m) {
    const SNode& s = sn_[i];
    if (s.kind == SNode::Kind::kReduction) {
      if (!same_shape(s.sizes, g.sizes) || s.reduced != g.reduced) return false;
      m.role = Role::kReduce;
      const Index idx = full_index(g.reduced);
      m.expr = s.body(idx);
      m.index = store_index(s, idx);
      return true;
    }
    if (same_shape(s.sizes, g.sizes)) {
      m.role = Role::kInner;
      const Index idx = full_index(g.reduced);
      m.expr = s.body(idx);
      m.index = store_index(s, idx);
      return true;
    }
    if (!g.fixed) return false;
    auto idx = scalar_index(g, s.sizes);
    if (!idx) return false;
    m.role = Role::kScalar;
    m.expr = s.body(*idx);
    m.index = store_index(s, *idx);
    return true;
  }

  /// Whether stores at `x` and `y` into buffer `b` from the points of group `g` provably never
  /// write one element: their boxes are apart in some dim (store_box, constant sizes), or their
  /// residues modulo a block of the buffer's trailing constant dims are (store_residues_apart:
  /// the two halves of rotate_half's last dim under a dynamic sequence length).
  bool stores_apart(const Group& g, int b, const SymInt& x, const SymInt& y) const {
    std::vector<std::string> vars;
    int o = 0, r = 0;
    for (bool red : g.reduced)
      vars.push_back(red ? "r" + std::to_string(r++) : "o" + std::to_string(o++));
    const std::vector<SymInt>& sizes = p_.buffers[static_cast<size_t>(b)].sizes;
    const auto bx = store_box(x, vars, g.sizes, sizes), by = store_box(y, vars, g.sizes, sizes);
    if (bx && by)
      for (size_t d = 0; d < bx->size(); ++d)
        if ((*bx)[d].second < (*by)[d].first || (*by)[d].second < (*bx)[d].first) return true;
    // w: the trailing 1, 2, ... dims while constant (any w is sound; these make residues apart
    // when the stores' parts of each block of the trailing dims are)
    int64_t w = 1;
    for (size_t d = sizes.size(); d-- > 0;) {
      const std::optional<int64_t> n = sizes[d].maybe_constant();
      if (!n || *n < 1 || *n > (int64_t{1} << 30) / w) break;
      if (*n == 1) continue;
      w *= *n;
      if (store_residues_apart(x, y, vars, g.sizes, w)) return true;
    }
    return false;
  }

  /// Dependence check of a candidate against the group's members; computes its stage.
  bool check_deps(const Group& g, Member& m) {
    const SNode& s = sn_[m.snode];
    std::vector<int> loads;
    p_.exprs.loads(m.expr, loads);
    int min_stage = m.role == Role::kScalar ? 0 : 1;
    for (const Member& w : g.members) {
      const SNode& ws = sn_[w.snode];
      // the candidate must not write what a member reads, nor an element a member wrote at
      // another index (a later point may run first: the kernel's points have no order), so
      // two stores into one buffer need boxes apart (a concatenation's pieces)
      if (ws.reads.count(s.buffer)) return false;
      if (ws.buffer == s.buffer && !(w.index == m.index) &&
          !stores_apart(g, s.buffer, w.index, m.index))
        return false;
      for (int l : loads) {
        const Expr& e = p_.exprs.at(l);
        if (e.buffer != ws.buffer) continue;
        if (!(e.index == w.index)) return false;
        if (w.role == Role::kInner) {
          if (m.role == Role::kScalar) return false;
          min_stage = std::max(min_stage, w.stage);
        } else {
          min_stage = std::max(min_stage, w.stage + 1);
        }
      }
    }
    // stage: inner / reduce members sit in a loop stage (3p+1), scalar ones before / after
    if (m.role == Role::kScalar) {
      int st = min_stage;
      while (st % 3 == 1) ++st;
      m.stage = st;
    } else {
      int st = min_stage;
      while (st % 3 != 1) ++st;
      m.stage = st;
    }
    return true;
  }

  bool try_add(size_t i) {
    if (!cur_) return false;
    Group& g = *cur_;
    if (g.members.size() >= 32) return false;
    const SNode& s = sn_[i];
    Group trial = g;
    if (s.kind == SNode::Kind::kReduction && !g.fixed) {
      if (!same_shape(s.sizes, g.sizes)) return false;
      if (s.reduced != g.reduced) {  // re-split the pointwise members with the new inner dims
        trial.reduced = s.reduced;
        for (Member& m : trial.members)
          if (!instantiate(trial, m.snode, m)) return false;
        // re-run the dependence checks in order
        Group rebuilt = trial;
        rebuilt.members.clear();
        for (Member m : trial.members) {
          if (!check_deps(rebuilt, m)) return false;
          rebuilt.members.push_back(m);
        }
        trial = rebuilt;
      }
    }
    Member m;
    m.snode = i;
    if (!instantiate(trial, i, m)) return false;
    if (!check_deps(trial, m)) return false;
    if (s.kind == SNode::Kind::kReduction) trial.fixed = true;
    trial.members.push_back(m);
    g = trial;
    return true;
  }

  void start(size_t i) {
    const SNode& s = sn_[i];
    Group g;
    g.sizes = s.sizes;
    if (s.kind == SNode::Kind::kReduction) {
      g.reduced = s.reduced;
      g.fixed = true;
    } else {
      g.reduced = default_reduced(s.sizes.size());
    }
    Member m;
    m.snode = i;
    instantiate(g, i, m);
    check_deps(g, m);
    g.members.push_back(m);
    cur_ = g;
  }

  void flush() {
    if (!cur_) return;
    Group& g = *cur_;
    LoopKernel k;
    k.name = "k" + std::to_string(n_kernel_++);
    for (size_t d = 0; d < g.sizes.size(); ++d)
      (g.reduced[d] ? k.inner : k.outer).push_back(g.sizes[d]);
    int max_stage = 0;
    for (const Member& m : g.members) max_stage = std::max(max_stage, m.stage);
    k.passes.resize(static_cast<size_t>(max_stage / 3 + 1));
    for (const Member& m : g.members) {
      const SNode& s = sn_[m.snode];
      for (const auto& nm : s.nodes)
        if (std::find(k.nodes.begin(), k.nodes.end(), nm) == k.nodes.end()) k.nodes.push_back(nm);
      Stmt st;
      st.kind = m.role == Role::kReduce ? Stmt::Kind::kReduce : Stmt::Kind::kStore;
      st.buffer = s.buffer;
      st.index = m.index;
      st.expr = m.expr;
      st.reduce = s.reduce;
      st.dtype = s.dtype;
      if (m.role == Role::kReduce) st.acc = n_acc_++;
      Pass& pass = k.passes[static_cast<size_t>(m.stage / 3)];
      (m.stage % 3 == 0 ? pass.pre : m.stage % 3 == 1 ? pass.loop : pass.post).push_back(st);
    }
    p_.steps.push_back(std::move(k));
    cur_.reset();
  }

  /// Buffers written and read only inside one kernel, at forwardable places, become local.
  void mark_locals() {
    std::map<int, std::set<size_t>> readers, writers;  // buffer -> steps
    for (size_t si = 0; si < p_.steps.size(); ++si) {
      const Step& st = p_.steps[si];
      if (const auto* k = std::get_if<LoopKernel>(&st)) {
        for (const Pass& ps : k->passes)
          for (const auto* list : {&ps.pre, &ps.loop, &ps.post})
            for (const Stmt& s : *list) {
              writers[s.buffer].insert(si);
              std::vector<int> loads;
              p_.exprs.loads(s.expr, loads);
              for (int l : loads) readers[p_.exprs.at(l).buffer].insert(si);
            }
      } else if (const auto* g = std::get_if<GemmStep>(&st)) {
        readers[g->a.buffer].insert(si);
        readers[g->b.buffer].insert(si);
        writers[g->c.buffer].insert(si);
      } else if (const auto* e = std::get_if<ExternStep>(&st)) {
        for (const auto& v : e->inputs)
          if (v.buffer >= 0) readers[v.buffer].insert(si);
        for (const auto& v : e->outputs) writers[v.buffer].insert(si);
      }
    }
    for (size_t b = 0; b < p_.buffers.size(); ++b) {
      Buffer& buf = p_.buffers[b];
      if (buf.kind != BufferKind::kArena) continue;
      const auto& w = writers[static_cast<int>(b)];
      const auto& r = readers[static_cast<int>(b)];
      if (w.size() != 1) continue;
      const size_t si = *w.begin();
      if (!r.empty() && (r.size() != 1 || *r.begin() != si)) continue;
      const auto* k = std::get_if<LoopKernel>(&p_.steps[si]);
      if (!k || !forwardable(*k, static_cast<int>(b))) continue;
      buf.local = true;
    }
  }

  /// Every read of `b` in kernel `k` reads a value written earlier in the same outer iteration
  /// at the same index: a reduction / scalar result in a later stage, or an inner value in the
  /// same loop after its store. Exactly one statement writes `b`.
  bool forwardable(const LoopKernel& k, int b) {
    const Stmt* writer = nullptr;
    int wstage = -1;
    std::vector<std::pair<const Stmt*, int>> stmts;
    for (size_t p = 0; p < k.passes.size(); ++p) {
      const Pass& ps = k.passes[p];
      for (const Stmt& s : ps.pre) stmts.push_back({&s, static_cast<int>(3 * p)});
      for (const Stmt& s : ps.loop) stmts.push_back({&s, static_cast<int>(3 * p + 1)});
      for (const Stmt& s : ps.post) stmts.push_back({&s, static_cast<int>(3 * p + 2)});
    }
    for (auto& [s, stage] : stmts)
      if (s->buffer == b) {
        if (writer) return false;
        writer = s;
        wstage = stage;
      }
    if (!writer) return false;
    bool after_writer = false;
    for (auto& [s, stage] : stmts) {
      if (s == writer) {
        after_writer = true;
        continue;
      }
      std::vector<int> loads;
      p_.exprs.loads(s->expr, loads);
      for (int l : loads) {
        const Expr& e = p_.exprs.at(l);
        if (e.buffer != b) continue;
        if (!(e.index == writer->index)) return false;
        if (writer->kind == Stmt::Kind::kReduce || wstage % 3 != 1) {
          if (stage <= wstage) return false;
        } else {
          if (stage != wstage || !after_writer) return false;
        }
      }
    }
    return true;
  }

  Program& p_;
  std::vector<SNode>& sn_;
  std::optional<Group> cur_;
  int n_kernel_ = 0, n_gemm_ = 0, n_ext_ = 0, n_acc_ = 0;
};

/// A GEMM or extern result that only its epilogue reads, at the epilogue's own store index, is
/// computed directly in the epilogue's destination (the epilogue then runs in place).
void fuse_gemm_epilogues(Program& p) {
  std::map<int, int> n_read, n_write;
  std::map<int, const Stmt*> only_reader;
  for (const Step& st : p.steps) {
    if (const auto* k = std::get_if<LoopKernel>(&st)) {
      for (const Pass& ps : k->passes)
        for (const auto* list : {&ps.pre, &ps.loop, &ps.post})
          for (const Stmt& s : *list) {
            ++n_write[s.buffer];
            std::vector<int> loads;
            p.exprs.loads(s.expr, loads);
            std::set<int> seen;
            for (int l : loads)
              if (seen.insert(p.exprs.at(l).buffer).second) {
                ++n_read[p.exprs.at(l).buffer];
                only_reader[p.exprs.at(l).buffer] = &s;
              }
          }
    } else if (const auto* g = std::get_if<GemmStep>(&st)) {
      ++n_read[g->a.buffer];
      ++n_read[g->b.buffer];
      ++n_write[g->c.buffer];
    } else if (const auto* e = std::get_if<ExternStep>(&st)) {
      for (const auto& v : e->inputs)
        if (v.buffer >= 0) ++n_read[v.buffer];
      for (const auto& v : e->outputs) ++n_write[v.buffer];
    }
  }
  std::set<int> taken;        // a destination holds at most one producer's result
  std::vector<int> produced;  // results of GEMMs and extern calls, in step order
  for (const Step& st : p.steps) {
    if (const auto* g = std::get_if<GemmStep>(&st)) produced.push_back(g->c.buffer);
    if (const auto* e = std::get_if<ExternStep>(&st))
      for (const auto& v : e->outputs) produced.push_back(v.buffer);
  }
  for (const int c : produced) {
    Buffer& cb = p.buffers[static_cast<size_t>(c)];
    if (cb.kind != BufferKind::kArena || n_read[c] != 1 || n_write[c] != 1) continue;
    const Stmt* s = only_reader[c];
    if (!s || s->kind != Stmt::Kind::kStore) continue;
    const int y = s->buffer;
    const Buffer& yb = p.buffers[static_cast<size_t>(y)];
    if (y == c || n_write[y] != 1 || taken.count(y)) continue;
    if (yb.kind != BufferKind::kArena && yb.kind != BufferKind::kOutput) continue;
    if (yb.dtype != cb.dtype || !(yb.numel == cb.numel) || yb.local || yb.alias_of >= 0) continue;
    // every load of c in the epilogue is at the store index
    std::vector<int> loads;
    p.exprs.loads(s->expr, loads);
    bool ok = true;
    for (int l : loads)
      if (p.exprs.at(l).buffer == c && !(p.exprs.at(l).index == s->index)) ok = false;
    if (!ok) continue;
    cb.alias_of = y;
    taken.insert(y);
  }
}

}  // namespace

void schedule(Program& program, std::vector<SNode>& snodes, bool fuse) {
  Scheduler(program, snodes).run(fuse);
  fuse_gemm_epilogues(program);
  for (const Step& s : program.steps) {
    if (std::holds_alternative<LoopKernel>(s)) ++program.stats.loop_kernels;
    if (std::holds_alternative<GemmStep>(s)) ++program.stats.gemms;
    if (const auto* e = std::get_if<ExternStep>(&s); e && !is_collective_issue(*e) &&
                                                      !is_collective_wait(*e))
      ++program.stats.externs;
  }
}

}  // namespace anvil::passes::detail
