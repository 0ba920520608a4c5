// Copy elision for extern results that a permuting copy moves into place: when the only reader
// of an extern's output is a loop kernel that does nothing but store it, element for element,
// into another buffer under a permutation of its dims (attention's [B, H, T, D] result turned
// into the [B, T, H*D] input of the output projection), the extern writes the destination
// directly through a strided output view, and the copy kernel goes. Only for externs the target
// says write any output view (PipelineOptions::extern_writes_strided_output).
#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "passes/lower_internal.h"
#include "passes/pipeline.h"

namespace anvil::passes::detail {

namespace {

/// The coefficient of loop variable `var` in affine `index` (others and symbols at 0), or
/// nullopt when the index is not affine in constants.
std::optional<int64_t> coefficient(const SymInt& index, const std::string& var,
                                   const std::vector<std::string>& vars) {
  std::map<std::string, SymInt> at0, at1;
  for (const auto& v : vars) {
    at0[v] = SymInt(0);
    at1[v] = SymInt(v == var ? 1 : 0);
  }
  const SymInt a = index.substitute(at1), b = index.substitute(at0);
  if (!a.is_constant() || !b.is_constant()) return std::nullopt;
  return a.constant() - b.constant();
}

/// True when `sizes` / `strides` (constants) address distinct elements.
bool non_overlapping(std::vector<std::pair<int64_t, int64_t>> dims) {  // (stride, size)
  std::sort(dims.begin(), dims.end());
  int64_t extent = 1;
  for (const auto& [stride, size] : dims) {
    if (size == 1) continue;
    if (stride < extent) return false;
    extent = stride * size;
  }
  return true;
}

/// Whether step `s` reads or writes buffer `b`.
bool touches(const Program& p, const Step& s, int b) {
  if (const auto* k = std::get_if<LoopKernel>(&s)) {
    for (const Pass& ps : k->passes)
      for (const auto* list : {&ps.pre, &ps.loop, &ps.post})
        for (const Stmt& st : *list) {
          if (st.buffer == b) return true;
          std::vector<int> loads;
          p.exprs.loads(st.expr, loads);
          for (int l : loads)
            if (p.exprs.at(l).buffer == b) return true;
        }
    return false;
  }
  if (const auto* g = std::get_if<GemmStep>(&s))
    return g->a.buffer == b || g->b.buffer == b || g->c.buffer == b;
  const auto& e = std::get<ExternStep>(s);
  for (const auto* list : {&e.inputs, &e.outputs})
    for (const auto& v : *list)
      if (v.buffer == b) return true;
  return false;
}

/// Whether step `s` writes buffer `b`.
bool writes(const Step& s, int b) {
  if (const auto* k = std::get_if<LoopKernel>(&s)) {
    for (const Pass& ps : k->passes)
      for (const auto* list : {&ps.pre, &ps.loop, &ps.post})
        for (const Stmt& st : *list)
          if (st.buffer == b) return true;
    return false;
  }
  if (const auto* g = std::get_if<GemmStep>(&s)) return g->c.buffer == b;
  for (const auto& v : std::get<ExternStep>(s).outputs)
    if (v.buffer == b) return true;
  return false;
}

/// The output view of extern output `out` written straight into the destination of copy kernel
/// `k`, or nullopt when `k` is not a pure permuting copy of all of `out`.
std::optional<TensorView> through_copy(const Program& p, const TensorView& out,
                                       const LoopKernel& k) {
  if (k.passes.size() != 1) return std::nullopt;
  const Pass& ps = k.passes[0];
  if (!ps.pre.empty() || !ps.post.empty() || ps.loop.size() != 1) return std::nullopt;
  const Stmt& s = ps.loop[0];
  const Expr& x = p.exprs.at(s.expr);
  if (s.kind != Stmt::Kind::kStore || x.op != ExprOp::kLoad || x.buffer != out.buffer ||
      s.dtype != out.dtype || x.dtype != out.dtype)
    return std::nullopt;
  std::vector<std::string> vars;
  std::vector<int64_t> extent;
  for (size_t i = 0; i < k.outer.size() + k.inner.size(); ++i) {
    const SymInt& n = i < k.outer.size() ? k.outer[i] : k.inner[i - k.outer.size()];
    if (!n.is_constant()) return std::nullopt;
    vars.push_back(i < k.outer.size() ? "o" + std::to_string(i)
                                      : "r" + std::to_string(i - k.outer.size()));
    extent.push_back(n.constant());
  }
  for (const auto& v : out.sizes)
    if (!v.is_constant()) return std::nullopt;
  for (const auto& v : out.strides)
    if (!v.is_constant()) return std::nullopt;
  if (!out.offset.is_constant()) return std::nullopt;
  // The load's constant term is the view's offset and its loop variables, one per dim of size
  // > 1, step through the view's dims (sizes and strides equal); the store's coefficients of the
  // same variables are the new strides.
  std::map<std::string, SymInt> zero;
  for (const auto& v : vars) zero[v] = SymInt(0);
  const SymInt l0 = x.index.substitute(zero), s0 = s.index.substitute(zero);
  if (!l0.is_constant() || !s0.is_constant() || l0.constant() != out.offset.constant())
    return std::nullopt;
  TensorView dst = out;
  dst.buffer = s.buffer;
  dst.offset = s0;
  std::set<size_t> used;
  std::vector<std::pair<int64_t, int64_t>> dims;
  for (size_t d = 0; d < out.sizes.size(); ++d) {
    const int64_t size = out.sizes[d].constant(), stride = out.strides[d].constant();
    if (size == 1) {
      dst.strides[d] = SymInt(0);
      continue;
    }
    std::optional<size_t> match;
    for (size_t v = 0; v < vars.size(); ++v) {
      if (used.count(v) || extent[v] != size) continue;
      const auto c = coefficient(x.index, vars[v], vars);
      if (!c) return std::nullopt;
      if (*c == stride) {
        match = v;
        break;
      }
    }
    if (!match) return std::nullopt;
    used.insert(*match);
    const auto c = coefficient(s.index, vars[*match], vars);
    if (!c || *c <= 0) return std::nullopt;
    dst.strides[d] = SymInt(*c);
    dims.emplace_back(*c, size);
  }
  // every other loop variable has extent 1 (the copy covers the view once)
  for (size_t v = 0; v < vars.size(); ++v)
    if (!used.count(v) && extent[v] != 1) return std::nullopt;
  if (!non_overlapping(dims)) return std::nullopt;
  return dst;
}

}  // namespace

int retarget_permuted_copies(Program& p,
                             const std::function<bool(const Program&, const ExternStep&)>& ok) {
  int done = 0;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    auto* e = std::get_if<ExternStep>(&p.steps[i]);
    if (!e || e->outputs.size() != 1 || !ok(p, *e)) continue;
    const TensorView& out = e->outputs[0];
    const int c = out.buffer;
    const Buffer& cb = p.buffers[static_cast<size_t>(c)];
    if (c < 0 || cb.kind != BufferKind::kArena || cb.local || cb.alias_of >= 0) continue;
    // the one later step touching c
    size_t reader = p.steps.size();
    int uses = 0;
    for (size_t j = 0; j < p.steps.size(); ++j)
      if (j != i && touches(p, p.steps[j], c)) {
        ++uses;
        reader = j;
      }
    if (uses != 1 || reader < i) continue;
    const auto* k = std::get_if<LoopKernel>(&p.steps[reader]);
    if (!k) continue;
    const auto dst = through_copy(p, out, *k);
    if (!dst) continue;
    const int y = dst->buffer;
    const Buffer& yb = p.buffers[static_cast<size_t>(y)];
    if (y == c || yb.local || yb.alias_of >= 0 || yb.dtype != cb.dtype) continue;
    if (yb.kind != BufferKind::kArena && yb.kind != BufferKind::kOutput) continue;
    // y is written by the copy only, and no step between the extern and the copy touches it
    // (later readers then see the same values, written earlier)
    bool alone = true;
    for (size_t j = 0; j < p.steps.size() && alone; ++j) {
      if (j == reader) continue;
      if ((j > i && j < reader) ? touches(p, p.steps[j], y) : writes(p.steps[j], y)) alone = false;
    }
    if (!alone) continue;
    for (const Buffer& b : p.buffers)  // nor through a buffer sharing its memory
      if (b.alias_of == y) alone = false;
    if (!alone) continue;
    e->outputs[0] = *dst;
    p.steps.erase(p.steps.begin() + static_cast<std::ptrdiff_t>(reader));
    --p.stats.loop_kernels;
    ++done;
  }
  return done;
}

}  // namespace anvil::passes::detail
