// C++ for one loop kernel: the outer domain split into chunks for api->parallel_for, an
// odometer over the outer indices, and per pass a `#pragma omp simd` loop over the inner domain
// (reductions accumulate in registers; 16-bit floats compute in float). Expressions become SSA
// temporaries; a value stored and read back in the same kernel is forwarded, and kernel-local
// buffers are never stored.
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "codegen/c_expr.h"
#include "codegen/cpu/emit_cpu.h"
#include "core/error.h"

namespace anvil::codegen::cpu {

namespace {

using passes::Expr;
using passes::ExprOp;
using passes::LoopKernel;
using passes::Program;
using passes::ReduceOp;
using passes::Stmt;
using codegen::Body;
using codegen::emit_stmts;
using codegen::finish_reductions;
using codegen::kernel_roots;

/// Declarations of the accumulators of `stmts` and the omp simd reduction clauses.
std::string acc_decls(const std::vector<Stmt>& stmts, const std::string& ind,
                      std::string& clauses) {
  std::string out;
  for (const Stmt& s : stmts) {
    if (s.kind != Stmt::Kind::kReduce) continue;
    if (is_complex(s.dtype))  // no omp simd reduction over std::complex
      throw Error("complex reductions are not supported by the CPU code generator",
                  "codegen/cpu", "a real accumulator", dtype_name(s.dtype));
    const bool fl = is_floating(s.dtype);
    const std::string ct = compute_type(s.dtype);
    const std::string acc = "acc" + std::to_string(s.acc);
    out += ind + ct + " " + acc + " = " + acc_init(s.reduce, fl) + ";\n";
    const char* red = s.reduce == ReduceOp::kSum    ? "+"
                      : s.reduce == ReduceOp::kProd ? "*"
                      : s.reduce == ReduceOp::kMax  ? "max"
                      : s.reduce == ReduceOp::kMin  ? "min"
                      : s.reduce == ReduceOp::kAny  ? "|"
                                                    : "&";
    clauses += std::string(" reduction(") + red + ":" + acc + ")";
    if (fl && (s.reduce == ReduceOp::kMax || s.reduce == ReduceOp::kMin)) {
      out += ind + "int nan" + std::to_string(s.acc) + " = 0;\n";
      clauses += " reduction(|:nan" + std::to_string(s.acc) + ")";
    }
  }
  return out;
}


std::string pointer_decls(const Program& p, const std::set<int>& roots) {
  std::ostringstream ptrs;
  for (int b : roots) {
    const std::string st = storage_type(p.buffers[static_cast<size_t>(b)].dtype);
    ptrs << "  " << st << "* __restrict p" << b << " = reinterpret_cast<" << st << "*>("
         << buffer_base(p, b) << ");  // " << p.buffers[static_cast<size_t>(b)].name << "\n";
  }
  return ptrs.str();
}

/// "const int64_t o<d> = ...;" for linear outer index `lin`.
std::string outer_vars(const LoopKernel& k, const std::string& lin, const std::string& ind) {
  std::ostringstream os;
  SymInt stride(1);
  std::vector<std::string> strides(k.outer.size());
  for (size_t d = k.outer.size(); d-- > 0;) {
    strides[d] = stride.str();
    stride = stride * k.outer[d];
  }
  for (size_t d = 0; d < k.outer.size(); ++d) {
    std::string e = lin;
    if (strides[d] != "1") e = "(" + e + " / (" + strides[d] + "))";
    if (d > 0) e = "(" + e + " % (" + k.outer[d].str() + "))";
    os << ind << "const int64_t o" << d << " = " << e << ";\n";
  }
  return os.str();
}

/// Whether `k` is a reduction over one long row (or a few) that runs split over the pool: one
/// pass of reductions only (statements after it allowed), one inner dim of at least 128 Ki
/// elements (or symbolic), at most 16 outer points.
bool splittable(const LoopKernel& k, const CpuCodegenOptions& o) {
  if (!o.split_reductions || k.passes.size() != 1 || k.inner.size() != 1) return false;
  const passes::Pass& pass = k.passes[0];
  if (!pass.pre.empty() || pass.loop.empty()) return false;
  for (const Stmt& st : pass.loop)
    if (st.kind != Stmt::Kind::kReduce || is_complex(st.dtype)) return false;
  SymInt outer_n(1);
  for (const auto& s : k.outer) outer_n = outer_n * s;
  if (!outer_n.is_constant() || outer_n.constant() > 16 || outer_n.constant() < 1) return false;
  return !k.inner[0].is_constant() || k.inner[0].constant() >= (int64_t{1} << 17);
}

/// A split reduction: the row is cut into at most 256 chunks of at least 64 Ki elements; the
/// pool computes each (outer point, chunk)'s partial accumulators, then the calling thread
/// combines them in chunk order (deterministic for a given thread count and size) and runs the
/// statements after the loop.
std::string emit_split_reduction(const Program& p, const LoopKernel& k,
                                 const CpuCodegenOptions& o) {
  const passes::Pass& pass = k.passes[0];
  const std::string R = k.inner[0].str();
  SymInt outer_n(1);
  for (const auto& s : k.outer) outer_n = outer_n * s;
  // partial accumulators
  std::ostringstream part;
  part << "struct " << k.name << "_part {\n";
  for (const Stmt& s : pass.loop) {
    part << "  " << compute_type(s.dtype) << " acc" << s.acc << ";\n";
    if (is_floating(s.dtype) && (s.reduce == ReduceOp::kMax || s.reduce == ReduceOp::kMin))
      part << "  int nan" << s.acc << ";\n";
  }
  part << "};\n";
  part << "struct " << k.name << "_ctx {\n  const RunState* s;\n  " << k.name
       << "_part* parts;\n  int64_t nchunk, chunk;\n};\n\n";
  // the chunk function
  std::ostringstream cb;
  Body cbody(p, cb);
  cbody.push();
  cb << outer_vars(k, "(it / c.nchunk)", "    ");
  cb << "    const int64_t c0 = (it % c.nchunk) * c.chunk;\n";
  cb << "    const int64_t c1 = c0 + c.chunk < R ? c0 + c.chunk : R;\n";
  std::string clauses;
  cb << acc_decls(pass.loop, "    ", clauses);
  cb << "#pragma omp simd" << clauses << "\n";
  cb << "    for (int64_t r0 = c0; r0 < c1; ++r0) {\n";
  cbody.push();
  emit_stmts(cbody, p, pass.loop, "      ", cb);
  cbody.pop();
  cb << "    }\n";
  for (const Stmt& s : pass.loop) {
    cb << "    c.parts[it].acc" << s.acc << " = acc" << s.acc << ";\n";
    if (is_floating(s.dtype) && (s.reduce == ReduceOp::kMax || s.reduce == ReduceOp::kMin))
      cb << "    c.parts[it].nan" << s.acc << " = nan" << s.acc << ";\n";
  }
  cbody.pop();
  const std::set<int> roots = kernel_roots(p, k);
  const std::string ptrs = pointer_decls(p, roots);
  std::ostringstream fn;
  std::string nodes;
  for (size_t i = 0; i < k.nodes.size(); ++i) nodes += (i ? ", " : "") + k.nodes[i];
  fn << "// " << k.name << ": " << nodes << " (split reduction)\n";
  fn << part.str();
  fn << "static void " << k.name << "_chunk(void* ctx, int64_t begin, int64_t end) {\n";
  fn << "  const " << k.name << "_ctx& c = *static_cast<const " << k.name << "_ctx*>(ctx);\n";
  fn << "  const RunState& s = *c.s;\n";
  const std::string chunk_text = ptrs + cb.str() + R;
  fn << symbol_decls(p, chunk_text, "s.sym", "  ");
  fn << ptrs << "  const int64_t R = " << R << ";\n";
  fn << "  for (int64_t it = begin; it < end; ++it) {\n" << cb.str() << "  }\n}\n\n";
  // the step: split, then combine and finish per outer point
  std::ostringstream mb;
  Body mbody(p, mb);
  mbody.push();
  mb << outer_vars(k, "lin", "    ");
  for (const Stmt& s : pass.loop) {
    const std::string a = "acc" + std::to_string(s.acc);
    const bool nan = is_floating(s.dtype) && (s.reduce == ReduceOp::kMax || s.reduce == ReduceOp::kMin);
    mb << "    " << compute_type(s.dtype) << " " << a << " = parts[lin * nchunk]." << a << ";\n";
    if (nan) mb << "    int nan" << s.acc << " = parts[lin * nchunk].nan" << s.acc << ";\n";
    mb << "    for (int64_t q = 1; q < nchunk; ++q) {\n";
    const std::string v = "parts[lin * nchunk + q]." + a;
    switch (s.reduce) {
      case ReduceOp::kSum:
        mb << "      " << a << " += " << v << ";\n";
        break;
      case ReduceOp::kProd:
        mb << "      " << a << " *= " << v << ";\n";
        break;
      case ReduceOp::kMax:
        mb << "      " << a << " = " << v << " > " << a << " ? " << v << " : " << a << ";\n";
        break;
      case ReduceOp::kMin:
        mb << "      " << a << " = " << v << " < " << a << " ? " << v << " : " << a << ";\n";
        break;
      case ReduceOp::kAny:
        mb << "      " << a << " |= " << v << ";\n";
        break;
      case ReduceOp::kAll:
        mb << "      " << a << " &= " << v << ";\n";
        break;
    }
    if (nan) mb << "      nan" << s.acc << " |= parts[lin * nchunk + q].nan" << s.acc << ";\n";
    mb << "    }\n";
  }
  finish_reductions(mbody, p, pass.loop, "    ", mb);
  emit_stmts(mbody, p, pass.post, "    ", mb);
  mbody.pop();
  std::ostringstream head;
  head << "  const int64_t R = " << R << ", n_outer = " << outer_n.str() << ";\n";
  head << "  if (R <= 0 || n_outer <= 0) return " << k.name << "_serial(s);\n";
  head << "  const int64_t chunk = (R + 255) / 256 > 65536 ? (R + 255) / 256 : 65536;\n";
  head << "  const int64_t nchunk = (R + chunk - 1) / chunk;\n";
  head << "  " << k.name << "_part parts[16 * 256];\n";
  head << "  " << k.name << "_ctx c{&s, parts, nchunk, chunk};\n";
  head << "  s.api->parallel_for(0, n_outer * nchunk, 1, " << k.name << "_chunk, &c);\n";
  fn << "ANVIL_HIDDEN void " << k.name << "(const RunState& s) {\n";
  const std::string main_text = ptrs + head.str() + mb.str();
  fn << symbol_decls(p, main_text, "s.sym", "  ");
  fn << ptrs << head.str();
  fn << "  for (int64_t lin = 0; lin < n_outer; ++lin) {\n" << mb.str() << "  }\n}\n";
  (void)o;
  return fn.str();
}

}  // namespace

std::string emit_loop_kernel(const Program& p, const LoopKernel& k, const CpuCodegenOptions& o) {
  if (splittable(k, o)) {
    // The serial form stays for empty rows (identity results) under another name.
    LoopKernel serial = k;
    serial.name = k.name + "_serial";
    CpuCodegenOptions so = o;
    so.split_reductions = false;
    std::string text = emit_loop_kernel(p, serial, so);
    const std::string hidden = "ANVIL_HIDDEN void " + serial.name;
    text.replace(text.find(hidden), hidden.size(), "static void " + serial.name);
    return text + "\n" + emit_split_reduction(p, k, o);
  }
  std::ostringstream body_os;
  Body body(p, body_os);
  body.push();
  const size_t no = k.outer.size(), ni = k.inner.size();
  const std::string ind1 = "    ";
  // Pure pointwise work over a long (or symbolic) inner dim is split into chunks of the inner
  // dim too, so that a few long rows still spread over the threads.
  constexpr int64_t kChunk = 2048;
  bool chunked = k.passes.size() == 1 && k.passes[0].pre.empty() && k.passes[0].post.empty() &&
                 ni == 1 && (!k.inner[0].is_constant() || k.inner[0].constant() >= 2 * kChunk);
  if (chunked)
    for (const Stmt& st : k.passes[0].loop) chunked = chunked && st.kind == Stmt::Kind::kStore;
  SymInt outer_stride(1);
  std::vector<std::string> outer_strides(no);
  for (size_t d = no; d-- > 0;) {
    outer_strides[d] = outer_stride.str();
    outer_stride = outer_stride * k.outer[d];
  }
  if (chunked) {
    body_os << ind1 << "const int64_t lin = it / nchunk;\n";
    body_os << ind1 << "const int64_t c0 = (it - lin * nchunk) * " << kChunk << ";\n";
    body_os << ind1 << "const int64_t c1 = c0 + " << kChunk << " < R ? c0 + " << kChunk
            << " : R;\n";
    for (size_t d = 0; d < no; ++d) {
      std::string e = "lin";
      if (outer_strides[d] != "1") e = "(" + e + " / (" + outer_strides[d] + "))";
      if (d > 0) e = "(" + e + " % (" + k.outer[d].str() + "))";
      body_os << ind1 << "const int64_t o" << d << " = " << e << ";\n";
    }
  }
  // odometer over the outer indices of this chunk
  std::ostringstream pre;
  if (no > 0 && !chunked) {
    SymInt stride(1);
    std::vector<std::string> strides(no);
    for (size_t d = no; d-- > 0;) {
      strides[d] = stride.str();
      stride = stride * k.outer[d];
    }
    for (size_t d = 0; d < no; ++d) {
      std::string e = "begin";
      if (strides[d] != "1") e = "(" + e + " / (" + strides[d] + "))";
      if (d > 0) e = "(" + e + " % (" + k.outer[d].str() + "))";
      pre << "  int64_t o" << d << " = " << e << ";\n";
    }
  }
  // passes
  std::string ind = ind1;
  for (const auto& pass : k.passes) {
    emit_stmts(body, p, pass.pre, ind, body_os);
    if (!pass.loop.empty()) {
      std::string clauses;
      body_os << acc_decls(pass.loop, ind, clauses);
      std::string lind = ind;
      for (size_t d = 0; d < ni; ++d) {
        if (d + 1 == ni) body_os << lind << "#pragma omp simd" << clauses << "\n";
        if (chunked)
          body_os << lind << "for (int64_t r0 = c0; r0 < c1; ++r0) {\n";
        else
          body_os << lind << "for (int64_t r" << d << " = 0; r" << d << " < " << k.inner[d].str()
                  << "; ++r" << d << ") {\n";
        lind += "  ";
      }
      if (ni == 0) {
        body_os << lind << "{\n";
        lind += "  ";
      }
      body.push();
      emit_stmts(body, p, pass.loop, lind, body_os);
      body.pop();
      for (size_t d = 0; d < std::max<size_t>(ni, 1); ++d) {
        lind.resize(lind.size() - 2);
        body_os << lind << "}\n";
      }
      finish_reductions(body, p, pass.loop, ind, body_os);
    }
    emit_stmts(body, p, pass.post, ind, body_os);
  }
  body.pop();
  // odometer increment
  std::ostringstream inc;
  if (no > 0 && !chunked) {
    inc << ind1 << "if (++o" << no - 1 << " == " << k.outer[no - 1].str() << ") {\n";
    std::string ii = ind1 + "  ";
    inc << ii << "o" << no - 1 << " = 0;\n";
    for (size_t d = no - 1; d-- > 0;) {
      inc << ii << "if (++o" << d << " == " << k.outer[d].str() << ") {\n";
      ii += "  ";
      inc << ii << "o" << d << " = 0;\n";
    }
    for (size_t d = 0; d < no; ++d) {
      ii.resize(ii.size() - 2);
      inc << ii << "}\n";
    }
  }
  // pointers of the buffers the body touches
  const std::set<int> roots = kernel_roots(p, k);
  std::ostringstream ptrs;
  for (int b : roots) {
    const std::string st = storage_type(p.buffers[static_cast<size_t>(b)].dtype);
    ptrs << "  " << st << "* __restrict p" << b << " = reinterpret_cast<" << st << "*>("
         << buffer_base(p, b) << ");  // " << p.buffers[static_cast<size_t>(b)].name << "\n";
  }
  SymInt outer_n(1), inner_n(1);
  for (const auto& s : k.outer) outer_n = outer_n * s;
  for (const auto& s : k.inner) inner_n = inner_n * s;
  std::ostringstream fn;
  std::string nodes;
  for (size_t i = 0; i < k.nodes.size(); ++i) nodes += (i ? ", " : "") + k.nodes[i];
  fn << "// " << k.name << ": " << nodes << "\n";
  fn << "static void " << k.name << "_chunk(void* ctx, int64_t begin, int64_t end) {\n";
  fn << "  const RunState& s = *static_cast<const RunState*>(ctx);\n";
  const std::string body_text = ptrs.str() + pre.str() + body_os.str() + inc.str();
  fn << symbol_decls(p, body_text + outer_n.str() + " " + inner_n.str(), "s.sym", "  ");
  fn << ptrs.str() << pre.str();
  if (chunked) {
    fn << "  const int64_t R = " << inner_n.str() << ";\n";
    fn << "  const int64_t nchunk = (R + " << kChunk - 1 << ") / " << kChunk << ";\n";
  }
  fn << "  for (int64_t it = begin; it < end; ++it) {\n";
  fn << body_os.str() << inc.str();
  fn << "  }\n";
  fn << "}\n\n";
  fn << "ANVIL_HIDDEN void " << k.name << "(const RunState& s) {\n";
  const std::string sizes_text = outer_n.str() + " " + inner_n.str();
  fn << symbol_decls(p, sizes_text, "s.sym", "  ");
  if (chunked) {
    fn << "  const int64_t R = " << inner_n.str() << ";\n";
    fn << "  const int64_t n_outer = " << outer_n.str() << " * ((R + " << kChunk - 1 << ") / "
       << kChunk << ");\n";
    fn << "  if (n_outer <= 0) return;\n";
    fn << "  if (n_outer > 1 && n_outer * " << kChunk << " >= " << o.parallel_min_work << ")\n";
    fn << "    s.api->parallel_for(0, n_outer, 1, " << k.name
       << "_chunk, const_cast<RunState*>(&s));\n";
    fn << "  else\n";
    fn << "    " << k.name << "_chunk(const_cast<RunState*>(&s), 0, n_outer);\n";
    fn << "}\n";
    return fn.str();
  }
  fn << "  const int64_t n_outer = " << outer_n.str() << ";\n";
  fn << "  if (n_outer <= 0) return;\n";
  fn << "  const int64_t inner = " << inner_n.str() << " > 1 ? " << inner_n.str() << " : 1;\n";
  fn << "  if (n_outer > 1 && n_outer * inner >= " << o.parallel_min_work << ") {\n";
  fn << "    const int64_t grain = " << o.parallel_min_work / 8 << " / inner > 1 ? "
     << o.parallel_min_work / 8 << " / inner : 1;\n";
  fn << "    s.api->parallel_for(0, n_outer, grain, " << k.name
     << "_chunk, const_cast<RunState*>(&s));\n";
  fn << "  } else {\n";
  fn << "    " << k.name << "_chunk(const_cast<RunState*>(&s), 0, n_outer);\n";
  fn << "  }\n";
  fn << "}\n";
  return fn.str();
}

}  // namespace anvil::codegen::cpu
