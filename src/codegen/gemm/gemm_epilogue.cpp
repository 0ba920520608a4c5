// GEMM epilogues the CUDA target hands to cuBLASLt (codegen/cuda/gemm_epilogue.h).
//
// Proving a statement is one of the fused forms takes three parts:
//  - where: the statement is the first use of the GEMM result's memory after the GEMM, nothing
//    in between (nor another statement of its kernel) writes what it reads, so it may run at the
//    GEMM's place; and it stores element e of the result to element e of its destination over a
//    domain of exactly the result's size (the store index is the row-major linear index of the
//    kernel's loop variables);
//  - what it loads: the GEMM result at the store index, a bias at (e mod n) + offset (the
//    innermost loop dims multiply to n) and a residual at e + offset, every index proven affine
//    in the loop variables by rebuilding it symbolically;
//  - how it combines them: a sum of those terms (the residual possibly times a constant), then
//    nothing, relu, or the exact expression tree lower_pointwise builds for gelu(approximate=
//    'tanh'), every node of the GEMM's dtype.
// The CPU forms (cpu_forms) add: the result times or divided by constants, one constant added or
// subtracted, and relu6 as lower_pointwise writes clamps (where(x < 0, 0, x), where(x > 6, 6, x)).
#include "codegen/gemm/gemm_epilogue.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "codegen/cpu/emit_cpu.h"  // is_control_step
#include "core/half.h"
#include "passes/collectives.h"

namespace anvil::codegen::gemm {

namespace {

using passes::Expr;
using passes::ExprOp;
using passes::GemmStep;
using passes::LoopKernel;
using passes::Program;
using passes::Stmt;

/// The loop domain of a kernel (outer then inner dims): variable names, sizes, row-major strides.
struct Domain {
  std::vector<std::string> vars;
  std::vector<SymInt> sizes, strides;
  SymInt total = SymInt(1);
  bool unit(size_t d) const { return sizes[d] == SymInt(1); }
};
Domain domain_of(const LoopKernel& k) {
  Domain d;
  for (size_t i = 0; i < k.outer.size(); ++i) {
    d.vars.push_back("o" + std::to_string(i));
    d.sizes.push_back(k.outer[i]);
  }
  for (size_t i = 0; i < k.inner.size(); ++i) {
    d.vars.push_back("r" + std::to_string(i));
    d.sizes.push_back(k.inner[i]);
  }
  d.strides.resize(d.sizes.size());
  for (size_t i = d.sizes.size(); i-- > 0;) {
    d.strides[i] = d.total;
    d.total = d.total * d.sizes[i];
  }
  return d;
}

/// Coefficients equal to the domain's strides on dims [from, end) and zero before (unit dims,
/// whose variable is always 0, are not compared).
bool coefs_are(const Domain& d, const Affine& a, size_t from) {
  for (size_t i = 0; i < d.sizes.size(); ++i) {
    if (d.unit(i)) continue;
    if (!(a.coef[i] == (i >= from ? d.strides[i] : SymInt(0)))) return false;
  }
  return true;
}

/// The statement's loads and the gelu / relu around their sum, matched against the forms.
class Matcher {
 public:
  Matcher(const Program& p, const GemmStep& g, const Domain& d, const Stmt& s, int c,
          bool cpu_forms)
      : p_(p), g_(g), d_(d), s_(s), c_(c), cpu_forms_(cpu_forms) {
    // the bias dims: the innermost dims multiplying to n
    SymInt inner(1);
    for (size_t q = d.sizes.size() + 1; q-- > 0;) {
      if (q < d.sizes.size()) inner = inner * d.sizes[q];
      if (inner == g.n) bias_from_ = q;  // the outermost such split (unit dims before it)
    }
  }

