#include "core/symint.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace anvil {

/// Expression node. kAdd / kMul are n-ary, flattened, with at most one constant operand (last).
struct SymInt::Node {
  enum class Op { kSym, kAdd, kMul, kFloorDiv, kMod, kMax, kMin, kPow };
  Op op;
  std::string name;          // kSym
  std::vector<SymInt> args;  // others
  std::string text;          // canonical text, used for equality and ordering
};

namespace {

using Op = SymInt::Node::Op;

/// a + b; throws Error on int64 overflow.
int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    throw Error("integer overflow in a symbolic size", "SymInt", "a result that fits in int64",
                std::to_string(a) + " + " + std::to_string(b));
  return r;
}

/// a * b; throws Error on int64 overflow.
int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    throw Error("integer overflow in a symbolic size", "SymInt", "a result that fits in int64",
                std::to_string(a) + " * " + std::to_string(b));
  return r;
}

int64_t py_floordiv(int64_t a, int64_t b, const char* where) {
  ANVIL_CHECK(b != 0, where, "division by zero in a symbolic size", "a non-zero divisor", "0");
  ANVIL_CHECK(!(a == std::numeric_limits<int64_t>::min() && b == -1), where,
              "integer overflow in a symbolic size", "a result that fits in int64",
              std::to_string(a) + " // -1");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t py_mod(int64_t a, int64_t b, const char* where) { return a - py_floordiv(a, b, where) * b; }

int64_t ipow(int64_t b, int64_t e) {
  ANVIL_CHECK(e >= 0, "SymInt", "negative exponent in a symbolic size", "an exponent >= 0",
              std::to_string(e));
  int64_t r = 1;
  while (e-- > 0) r = checked_mul(r, b);
  return r;
}

const char* op_fn_name(Op op) {
  switch (op) {
    case Op::kFloorDiv:
      return "FloorDiv";
    case Op::kMod:
      return "Mod";
    case Op::kMax:
      return "Max";
    case Op::kMin:
      return "Min";
    case Op::kPow:
      return "Pow";
    default:
      return "?";
  }
}

}  // namespace

std::string SymRange::str() const {
  auto bound = [](int64_t v) {
    return v >= kSymMax    ? std::string("inf")
           : v <= -kSymMax ? std::string("-inf")
                           : std::to_string(v);
  };
  return "[" + bound(min) + ", " + bound(max) + "]";
}

SymInt::SymInt(int64_t value) : value_(value) {}

SymInt SymInt::symbol(const std::string& name) {
  ANVIL_CHECK(!name.empty(), "SymInt::symbol", "empty symbol name", "a name", "\"\"");
  auto n = std::make_shared<Node>();
  n->op = Op::kSym;
  n->name = name;
  n->text = name;
  return SymInt(std::shared_ptr<const Node>(std::move(n)));
}

int64_t SymInt::constant() const {
  if (node_) throw Error("size is symbolic, not a constant", "SymInt", "a constant", str());
  return value_;
}

std::optional<int64_t> SymInt::maybe_constant() const {
  if (node_) return std::nullopt;
  return value_;
}

std::optional<std::string> SymInt::as_symbol() const {
  if (node_ && node_->op == Op::kSym) return node_->name;
  return std::nullopt;
}

