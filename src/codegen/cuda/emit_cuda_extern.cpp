// CUDA kernels for the extern ops transformer exports carry (codegen/cuda/emit_cuda.h): gathers
// (embedding, index.Tensor with integer indices, gather), scans (cumsum), diff, and
// scaled_dot_product_attention. Each is generated from the step's strided views, like a loop
// kernel: shapes and strides are expressions over the model's symbols, evaluated in the kernel.
// Indices out of range stop the kernel with a message (as PyTorch's device-side assert does);
// the run then fails at the stream synchronization.
#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "codegen/c_expr.h"
#include "codegen/cpu/emit_cpu.h"
#include "codegen/cuda/emit_cuda.h"
#include "core/error.h"
#include "passes/collectives.h"

namespace anvil::codegen::cuda {

namespace {

using cpu::buffer_base;
using cpu::symbol_decls;
using passes::ExternAttr;
using passes::ExternStep;
using passes::Program;
using passes::TensorView;

int64_t int_attr(const ExternStep& e, const std::string& name, int64_t dflt) {
  const ExternAttr* a = passes::find_attr(e, name);
  if (!a || a->kind != 0 || !a->i.is_constant()) return dflt;
  return a->i.constant();
}

bool has_attr(const ExternStep& e, const std::string& name) {
  return passes::find_attr(e, name) != nullptr;
}

/// A value of `dtype` stored at `ptr[off]` in its compute type.
std::string load(DType t, const std::string& ptr, const std::string& off) {
  return from_storage(t, ptr + "[" + off + "]");
}

/// Statement storing compute value `v` at `ptr[off]` of `dtype`.
std::string store(DType t, const std::string& ptr, const std::string& off, const std::string& v) {
  return ptr + "[" + off + "] = " + to_storage(t, v) + ";";
}

std::string paren(const SymInt& s) { return "(" + s.str() + ")"; }

/// "const int64_t u0 = ...;" decomposing linear `lin` over `sizes`.
std::string decompose(const std::vector<SymInt>& sizes, const std::string& lin,
                      const std::string& prefix, const std::string& ind) {
  std::ostringstream os;
  os << ind << "int64_t rest_" << prefix << " = " << lin << ";\n";
  for (size_t d = sizes.size(); d-- > 0;) {
    os << ind << "const int64_t " << prefix << d << " = rest_" << prefix << " % " << paren(sizes[d])
       << ";\n";
    os << ind << "rest_" << prefix << " /= " << paren(sizes[d]) << ";\n";
  }
  os << ind << "(void)rest_" << prefix << ";\n";
  return os.str();
}

/// Element offset of view `v` at index variables vars[d] (one per view dim); a dim of size 1
/// contributes nothing (broadcasting).
std::string offset_of(const TensorView& v, const std::vector<std::string>& vars) {
  std::string e;
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    if (v.sizes[d].is_constant() && v.sizes[d].constant() == 1) continue;
    std::string term = vars[d] + " * " + paren(v.strides[d]);
    if (!v.sizes[d].is_constant())
      term = "(" + paren(v.sizes[d]) + " == 1 ? 0 : " + term + ")";
    e += (e.empty() ? "" : " + ") + term;
  }
  return e.empty() ? "0" : e;
}

std::string numel(const std::vector<SymInt>& sizes) {
  SymInt n(1);
  for (const auto& s : sizes) n = n * s;
  return paren(n);
}

std::vector<std::string> vars(const std::string& prefix, size_t n) {
  std::vector<std::string> v;
  for (size_t i = 0; i < n; ++i) v.push_back(prefix + std::to_string(i));
  return v;
}

/// The pieces every extern kernel shares: parameters (one pointer per present view, named
/// v<i> for input i and y<i> for output i) and the launcher.
struct KernelText {
  std::string name;
  std::vector<std::pair<std::string, const TensorView*>> params;  // (name, view)
  std::string body;                                                // inside the kernel
  std::string grid, block = "256", shared = "0";                   // launch, host expressions
  std::string guard;  // host statement(s) before the launch (return 1 with an error to refuse)
};

std::string finish(const Program& p, const ExternStep& e, const KernelText& k) {
  std::ostringstream fn;
  std::string nodes;
  for (size_t i = 0; i < e.nodes.size(); ++i) nodes += (i ? ", " : "") + e.nodes[i];
  fn << "// " << e.name << ": " << nodes << " (" << e.target << ")\n";
  fn << "__global__ void " << e.name << "_kernel(Syms<" << kernel_sym_count(p) << "> sy";
  for (const auto& [name, v] : k.params)
    fn << ", " << storage_type(v->dtype) << "* __restrict__ " << name;
  fn << ") {\n";
  std::string sizes_text = k.body;
  fn << kernel_symbol_decls(p, sizes_text, "  ") << k.body << "}\n\n";
  std::ostringstream launch;
  launch << k.guard;
  launch << kernel_syms_fill(p);
  launch << "  " << e.name << "_kernel<<<" << k.grid << ", " << k.block << ", " << k.shared
         << ", static_cast<cudaStream_t>(s.stream)>>>(sy";
  for (const auto& [name, v] : k.params)
    launch << ",\n      reinterpret_cast<" << storage_type(v->dtype) << "*>(" << buffer_base(p, v->buffer)
           << ") + (" << v->offset.str() << ")";
  launch << ");\n";
  launch << "  return anvil_launch_check(s, \"" << e.name << "\");\n";
  fn << "ANVIL_HIDDEN int " << e.name << "(const RunState& s) {\n";
  fn << symbol_decls(p, launch.str(), "s.sym", "  ") << launch.str() << "}\n";
  return fn.str();
}

/// One thread per output element (grid-stride) over `out`.
std::string elementwise_loop(const TensorView& out, const std::string& inner) {
  std::ostringstream os;
  os << "  const int64_t total = " << numel(out.sizes) << ";\n";
  os << "  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; "
        "idx < total;\n       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {\n";
  os << decompose(out.sizes, "idx", "u", "    ");
  os << inner << "  }\n";
  return os.str();
}

/// Code checking index `var` against [0, n) after wrapping negatives when `wrap`.
std::string check_index(const ExternStep& e, const std::string& var, const std::string& n,
                        bool wrap) {
  std::ostringstream os;
  if (wrap) os << "    if (" << var << " < 0) " << var << " += " << n << ";\n";
  os << "    if (" << var << " < 0 || " << var << " >= " << n << ") {\n"
     << "      printf(\"anvil: " << e.name << " (" << e.target
     << "): index %lld is out of range [0, %lld)\\n\", (long long)" << var << ", (long long)(" << n
     << "));\n"
     << "      __trap();\n    }\n";
  return os.str();
}

std::string elementwise_grid(const TensorView& out) {
  return "anvil_blocks(" + numel(out.sizes) + ", 256)";
}

bool int_index(DType t) { return t == DType::kInt64 || t == DType::kInt32; }

// ---- the ops ----

std::string embedding(const Program& p, const ExternStep& e) {
  const TensorView &w = e.inputs[0], &ix = e.inputs[1], &out = e.outputs[0];
  const size_t n = ix.sizes.size();
  std::vector<std::string> iv = vars("u", n);
  std::ostringstream in;
  in << "    int64_t row = " << load(ix.dtype, "v1", offset_of(ix, iv)) << ";\n";
  in << check_index(e, "row", paren(w.sizes[0]), false);
  in << "    " << store(out.dtype, "y0", offset_of(out, vars("u", out.sizes.size())),
                         load(w.dtype, "v0", "row * " + paren(w.strides[0]) + " + u" +
                                                  std::to_string(n) + " * " + paren(w.strides[1])))
     << "\n";
  KernelText k;
  k.params = {{"v0", &w}, {"v1", &ix}, {"y0", &out}};
  k.body = elementwise_loop(out, in.str());
  k.grid = elementwise_grid(out);
  return finish(p, e, k);
}

std::string index_tensor(const Program& p, const ExternStep& e) {
  const TensorView& self = e.inputs[0];
  const TensorView& out = e.outputs[0];
  const size_t k = e.inputs.size() - 1;
  const size_t rank = self.sizes.size();
  const size_t nb = out.sizes.size() - (rank - k);  // broadcast dims of the index tensors
  std::ostringstream in;
  std::string off;
  for (size_t j = 0; j < k; ++j) {
    const TensorView& ix = e.inputs[j + 1];
    std::vector<std::string> iv;
    for (size_t d = 0; d < ix.sizes.size(); ++d)
      iv.push_back("u" + std::to_string(nb - ix.sizes.size() + d));
    const std::string var = "i" + std::to_string(j);
    in << "    int64_t " << var << " = " << load(ix.dtype, "v" + std::to_string(j + 1), offset_of(ix, iv))
       << ";\n";
    in << check_index(e, var, paren(self.sizes[j]), true);
    off += (off.empty() ? "" : " + ") + var + " * " + paren(self.strides[j]);
  }
  for (size_t r = k; r < rank; ++r)
    off += " + u" + std::to_string(nb + r - k) + " * " + paren(self.strides[r]);
  in << "    " << store(out.dtype, "y0", offset_of(out, vars("u", out.sizes.size())),
                         load(self.dtype, "v0", off))
     << "\n";
  KernelText kt;
  kt.params.push_back({"v0", &self});
  for (size_t j = 0; j < k; ++j) kt.params.push_back({"v" + std::to_string(j + 1), &e.inputs[j + 1]});
  kt.params.push_back({"y0", &out});
  kt.body = elementwise_loop(out, in.str());
  kt.grid = elementwise_grid(out);
  return finish(p, e, kt);
}

int64_t wrap(int64_t d, size_t rank) { return d < 0 ? d + static_cast<int64_t>(rank) : d; }

std::string gather(const Program& p, const ExternStep& e) {
  const TensorView &self = e.inputs[0], &ix = e.inputs[1], &out = e.outputs[0];
  const size_t rank = self.sizes.size();
  const int64_t dim = wrap(int_attr(e, "dim", 0), rank);
  std::vector<std::string> uv = vars("u", out.sizes.size());
  std::ostringstream in;
  in << "    int64_t g = " << load(ix.dtype, "v1", offset_of(ix, uv)) << ";\n";
  in << check_index(e, "g", paren(self.sizes[static_cast<size_t>(dim)]), true);
  std::string off;
  for (size_t d = 0; d < rank; ++d)
    off += (d ? " + " : "") + (static_cast<int64_t>(d) == dim ? std::string("g") : uv[d]) + " * " +
           paren(self.strides[d]);
  in << "    " << store(out.dtype, "y0", offset_of(out, uv), load(self.dtype, "v0", off)) << "\n";
  KernelText k;
  k.params = {{"v0", &self}, {"v1", &ix}, {"y0", &out}};
  k.body = elementwise_loop(out, in.str());
  k.grid = elementwise_grid(out);
  return finish(p, e, k);
}

/// One thread per line along `dim`: the other dims' sizes, and the line's offset expression.
struct Lines {
  std::vector<SymInt> sizes;
  std::vector<std::string> vars;  // per dim of the tensor: "w<k>" or "t" for dim
};

Lines lines_along(const std::vector<SymInt>& sizes, size_t dim) {
  Lines l;
  for (size_t d = 0, k = 0; d < sizes.size(); ++d) {
    if (d == dim) {
      l.vars.push_back("t");
      continue;
    }
    l.sizes.push_back(sizes[d]);
    l.vars.push_back("w" + std::to_string(k++));
  }
  return l;
}

std::string line_loop(const Lines& l, const std::string& inner) {
  std::ostringstream os;
  os << "  const int64_t lines = " << numel(l.sizes) << ";\n";
  os << "  for (int64_t line = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; "
        "line < lines;\n       line += static_cast<int64_t>(gridDim.x) * blockDim.x) {\n";
  os << decompose(l.sizes, "line", "w", "    ") << inner << "  }\n";
  return os.str();
}

std::string cumsum(const Program& p, const ExternStep& e) {
  const TensorView &self = e.inputs[0], &out = e.outputs[0];
  const size_t rank = self.sizes.size();
  const size_t dim = static_cast<size_t>(wrap(int_attr(e, "dim", 0), std::max<size_t>(rank, 1)));
  KernelText k;
  k.params = {{"v0", &self}, {"y0", &out}};
  if (rank == 0) {  // a 0-dim cumsum is a copy
    k.body = "  if (blockIdx.x == 0 && threadIdx.x == 0) { " +
             store(out.dtype, "y0", "0", load(self.dtype, "v0", "0")) + " }\n";
    k.grid = "1";
    return finish(p, e, k);
  }
  const Lines l = lines_along(self.sizes, dim);
  const std::string ct = compute_type(out.dtype);
  std::ostringstream in;
  in << "    " << ct << " acc = 0;\n";
  in << "    for (int64_t t = 0; t < " << paren(self.sizes[dim]) << "; ++t) {\n";
  in << "      acc += static_cast<" << ct << ">(" << load(self.dtype, "v0", offset_of(self, l.vars))
     << ");\n";
  in << "      " << store(out.dtype, "y0", offset_of(out, l.vars), "acc") << "\n    }\n";
  k.body = line_loop(l, in.str());
  k.grid = "anvil_blocks(" + numel(l.sizes) + ", 256)";
  return finish(p, e, k);
}

std::string diff(const Program& p, const ExternStep& e) {
  const TensorView& self = e.inputs[0];
  const TensorView* pre = e.inputs.size() > 1 && e.inputs[1].buffer >= 0 ? &e.inputs[1] : nullptr;
  const TensorView* app = e.inputs.size() > 2 && e.inputs[2].buffer >= 0 ? &e.inputs[2] : nullptr;
  const TensorView& out = e.outputs[0];
  const size_t rank = self.sizes.size();
  const size_t dim = static_cast<size_t>(wrap(int_attr(e, "dim", -1), rank));
  std::vector<std::string> uv = vars("u", rank);
  const std::string ns = paren(self.sizes[dim]);
  const std::string np = pre ? paren(pre->sizes[dim]) : "0";
  // c(i): element i along dim of cat(prepend, self, append) at the other coordinates of u
  auto at = [&](const TensorView& v, const std::string& name, const std::string& i) {
    std::vector<std::string> w = uv;
    w[dim] = "(" + i + ")";
    return load(v.dtype, name, offset_of(v, w));
  };
  const std::string ct = compute_type(self.dtype);
  std::ostringstream in;
  in << "    auto c = [&](int64_t i) -> " << ct << " {\n";
  if (pre) in << "      if (i < " << np << ") return " << at(*pre, "v1", "i") << ";\n";
  if (app)
    in << "      if (i >= " << np << " + " << ns << ") return " << at(*app, "v2", "i - " + np + " - " + ns)
       << ";\n";
  in << "      return " << at(self, "v0", "i - " + np) << ";\n    };\n";
  const std::string d = self.dtype == DType::kBool ? "static_cast<int64_t>(c(u" + std::to_string(dim) +
                                                         " + 1) != c(u" + std::to_string(dim) + "))"
                                                   : "c(u" + std::to_string(dim) + " + 1) - c(u" +
                                                         std::to_string(dim) + ")";
  in << "    " << store(out.dtype, "y0", offset_of(out, uv), d) << "\n";
  KernelText k;
  k.params = {{"v0", &self}};
  if (pre) k.params.push_back({"v1", pre});
  if (app) k.params.push_back({"v2", app});
  k.params.push_back({"y0", &out});
  k.body = elementwise_loop(out, in.str());
  k.grid = elementwise_grid(out);
  return finish(p, e, k);
}

/// What both attention kernels read off the step: operands, dtype of the math, scale, sizes
/// as expressions, the key / value head of query head `h` (grouped-query attention: each key /
/// value head serves H / Hk query heads), and the masking of a score.
struct Attention {
  const TensorView &q, &k, &v, &out;
  const TensorView* mask;
  bool causal, f64;
  std::string ct, B, H, L, S, hk, hv;
  explicit Attention(const ExternStep& e)
      : q(e.inputs[0]), k(e.inputs[1]), v(e.inputs[2]), out(e.outputs[0]),
        mask(e.inputs.size() > 3 && e.inputs[3].buffer >= 0 ? &e.inputs[3] : nullptr),
        causal(int_attr(e, "is_causal", 0) != 0), f64(q.dtype == DType::kFloat64),
        ct(f64 ? "double" : "float"), B(paren(q.sizes[0])), H(paren(q.sizes[1])),
        L(paren(q.sizes[2])), S(paren(k.sizes[2])),
        hk("(h / (" + H + " / " + paren(k.sizes[1]) + "))"),
        hv("(h / (" + H + " / " + paren(v.sizes[1]) + "))") {}
  /// The softmax scale: the step's, else 1 / sqrt(head size `e`).
  std::string scale(const ExternStep& e, const std::string& head) const {
    const passes::ExternAttr* sa = passes::find_attr(e, "scale");
    if (sa && sa->kind == 1) return float_literal(sa->f, f64 ? DType::kFloat64 : DType::kFloat32);
    return "(static_cast<" + ct + ">(1) / sqrt(static_cast<" + ct + ">(" + head + ")))";
  }
  /// Statements applying causality and the mask (its dims aligned to (b, h, i, j) from the
  /// right, read from parameter v3) to score variable `sc` of row i and key j.
  std::string masking(const std::string& sc, const std::string& ind) const {
    std::string out_text;
    if (causal) out_text += ind + "if (j > i) " + sc + " = -INFINITY;\n";
    if (mask) {
      std::vector<std::string> mv;
      const std::vector<std::string> all = {"b", "h", "i", "j"};
      for (size_t d = 0; d < mask->sizes.size(); ++d)
        mv.push_back(all[4 - mask->sizes.size() + d]);
      const std::string m = load(mask->dtype, "v3", offset_of(*mask, mv));
      if (mask->dtype == DType::kBool)
        out_text += ind + "if (" + m + " == 0) " + sc + " = -INFINITY;\n";
      else
        out_text += ind + sc + " += static_cast<" + ct + ">(" + m + ");\n";
    }
    return out_text;
  }
};

/// scaled_dot_product_attention, one block per query row: scores in shared memory, a block max
/// and sum, then each thread one output feature.
std::string sdpa(const Program& p, const ExternStep& e) {
  const Attention a(e);
  const TensorView &q = a.q, &kk = a.k, &v = a.v, &out = a.out;
  const TensorView* mask = a.mask;
  const std::string &ct = a.ct, &B = a.B, &H = a.H, &L = a.L, &S = a.S, &hk = a.hk, &hv = a.hv;
  const std::string E = paren(q.sizes[3]), Ev = paren(v.sizes[3]);
  const std::string scale = a.scale(e, E);
  auto at4 = [](const TensorView& t, const std::string& a, const std::string& b,
                const std::string& c, const std::string& d) {
    return offset_of(t, {a, b, c, d});
  };
  std::ostringstream in;
  in << "  extern __shared__ unsigned char anvil_dyn_smem[];\n";
  in << "  " << ct << "* sc = reinterpret_cast<" << ct << "*>(anvil_dyn_smem);\n";
  in << "  __shared__ " << ct << " red[32];\n";
  in << "  const int64_t rows = " << B << " * " << H << " * " << L << ";\n";
  in << "  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {\n";
  in << "    const int64_t i = row % " << L << ", h = (row / " << L << ") % " << H
     << ", b = row / (" << L << " * " << H << ");\n";
  in << "    " << ct << " mx = -INFINITY;\n";
  in << "    for (int64_t j = threadIdx.x; j < " << S << "; j += blockDim.x) {\n";
  in << "      " << ct << " acc = 0;\n";
  in << "      for (int64_t d = 0; d < " << E << "; ++d)\n";
  in << "        acc += static_cast<" << ct << ">(" << load(q.dtype, "v0", at4(q, "b", "h", "i", "d"))
     << ") * static_cast<" << ct << ">(" << load(kk.dtype, "v1", at4(kk, "b", hk, "j", "d"))
     << ");\n";
  in << "      acc *= " << scale << ";\n";
  in << a.masking("acc", "      ");
  in << "      sc[j] = acc;\n      mx = acc > mx ? acc : mx;\n    }\n";
  in << "    mx = block_reduce(mx, MaxOp(), red);\n";
  in << "    " << ct << " sum = 0;\n";
  in << "    for (int64_t j = threadIdx.x; j < " << S << "; j += blockDim.x) {\n";
  in << "      const " << ct << " pj = exp(sc[j] - mx);\n      sc[j] = pj;\n      sum += pj;\n    }\n";
  in << "    sum = block_reduce(sum, SumOp(), red);  // its barriers publish sc[]\n";
  in << "    for (int64_t d = threadIdx.x; d < " << Ev << "; d += blockDim.x) {\n";
  in << "      " << ct << " acc = 0;\n";
  in << "      for (int64_t j = 0; j < " << S << "; ++j)\n";
  in << "        acc += sc[j] * static_cast<" << ct << ">(" << load(v.dtype, "v2", at4(v, "b", hv, "j", "d"))
     << ");\n";
  in << "      " << store(out.dtype, "y0", at4(out, "b", "h", "i", "d"), "acc / sum") << "\n    }\n";
  in << "    __syncthreads();  // sc[] is rewritten by the next row\n  }\n";
  KernelText k;
  k.params = {{"v0", &q}, {"v1", &kk}, {"v2", &v}};
  if (mask) k.params.push_back({"v3", mask});
  k.params.push_back({"y0", &out});
  k.body = in.str();
  k.block = "128";
  k.shared = "smem";
  k.grid = "anvil_blocks(" + B + " * " + H + " * " + L + ", 1)";
  std::ostringstream guard;
  guard << "  const size_t smem = static_cast<size_t>(" << S << ") * sizeof(" << ct << ");\n";
  guard << "  if (" << B << " * " << H << " * " << L << " <= 0) return 0;\n";
  guard << "  if (smem > 99 * 1024) {\n"
        << "    s.api->set_error(s.run_ctx, \"" << e.name
        << ": the CUDA attention kernel keeps a row of scores in shared memory; this key length "
           "is too long for it\");\n    return 1;\n  }\n";
  guard << "  if (smem > 48 * 1024)\n"
        << "    cudaFuncSetAttribute(" << e.name
        << "_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));\n";
  k.guard = guard.str();
  return finish(p, e, k);
}

/// scaled_dot_product_attention with compile-time head sizes (E, Ev <= 128), flash-style: a
/// block of 128 threads takes 32 query rows of one (batch, head), four threads per row, each
/// with the query and its own output accumulator in registers and every fourth key of each tile;
/// key and value tiles are staged in shared memory (rows padded by one element so the four
/// lanes' different keys fall in different banks) and the softmax runs online (running max and
/// sum per thread, merged across the four lanes with shuffles at the end), so scores never leave
/// registers. Causal blocks stop at their last row's diagonal.
std::string sdpa_tiled(const Program& p, const ExternStep& e) {
  const Attention a(e);
  const TensorView &q = a.q, &kk = a.k, &v = a.v, &out = a.out;
  const TensorView* mask = a.mask;
  const bool causal = a.causal, f64 = a.f64;
  const std::string &ct = a.ct, &B = a.B, &H = a.H, &L = a.L, &S = a.S, &hk = a.hk, &hv = a.hv;
  const int64_t E = q.sizes[3].constant(), EV = v.sizes[3].constant();
  const int64_t BK = (E + EV + 2) * (f64 ? 8 : 4) * 64 <= 48 * 1024 ? 64 : 32;  // keys per tile
  const std::string scale = a.scale(e, std::to_string(E));
  std::ostringstream in;
  in << "  constexpr int E = " << E << ", EV = " << EV << ", BQ = 32, LANES = 4, BK = " << BK
     << ";\n";
  in << "  __shared__ " << ct << " ks[BK][E + 1];\n  __shared__ " << ct << " vs[BK][EV + 1];\n";
  in << "  const int64_t b = blockIdx.z, h = blockIdx.y;\n";
  in << "  const int lane = threadIdx.x % LANES;\n";
  in << "  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * BQ, i = i0 + threadIdx.x / LANES;\n";
  in << "  const bool live = i < " << L << ";\n";
  in << "  " << ct << " qr[E], acc[EV];\n";
  in << "  #pragma unroll\n  for (int d = 0; d < E; ++d)\n";
  in << "    qr[d] = live ? static_cast<" << ct << ">("
     << load(q.dtype, "v0", offset_of(q, {"b", "h", "i", "d"})) << ") * " << scale << " : 0;\n";
  in << "  #pragma unroll\n  for (int d = 0; d < EV; ++d) acc[d] = 0;\n";
  in << "  " << ct << " m = -INFINITY, l = 0;\n";
  std::string kend = S;
  if (causal) kend = "(" + S + " < i0 + BQ ? " + S + " : i0 + BQ)";
  in << "  const int64_t kend = " << kend << ";\n";
  in << "  for (int64_t k0 = 0; k0 < kend; k0 += BK) {\n";
  in << "    const int nk = static_cast<int>(kend - k0 < BK ? kend - k0 : BK);\n";
  in << "    __syncthreads();  // the previous tile is no longer read\n";
  in << "    for (int t = threadIdx.x; t < nk * E; t += blockDim.x) {\n";
  in << "      const int jj = t / E, d = t % E;\n      const int64_t j = k0 + jj;\n";
  in << "      ks[jj][d] = static_cast<" << ct << ">("
     << load(kk.dtype, "v1", offset_of(kk, {"b", hk, "j", "d"})) << ");\n    }\n";
  in << "    for (int t = threadIdx.x; t < nk * EV; t += blockDim.x) {\n";
  in << "      const int jj = t / EV, d = t % EV;\n      const int64_t j = k0 + jj;\n";
  in << "      vs[jj][d] = static_cast<" << ct << ">("
     << load(v.dtype, "v2", offset_of(v, {"b", hv, "j", "d"})) << ");\n    }\n";
  in << "    __syncthreads();\n";
  in << "    if (!live) continue;\n";
  in << "    for (int jj = lane; jj < nk; jj += LANES) {\n";
  in << "      const int64_t j = k0 + jj;\n";
  in << "      " << ct << " sc = 0;\n";
  in << "      #pragma unroll\n      for (int d = 0; d < E; ++d) sc += qr[d] * ks[jj][d];\n";
  in << a.masking("sc", "      ");
  in << "      if (sc == -INFINITY) continue;  // masked: contributes exp(-inf) = 0\n";
  in << "      if (sc > m) {\n";
  in << "        const " << ct << " r = exp(m - sc);\n";
  in << "        l *= r;\n        #pragma unroll\n        for (int d = 0; d < EV; ++d) acc[d] *= r;\n";
  in << "        m = sc;\n      }\n";
  in << "      const " << ct << " pj = exp(sc - m);\n      l += pj;\n";
  in << "      #pragma unroll\n      for (int d = 0; d < EV; ++d) acc[d] += pj * vs[jj][d];\n";
  in << "    }\n  }\n";
  // merge the four lanes of a row (adjacent threads of one warp)
  in << "  #pragma unroll\n  for (int o = 1; o < LANES; o <<= 1) {\n";
  in << "    const " << ct << " mo = __shfl_xor_sync(0xffffffffu, m, o);\n";
  in << "    const " << ct << " lo = __shfl_xor_sync(0xffffffffu, l, o);\n";
  in << "    const " << ct << " mn = mo > m ? mo : m;\n";
  in << "    const " << ct << " a = mn == -INFINITY ? 0 : exp(m - mn), c = mn == -INFINITY ? 0 : exp(mo - mn);\n";
  in << "    #pragma unroll\n    for (int d = 0; d < EV; ++d) {\n";
  in << "      const " << ct << " ao = __shfl_xor_sync(0xffffffffu, acc[d], o);\n";
  in << "      acc[d] = acc[d] * a + ao * c;\n    }\n";
  in << "    l = l * a + lo * c;\n    m = mn;\n  }\n";
  // A row with every key masked: PyTorch's math path gives NaN (softmax of all -inf).
  in << "  if (live) {\n    const " << ct << " inv = l > 0 ? 1 / l : static_cast<" << ct
     << ">(NAN);\n";
  // (a static index keeps acc[] in registers: lane l writes the features d = l mod 4)
  in << "    #pragma unroll\n    for (int d = 0; d < EV; ++d)\n      if (d % LANES == lane) "
     << store(out.dtype, "y0", offset_of(out, {"b", "h", "i", "d"}), "acc[d] * inv") << "\n  }\n";
  KernelText k;
  k.params = {{"v0", &q}, {"v1", &kk}, {"v2", &v}};
  if (mask) k.params.push_back({"v3", mask});
  k.params.push_back({"y0", &out});
  k.body = in.str();
  k.block = "128";
  k.grid = "dim3(static_cast<unsigned>((" + L + " + 31) / 32), static_cast<unsigned>(" + H +
           "), static_cast<unsigned>(" + B + "))";
  k.guard = "  if (" + B + " * " + H + " * " + L + " <= 0) return 0;\n";
  return finish(p, e, k);
}

/// True when attention step `e` can run on tensor cores (sdpa_wmma): 16-bit q, k, v and output
/// of one dtype, one compile-time head size that is a multiple of 16 up to 96 (the tiles of a
/// head size of 128 would not fit in 48 KiB of static shared memory).
bool wmma_attention(const ExternStep& e) {
  const TensorView &q = e.inputs[0], &k = e.inputs[1], &v = e.inputs[2], &o = e.outputs[0];
  if (q.dtype != DType::kBFloat16 && q.dtype != DType::kFloat16) return false;
  if (k.dtype != q.dtype || v.dtype != q.dtype || o.dtype != q.dtype) return false;
  if (!q.sizes[3].is_constant() || !v.sizes[3].is_constant()) return false;
  const int64_t E = q.sizes[3].constant();
  return E == v.sizes[3].constant() && E % 16 == 0 && E >= 16 && E <= 96;
}

/// Attention on tensor cores (WMMA, fp32 accumulation) for 16-bit inputs: a block takes 64
/// query rows of one (b, h), a warp 16 of them. Pass 1 computes S = Q·Kᵀ tile by tile (32
/// keys) and each row's maximum and exp-sum; pass 2 computes S again, P = exp(S·scale − max)
/// rounded to the input dtype (as flash attention does), and O += P·V in accumulator
/// fragments; O / sum is stored. Causal blocks stop at their last row's key.
std::string sdpa_wmma(const Program& p, const ExternStep& e) {
  const Attention a(e);
  const TensorView &q = a.q, &kk = a.k, &v = a.v, &out = a.out;
  const std::string &B = a.B, &H = a.H, &L = a.L, &S = a.S, &hk = a.hk, &hv = a.hv;
  const int64_t E = q.sizes[3].constant();
  const std::string wt = q.dtype == DType::kBFloat16 ? "__nv_bfloat16" : "__half";
  const std::string scale = a.scale(e, std::to_string(E));
  std::ostringstream in;
  in << "  using namespace nvcuda;\n";
  // 64 query rows, 32 keys per tile; the row pitches keep WMMA's 32-byte alignment
  in << "  constexpr int E = " << E << ", BQ = 64, BK = 32, EP = E + 8, KP = BK + 8, SP = BK + 4;\n";
  in << "  __shared__ __align__(32) uint16_t qs[BQ * EP];\n";
  in << "  __shared__ __align__(32) uint16_t ks[BK * EP];\n";
  in << "  __shared__ __align__(32) uint16_t vs[BK * EP];\n";
  in << "  __shared__ __align__(32) float ss[4][16 * SP];\n";
  in << "  __shared__ __align__(32) uint16_t ps[4][16 * KP];\n";
  in << "  const int64_t b = blockIdx.z, h = blockIdx.y;\n";
  in << "  const int64_t i0 = static_cast<int64_t>(blockIdx.x) * BQ;\n";
  in << "  const int w = threadIdx.x / 32, lane = threadIdx.x % 32;\n";
  in << "  const int r = lane / 2, half = lane % 2;  // the row and half-tile a lane scores\n";
  in << "  const int64_t i = i0 + w * 16 + r;\n";
  in << "  const " << a.ct << " scale = " << scale << ";\n";
  // Q tile (zero beyond L)
  in << "  for (int t = threadIdx.x; t < BQ * E; t += blockDim.x) {\n";
  in << "    const int rr = t / E, d = t % E;\n    const int64_t iq = i0 + rr;\n";
  in << "    qs[rr * EP + d] = iq < " << L << " ? "
     << "v0[" << offset_of(q, {"b", "h", "iq", "d"}) << "] : uint16_t(0);\n  }\n";
  in << "  __syncthreads();\n";
  in << "  wmma::fragment<wmma::matrix_a, 16, 16, 16, " << wt << ", wmma::row_major> qf[E / 16];\n";
  in << "  #pragma unroll\n  for (int c = 0; c < E / 16; ++c)\n";
  in << "    wmma::load_matrix_sync(qf[c], reinterpret_cast<const " << wt
     << "*>(qs + w * 16 * EP + c * 16), EP);\n";
  std::string kend = S;
  if (a.causal) kend = "(" + S + " < i0 + BQ ? " + S + " : i0 + BQ)";
  in << "  const int64_t kend = " << kend << ";\n";
  // loads a K (and V) tile; scores the warp's 16 rows into ss[w]
  auto tile = [&](bool with_v) {
    std::ostringstream t;
    t << "    __syncthreads();\n";
    t << "    for (int t = threadIdx.x; t < BK * E; t += blockDim.x) {\n";
    t << "      const int jj = t / E, d = t % E;\n      const int64_t j = k0 + jj;\n";
    t << "      const bool in = j < " << S << ";\n";
    t << "      ks[jj * EP + d] = in ? v1[" << offset_of(kk, {"b", hk, "j", "d"}) << "] : uint16_t(0);\n";
    if (with_v)
      t << "      vs[jj * EP + d] = in ? v2[" << offset_of(v, {"b", hv, "j", "d"})
        << "] : uint16_t(0);\n";
    t << "    }\n    __syncthreads();\n";
    t << "    #pragma unroll\n    for (int n = 0; n < BK / 16; ++n) {\n";
    t << "      wmma::fragment<wmma::accumulator, 16, 16, 16, float> sf;\n";
    t << "      wmma::fill_fragment(sf, 0.0f);\n";
    t << "      #pragma unroll\n      for (int c = 0; c < E / 16; ++c) {\n";
    t << "        wmma::fragment<wmma::matrix_b, 16, 16, 16, " << wt << ", wmma::col_major> kf;\n";
    t << "        wmma::load_matrix_sync(kf, reinterpret_cast<const " << wt
      << "*>(ks + n * 16 * EP + c * 16), EP);\n";
    t << "        wmma::mma_sync(sf, qf[c], kf, sf);\n      }\n";
    t << "      wmma::store_matrix_sync(ss[w] + n * 16, sf, SP, wmma::mem_row_major);\n    }\n";
    t << "    __syncwarp();\n";
    return t.str();
  };
  // score of (i, j) with the scale and masking applied, into `sc`
  const std::string score = "        " + a.ct + " sc = ss[w][r * SP + jj] * scale;\n" +
                            "        if (j >= " + S + " || i >= " + L + ") sc = -INFINITY;\n" +
                            a.masking("sc", "        ");
  in << "  float m = -INFINITY, l = 0;\n";
  in << "  for (int64_t k0 = 0; k0 < kend; k0 += BK) {\n" << tile(false);
  in << "    for (int jj = half * (BK / 2); jj < (half + 1) * (BK / 2); ++jj) {\n";
  in << "      {\n        const int64_t j = k0 + jj;\n" << score;
  in << "        if (sc > m) {\n          l *= expf(m - sc);\n          m = sc;\n        }\n";
  in << "        if (sc != -INFINITY) l += expf(sc - m);\n      }\n    }\n  }\n";
  // combine the two lanes of a row
  in << "  {\n    const float mo = __shfl_xor_sync(0xffffffffu, m, 1), lo = __shfl_xor_sync(0xffffffffu, l, 1);\n";
  in << "    const float mn = mo > m ? mo : m;\n";
  in << "    l = mn == -INFINITY ? 0.0f : l * expf(m - mn) + lo * expf(mo - mn);\n    m = mn;\n  }\n";
  // pass 2
  in << "  wmma::fragment<wmma::accumulator, 16, 16, 16, float> of[E / 16];\n";
  in << "  #pragma unroll\n  for (int c = 0; c < E / 16; ++c) wmma::fill_fragment(of[c], 0.0f);\n";
  in << "  for (int64_t k0 = 0; k0 < kend; k0 += BK) {\n" << tile(true);
  in << "    for (int jj = half * (BK / 2); jj < (half + 1) * (BK / 2); ++jj) {\n";
  in << "      {\n        const int64_t j = k0 + jj;\n" << score;
  in << "        const float pv = sc == -INFINITY ? 0.0f : expf(sc - m);\n";
  in << "        ps[w][r * KP + jj] = " << to_storage(q.dtype, "pv") << ";\n      }\n    }\n";
  in << "    __syncwarp();\n";
  in << "    #pragma unroll\n    for (int c = 0; c < BK / 16; ++c) {\n";
  in << "      wmma::fragment<wmma::matrix_a, 16, 16, 16, " << wt << ", wmma::row_major> pf;\n";
  in << "      wmma::load_matrix_sync(pf, reinterpret_cast<const " << wt << "*>(ps[w] + c * 16), KP);\n";
  in << "      #pragma unroll\n      for (int n = 0; n < E / 16; ++n) {\n";
  in << "        wmma::fragment<wmma::matrix_b, 16, 16, 16, " << wt << ", wmma::row_major> vf;\n";
  in << "        wmma::load_matrix_sync(vf, reinterpret_cast<const " << wt
     << "*>(vs + c * 16 * EP + n * 16), EP);\n";
  in << "        wmma::mma_sync(of[n], pf, vf, of[n]);\n      }\n    }\n  }\n";
  // O / l through ss[w], 16 columns at a time; a row with every key masked gives NaN (PyTorch)
  in << "  const float inv = l > 0 ? 1.0f / l : NAN;\n";
  in << "  #pragma unroll\n  for (int n = 0; n < E / 16; ++n) {\n";
  in << "    __syncwarp();\n";
  in << "    wmma::store_matrix_sync(ss[w], of[n], SP, wmma::mem_row_major);\n    __syncwarp();\n";
  in << "    if (i < " << L << ")\n";
  in << "      for (int c = half * 8; c < half * 8 + 8; ++c) {\n";
  in << "        const int64_t d = n * 16 + c;\n";
  in << "        " << store(out.dtype, "y0", offset_of(out, {"b", "h", "i", "d"}),
                           "ss[w][r * SP + c] * inv") << "\n      }\n  }\n";
  KernelText k;
  k.params = {{"v0", &q}, {"v1", &kk}, {"v2", &v}};
  if (a.mask) k.params.push_back({"v3", a.mask});
  k.params.push_back({"y0", &out});
  k.body = in.str();
  k.block = "128";
  k.grid = "dim3(static_cast<unsigned>((" + L + " + 63) / 64), static_cast<unsigned>(" + H +
           "), static_cast<unsigned>(" + B + "))";
  k.guard = "  if (" + B + " * " + H + " * " + L + " <= 0) return 0;\n";
  return finish(p, e, k);
}

}  // namespace

