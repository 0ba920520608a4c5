// CUDA kernels for the extern ops transformer exports carry (codegen/cuda/emit_cuda.h): gathers
// (embedding, index.Tensor with integer indices, gather), scans (cumsum), diff,
// scaled_dot_product_attention (emit_cuda_attention.cpp), and convolutions through cuDNN
// (emit_cuda_conv.cpp). Each is generated from the step's strided views, like a loop
// kernel: shapes and strides are expressions over the model's symbols, evaluated in the kernel.
// Indices out of range stop the kernel with a message (as PyTorch's device-side assert does);
// the run then fails at the stream synchronization.
#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "codegen/c_expr.h"
#include "codegen/cpu/emit_cpu.h"
#include "codegen/cuda/emit_cuda.h"
#include "codegen/cuda/extern_kernel.h"
#include "core/error.h"
#include "passes/collectives.h"

namespace anvil::codegen::cuda {

namespace ext {

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
  return ptr + "[" + off + "] = " + to_storage(t, v, Dialect::kCuda) + ";";
}

std::string paren(const SymInt& s) { return "(" + s.str() + ")"; }

/// "const int64_t u0 = ...;" decomposing linear `lin` over `sizes`.
std::string decompose_linear(const std::vector<SymInt>& sizes, const std::string& lin,
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

std::string node_list(const ExternStep& e) {
  std::string nodes;
  for (size_t i = 0; i < e.nodes.size(); ++i) nodes += (i ? ", " : "") + e.nodes[i];
  return nodes;
}

std::string finish(const Program& p, const ExternStep& e, const KernelText& k) {
  std::ostringstream fn;
  fn << "// " << e.name << ": " << node_list(e) << " (" << e.target << ")\n";
  fn << "__global__ void "
     << (k.bounds.empty() ? std::string() : "__launch_bounds__(" + k.bounds + ") ") << e.name
     << "_kernel(Syms<" << kernel_sym_count(p) << "> sy";
  for (const auto& [name, v] : k.params)
    fn << ", " << storage_type(v->dtype, Dialect::kCuda) << "* __restrict__ " << name;
  for (const auto& [decl, arg] : k.extra) fn << ", " << decl;
  fn << ") {\n" << pdl_prologue();
  std::string sizes_text = k.body;
  fn << kernel_symbol_decls(p, sizes_text, "  ") << k.body << "}\n\n";
  std::ostringstream launch;
  launch << k.guard;
  launch << kernel_syms_fill(p);
  if (pdl_mode() > 0)
    launch << "  anvil_launch_shared(s, " << e.name << "_kernel, " << k.grid << ", " << k.block
           << ", " << k.shared << ", sy";
  else
    launch << "  " << e.name << "_kernel<<<" << k.grid << ", " << k.block << ", " << k.shared
           << ", static_cast<cudaStream_t>(s.stream)>>>(sy";
  for (const auto& [name, v] : k.params)
    launch << ",\n      reinterpret_cast<" << storage_type(v->dtype, Dialect::kCuda) << "*>("
           << buffer_base(p, v->buffer)
           << ") + (" << v->offset.str() << ")";
  for (const auto& [decl, arg] : k.extra) launch << ",\n      " << arg;
  launch << ");\n";
  launch << "  return anvil_launch_check(s, \"" << e.name << "\");\n";
  fn << "ANVIL_HIDDEN int " << e.name << "(const RunState& s) {\n";
  fn << symbol_decls(p, launch.str(), "s.sym", "  ") << launch.str() << "}\n";
  return fn.str();
}

/// One thread per output element (grid-stride) over `out`, in the memory order of `order_by`
/// (default: `out` itself; a view of the same rank).
std::string elementwise_loop(const TensorView& out, const std::string& inner,
                             const TensorView* order_by, const std::string& block_prologue) {
  const TensorView& ov = order_by ? *order_by : out;
  std::ostringstream os;
  os << "  const int64_t total = " << numel(out.sizes) << ";\n";
  if (block_prologue.empty()) {
    os << "  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; "
          "idx < total;\n       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {\n";
  } else {  // uniform over the block: the prologue may synchronize it
    os << "  for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.x; base < total;\n"
          "       base += static_cast<int64_t>(gridDim.x) * blockDim.x) {\n";
    os << block_prologue;
    os << "    const int64_t idx = base + threadIdx.x;\n";
    os << "    if (idx < total) {\n";
  }
  // idx walks the view in its memory order (a channels-last output's threads write
  // neighbouring channels): dims by decreasing constant stride, else the logical order
  const size_t r = out.sizes.size();
  std::vector<size_t> order(r);
  for (size_t d = 0; d < r; ++d) order[d] = d;
  bool constant = ov.strides.size() == r;
  for (const SymInt& st : ov.strides) constant &= st.is_constant();
  if (constant)
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return ov.strides[a].constant() > ov.strides[b].constant();
    });
  std::vector<SymInt> sizes(r);
  for (size_t i = 0; i < r; ++i) sizes[i] = out.sizes[order[i]];
  // a constant total below 2^31 divides in 32 bits (64-bit division is a long sequence)
  bool narrow = true;
  int64_t total = 1;
  for (const SymInt& d : out.sizes) {
    narrow &= d.is_constant() && d.constant() >= 0 && d.constant() < (int64_t{1} << 31) &&
              total < (int64_t{1} << 31);
    if (narrow) total *= d.constant();
  }
  narrow &= total < (int64_t{1} << 31);
  if (narrow) {
    os << "    int rest_m = static_cast<int>(idx);\n";
    for (size_t d = r; d-- > 0;) {
      os << "    const int64_t m" << d << " = rest_m % " << sizes[d].constant() << ";\n";
      if (d > 0) os << "    rest_m /= " << sizes[d].constant() << ";\n";
    }
  } else {
    os << decompose_linear(sizes, "idx", "m", "    ");
  }
  for (size_t i = 0; i < r; ++i)
    os << "    const int64_t u" << order[i] << " = m" << i << ";\n";
  os << inner << "  }\n";
  if (!block_prologue.empty()) os << "  }\n";
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

}  // namespace ext