namespace {

// Builds an n-ary node with canonical text; `args` already flattened and sorted.
SymInt make_nary(Op op, std::vector<SymInt> args);

std::string term_text(const SymInt& s, bool in_product) {
  std::string t = s.str();
  if (s.node() && s.node()->op == Op::kAdd) return "(" + t + ")";
  if (in_product && !s.node() && s.constant() < 0) return "(" + t + ")";
  return t;
}

SymInt fold_nary(Op op, const SymInt& a, const SymInt& b) {
  std::vector<SymInt> parts;
  int64_t c = op == Op::kAdd ? 0 : 1;
  for (const SymInt* x : {&a, &b}) {
    if (x->is_constant()) {
      c = op == Op::kAdd ? checked_add(c, x->constant()) : checked_mul(c, x->constant());
    } else if (x->node()->op == op) {
      for (const SymInt& y : x->node()->args) {
        if (y.is_constant())
          c = op == Op::kAdd ? checked_add(c, y.constant()) : checked_mul(c, y.constant());
        else
          parts.push_back(y);
      }
    } else {
      parts.push_back(*x);
    }
  }
  if (op == Op::kMul && c == 0) return SymInt(0);
  std::sort(parts.begin(), parts.end(),
            [](const SymInt& l, const SymInt& r) { return l.str() < r.str(); });
  if (op == Op::kAdd) {
    // Combine like terms: k*x + m*x -> (k+m)*x.
    std::vector<std::pair<SymInt, int64_t>> terms;  // (base, coefficient)
    for (const SymInt& p : parts) {
      SymInt base = p;
      int64_t k = 1;
      if (p.node()->op == Op::kMul) {
        const auto& as = p.node()->args;
        if (as.back().is_constant()) {
          k = as.back().constant();
          std::vector<SymInt> rest(as.begin(), as.end() - 1);
          base = rest.size() == 1 ? rest[0] : make_nary(Op::kMul, rest);
        }
      }
      bool merged = false;
      for (auto& [b2, k2] : terms)
        if (b2 == base) {
          k2 = checked_add(k2, k);
          merged = true;
          break;
        }
      if (!merged) terms.emplace_back(base, k);
    }
    parts.clear();
    for (auto& [base, k] : terms) {
      if (k == 0) continue;
      parts.push_back(k == 1 ? base : base * SymInt(k));
    }
    std::sort(parts.begin(), parts.end(),
              [](const SymInt& l, const SymInt& r) { return l.str() < r.str(); });
  } else {
    // Equal factors become powers, as in sympy: s0*s0 -> Pow(s0, 2).
    std::vector<std::pair<SymInt, int64_t>> factors;  // (base, exponent)
    for (const SymInt& p : parts) {
      SymInt base = p;
      int64_t e = 1;
      if (p.node()->op == Op::kPow && p.node()->args[1].is_constant()) {
        base = p.node()->args[0];
        e = p.node()->args[1].constant();
      }
      bool merged = false;
      for (auto& [b2, e2] : factors)
        if (b2 == base) {
          e2 = checked_add(e2, e);
          merged = true;
          break;
        }
      if (!merged) factors.emplace_back(base, e);
    }
    parts.clear();
    for (auto& [base, e] : factors)
      parts.push_back(e == 1 ? base : make_nary(Op::kPow, {base, SymInt(e)}));
    std::sort(parts.begin(), parts.end(),
              [](const SymInt& l, const SymInt& r) { return l.str() < r.str(); });
  }
  bool neutral = op == Op::kAdd ? c == 0 : c == 1;
  if (parts.empty()) return SymInt(c);
  if (parts.size() == 1 && neutral) return parts[0];
  if (!neutral) parts.push_back(SymInt(c));
  return make_nary(op, std::move(parts));
}

}  // namespace

namespace {
SymInt make_nary(Op op, std::vector<SymInt> args) {
  auto n = std::make_shared<SymInt::Node>();
  n->op = op;
  std::string text;
  if (op == Op::kAdd) {
    for (size_t i = 0; i < args.size(); ++i) {
      std::string t = term_text(args[i], false);
      if (i == 0) {
        text = t;
      } else if (args[i].is_constant() && args[i].constant() < 0) {
        text += " - " + std::to_string(-args[i].constant());
      } else {
        text += " + " + t;
      }
    }
  } else if (op == Op::kMul) {
    // Constant coefficient first: 2*s0.
    if (args.back().is_constant()) text = std::to_string(args.back().constant()) + "*";
    bool first = true;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].is_constant()) continue;
      text += (first ? "" : "*") + term_text(args[i], true);
      first = false;
    }
  } else {
    text = std::string(op_fn_name(op)) + "(" + args[0].str() + ", " + args[1].str() + ")";
  }
  n->args = std::move(args);
  n->text = std::move(text);
  return SymInt::from_node(std::shared_ptr<const SymInt::Node>(std::move(n)));
}
}  // namespace

SymInt SymInt::operator+(const SymInt& o) const {
  if (is_constant() && o.is_constant()) return SymInt(checked_add(value_, o.value_));
  return fold_nary(Op::kAdd, *this, o);
}
SymInt SymInt::operator*(const SymInt& o) const {
  if (is_constant() && o.is_constant()) return SymInt(checked_mul(value_, o.value_));
  // A number times a sum distributes, as sympy does: 2*(s0 + 1) -> 2*s0 + 2.
  const SymInt& sym = is_constant() ? o : *this;
  const SymInt& other = is_constant() ? *this : o;
  if (other.is_constant() && sym.node()->op == Op::kAdd) {
    SymInt r(0);
    for (const SymInt& a : sym.node()->args) r = r + a * other;
    return r;
  }
  return fold_nary(Op::kMul, *this, o);
}
SymInt SymInt::operator-() const { return *this * SymInt(-1); }
SymInt SymInt::operator-(const SymInt& o) const { return *this + (-o); }