namespace {

/// Steps whose code is generated host code on every target: control flow (model.cu's control
/// functions, emit_control.cpp) and run-time symbols (a value read into s.usym, a check).
bool is_generated_host_code(const std::string& t) {
  return t == "anvil.cond" || t == "anvil.while" || t == "anvil.item" || t == "anvil.assert";
}

}  // namespace

std::string cuda_kernel_gap(const passes::Program& p, const passes::ExternStep& e) {
  if (is_generated_host_code(e.target)) return "";
  auto floating = [](DType t) {
    return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 ||
           t == DType::kFloat64;
  };
  const std::string& t = e.target;
  if (t == "aten.embedding.default") {
    if (e.inputs.size() < 2 || e.inputs[0].sizes.size() != 2 || !int_index(e.inputs[1].dtype))
      return "embedding needs a 2-D weight and integer indices";
    return "";
  }
  if (t == "aten.index.Tensor") {
    for (size_t j = 1; j < e.inputs.size(); ++j)
      if (e.inputs[j].buffer < 0 || !int_index(e.inputs[j].dtype))
        return "index.Tensor with None or boolean indices has no CUDA kernel yet";
    if (e.inputs.size() - 1 > e.inputs[0].sizes.size()) return "too many indices";
    return "";
  }
  if (t == "aten.gather.default") {
    if (e.inputs.size() < 2 || !int_index(e.inputs[1].dtype)) return "gather needs integer indices";
    return "";
  }
  if (t == "aten.cumsum.default") {
    if (is_complex(e.outputs[0].dtype)) return "complex cumsum";
    return "";
  }
  if (t == "aten.diff.default") {
    if (int_attr(e, "n", 1) != 1) return "diff with n != 1 has no CUDA kernel yet";
    if (e.inputs[0].sizes.empty()) return "diff of a 0-dim tensor";
    if (is_complex(e.inputs[0].dtype)) return "complex diff";
    return "";
  }
  if (t == "aten.scaled_dot_product_attention.default") {
    const auto& in = e.inputs;
    if (in.size() < 3 || in[0].sizes.size() != 4 || in[1].sizes.size() != 4 ||
        in[2].sizes.size() != 4 || e.outputs[0].sizes.size() != 4)
      return "attention with other than 4-D query, key and value has no CUDA kernel yet";
    if (!floating(in[0].dtype)) return "attention needs floating inputs";
    if (in.size() > 3 && in[3].buffer >= 0 && in[3].sizes.size() > 4) return "attention mask rank";
    if (has_attr(e, "dropout_p")) {
      const passes::ExternAttr* d = passes::find_attr(e, "dropout_p");
      if (d->kind == 1 && d->f != 0.0) return "dropout is not supported at inference";
    }
    return "";
  }
  (void)p;
  return "no CUDA kernel for " + t + " yet";
}

