// ExprPool (hash-consed expressions) and the text form of a Program.
#include "passes/loop_ir.h"

#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "core/error.h"

namespace anvil::passes {

const char* buffer_kind_name(BufferKind k) {
  switch (k) {
    case BufferKind::kInput:
      return "input";
    case BufferKind::kOutput:
      return "output";
    case BufferKind::kConstant:
      return "constant";
    case BufferKind::kArena:
      return "arena";
  }
  return "?";
}

const char* expr_op_name(ExprOp op) {
  switch (op) {
    case ExprOp::kConst:
      return "const";
    case ExprOp::kLoad:
      return "load";
    case ExprOp::kIndex:
      return "index";
    case ExprOp::kCast:
      return "cast";
    case ExprOp::kNeg:
      return "neg";
    case ExprOp::kAbs:
      return "abs";
    case ExprOp::kExp:
      return "exp";
    case ExprOp::kLog:
      return "log";
    case ExprOp::kSqrt:
      return "sqrt";
    case ExprOp::kRsqrt:
      return "rsqrt";
    case ExprOp::kRecip:
      return "recip";
    case ExprOp::kSin:
      return "sin";
    case ExprOp::kCos:
      return "cos";
    case ExprOp::kTanh:
      return "tanh";
    case ExprOp::kErf:
      return "erf";
    case ExprOp::kTan:
      return "tan";
    case ExprOp::kAsin:
      return "asin";
    case ExprOp::kAcos:
      return "acos";
    case ExprOp::kAtan:
      return "atan";
    case ExprOp::kSinh:
      return "sinh";
    case ExprOp::kCosh:
      return "cosh";
    case ExprOp::kAsinh:
      return "asinh";
    case ExprOp::kAcosh:
      return "acosh";
    case ExprOp::kAtanh:
      return "atanh";
    case ExprOp::kExpm1:
      return "expm1";
    case ExprOp::kLog1p:
      return "log1p";
    case ExprOp::kLog2:
      return "log2";
    case ExprOp::kLog10:
      return "log10";
    case ExprOp::kSigmoid:
      return "sigmoid";
    case ExprOp::kRelu:
      return "relu";
    case ExprOp::kFloor:
      return "floor";
    case ExprOp::kCeil:
      return "ceil";
    case ExprOp::kRound:
      return "round";
    case ExprOp::kTrunc:
      return "trunc";
    case ExprOp::kLogicalNot:
      return "not";
    case ExprOp::kBitNot:
      return "bitnot";
    case ExprOp::kAdd:
      return "add";
    case ExprOp::kSub:
      return "sub";
    case ExprOp::kMul:
      return "mul";
    case ExprOp::kDiv:
      return "div";
    case ExprOp::kFloorDiv:
      return "floordiv";
    case ExprOp::kTruncDiv:
      return "truncdiv";
    case ExprOp::kPow:
      return "pow";
    case ExprOp::kMax:
      return "max";
    case ExprOp::kMin:
      return "min";
    case ExprOp::kEq:
      return "eq";
    case ExprOp::kNe:
      return "ne";
    case ExprOp::kLt:
      return "lt";
    case ExprOp::kLe:
      return "le";
    case ExprOp::kGt:
      return "gt";
    case ExprOp::kGe:
      return "ge";
    case ExprOp::kLogicalAnd:
      return "and";
    case ExprOp::kLogicalOr:
      return "or";
    case ExprOp::kBitAnd:
      return "bitand";
    case ExprOp::kBitOr:
      return "bitor";
    case ExprOp::kBitXor:
      return "bitxor";
    case ExprOp::kAtan2:
      return "atan2";
    case ExprOp::kFmod:
      return "fmod";
    case ExprOp::kWhere:
      return "where";
    case ExprOp::kReal:
      return "real";
    case ExprOp::kImag:
      return "imag";
  }
  return "?";
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kProd:
      return "prod";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kAny:
      return "any";
    case ReduceOp::kAll:
      return "all";
  }
  return "?";
}