namespace {
SymInt binary_fn(Op op, const SymInt& a, const SymInt& b) { return make_nary(op, {a, b}); }

/// The terms of a sum (the expression itself when it is not an Add).
std::vector<SymInt> terms_of(const SymInt& s) {
  if (s.node() && s.node()->op == Op::kAdd) return s.node()->args;
  return {s};
}

/// Splits a term into its integer coefficient and the rest: 6*s0 -> (6, s0), s0 -> (1, s0),
/// 5 -> (5, 1).
std::pair<int64_t, SymInt> split_coefficient(const SymInt& t) {
  if (t.is_constant()) return {t.constant(), SymInt(1)};
  const auto& as = t.node()->args;
  if (t.node()->op != Op::kMul || !as.back().is_constant()) return {1, t};
  SymInt rest(1);
  for (size_t i = 0; i + 1 < as.size(); ++i) rest = rest * as[i];
  return {as.back().constant(), rest};
}
}  // namespace

namespace {

/// A monomial: coefficient times a multiset of non-constant factors (symbols or opaque
/// sub-expressions). Sums are not monomials.
struct Monomial {
  int64_t coeff = 1;
  std::vector<SymInt> factors;
};

/// Appends factor `f` to `out`, a constant-exponent power as that many equal factors.
void push_factor(const SymInt& f, std::vector<SymInt>& out) {
  if (f.node()->op == Op::kPow && f.node()->args[1].is_constant() &&
      f.node()->args[1].constant() >= 0 && f.node()->args[1].constant() <= 64) {
    for (int64_t i = 0; i < f.node()->args[1].constant(); ++i) out.push_back(f.node()->args[0]);
  } else {
    out.push_back(f);
  }
}

std::optional<Monomial> as_monomial(const SymInt& x) {
  if (x.is_constant()) return Monomial{x.constant(), {}};
  if (x.node()->op == Op::kAdd) return std::nullopt;
  Monomial m;
  if (x.node()->op != Op::kMul) {
    push_factor(x, m.factors);
    return m;
  }
  for (const SymInt& f : x.node()->args) {
    if (f.is_constant())
      m.coeff *= f.constant();
    else
      push_factor(f, m.factors);
  }
  return m;
}

/// a / b when b divides a exactly for every value of the symbols (b a non-zero monomial whose
/// factors all occur in each term of a, and whose coefficient divides each term's), else none.
std::optional<SymInt> exact_quotient(const SymInt& a, const SymInt& b) {
  auto mb = as_monomial(b);
  if (!mb || mb->coeff == 0) return std::nullopt;
  if (!a.is_constant() && a.node()->op == Op::kAdd) {
    SymInt sum(0);
    for (const SymInt& term : a.node()->args) {
      auto q = exact_quotient(term, b);
      if (!q) return std::nullopt;
      sum = sum + *q;
    }
    return sum;
  }
  auto ma = as_monomial(a);
  if (!ma || (mb->coeff == -1 && ma->coeff == std::numeric_limits<int64_t>::min()) ||
      ma->coeff % mb->coeff != 0)
    return std::nullopt;
  std::vector<SymInt> rest = ma->factors;
  for (const SymInt& f : mb->factors) {
    auto it = std::find(rest.begin(), rest.end(), f);
    if (it == rest.end()) return std::nullopt;
    rest.erase(it);
  }
  SymInt q(ma->coeff / mb->coeff);
  for (const SymInt& f : rest) q = q * f;
  return q;
}

}  // namespace

SymInt SymInt::floordiv(const SymInt& o) const {
  if (is_constant() && o.is_constant())
    return SymInt(py_floordiv(value_, o.value_, "SymInt::floordiv"));
  if (!o.is_constant()) {
    // Exact symbolic quotients fold: (s0*s1*64) // (s1*16) -> 4*s0.
    if (auto q = exact_quotient(*this, o)) return *q;
    return binary_fn(Op::kFloorDiv, *this, o);
  }
  int64_t c = o.constant();
  ANVIL_CHECK(c != 0, "SymInt::floordiv", "division by zero in a symbolic size",
              "a non-zero divisor", str() + " // 0");
  if (c == 1) return *this;
  std::vector<std::pair<int64_t, SymInt>> terms;
  int64_t g = c < 0 ? -c : c;
  for (const SymInt& t : terms_of(*this)) {
    terms.push_back(split_coefficient(t));
    g = std::gcd(g, terms.back().first);
  }
  // Common factors cancel: (4*s0 + 2) // 6 -> (2*s0 + 1) // 3.
  if (g > 1) {
    c /= g;
    for (auto& t : terms) t.first /= g;
  }
  // Whole multiples of the divisor come out: (s0 + 2*c) // c -> s0 // c + 2.
  SymInt whole(0), rest(0);
  for (const auto& [k, base] : terms) {
    if (k % c == 0)
      whole = whole + base * SymInt(k / c);
    else
      rest = rest + base * SymInt(k);
  }
  if (rest == SymInt(0)) return whole;
  if (c == 1) return whole + rest;
  return binary_fn(Op::kFloorDiv, rest, SymInt(c)) + whole;
}