bool runs_on_host(const passes::Program& p, const passes::ExternStep& e) {
  (void)p;
  // Collectives are issued and waited by run() on a process group: not a kernel. Of anvil's own
  // steps, the data-dependent ones (nonzero, boolean-mask rows: runtime kernels writing at a
  // capacity) stage like any extern; the rest are generated code.
  if (passes::is_collective_issue(e) || passes::is_collective_wait(e)) return false;
  return e.target.rfind("anvil.", 0) != 0 || e.target == "anvil.nonzero" ||
         e.target == "anvil.mask_rows";
}

std::string extern_unsupported_reason(const passes::Program& p, const passes::ExternStep& e) {
  std::string gap = cuda_kernel_gap(p, e);
  if (gap.empty() || runs_on_host(p, e)) return "";
  return gap;
}

std::string emit_extern(const passes::Program& p, const passes::ExternStep& e) {
  const std::string& t = e.target;
  if (t == "anvil.item" || t == "anvil.assert") return cpu::emit_extern(p, e);  // anvil_fetch
  if (is_generated_host_code(t))
    throw Error("internal error: a control-flow step reached the kernel emitter", "codegen/cuda",
                "kernels only", t);
  if (const std::string gap = cuda_kernel_gap(p, e); !gap.empty()) {
    if (!runs_on_host(p, e))
      throw Error("internal error: an extern the CUDA target refuses reached emission",
                  "codegen/cuda", "a supported extern", t + ": " + gap);
    return "// host step (" + gap + "): the CPU kernel on host copies of the tensors\n" +
           cpu::emit_extern(p, e);
  }
  if (t == "aten.embedding.default") return embedding(p, e);
  if (t == "aten.index.Tensor") return index_tensor(p, e);
  if (t == "aten.gather.default") return gather(p, e);
  if (t == "aten.cumsum.default") return cumsum(p, e);
  if (t == "aten.diff.default") return diff(p, e);
  if (t == "aten.scaled_dot_product_attention.default") {
    const TensorView &q = e.inputs[0], &v = e.inputs[2];
    const bool fixed = q.sizes[3].is_constant() && v.sizes[3].is_constant() &&
                       q.sizes[3].constant() <= 128 && v.sizes[3].constant() <= 128;
    if (wmma_attention(e) && !std::getenv("ANVIL_CUDA_NO_WMMA_ATTENTION")) return sdpa_wmma(p, e);
    return fixed ? sdpa_tiled(p, e) : sdpa(p, e);
  }
  throw Error("internal error: no CUDA kernel for an extern the target accepted", "codegen/cuda",
              "a supported extern", t);
}

}  // namespace anvil::codegen::cuda