  bool match(FusedEpilogue& f) {
    int x = s_.expr;
    if (const int rx = cpu_forms_ ? relu6_input(x) : -1; rx >= 0) {
      f.kind = GemmEpilogueKind::kRelu6;
      x = rx;
    } else if (is(x, ExprOp::kRelu)) {
      f.kind = GemmEpilogueKind::kRelu;
      x = at(x).args[0];
    } else if (int gx = gelu_tanh_input(x); gx >= 0) {
      f.kind = GemmEpilogueKind::kGeluTanh;
      x = gx;
    } else if (int ex = gelu_erf_input(x); ex >= 0) {
      f.kind = GemmEpilogueKind::kGeluErf;
      x = ex;
    } else if (int sx = silu_input(x); sx >= 0) {
      f.kind = GemmEpilogueKind::kSilu;
      x = sx;
    }
    std::vector<std::pair<int, bool>> terms;  // (term, subtracted)
    flatten_sum(x, false, terms);
    int n_c = 0;
    double v = 0;
    for (const auto& [t, minus] : terms) {
      const Expr& e = at(t);
      if (minus) {  // only a constant is subtracted (the CPU forms' shift)
        if (f.has_shift || !number(t, v)) return false;
        f.has_shift = true;
        f.shift = -v;
        continue;
      }
      if (e.op == ExprOp::kLoad && e.buffer == c_) {
        if (!(e.index == s_.index) || e.dtype != g_.dtype) return false;
        ++n_c;
        continue;
      }
      if (cpu_forms_ && scaled_result(t, f)) {
        ++n_c;
        continue;
      }
      if (e.op == ExprOp::kLoad && f.bias < 0 && bias_load(t, f)) continue;
      if (f.residual < 0 && residual_term(t, f)) continue;
      if (cpu_forms_ && !f.has_shift && number(t, v)) {
        f.has_shift = true;
        f.shift = v;
        continue;
      }
      return false;
    }
    if (n_c != 1) return false;
    if (f.residual >= 0 && f.kind != GemmEpilogueKind::kNone) return false;  // act(... + R)
    if (f.residual >= 0 && (f.scale != 1.0 || f.has_shift)) return false;
    // one bias vector: a loaded one or the shift's; the shift a float
    if (f.has_shift && (f.bias >= 0 || !std::isfinite(f.shift) || std::fabs(f.shift) > 3.0e38))
      return false;
    if (f.bias >= 0 || f.has_shift)
      f.kind = f.kind == GemmEpilogueKind::kRelu       ? GemmEpilogueKind::kBiasRelu
               : f.kind == GemmEpilogueKind::kRelu6    ? GemmEpilogueKind::kBiasRelu6
               : f.kind == GemmEpilogueKind::kGeluTanh ? GemmEpilogueKind::kBiasGeluTanh
               : f.kind == GemmEpilogueKind::kGeluErf  ? GemmEpilogueKind::kBiasGeluErf
               : f.kind == GemmEpilogueKind::kSilu     ? GemmEpilogueKind::kBiasSilu
                                                       : GemmEpilogueKind::kBias;
    return true;
  }

 private:
  const Expr& at(int id) const { return p_.exprs.at(id); }
  bool is(int id, ExprOp op) const { return at(id).op == op && at(id).dtype == g_.dtype; }
  bool is_const(int id, double v) const {
    return at(id).op == ExprOp::kConst && at(id).dtype == g_.dtype && at(id).f == v;
  }
  bool bin(int id, ExprOp op, int& a, int& b) const {
    if (!is(id, op)) return false;
    a = at(id).args[0];
    b = at(id).args[1];
    return true;
  }