SymInt SymInt::mod(const SymInt& o) const {
  if (is_constant() && o.is_constant()) return SymInt(py_mod(value_, o.value_, "SymInt::mod"));
  if (!o.is_constant()) {
    if (exact_quotient(*this, o)) return SymInt(0);
    return binary_fn(Op::kMod, *this, o);
  }
  const int64_t c = o.constant();
  ANVIL_CHECK(c != 0, "SymInt::mod", "modulo by zero in a symbolic size", "a non-zero divisor",
              str() + " % 0");
  if (c == 1 || c == -1) return SymInt(0);
  // Multiples of the divisor drop out: (s0 + 4*s1 + 5) % 4 -> (s0 + 1) % 4.
  SymInt rest(0);
  for (const SymInt& t : terms_of(*this)) {
    auto [k, base] = split_coefficient(t);
    if (t.is_constant())
      rest = rest + SymInt(py_mod(k, c, "SymInt::mod"));
    else if (k % c != 0)
      rest = rest + t;
  }
  if (rest.is_constant()) return SymInt(py_mod(rest.constant(), c, "SymInt::mod"));
  return binary_fn(Op::kMod, rest, o);
}

SymInt SymInt::max(const SymInt& a, const SymInt& b) {
  if (a.is_constant() && b.is_constant()) return SymInt(std::max(a.value_, b.value_));
  if (a == b) return a;
  return a.str() < b.str() ? binary_fn(Op::kMax, a, b) : binary_fn(Op::kMax, b, a);
}

SymInt SymInt::min(const SymInt& a, const SymInt& b) {
  if (a.is_constant() && b.is_constant()) return SymInt(std::min(a.value_, b.value_));
  if (a == b) return a;
  return a.str() < b.str() ? binary_fn(Op::kMin, a, b) : binary_fn(Op::kMin, b, a);
}

bool SymInt::operator==(const SymInt& o) const {
  if (is_constant() != o.is_constant()) return false;
  if (is_constant()) return value_ == o.value_;
  return node_ == o.node_ || node_->text == o.node_->text;
}

std::string SymInt::str() const { return node_ ? node_->text : std::to_string(value_); }

int64_t SymInt::evaluate(const SymEnv& env) const {
  if (!node_) return value_;
  const Node& n = *node_;
  switch (n.op) {
    case Op::kSym: {
      auto it = env.find(n.name);
      if (it == env.end())
        throw Error("symbol has no value", "SymInt::evaluate", "a binding for " + n.name, "none");
      return it->second;
    }
    case Op::kAdd: {
      int64_t s = 0;
      for (const auto& a : n.args) s = checked_add(s, a.evaluate(env));
      return s;
    }
    case Op::kMul: {
      int64_t s = 1;
      for (const auto& a : n.args) s = checked_mul(s, a.evaluate(env));
      return s;
    }
    case Op::kFloorDiv:
      return py_floordiv(n.args[0].evaluate(env), n.args[1].evaluate(env), "SymInt::evaluate");
    case Op::kMod:
      return py_mod(n.args[0].evaluate(env), n.args[1].evaluate(env), "SymInt::evaluate");
    case Op::kMax:
      return std::max(n.args[0].evaluate(env), n.args[1].evaluate(env));
    case Op::kMin:
      return std::min(n.args[0].evaluate(env), n.args[1].evaluate(env));
    case Op::kPow:
      return ipow(n.args[0].evaluate(env), n.args[1].evaluate(env));
  }
  return 0;
}

SymInt SymInt::substitute(const std::map<std::string, SymInt>& values) const {
  if (!node_) return *this;
  const Node& n = *node_;
  if (n.op == Op::kSym) {
    auto it = values.find(n.name);
    return it == values.end() ? *this : it->second;
  }
  std::vector<SymInt> a;
  for (const auto& x : n.args) a.push_back(x.substitute(values));
  switch (n.op) {
    case Op::kAdd: {
      SymInt s(0);
      for (const auto& x : a) s = s + x;
      return s;
    }
    case Op::kMul: {
      SymInt s(1);
      for (const auto& x : a) s = s * x;
      return s;
    }
    case Op::kFloorDiv:
      return a[0].floordiv(a[1]);
    case Op::kMod:
      return a[0].mod(a[1]);
    case Op::kMax:
      return SymInt::max(a[0], a[1]);
    case Op::kMin:
      return SymInt::min(a[0], a[1]);
    case Op::kPow:
      if (auto e = a[1].maybe_constant(); e && *e >= 0) {
        SymInt s(1);
        for (int64_t i = 0; i < *e; ++i) s = s * a[0];
        return s;
      }
      return *this;  // a symbolic exponent: left as it is
    case Op::kSym:
      break;
  }
  return *this;
}

