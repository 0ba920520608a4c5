// Vectorized pointwise kernels of the CUDA target (codegen/cuda/emit_cuda.h): each thread takes V
// consecutive elements of the innermost dim, loading and storing each contiguous operand with one
// 16-byte (or 8-byte) access, and runs the scalar expression code once per lane on registers.
//
// When: a pointwise kernel whose innermost dim's size is a multiple of V, whose every store and
// every load that moves along that dim is contiguous in it (coefficient 1) and starts a vector at
// a multiple of V elements (the other coefficients and the offset are multiples of V for every
// value of the model's symbols), over float32 / bfloat16 / float16 buffers; loads that do not move
// along it (coefficient 0: a bias over rows, a scalar) stay scalar loads. A buffer both loaded and
// stored is an in-place update: every load of it reads the element its store writes (before
// the first statement storing it, from memory; after, the stored value, forwarded), and every
// statement storing it stores that element (a batch norm then a ReLU in place). V = 16 bytes
// over the widest such element: 4 for float32, 8 for 16-bit data. The launcher checks at run
// time that every vector operand's base pointer is aligned to V elements and otherwise launches
// the scalar kernel.
#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "codegen/c_expr.h"
#include "codegen/cpu/emit_cpu.h"  // buffer_base
#include "codegen/cuda/emit_cuda.h"
#include "codegen/gemm/gemm_epilogue.h"