namespace {
std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
}  // namespace

int ExprPool::intern(Expr e) {
  std::string key = std::to_string(static_cast<int>(e.op)) + "|" +
                    std::to_string(static_cast<int>(e.dtype)) + "|" + std::to_string(e.args[0]) +
                    "," + std::to_string(e.args[1]) + "," + std::to_string(e.args[2]) + "|" +
                    fmt_double(e.f) + "|" + std::to_string(e.i) + "|" + std::to_string(e.buffer) +
                    "|" + e.index.str();
  auto it = index_.find(key);
  if (it != index_.end()) return it->second;
  exprs_.push_back(std::move(e));
  const int id = static_cast<int>(exprs_.size()) - 1;
  index_[key] = id;
  return id;
}

int ExprPool::constant(double value, DType dtype) {
  if (!is_floating(dtype)) return int_constant(static_cast<int64_t>(value), dtype);
  Expr e;
  e.op = ExprOp::kConst;
  e.dtype = dtype;
  e.f = value;
  return intern(e);
}

int ExprPool::int_constant(int64_t value, DType dtype) {
  if (is_floating(dtype)) return constant(static_cast<double>(value), dtype);
  Expr e;
  e.op = ExprOp::kConst;
  e.dtype = dtype;
  e.i = dtype == DType::kBool ? (value != 0) : value;
  return intern(e);
}

int ExprPool::load(int buffer, const SymInt& index, DType dtype) {
  Expr e;
  e.op = ExprOp::kLoad;
  e.dtype = dtype;
  e.buffer = buffer;
  e.index = index;
  return intern(e);
}

int ExprPool::index_value(const SymInt& index, DType dtype) {
  Expr e;
  e.op = ExprOp::kIndex;
  e.dtype = dtype;
  e.index = index;
  return intern(e);
}

int ExprPool::cast(int a, DType dtype) {
  const Expr& x = at(a);
  if (x.dtype == dtype) return a;
  // Same compute type and no rounding / narrowing needed: f16/bf16 -> f32 is exact.
  if (dtype == DType::kFloat32 && (x.dtype == DType::kFloat16 || x.dtype == DType::kBFloat16))
    return unary(ExprOp::kCast, a, dtype);
  if (x.op == ExprOp::kConst) {
    if (is_floating(dtype) && is_floating(x.dtype) &&
        (dtype == DType::kFloat64 || dtype == DType::kFloat32) && x.dtype != DType::kFloat64)
      return constant(x.f, dtype);
    if (is_floating(dtype) && !is_floating(x.dtype) && dtype == DType::kFloat64)
      return constant(static_cast<double>(x.i), dtype);
    if (!is_floating(dtype) && !is_floating(x.dtype) && dtype == DType::kInt64)
      return int_constant(x.i, dtype);
  }
  return unary(ExprOp::kCast, a, dtype);
}

int ExprPool::unary(ExprOp op, int a, DType dtype) {
  Expr e;
  e.op = op;
  e.dtype = dtype;
  e.args[0] = a;
  return intern(e);
}

int ExprPool::binary(ExprOp op, int a, int b, DType dtype) {
  Expr e;
  e.op = op;
  e.dtype = dtype;
  e.args[0] = a;
  e.args[1] = b;
  return intern(e);
}

int ExprPool::where(int cond, int a, int b, DType dtype) {
  Expr e;
  e.op = ExprOp::kWhere;
  e.dtype = dtype;
  e.args = {cond, a, b};
  return intern(e);
}

int ExprPool::cost(int root) const {
  std::set<int> seen;
  std::vector<int> stack{root};
  int n = 0;
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    if (id < 0 || !seen.insert(id).second) continue;
    const Expr& e = at(id);
    if (e.op != ExprOp::kLoad && e.op != ExprOp::kConst && e.op != ExprOp::kIndex) ++n;
    for (int a : e.args) stack.push_back(a);
  }
  return n;
}