  /// x when `id` is lower_pointwise's gelu(x, approximate='tanh'):
  ///   (0.5 * x) * (1 + tanh(k * (x + ((0.044715 * x) * x) * x))), k = sqrt(2 / pi); else -1.
  int gelu_tanh_input(int id) const {
    const double k_beta = M_SQRT2 * M_2_SQRTPI * 0.5;
    int half_x, one_plus, half, x, one, th, scaled, kb, inner, cube, sq, x3, cx, c, x1, x2;
    if (!bin(id, ExprOp::kMul, half_x, one_plus) || !bin(half_x, ExprOp::kMul, half, x) ||
        !is_const(half, 0.5) || !bin(one_plus, ExprOp::kAdd, one, th) || !is_const(one, 1.0) ||
        !is(th, ExprOp::kTanh))
      return -1;
    scaled = at(th).args[0];
    if (!bin(scaled, ExprOp::kMul, kb, inner) || !is_const(kb, k_beta) ||
        !bin(inner, ExprOp::kAdd, x1, cube) || x1 != x || !bin(cube, ExprOp::kMul, sq, x3) ||
        x3 != x || !bin(sq, ExprOp::kMul, cx, x2) || x2 != x || !bin(cx, ExprOp::kMul, c, x1) ||
        !is_const(c, 0.044715) || x1 != x)
      return -1;
    return x;
  }

  /// x when `id` is lower_pointwise's gelu(x, approximate='none'):
  ///   (x * 0.5) * (1 + erf(x * (1 / sqrt 2))); else -1.
  int gelu_erf_input(int id) const {
    int half_x, one_plus, x, half, one, er, scaled, x2, k;
    if (!bin(id, ExprOp::kMul, half_x, one_plus) || !bin(half_x, ExprOp::kMul, x, half) ||
        !is_const(half, 0.5) || !bin(one_plus, ExprOp::kAdd, one, er) || !is_const(one, 1.0) ||
        !is(er, ExprOp::kErf))
      return -1;
    scaled = at(er).args[0];
    if (!bin(scaled, ExprOp::kMul, x2, k) || x2 != x || !is_const(k, M_SQRT1_2)) return -1;
    return x;
  }

  /// x when `id` is lower_pointwise's silu(x): x / (1 + exp(-x)); else -1.
  int silu_input(int id) const {
    int x, one_plus, one, ex;
    if (!bin(id, ExprOp::kDiv, x, one_plus) || !bin(one_plus, ExprOp::kAdd, one, ex) ||
        !is_const(one, 1.0) || !is(ex, ExprOp::kExp))
      return -1;
    const int neg = at(ex).args[0];
    if (!is(neg, ExprOp::kNeg) || at(neg).args[0] != x) return -1;
    return x;
  }

  /// The terms of a sum, each with whether it is subtracted (a - b: the CPU forms only).
  void flatten_sum(int id, bool minus, std::vector<std::pair<int, bool>>& out) const {
    int a, b;
    if (bin(id, ExprOp::kAdd, a, b)) {
      flatten_sum(a, minus, out);
      flatten_sum(b, minus, out);
    } else if (cpu_forms_ && bin(id, ExprOp::kSub, a, b)) {
      flatten_sum(a, minus, out);
      flatten_sum(b, !minus, out);
    } else {
      out.emplace_back(id, minus);
    }
  }

  /// A number in the expression: a floating constant (of any float dtype: lower_pointwise keeps
  /// a Python scalar in float32 for a 16-bit result) or a constant cast to the GEMM's dtype (a
  /// clamp's bounds).
  bool number(int id, double& v) const {
    const Expr* e = &at(id);
    const bool cast = e->op == ExprOp::kCast && e->dtype == g_.dtype;
    if (cast) e = &at(e->args[0]);
    if (e->op != ExprOp::kConst) return false;
    v = is_floating(e->dtype) ? e->f : static_cast<double>(e->i);
    if (cast)  // the value the cast gives
      v = g_.dtype == DType::kBFloat16 ? double(float(BFloat16(static_cast<float>(v))))
          : g_.dtype == DType::kFloat16 ? double(float(Half(static_cast<float>(v))))
                                        : double(static_cast<float>(v));
    return true;
  }