namespace anvil::codegen::cuda {

namespace {

using passes::Expr;
using passes::LoopKernel;
using passes::Stmt;

size_t elem_bytes(DType t) {
  switch (t) {
    case DType::kFloat32:
      return 4;
    case DType::kBFloat16:
    case DType::kFloat16:
      return 2;
    default:
      return 0;  // not vectorized
  }
}

/// Whether `s` is a multiple of `v` for every value of its symbols: its terms' coefficients all
/// are (SymInt's floordiv by a constant takes such terms out whole, 64*s0 // 4 -> 16*s0).
bool multiple_of(const SymInt& s, int v) { return s.floordiv(SymInt(v)) * SymInt(v) == s; }

const char* vec_type(size_t bytes) {
  return bytes == 16 ? "uint4" : bytes == 8 ? "uint2" : "unsigned int";
}

using passes::loop_vars;

/// The vector plan of pointwise kernel `k`: the width and the contiguous accesses; width 0 when
/// the kernel does not qualify.
struct VecPlan {
  int width = 0;
  std::string lane_var;
  std::vector<VecAccess> access;  // loads (unique by buffer and index) then stores
};

VecPlan plan_vector(const passes::Program& p, const LoopKernel& k) {
  VecPlan none;
  if (k.inner.empty() && k.outer.empty()) return none;
  std::vector<std::string> vars;
  std::vector<SymInt> sizes;
  loop_vars(k, vars, sizes);
  const size_t lane = vars.size() - 1;

  VecPlan plan;
  plan.lane_var = vars[lane];
  std::set<std::string> seen;
  std::vector<Affine> forms;
  const auto add = [&](int b, const SymInt& index, bool store) {
    const auto& buf = p.buffers[static_cast<size_t>(b)];
    if (buf.local) return false;
    const auto a = affine(index, vars);
    if (!a) return false;
    if (a->coef[lane] == SymInt(0) && !store) return true;  // a scalar load, the same per lane
    if (!(a->coef[lane] == SymInt(1))) return false;
    const size_t elem = elem_bytes(buf.dtype);
    if (elem == 0 || p.buffers[static_cast<size_t>(buffer_root(p, b))].dtype != buf.dtype)
      return false;
    if (!store && !seen.insert(std::to_string(b) + "[" + index.str() + "]").second) return true;
    plan.access.push_back({b, index, store, elem});
    forms.push_back(*a);
    return true;
  };
  const auto& loop = k.passes[0].loop;
  // Each stored root: the elements statements store in it, each with its first storing
  // statement and its buffer. One element stored by several statements (a batch norm, then a
  // ReLU in place): each thread keeps its lanes' latest value and stores the vector once, after
  // the last statement. Several elements (the slices of a concatenation): never loaded here.
  struct Stored {
    size_t first;
    int buffer;
    SymInt index;
  };
  std::map<int, std::vector<Stored>> stored_at;
  std::vector<std::pair<int, size_t>> store_order;  // (root, element)
  for (size_t i = 0; i < loop.size(); ++i) {
    const Stmt& s = loop[i];
    if (s.kind != Stmt::Kind::kStore) return none;
    const int r = buffer_root(p, s.buffer);
    auto& elems = stored_at[r];
    const auto same = std::find_if(elems.begin(), elems.end(),
                                   [&](const Stored& e) { return e.index == s.index; });
    if (same == elems.end()) {
      store_order.push_back({r, elems.size()});
      elems.push_back({i, s.buffer, s.index});
    } else if (same->buffer != s.buffer) {
      return none;  // the same element through two aliases
    }
  }
  // Loads of a stored root read the very element each thread stores (aliases share their
  // base): up to its first store (in place: each thread loads its lanes before it stores them)
  // from memory, after it the value an earlier statement stored (forwarded in registers).
  for (size_t i = 0; i < loop.size(); ++i) {
    std::vector<int> loads;
    p.exprs.loads(loop[i].expr, loads);
    for (int l : loads) {
      const Expr& e = p.exprs.at(l);
      const auto it = stored_at.find(buffer_root(p, e.buffer));
      if (it != stored_at.end()) {
        const auto& elems = it->second;
        if (elems.size() != 1 || !(e.index == elems[0].index)) return none;
        if (elems[0].first < i) {
          if (e.buffer != elems[0].buffer) return none;  // forwarded by buffer and index
          continue;
        }
      }
      if (!add(e.buffer, e.index, false)) return none;
    }
  }
  for (const auto& [r, n] : store_order) {
    const Stored& st = stored_at.at(r)[n];
    if (!add(st.buffer, st.index, true)) return none;
  }
  size_t widest = 0;
  for (const auto& a : plan.access) widest = std::max(widest, a.elem);
  if (widest == 0) return none;
  const int width = static_cast<int>(16 / widest);
  if (!multiple_of(sizes[lane], width)) return none;
  // every vector starts at a multiple of `width` elements from its buffer's base
  for (const Affine& f : forms) {
    if (!multiple_of(f.c0, width)) return none;
    for (size_t d = 0; d < lane; ++d)
      if (!(sizes[d] == SymInt(1)) && !multiple_of(f.coef[d], width)) return none;  // unit: 0
  }
  plan.width = width;
  return plan;
}

}  // namespace

VectorKernel emit_vector_kernel(const passes::Program& p, const LoopKernel& k) {
  VectorKernel out;
  const VecPlan plan = plan_vector(p, k);
  if (plan.width == 0) return out;
  const int V = plan.width;
  SymInt outer_n(1), inner_n(1);
  for (const auto& s : k.outer) outer_n = outer_n * s;
  for (const auto& s : k.inner) inner_n = inner_n * s;

  std::ostringstream os;
  Body body(p, os);
  body.push();
  const std::string ind = "    ", lind = "      ";
  os << ind << "const int64_t e0 = idx * " << V << ";\n";
  os << ind << "const int64_t lin = e0 / (" << inner_n.str() << ");\n";
  os << ind << "const int64_t rr = e0 - lin * (" << inner_n.str() << ");\n";
  os << ind << "(void)rr;\n";
  os << decompose(k.outer, "lin", "o", ind) << decompose(k.inner, "rr", "r", ind);
  os << ind << "const int64_t lane0 = " << plan.lane_var << ";\n";
  std::map<size_t, std::string> reg;  // access -> its register array
  for (size_t i = 0; i < plan.access.size(); ++i) {
    const VecAccess& a = plan.access[i];
    const auto& buf = p.buffers[static_cast<size_t>(a.buffer)];
    const std::string name = (a.store ? "w" : "v") + std::to_string(i);
    const std::string vt = vec_type(a.elem * static_cast<size_t>(V));
    reg[i] = name;
    os << ind << "alignas(16) " << storage_type(buf.dtype) << " " << name << "[" << V << "];\n";
    if (!a.store)
      os << ind << "*reinterpret_cast<" << vt << "*>(" << name << ") = *reinterpret_cast<const "
         << vt << "*>(" << body.ptr(a.buffer) << " + (" << a.index.str() << "));\n";
  }
  os << ind << "#pragma unroll\n";
  os << ind << "for (int j = 0; j < " << V << "; ++j) {\n";
  os << lind << "const int64_t " << plan.lane_var << " = lane0 + j;\n";
  os << lind << "(void)" << plan.lane_var << ";\n";
  body.push();
  for (size_t i = 0; i < plan.access.size(); ++i) {
    const VecAccess& a = plan.access[i];
    if (!a.store)
      body.forward(a.buffer, a.index,
                   from_storage(p.buffers[static_cast<size_t>(a.buffer)].dtype, reg[i] + "[j]"));
  }
  for (const Stmt& s : k.passes[0].loop) {
    const std::string v = body.value(s.expr, lind);
    for (size_t i = 0; i < plan.access.size(); ++i)
      if (plan.access[i].store && plan.access[i].buffer == s.buffer &&
          plan.access[i].index == s.index)
        os << lind << reg[i] << "[j] = " << body.store_code(s.buffer, v) << ";\n";
    body.forward(s.buffer, s.index, v);  // a later statement's load of it reads `v`
  }
  body.pop();
  os << ind << "}\n";
  for (size_t i = 0; i < plan.access.size(); ++i) {
    const VecAccess& a = plan.access[i];
    if (!a.store) continue;
    const std::string vt = vec_type(a.elem * static_cast<size_t>(V));
    os << ind << "*reinterpret_cast<" << vt << "*>(" << body.ptr(a.buffer) << " + ("
       << a.index.str() << ")) = *reinterpret_cast<const " << vt << "*>(" << reg[i] << ");\n";
  }
  body.pop();

  const std::set<int> roots = kernel_roots(p, k);
  const std::string body_text = os.str();
  const std::string sizes_text = outer_n.str() + " " + inner_n.str();
  std::ostringstream fn;
  fn << "// " << k.name << " vectorized: " << V << " elements per thread\n";
  fn << "__global__ void __launch_bounds__(256) " << k.name << "_kernel_v(Syms<"
     << kernel_sym_count(p) << "> sy";
  for (int b : roots)
    fn << ", " << storage_type(p.buffers[static_cast<size_t>(b)].dtype) << "* __restrict__ p" << b;
  fn << ") {\n" << pdl_prologue();
  fn << kernel_symbol_decls(p, body_text + sizes_text, "  ");
  fn << "  const int64_t total = (" << outer_n.str() << ") * (" << inner_n.str() << ") / " << V
     << ";\n";
  fn << "  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; "
        "idx < total;\n       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {\n";
  fn << body_text << "  }\n}\n\n";
  out.kernel_text = fn.str();
  out.width = V;
  // the launcher's run-time check: every vector operand's base aligned to its vector
  std::set<std::string> checks;
  for (const VecAccess& a : plan.access)
    checks.insert("reinterpret_cast<uintptr_t>(" + cpu::buffer_base(p, buffer_root(p, a.buffer)) +
                  ") % " + std::to_string(a.elem * static_cast<size_t>(V)) + " == 0");
  for (const auto& c : checks)
    out.align_check += (out.align_check.empty() ? "" : " &&\n      ") + c;
  return out;
}


// ---- row kernels (a block or a warp per outer point, passes over the inner dims) -----------------
//
// The same lanes in each pass loop of a row kernel (a norm, a softmax): the row's threads take
// V consecutive innermost elements at a time, with one vector access per contiguous operand. When:
// every pass loop's statements are stores and reductions; every load moving along the innermost
// dim and every store to memory is contiguous and V-aligned in it as above (loads that do not
// move along it, a row's mean, a weight over rows, stay scalar); a buffer a pass stores is read in
// that pass only at the element it writes (no store-to-load traffic between lanes or threads
// inside a pass; later passes read it after the block's or the warp's barrier).

RowVectorPlan plan_row_vector(const passes::Program& p, const LoopKernel& k) {
  RowVectorPlan none;
  if (k.inner.empty()) return none;
  std::vector<std::string> vars;
  std::vector<SymInt> sizes;
  loop_vars(k, vars, sizes);
  const size_t lane = vars.size() - 1;
  RowVectorPlan plan;
  plan.lane_var = vars[lane];
  std::vector<Affine> forms;
  for (const passes::Pass& pass : k.passes) {
    std::vector<VecAccess> acc;
    std::set<std::string> seen;
    std::map<int, SymInt> stored;  // root -> its store index in this pass
    std::vector<std::pair<int, SymInt>> loads;
    for (const Stmt& st : pass.loop) {
      std::vector<int> ls;
      p.exprs.loads(st.expr, ls);
      for (int l : ls) {
        const Expr& e = p.exprs.at(l);
        const auto a = affine(e.index, vars);
        if (!a) return none;
        if (a->coef[lane] == SymInt(0)) continue;  // the same for every lane: a scalar load
        const auto& buf = p.buffers[static_cast<size_t>(e.buffer)];
        const size_t elem = elem_bytes(buf.dtype);
        if (buf.local || !(a->coef[lane] == SymInt(1)) || elem == 0 ||
            p.buffers[static_cast<size_t>(buffer_root(p, e.buffer))].dtype != buf.dtype)
          return none;
        loads.push_back({buffer_root(p, e.buffer), e.index});
        if (!seen.insert(std::to_string(e.buffer) + "[" + e.index.str() + "]").second) continue;
        acc.push_back({e.buffer, e.index, false, elem});
        forms.push_back(*a);
      }
      if (st.kind == Stmt::Kind::kReduce) continue;
      const auto& buf = p.buffers[static_cast<size_t>(st.buffer)];
      if (buf.local) continue;  // a value forwarded to later statements, never stored
      const auto a = affine(st.index, vars);
      const size_t elem = elem_bytes(buf.dtype);
      if (!a || !(a->coef[lane] == SymInt(1)) || elem == 0 ||
          p.buffers[static_cast<size_t>(buffer_root(p, st.buffer))].dtype != buf.dtype)
        return none;
      if (!stored.emplace(buffer_root(p, st.buffer), st.index).second) return none;  // twice
      acc.push_back({st.buffer, st.index, true, elem});
      forms.push_back(*a);
    }
    for (const auto& [root, index] : loads) {
      const auto it = stored.find(root);
      if (it != stored.end() && !(it->second == index)) return none;
    }
    plan.access.push_back(std::move(acc));
  }
  size_t widest = 0;
  for (const auto& pass : plan.access)
    for (const auto& a : pass) widest = std::max(widest, a.elem);
  if (widest == 0) return none;  // nothing to vectorize
  const int width = static_cast<int>(16 / widest);
  if (!multiple_of(sizes[lane], width)) return none;
  for (const Affine& f : forms) {
    if (!multiple_of(f.c0, width)) return none;
    for (size_t d = 0; d < lane; ++d)
      if (!(sizes[d] == SymInt(1)) && !multiple_of(f.coef[d], width)) return none;
  }
  std::set<std::string> checks;
  for (const auto& pass : plan.access)
    for (const VecAccess& a : pass)
      checks.insert("reinterpret_cast<uintptr_t>(" + cpu::buffer_base(p, buffer_root(p, a.buffer)) +
                    ") % " + std::to_string(a.elem * static_cast<size_t>(width)) + " == 0");
  for (const auto& c : checks)
    plan.align_check += (plan.align_check.empty() ? "" : " &&\n      ") + c;
  plan.width = width;
  return plan;
}

void emit_row_vector_loop(Body& body, const passes::Program& p, const LoopKernel& k,
                          const RowVectorPlan& plan, size_t pass, int threads,
                          const std::string& tid, const std::string& ind,
                          std::ostringstream& os) {
  const int V = plan.width;
  SymInt inner_n(1);
  for (const auto& s : k.inner) inner_n = inner_n * s;
  const std::string in = ind + "  ", lin = ind + "    ";
  if (inner_n.is_constant() && inner_n.constant() % (threads * V) == 0 &&
      inner_n.constant() / (threads * V) <= 16) {
    os << ind << "#pragma unroll\n"
       << ind << "for (int64_t jj = 0; jj < " << inner_n.constant() / (threads * V)
       << "; ++jj) {\n"
       << in << "const int64_t rr = (" << tid << " + jj * " << threads << ") * " << V << ";\n";
  } else {
    os << ind << "for (int64_t rv = " << tid << "; rv < (" << inner_n.str() << ") / " << V
       << "; rv += " << threads << ") {\n"
       << in << "const int64_t rr = rv * " << V << ";\n";
  }
  os << decompose(k.inner, "rr", "r", in);
  os << in << "const int64_t lane0 = " << plan.lane_var << ";\n";
  const std::vector<VecAccess>& acc = plan.access[pass];
  std::vector<std::string> reg(acc.size());
  for (size_t i = 0; i < acc.size(); ++i) {
    const VecAccess& a = acc[i];
    const auto& buf = p.buffers[static_cast<size_t>(a.buffer)];
    const std::string vt = vec_type(a.elem * static_cast<size_t>(V));
    reg[i] = (a.store ? "w" : "v") + std::to_string(i);
    os << in << "alignas(16) " << storage_type(buf.dtype) << " " << reg[i] << "[" << V << "];\n";
    if (!a.store)
      os << in << "*reinterpret_cast<" << vt << "*>(" << reg[i] << ") = *reinterpret_cast<const "
         << vt << "*>(" << body.ptr(a.buffer) << " + (" << a.index.str() << "));\n";
  }
  os << in << "#pragma unroll\n";
  os << in << "for (int j = 0; j < " << V << "; ++j) {\n";
  os << lin << "const int64_t " << plan.lane_var << " = lane0 + j;\n";
  os << lin << "(void)" << plan.lane_var << ";\n";
  body.push();
  for (size_t i = 0; i < acc.size(); ++i)
    if (!acc[i].store)
      body.forward(acc[i].buffer, acc[i].index,
                   from_storage(p.buffers[static_cast<size_t>(acc[i].buffer)].dtype,
                                reg[i] + "[j]"));
  for (const Stmt& st : k.passes[pass].loop) {
    if (st.kind == Stmt::Kind::kReduce || p.buffers[static_cast<size_t>(st.buffer)].local) {
      emit_stmts(body, p, {st}, lin, os);  // an accumulation, or a forwarded local value
      continue;
    }
    const std::string v = body.value(st.expr, lin);
    for (size_t i = 0; i < acc.size(); ++i)
      if (acc[i].store && acc[i].buffer == st.buffer && acc[i].index == st.index)
        os << lin << reg[i] << "[j] = " << body.store_code(st.buffer, v) << ";\n";
    body.forward(st.buffer, st.index, v);
  }
  body.pop();
  os << in << "}\n";
  for (size_t i = 0; i < acc.size(); ++i) {
    if (!acc[i].store) continue;
    const std::string vt = vec_type(acc[i].elem * static_cast<size_t>(V));
    os << in << "*reinterpret_cast<" << vt << "*>(" << body.ptr(acc[i].buffer) << " + ("
       << acc[i].index.str() << ")) = *reinterpret_cast<const " << vt << "*>(" << reg[i]
       << ");\n";
  }
  os << ind << "}\n";
}

}  // namespace anvil::codegen::cuda