void ExprPool::loads(int root, std::vector<int>& out) const {
  std::set<int> seen;
  std::vector<int> stack{root};
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    if (id < 0 || !seen.insert(id).second) continue;
    const Expr& e = at(id);
    if (e.op == ExprOp::kLoad) out.push_back(id);
    for (int a : e.args) stack.push_back(a);
  }
}

std::string ExprPool::str(int id) const {
  const Expr& e = at(id);
  switch (e.op) {
    case ExprOp::kConst:
      return is_floating(e.dtype) ? fmt_double(e.f) : std::to_string(e.i);
    case ExprOp::kLoad:
      return "load(b" + std::to_string(e.buffer) + ", " + e.index.str() + ")";
    case ExprOp::kIndex:
      return "index(" + e.index.str() + ")";
    case ExprOp::kCast:
      return std::string(dtype_name(e.dtype)) + "(" + str(e.args[0]) + ")";
    default:
      break;
  }
  std::string s = std::string(expr_op_name(e.op)) + "(";
  for (size_t k = 0; k < e.args.size() && e.args[k] >= 0; ++k)
    s += (k ? ", " : "") + str(e.args[k]);
  return s + ")";
}

const ExternAttr* find_attr(const ExternStep& e, const std::string& name, size_t k) {
  for (const auto& a : e.attrs)
    if (a.name == name && k-- == 0) return &a;
  return nullptr;
}

bool spatial_ints(const ExternStep& e, const std::string& name, int64_t dflt, size_t n,
                  std::vector<int64_t>& out) {
  out.assign(n, dflt);
  const ExternAttr* a = find_attr(e, name);
  if (a == nullptr) return true;
  if (a->kind == 0) {
    if (!a->i.is_constant()) return false;
    out.assign(n, a->i.constant());
    return true;
  }
  if (a->kind != 3 || (a->ints.size() != 1 && a->ints.size() != n)) return false;
  for (size_t d = 0; d < n; ++d) {
    const SymInt& v = a->ints[a->ints.size() == 1 ? 0 : d];
    if (!v.is_constant()) return false;
    out[d] = v.constant();
  }
  return true;
}

std::string step_name(const Step& step) {
  return std::visit([](const auto& s) { return s.name; }, step);
}

const char* step_kind(const Step& step) {
  if (std::holds_alternative<LoopKernel>(step)) return "loop";
  if (std::holds_alternative<GemmStep>(step)) return "gemm";
  return "extern";
}

const std::vector<std::string>& step_nodes(const Step& step) {
  return *std::visit([](const auto& s) { return &s.nodes; }, step);
}

namespace {

std::string join_nodes(const std::vector<std::string>& nodes) {
  std::string s;
  for (size_t i = 0; i < nodes.size(); ++i) s += (i ? ", " : "") + nodes[i];
  return s;
}

void print_stmts(std::ostringstream& os, const Program& p, const std::vector<Stmt>& stmts,
                 const char* indent) {
  for (const Stmt& s : stmts) {
    os << indent;
    if (s.kind == Stmt::Kind::kReduce)
      os << "acc" << s.acc << " " << reduce_op_name(s.reduce) << "= " << p.exprs.str(s.expr)
         << "  -> b" << s.buffer << "[" << s.index.str() << "]\n";
    else
      os << "b" << s.buffer << "[" << s.index.str() << "] = " << p.exprs.str(s.expr) << "\n";
  }
}

std::string view_str(const TensorView& v) {
  if (v.buffer < 0) return "None";
  return "b" + std::to_string(v.buffer) + "{" + sym_shape_str(v.sizes) + " strides " +
         sym_shape_str(v.strides) + " offset " + v.offset.str() + "}";
}

}  // namespace