  /// The GEMM's result times or divided by numbers (C * a, a * C, C / a, nested): sets f.scale
  /// to their product (a float, not 0).
  bool scaled_result(int id, FusedEpilogue& f) const {
    double scale = 1.0, v = 0;
    bool any = false;
    for (;;) {
      int l, r;
      if (bin(id, ExprOp::kMul, l, r) && number(r, v)) {
        id = l;
        scale *= v;
      } else if (bin(id, ExprOp::kMul, l, r) && number(l, v)) {
        id = r;
        scale *= v;
      } else if (bin(id, ExprOp::kDiv, l, r) && number(r, v)) {
        id = l;
        scale /= v;
      } else {
        break;
      }
      any = true;
    }
    const Expr& e = at(id);
    if (!any || e.op != ExprOp::kLoad || e.buffer != c_ || !(e.index == s_.index) ||
        e.dtype != g_.dtype)
      return false;
    if (!std::isfinite(scale) || std::fabs(scale) > 3.0e38 || std::fabs(scale) < 1.0e-37)
      return false;
    f.scale = scale;
    return true;
  }

  /// x when `id` is where(x OP b, b, x) with b the number `bound` (lower_pointwise's clamp to
  /// a bound: OP kLt for a lower one, kGt for an upper one); else -1.
  int clamp_input(int id, double bound, ExprOp op) const {
    if (!is(id, ExprOp::kWhere)) return -1;
    const Expr& w = at(id);
    const int b = w.args[1], x = w.args[2];
    const Expr& c = at(w.args[0]);
    double v = 0;
    if (c.op != op || c.args[0] != x || c.args[1] != b || !number(b, v) || v != bound ||
        at(x).dtype != g_.dtype)
      return -1;
    return x;
  }

  /// y when `id` is relu6(y): an upper clamp at 6 over relu(y) or over a lower clamp at 0
  /// (relu6, hardtanh(0, 6), clamp(0, 6), clamp(relu(y), max=6)), or relu of an upper clamp
  /// at 6 (relu(clamp(y, max=6))); else -1.
  int relu6_input(int id) const {
    if (const int y = clamp_input(id, 6.0, ExprOp::kGt); y >= 0)
      return is(y, ExprOp::kRelu) ? at(y).args[0] : clamp_input(y, 0.0, ExprOp::kLt);
    if (is(id, ExprOp::kRelu)) return clamp_input(at(id).args[0], 6.0, ExprOp::kGt);
    return -1;
  }

  /// A load of the GEMM's dtype from another buffer than the result and its destination, of
  /// memory no statement between the GEMM and this one writes (checked by the planner).
  bool plain_load(int id) const {
    const Expr& e = at(id);
    if (e.op != ExprOp::kLoad || e.dtype != g_.dtype || e.buffer == c_) return false;
    const auto& b = p_.buffers[static_cast<size_t>(e.buffer)];
    return b.dtype == g_.dtype && !b.local;
  }

  bool bias_load(int id, FusedEpilogue& f) const {
    if (!plain_load(id) || bias_from_ > d_.sizes.size()) return false;
    const auto a = affine(at(id).index, d_.vars);
    if (!a || !coefs_are(d_, *a, bias_from_)) return false;
    f.bias = at(id).buffer;
    f.bias_offset = a->c0;
    return true;
  }

  bool residual_term(int id, FusedEpilogue& f) const {
    double beta = 1.0;
    int load = id, l, r;
    if (bin(id, ExprOp::kMul, l, r)) {  // beta * R or R * beta
      if (at(l).op == ExprOp::kConst && at(l).dtype == g_.dtype) {
        beta = at(l).f;
        load = r;
      } else if (at(r).op == ExprOp::kConst && at(r).dtype == g_.dtype) {
        beta = at(r).f;
        load = l;
      } else {
        return false;
      }
      if (!std::isfinite(beta) || std::fabs(beta) > 3.0e38) return false;  // a float
    }
    if (!plain_load(load)) return false;
    const auto a = affine(at(load).index, d_.vars);
    if (!a || !coefs_are(d_, *a, 0)) return false;
    f.residual = at(load).buffer;
    f.residual_offset = a->c0;
    f.beta = beta;
    return true;
  }