namespace {
constexpr int64_t kInf = SymRange::kSymMax;
/// a + b saturating at +-kInf (kInf + anything is kInf, then -kInf + anything is -kInf).
int64_t sat_add(int64_t a, int64_t b) {
  if (a == kInf || b == kInf) return kInf;
  if (a <= -kInf || b <= -kInf) return -kInf;
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return a > 0 ? kInf : -kInf;
  return std::clamp(r, -kInf, kInf);
}
int64_t sat_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  if (a == kInf || b == kInf) return (a < 0 || b < 0) ? -kInf : kInf;
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return ((a < 0) != (b < 0)) ? -kInf : kInf;
  return r;
}
}  // namespace

SymRange SymInt::bounds(const SymRanges& ranges) const {
  if (!node_) return {value_, value_};
  const Node& n = *node_;
  switch (n.op) {
    case Op::kSym: {
      auto it = ranges.find(n.name);
      return it == ranges.end() ? SymRange{0, kInf} : it->second;
    }
    case Op::kAdd: {
      SymRange r{0, 0};
      for (const auto& a : n.args) {
        SymRange b = a.bounds(ranges);
        r = {sat_add(r.min, b.min), sat_add(r.max, b.max)};
      }
      return r;
    }
    case Op::kMul: {
      SymRange r{1, 1};
      for (const auto& a : n.args) {
        SymRange b = a.bounds(ranges);
        int64_t c[] = {sat_mul(r.min, b.min), sat_mul(r.min, b.max), sat_mul(r.max, b.min),
                       sat_mul(r.max, b.max)};
        r = {*std::min_element(c, c + 4), *std::max_element(c, c + 4)};
      }
      return r;
    }
    case Op::kMax: {
      SymRange a = n.args[0].bounds(ranges), b = n.args[1].bounds(ranges);
      return {std::max(a.min, b.min), std::max(a.max, b.max)};
    }
    case Op::kMin: {
      SymRange a = n.args[0].bounds(ranges), b = n.args[1].bounds(ranges);
      return {std::min(a.min, b.min), std::min(a.max, b.max)};
    }
    case Op::kFloorDiv: {
      SymRange a = n.args[0].bounds(ranges), b = n.args[1].bounds(ranges);
      auto div = [](int64_t x, int64_t d) {
        return x >= kInf ? kInf : x <= -kInf ? -kInf : py_floordiv(x, d, "SymInt::bounds");
      };
      if (b.min > 0 && b.min == b.max) return {div(a.min, b.min), div(a.max, b.min)};
      if (b.min > 0 && a.min >= 0) return {b.max == kInf ? 0 : a.min / b.max, div(a.max, b.min)};
      return {-kInf, kInf};
    }
    case Op::kMod: {
      SymRange a = n.args[0].bounds(ranges), b = n.args[1].bounds(ranges);
      if (b.min > 0) {
        int64_t hi = b.max == kInf ? kInf : b.max - 1;
        return {0, a.min >= 0 ? std::min(hi, a.max) : hi};
      }
      return {-kInf, kInf};
    }
    case Op::kPow: {
      SymRange a = n.args[0].bounds(ranges);
      auto e = n.args[1].maybe_constant();
      if (e && a.min >= 0) {
        int64_t lo = 1, hi = 1;
        for (int64_t i = 0; i < *e; ++i) lo = sat_mul(lo, a.min), hi = sat_mul(hi, a.max);
        return {lo, hi};
      }
      return {-kInf, kInf};
    }
  }
  return {-kInf, kInf};
}

void SymInt::collect_symbols(std::set<std::string>& out) const {
  if (!node_) return;
  if (node_->op == Op::kSym) out.insert(node_->name);
  for (const auto& a : node_->args) a.collect_symbols(out);
}

std::vector<int64_t> evaluate_shape(const std::vector<SymInt>& shape, const SymEnv& env) {
  std::vector<int64_t> out;
  out.reserve(shape.size());
  for (const auto& s : shape) out.push_back(s.evaluate(env));
  return out;
}

std::string sym_shape_str(const std::vector<SymInt>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + shape[i].str();
  return out + "]";
}

}  // namespace anvil