std::string print_program(const Program& p) {
  std::ostringstream os;
  os << "program {\n  symbols:";
  for (const auto& s : p.symbols) os << " " << s;
  os << "\n";
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const Buffer& b = p.buffers[i];
    os << "  b" << i << ": " << b.name << " " << buffer_kind_name(b.kind) << " "
       << dtype_name(b.dtype) << sym_shape_str(b.sizes);
    if (b.alias_of >= 0)
      os << " = b" << b.alias_of;
    else if (b.run_time_sized)
      os << " run-time sized";
    else if (b.kind == BufferKind::kArena)
      os << (b.local ? " local" : " @" + b.offset.str());
    os << "\n";
  }
  for (const Step& step : p.steps) {
    os << "  " << step_kind(step) << " " << step_name(step) << "  # "
       << join_nodes(step_nodes(step)) << "\n";
    if (const auto* k = std::get_if<LoopKernel>(&step)) {
      os << "    outer " << sym_shape_str(k->outer) << " inner " << sym_shape_str(k->inner) << "\n";
      for (size_t i = 0; i < k->passes.size(); ++i) {
        os << "    pass " << i << "\n";
        print_stmts(os, p, k->passes[i].pre, "      pre  ");
        print_stmts(os, p, k->passes[i].loop, "      loop ");
        print_stmts(os, p, k->passes[i].post, "      post ");
      }
    } else if (const auto* g = std::get_if<GemmStep>(&step)) {
      os << "    " << dtype_name(g->dtype) << " m=" << g->m.str() << " n=" << g->n.str()
         << " k=" << g->k.str() << " batch=" << sym_shape_str(g->batch) << " alpha=" << g->alpha
         << "\n";
      auto op = [&](const char* nm, const GemmOperand& o) {
        os << "    " << nm << "=b" << o.buffer << "+" << o.offset.str() << " ld=" << o.ld.str()
           << (o.trans ? " T" : "") << " batch_strides=" << sym_shape_str(o.batch_strides) << "\n";
      };
      op("a", g->a);
      op("b", g->b);
      op("c", g->c);
      if (g->b_dtype) os << "    b_dtype=" << dtype_name(*g->b_dtype) << "\n";
      if (!g->choice.name.empty()) os << "    kernel " << g->choice.name << "\n";
      for (const GemmBucket& bk : g->buckets)
        os << "    m in " << SymRange{bk.m_min, bk.m_max}.str() << ": kernel "
           << (bk.choice.name.empty() ? std::string("default") : bk.choice.name) << "\n";
    } else if (const auto* e = std::get_if<ExternStep>(&step)) {
      os << "    " << e->target << "\n";
      for (const auto& v : e->inputs) os << "    in  " << view_str(v) << "\n";
      for (const auto& v : e->outputs) os << "    out " << view_str(v) << "\n";
      for (const auto& a : e->attrs) {
        os << "    attr " << a.name << "=";
        if (a.kind == 0) os << a.i.str();
        if (a.kind == 1) os << a.f;
        if (a.kind == 2) os << '"' << a.s << '"';
        if (a.kind == 3) os << sym_shape_str(a.ints);
        os << "\n";
      }
    }
  }
  os << "  arena " << p.arena_bytes.str() << " (peak " << p.planned_peak_bytes << ")\n}\n";
  return os.str();
}

std::map<std::string, SymInt> sizes_before_run(const Program& p) {
  std::map<std::string, SymInt> m(p.unbacked_capacity.begin(), p.unbacked_capacity.end());
  for (const auto& u : p.unbacked_symbols) m.emplace(u, SymInt(0));
  return m;
}