  const Program& p_;
  const GemmStep& g_;
  const Domain& d_;
  const Stmt& s_;
  const int c_;
  const bool cpu_forms_;
  size_t bias_from_ = static_cast<size_t>(-1);
};

/// The GEMM result's layout is contiguous [batch, m, n] from offset 0 (what lower_matmul builds).
bool contiguous_result(const GemmStep& g) {
  if (!(g.c.offset == SymInt(0)) || !(g.c.ld == g.n) || g.c.trans) return false;
  SymInt stride = g.m * g.n;
  for (size_t d = g.batch.size(); d-- > 0;) {
    if (d >= g.c.batch_strides.size() || !(g.c.batch_strides[d] == stride)) return false;
    stride = stride * g.batch[d];
  }
  return true;
}

std::optional<FusedEpilogue> plan_one(const Program& p, size_t gi, bool cpu_forms) {
  const auto& g = std::get<GemmStep>(p.steps[gi]);
  if (g.dtype != DType::kFloat32 && g.dtype != DType::kBFloat16 && g.dtype != DType::kFloat16)
    return std::nullopt;
  // one cuBLASLt call: a fallback after a partly fused loop over outer batches would apply the
  // epilogue twice to the fused batches
  if (g.batch.size() > 1 || !contiguous_result(g)) return std::nullopt;
  const int c = g.c.buffer;
  const auto& cb = p.buffers[static_cast<size_t>(c)];
  const int y = cb.alias_of;
  if (cb.kind != passes::BufferKind::kArena || y < 0) return std::nullopt;
  const int mem = buffer_root(p, c);
  // the first step after the GEMM that touches its result's memory
  size_t ki = gi + 1;
  for (; ki < p.steps.size(); ++ki) {
    const auto* e = std::get_if<passes::ExternStep>(&p.steps[ki]);
    if (e && (!e->subprograms.empty() || cpu::is_control_step(p.steps[ki]) ||
              passes::is_collective_issue(*e) || passes::is_collective_wait(*e)))
      return std::nullopt;
    std::set<int> reads, writes;
    passes::step_accesses(p, p.steps[ki], reads, writes);
    bool touches = false;
    for (const auto* set : {&reads, &writes})
      for (int b : *set) touches |= buffer_root(p, b) == mem;
    if (touches) break;
  }
  if (ki >= p.steps.size()) return std::nullopt;
  const auto* k = std::get_if<LoopKernel>(&p.steps[ki]);
  if (!k) return std::nullopt;
  // the one statement of the kernel writing the destination: a store in a pass's loop (over
  // the whole domain; a multi-pass kernel's later passes, e.g. a layer norm of a residual sum,
  // then read the destination the GEMM wrote)
  size_t pi = k->passes.size(), si = 0;
  int writers = 0;
  for (size_t q = 0; q < k->passes.size(); ++q)
    for (const auto* list : {&k->passes[q].pre, &k->passes[q].loop, &k->passes[q].post})
      for (size_t i = 0; i < list->size(); ++i) {
        const Stmt& st = (*list)[i];
        if (st.buffer != y) continue;
        ++writers;
        if (list == &k->passes[q].loop && st.kind == Stmt::Kind::kStore) {
          pi = q;
          si = i;
        }
      }
  if (writers != 1 || pi == k->passes.size()) return std::nullopt;
  const Stmt& s = k->passes[pi].loop[si];
  const auto& yb = p.buffers[static_cast<size_t>(y)];
  if (s.dtype != g.dtype || yb.dtype != g.dtype || yb.local || yb.alias_of >= 0)
    return std::nullopt;
  // every element of the result, stored at its own index
  const Domain d = domain_of(*k);
  if (!(d.total == cb.numel)) return std::nullopt;
  const auto sa = affine(s.index, d.vars);
  if (!sa || !(sa->c0 == SymInt(0)) || !coefs_are(d, *sa, 0)) return std::nullopt;

  FusedEpilogue f;
  f.gemm_step = gi;
  f.kernel_step = ki;
  f.pass = pi;
  f.stmt = si;
  if (!Matcher(p, g, d, s, c, cpu_forms).match(f)) return std::nullopt;
  // what the epilogue reads is final at the GEMM: no step in between nor another statement of
  // the kernel writes its memory, and it is not the result's own memory
  std::set<int> inputs;
  for (int b : {f.bias, f.residual})
    if (b >= 0) inputs.insert(buffer_root(p, b));
  if (inputs.count(mem)) return std::nullopt;
  for (size_t i = gi + 1; i <= ki; ++i) {
    std::set<int> reads, writes;
    if (i < ki) {
      passes::step_accesses(p, p.steps[i], reads, writes);
    } else {
      for (size_t q = 0; q < k->passes.size(); ++q)
        for (const auto* list : {&k->passes[q].pre, &k->passes[q].loop, &k->passes[q].post})
          for (size_t j = 0; j < list->size(); ++j)
            if (!(list == &k->passes[pi].loop && j == si)) writes.insert((*list)[j].buffer);
    }
    for (int b : writes)
      if (inputs.count(buffer_root(p, b))) return std::nullopt;
  }
  f.fallback = *k;
  f.fallback.name = g.name + "_epilogue";  // one per GEMM: a kernel may hold several
  f.fallback.passes = {passes::Pass{}};
  f.fallback.passes[0].loop = {s};
  return f;
}

}  // namespace

int buffer_root(const Program& p, int b) {
  for (int guard = 0; b >= 0 && p.buffers[static_cast<size_t>(b)].alias_of >= 0 && guard < 64;
       ++guard)
    b = p.buffers[static_cast<size_t>(b)].alias_of;
  return b;
}

const char* epilogue_macro(GemmEpilogueKind k) {
  switch (k) {
    case GemmEpilogueKind::kNone:
      return "ANVIL_EPILOGUE_NONE";
    case GemmEpilogueKind::kBias:
      return "ANVIL_EPILOGUE_BIAS";
    case GemmEpilogueKind::kRelu:
      return "ANVIL_EPILOGUE_RELU";
    case GemmEpilogueKind::kGeluTanh:
      return "ANVIL_EPILOGUE_GELU_TANH";
    case GemmEpilogueKind::kBiasRelu:
      return "ANVIL_EPILOGUE_BIAS_RELU";
    case GemmEpilogueKind::kBiasGeluTanh:
      return "ANVIL_EPILOGUE_BIAS_GELU_TANH";
    case GemmEpilogueKind::kGeluErf:
      return "ANVIL_EPILOGUE_GELU_ERF";
    case GemmEpilogueKind::kBiasGeluErf:
      return "ANVIL_EPILOGUE_BIAS_GELU_ERF";
    case GemmEpilogueKind::kSilu:
      return "ANVIL_EPILOGUE_SILU";
    case GemmEpilogueKind::kBiasSilu:
      return "ANVIL_EPILOGUE_BIAS_SILU";
    case GemmEpilogueKind::kRelu6:
      return "ANVIL_EPILOGUE_RELU6";
    case GemmEpilogueKind::kBiasRelu6:
      return "ANVIL_EPILOGUE_BIAS_RELU6";
  }
  return "ANVIL_EPILOGUE_NONE";
}

bool cublaslt_fuses(GemmEpilogueKind k) {
  switch (k) {
    case GemmEpilogueKind::kGeluErf:
    case GemmEpilogueKind::kBiasGeluErf:
    case GemmEpilogueKind::kSilu:
    case GemmEpilogueKind::kBiasSilu:
    case GemmEpilogueKind::kRelu6:
    case GemmEpilogueKind::kBiasRelu6: return false;
    default: return true;
  }
}

bool epilogue_has_bias(GemmEpilogueKind k) {
  return k == GemmEpilogueKind::kBias || k == GemmEpilogueKind::kBiasRelu ||
         k == GemmEpilogueKind::kBiasGeluTanh || k == GemmEpilogueKind::kBiasGeluErf ||
         k == GemmEpilogueKind::kBiasSilu || k == GemmEpilogueKind::kBiasRelu6;
}

bool cpu_only_form(const FusedEpilogue& f) {
  return f.scale != 1.0 || f.has_shift || f.kind == GemmEpilogueKind::kRelu6 ||
         f.kind == GemmEpilogueKind::kBiasRelu6;
}

bool epilogue_has_activation(GemmEpilogueKind k) {
  return k != GemmEpilogueKind::kNone && k != GemmEpilogueKind::kBias;
}

passes::LoopKernel EpiloguePlan::remaining(size_t step, const LoopKernel& k) const {
  const auto it = removed.find(step);
  if (it == removed.end()) return k;
  LoopKernel r = k;
  for (auto s = it->second.rbegin(); s != it->second.rend(); ++s) {  // back to front
    auto& loop = r.passes[s->first].loop;
    loop.erase(loop.begin() + static_cast<std::ptrdiff_t>(s->second));
  }
  return r;
}

bool EpiloguePlan::fused_away(size_t step, const LoopKernel& k) const {
  if (!removed.count(step)) return false;
  for (const auto& ps : remaining(step, k).passes)
    if (!ps.pre.empty() || !ps.loop.empty() || !ps.post.empty()) return false;
  return true;
}

namespace {

/// The fusions of `all` that `keep(gemm step, fusion)` accepts.
template <class Keep>
EpiloguePlan select(const Program& p, const EpiloguePlan& all, Keep keep) {
  EpiloguePlan out;
  for (const auto& [gi, f] : all.by_gemm) {
    if (!keep(std::get<GemmStep>(p.steps[gi]), f)) continue;
    out.by_gemm.emplace(gi, f);
    out.removed[f.kernel_step].emplace_back(f.pass, f.stmt);
  }
  for (auto& [k, v] : out.removed) std::sort(v.begin(), v.end());
  return out;
}

}  // namespace

EpiloguePlan match_gemm_epilogues(const Program& p, bool cpu_forms) {
  EpiloguePlan plan;
  for (size_t i = 0; i < p.steps.size(); ++i) {
    if (!std::holds_alternative<GemmStep>(p.steps[i])) continue;
    if (auto f = plan_one(p, i, cpu_forms)) {
      auto& rm = plan.removed[f->kernel_step];
      const std::pair<size_t, size_t> at{f->pass, f->stmt};
      rm.insert(std::upper_bound(rm.begin(), rm.end(), at), at);
      plan.by_gemm.emplace(i, std::move(*f));
    }
  }
  return plan;
}

bool chosen_kernel_fuses(const GemmStep& g, const FusedEpilogue& f) {
  if (g.choice.source.empty() || !g.batch.empty() || cpu_only_form(f)) return false;
  if (f.residual >= 0 && !g.choice.fuses_residual) return false;
  return g.choice.fuses_bias == epilogue_has_bias(f.kind) &&
         g.choice.fuses_activation == epilogue_has_activation(f.kind);
}

EpiloguePlan plan_gemm_epilogues(const Program& p) {
  return select(p, match_gemm_epilogues(p), [](const GemmStep& g, const FusedEpilogue& f) {
    auto fuses = [&f](const GemmStep& one) {
      return one.choice.source.empty() ? cublaslt_fuses(f.kind) : chosen_kernel_fuses(one, f);
    };
    if (g.buckets.empty()) return fuses(g);
    // a symbolic M's buckets: fused when every bucket's kernel (or cuBLASLt) fuses it
    GemmStep one = g;
    for (const passes::GemmBucket& bk : g.buckets) {
      one.choice = bk.choice;
      if (!fuses(one)) return false;
    }
    return true;
  });
}

/// What every M of GEMM step `g` runs: its choice, or with buckets (symbolic M) a choice that
/// fuses a bias / an activation only when every bucket's does (an empty name when a bucket
/// keeps the default path, which fuses nothing).
static passes::GemmKernelChoice every_m_choice(const GemmStep& g) {
  if (g.buckets.empty()) return g.choice;
  passes::GemmKernelChoice all;
  all.name = "buckets";
  all.fuses_bias = all.fuses_activation = true;
  for (const passes::GemmBucket& bk : g.buckets) {
    if (bk.choice.name.empty()) return {};
    all.fuses_bias &= bk.choice.fuses_bias;
    all.fuses_activation &= bk.choice.fuses_activation;
  }
  return all;
}

EpiloguePlan cpu_store_epilogues(const passes::Program& p) {
  bool any = false;
  for (const auto& step : p.steps)
    if (const auto* g = std::get_if<passes::GemmStep>(&step);
        g && (!g->choice.name.empty() || !g->buckets.empty()))
      any = true;
  if (!any) return {};
  return select(p, match_gemm_epilogues(p, true), [](const GemmStep& step,
                                                     const FusedEpilogue& f) {
    GemmStep g = step;  // the checks below read g.choice
    g.choice = every_m_choice(step);
    if (g.choice.name.empty() || f.residual >= 0 || !g.batch.empty()) return false;
    if (f.kind == GemmEpilogueKind::kNone && f.scale == 1.0) return false;  // a copy
    // every chosen kernel applies AnvilGemmCall::alpha (the scale); the shift's bias vector is
    // sized when the package is generated
    if (f.has_shift && !g.n.maybe_constant()) return false;
    return (!epilogue_has_bias(f.kind) || g.choice.fuses_bias) &&
           (!epilogue_has_activation(f.kind) || g.choice.fuses_activation);
  });
}

int gemm_call_activation(GemmEpilogueKind k) {
  switch (k) {
    case GemmEpilogueKind::kRelu:
    case GemmEpilogueKind::kBiasRelu: return 1;      // ANVIL_GEMM_ACT_RELU
    case GemmEpilogueKind::kRelu6:
    case GemmEpilogueKind::kBiasRelu6: return 2;     // ANVIL_GEMM_ACT_RELU6
    case GemmEpilogueKind::kGeluTanh:
    case GemmEpilogueKind::kBiasGeluTanh: return 4;  // ANVIL_GEMM_ACT_GELU_TANH
    case GemmEpilogueKind::kGeluErf:
    case GemmEpilogueKind::kBiasGeluErf: return 3;   // ANVIL_GEMM_ACT_GELU_ERF
    case GemmEpilogueKind::kSilu:
    case GemmEpilogueKind::kBiasSilu: return 5;      // ANVIL_GEMM_ACT_SILU
    default: return 0;
  }
}

bool pose_cuda_epilogue(const EpiloguePlan& plan, size_t step, const passes::GemmStep& g,
                        GemmProblem& p) {
  const auto f = plan.by_gemm.find(step);
  if (f == plan.by_gemm.end() || g.b_dtype) return true;
  if (!g.batch.empty()) return false;
  if (f->second.residual >= 0) {
    // Only the fp32 3xTF32 kernels fuse a residual (fuses_residual), and only alone: it is
    // their C source, scaled by beta.
    if (g.dtype != DType::kFloat32 || f->second.kind != GemmEpilogueKind::kNone) return false;
    // ... read with D's 16-byte alignment: its offset a constant multiple of 4 floats
    const auto offset = f->second.residual_offset.maybe_constant();
    if (!offset || *offset % 4 != 0) return false;
    p.beta = f->second.beta;
    return true;
  }
  p.bias = epilogue_has_bias(f->second.kind) ? GemmBias::kPerColumn : GemmBias::kNone;
  p.activation = static_cast<GemmActivation>(gemm_call_activation(f->second.kind));
  return true;
}

}  // namespace anvil::codegen::gemm