namespace {

using namespace ext;

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
  os << decompose_linear(l.sizes, "line", "w", "    ") << inner << "  }\n";
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
  const std::string ct = compute_type(out.dtype, Dialect::kCuda);
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
  const std::string ct = compute_type(self.dtype, Dialect::kCuda);
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
  // collectives are issued and waited by run() (model.cu) on the run's stream, not kernels
  if (passes::is_collective_issue(e) || passes::is_collective_wait(e)) return "";
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
  if (t == "aten._scaled_mm.default") return ext::scaled_mm_gap(e);
  if (ext::is_pool_target(t)) return ext::pool_gap(e);
  if (t == "aten.convolution.default" || t == "aten.conv2d.default" ||
      t == "aten.conv1d.default")
    return ext::conv_gap(e);  // cuDNN's (device ABI 5), its host path behind it
  (void)p;
  return "no CUDA kernel for " + t + " yet";
}

bool runs_on_host(const passes::Program& p, const passes::ExternStep& e) {
  (void)p;
  // Collectives are issued and waited by run() on a process group: not a kernel. Of anvil's own
  // steps, the data-dependent ones (nonzero, boolean-mask rows: runtime kernels writing at a
  // capacity) stage like any extern; the rest are generated code.
  if (passes::is_collective_issue(e) || passes::is_collective_wait(e)) return false;
  if (e.target == "aten._scaled_mm.default") return false;  // no host kernel: FP8 GEMM or error
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
  if (t == "aten.scaled_dot_product_attention.default") return ext::attention(p, e);
  if (t == "aten._scaled_mm.default") return ext::scaled_mm(p, e);
  if (ext::is_pool_target(t)) return ext::pool(p, e);
  if (t == "aten.convolution.default" || t == "aten.conv2d.default" ||
      t == "aten.conv1d.default")
    return ext::conv(p, e);
  throw Error("internal error: no CUDA kernel for an extern the target accepted", "codegen/cuda",
              "a supported extern", t);
}

}  // namespace anvil::codegen::cuda