SymInt step_bytes(const Program& p, const Step& step) {
  const auto before = sizes_before_run(p);
  auto view_bytes = [](const TensorView& v) {
    SymInt n(static_cast<int64_t>(dtype_size(v.dtype)));
    for (const auto& s : v.sizes) n = n * s;
    return n;
  };
  SymInt total(0);
  if (const auto* g = std::get_if<GemmStep>(&step)) {
    SymInt batch(1);
    for (const auto& b : g->batch) batch = batch * b;
    total = (g->m * g->k + g->k * g->n + g->m * g->n) * batch *
            SymInt(static_cast<int64_t>(dtype_size(g->dtype)));
  } else if (const auto* e = std::get_if<ExternStep>(&step)) {
    for (const auto* list : {&e->inputs, &e->outputs})
      for (const auto& v : *list)
        if (v.buffer >= 0) total = total + view_bytes(v);
  } else {
    std::set<int> reads, writes;
    step_accesses(p, step, reads, writes);
    reads.insert(writes.begin(), writes.end());
    for (int b : reads) {
      const Buffer& buf = p.buffers[static_cast<size_t>(b)];
      if (!buf.local)
        total = total + buf.numel * SymInt(static_cast<int64_t>(dtype_size(buf.dtype)));
    }
  }
  return total.substitute(before);
}

void loop_vars(const LoopKernel& k, std::vector<std::string>& vars, std::vector<SymInt>& sizes) {
  for (size_t i = 0; i < k.outer.size(); ++i) {
    vars.push_back("o" + std::to_string(i));
    sizes.push_back(k.outer[i]);
  }
  for (size_t i = 0; i < k.inner.size(); ++i) {
    vars.push_back("r" + std::to_string(i));
    sizes.push_back(k.inner[i]);
  }
}

std::optional<Affine> affine(const SymInt& idx, const std::vector<std::string>& vars) {
  std::map<std::string, SymInt> zero;
  for (const auto& v : vars) zero[v] = SymInt(0);
  Affine a;
  a.c0 = idx.substitute(zero);
  SymInt rebuilt = a.c0;
  for (const auto& v : vars) {
    std::map<std::string, SymInt> one = zero;
    one[v] = SymInt(1);
    a.coef.push_back(idx.substitute(one) - a.c0);
    rebuilt = rebuilt + a.coef.back() * SymInt::symbol(v);
  }
  if (!(rebuilt == idx)) return std::nullopt;
  return a;
}

std::optional<std::vector<std::pair<int64_t, int64_t>>> store_box(
    const SymInt& idx, const std::vector<std::string>& vars, const std::vector<SymInt>& ext,
    const std::vector<SymInt>& sizes) {
  const size_t n = sizes.size();
  std::vector<int64_t> st(n, 1);  // the dims' strides in the dense buffer
  for (size_t d = n; d-- > 0;) {
    if (!sizes[d].is_constant() || sizes[d].constant() < 1) return std::nullopt;
    if (d + 1 < n) st[d] = st[d + 1] * sizes[d + 1].constant();
  }
  const std::optional<Affine> a = affine(idx, vars);
  if (!a || !a->c0.is_constant() || a->c0.constant() < 0) return std::nullopt;
  std::vector<std::pair<int64_t, int64_t>> box(n);
  int64_t rem = a->c0.constant();
  for (size_t d = 0; d < n; ++d) {
    box[d].first = box[d].second = rem / st[d];
    rem %= st[d];
  }
  if (n == 0 && rem != 0) return std::nullopt;
  for (size_t v = 0; v < vars.size(); ++v) {
    if (!a->coef[v].is_constant() || !ext[v].is_constant()) return std::nullopt;
    const int64_t c = a->coef[v].constant(), e = ext[v].constant();
    if (c == 0 || e <= 1) continue;
    size_t d = 0;
    while (d < n && (c % st[d] != 0 || sizes[d].constant() == 1)) ++d;
    if (d == n) return std::nullopt;
    const int64_t m = c / st[d];
    (m > 0 ? box[d].second : box[d].first) += (e - 1) * m;
  }
  for (size_t d = 0; d < n; ++d)
    if (box[d].first < 0 || box[d].second >= sizes[d].constant()) return std::nullopt;
  return box;
}

std::optional<std::pair<int64_t, int64_t>> store_residues(const SymInt& idx,
                                                          const std::vector<std::string>& vars,
                                                          const std::vector<SymInt>& ext,
                                                          int64_t w) {
  // idx = c0 + sum(coef[v] * v) is congruent modulo w to c + sum(k[v] * v), c and k[v] the
  // constant residues of c0 and coef[v] (k[v] taken in (-w/2, w/2] to keep the range short);
  // the range of that sum over the variables' values holds the residues of every index.
  if (w < 2 || w > (int64_t{1} << 30)) return std::nullopt;
  const std::optional<Affine> a = affine(idx, vars);
  if (!a) return std::nullopt;
  const SymInt c = a->c0.mod(SymInt(w));
  if (!c.is_constant()) return std::nullopt;
  int64_t lo = c.constant(), hi = lo;  // py_mod: in [0, w)
  for (size_t v = 0; v < vars.size(); ++v) {
    if (ext[v].is_constant() && ext[v].constant() == 1) continue;  // only v = 0
    const SymInt m = a->coef[v].mod(SymInt(w));
    if (!m.is_constant()) return std::nullopt;
    int64_t k = m.constant();
    if (k == 0) continue;  // a multiple of w for every value of v
    if (!ext[v].is_constant() || ext[v].constant() < 1) return std::nullopt;
    const int64_t e = ext[v].constant();
    if (e - 1 >= w) return std::nullopt;  // |k| * (e - 1) >= w: every residue
    if (2 * k > w) k -= w;
    (k > 0 ? hi : lo) += k * (e - 1);  // |k| <= w / 2, e - 1 < w <= 2^30: no overflow
    if (hi - lo + 1 >= w) return std::nullopt;
  }
  const int64_t shift = lo - ((lo % w) + w) % w;  // a multiple of w moving lo into [0, w)
  return std::make_pair(lo - shift, hi - shift);
}

bool store_residues_apart(const SymInt& x, const SymInt& y, const std::vector<std::string>& vars,
                          const std::vector<SymInt>& ext, int64_t w) {
  const auto rx = store_residues(x, vars, ext, w), ry = store_residues(y, vars, ext, w);
  if (!rx || !ry) return false;
  // both ranges lie in [0, 2w - 1), so two of their values are congruent modulo w only when
  // they differ by -w, 0 or w: the ranges must not meet under any of these shifts
  for (const int64_t t : {-w, int64_t{0}, w})
    if (rx->first <= ry->second + t && ry->first + t <= rx->second) return false;
  return true;
}

void step_accesses(const Program& p, const Step& step, std::set<int>& reads,
                   std::set<int>& writes) {
  auto add = [](std::set<int>& to, int b) {
    if (b >= 0) to.insert(b);
  };
  if (const auto* k = std::get_if<LoopKernel>(&step)) {
    for (const Pass& ps : k->passes)
      for (const auto* list : {&ps.pre, &ps.loop, &ps.post})
        for (const Stmt& s : *list) {
          add(writes, s.buffer);
          std::vector<int> loads;
          p.exprs.loads(s.expr, loads);
          for (int l : loads) add(reads, p.exprs.at(l).buffer);
        }
  } else if (const auto* g = std::get_if<GemmStep>(&step)) {
    add(reads, g->a.buffer);
    add(reads, g->b.buffer);
    add(writes, g->c.buffer);
  } else if (const auto* e = std::get_if<ExternStep>(&step)) {
    for (const auto& v : e->inputs) add(reads, v.buffer);
    for (const auto& v : e->outputs) add(writes, v.buffer);
  }
}

std::vector<HostSync> host_syncs(const Program& program) {
  std::vector<HostSync> out;
  size_t alloc = 0;  // run_allocs are in step order
  for (size_t i = 0; i < program.steps.size(); ++i) {
    if (const auto* e = std::get_if<ExternStep>(&program.steps[i])) {
      if (e->target == "anvil.item" || e->target == "anvil.assert")
        out.push_back({i, e->target + ": reads a tensor value on the host"});
      else if (e->target == "anvil.cond" || e->target == "anvil.while")
        out.push_back({i, e->target + ": the host reads the predicate"});
    }
    bool allocates = false;
    for (; alloc < program.run_allocs.size() && program.run_allocs[alloc].first <= i; ++alloc)
      allocates = true;
    if (allocates) out.push_back({i, "allocates a buffer sized during the run"});
  }
  if (alloc < program.run_allocs.size())
    out.push_back({program.steps.size(), "allocates a buffer sized during the run"});
  return out;
}

namespace {

/// Serialises steps with buffers and expressions renumbered by first use.
class KeyWriter {
 public:
  explicit KeyWriter(const Program& p) : p_(p) {}
  std::string out;

  void buffer(int b) {
    auto [it, fresh] = buffers_.emplace(b, static_cast<int>(buffers_.size()));
    out += "b" + std::to_string(it->second);
    if (fresh && b >= 0) {
      const Buffer& buf = p_.buffers[static_cast<size_t>(b)];
      out += std::string("{") + dtype_name(buf.dtype) + (buf.local ? ",local" : "") + "}";
    }
  }
  void expr(int id) {
    auto [it, fresh] = exprs_.emplace(id, static_cast<int>(exprs_.size()));
    out += "e" + std::to_string(it->second);
    if (!fresh) return;  // a shared subexpression: referenced, not repeated
    const Expr& e = p_.exprs.at(id);
    out += std::string("=") + expr_op_name(e.op) + ":" + dtype_name(e.dtype);
    if (e.op == ExprOp::kConst) out += ":" + (is_floating(e.dtype) ? fmt_double(e.f) : std::to_string(e.i));
    if (e.op == ExprOp::kLoad) {
      out += ":";
      buffer(e.buffer);
    }
    if (e.op == ExprOp::kLoad || e.op == ExprOp::kIndex) out += "[" + e.index.str() + "]";
    out += "(";
    for (int a : e.args)
      if (a >= 0) {
        expr(a);
        out += ",";
      }
    out += ")";
  }
  void sizes(const std::vector<SymInt>& v) {
    out += "[";
    for (const auto& x : v) out += x.str() + ",";
    out += "]";
  }
  void operand(const GemmOperand& o) {
    buffer(o.buffer);
    out += "@" + o.offset.str() + "/" + o.ld.str() + (o.trans ? "T" : "N");
    sizes(o.batch_strides);
  }

 private:
  const Program& p_;
  std::map<int, int> buffers_, exprs_;
};

}  // namespace

std::string structural_key(const Program& program, const Step& step) {
  KeyWriter w(program);
  if (const auto* k = std::get_if<LoopKernel>(&step)) {
    w.out = "loop";
    w.sizes(k->outer);
    w.sizes(k->inner);
    for (const Pass& pass : k->passes)
      for (const auto* part : {&pass.pre, &pass.loop, &pass.post}) {
        w.out += "|";
        for (const Stmt& st : *part) {
          w.out += st.kind == Stmt::Kind::kStore ? "S" : std::string("R") + reduce_op_name(st.reduce);
          w.out += std::string(":") + dtype_name(st.dtype) + ":a" + std::to_string(st.acc) + ":";
          w.buffer(st.buffer);
          w.out += "[" + st.index.str() + "]=";
          w.expr(st.expr);
          w.out += ";";
        }
      }
    return w.out;
  }
  if (const auto* g = std::get_if<GemmStep>(&step)) {
    w.out = std::string("gemm:") + dtype_name(g->dtype) + ":" + g->m.str() + "x" + g->n.str() +
            "x" + g->k.str() + ":" + fmt_double(g->alpha);
    w.sizes(g->batch);
    w.operand(g->a);
    w.operand(g->b);
    w.operand(g->c);
    return w.out;
  }
  return "";
}

}  // namespace anvil::passes
