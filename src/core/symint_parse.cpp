// SymInt::parse: anvil's text form ("2*s0 + 1", "(s0//2)", "Max(s0, 4)") and torch.export's
// sympy forms ("Mul(Integer(2), Symbol('s0'))") back into expressions.
#include <cctype>
#include <string>

#include "core/error.h"
#include "core/symint.h"

namespace anvil {

// ---- parsing -------------------------------------------------------------------------------
namespace {

class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}
  SymInt parse_all() {
    SymInt v = expr();
    skip();
    if (pos_ != s_.size()) error("unexpected text");
    return v;
  }

 private:
  [[noreturn]] void error(const std::string& what) {
    throw Error("cannot parse symbolic int: " + what, "SymInt::parse",
                "an expression like 2*s0 + 1 or Mul(Integer(2), Symbol('s0'))",
                (s_.size() > 200 ? s_.substr(0, 200) + "..." : s_) + " (at offset " +
                    std::to_string(pos_) + ")");
  }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(const std::string& tok) {
    skip();
    if (s_.compare(pos_, tok.size(), tok) == 0) {
      pos_ += tok.size();
      return true;
    }
    return false;
  }
  void expect(const std::string& tok) {
    if (!eat(tok)) error("expected '" + tok + "'");
  }
  SymInt expr() {
    SymInt v = term();
    while (true) {
      if (eat("+"))
        v = v + term();
      else if (peek_minus()) {
        ++pos_;
        v = v - term();
      } else
        return v;
    }
  }
  bool peek_minus() {
    skip();
    return pos_ < s_.size() && s_[pos_] == '-';
  }
  SymInt term() {
    SymInt v = unary();
    while (true) {
      if (eat("//")) {
        v = v.floordiv(unary());
      } else if (!peek_pow() && eat("*")) {
        v = v * unary();
      } else if (eat("%")) {
        v = v.mod(unary());
      } else {
        return v;
      }
    }
  }
  bool peek_pow() {
    skip();
    return s_.compare(pos_, 2, "**") == 0;
  }
  SymInt pow(const SymInt& b, const SymInt& e) {
    auto k = e.maybe_constant();
    if (!k || *k < 0 || *k > kMaxExponent)
      error("only constant exponents in [0, " + std::to_string(kMaxExponent) + "] are supported");
    SymInt r(1);
    for (int64_t i = 0; i < *k; ++i) r = r * b;  // equal factors merge into one power
    return r;
  }
  /// unary := '-' unary | atom ['**' unary]   (so -s0**2 is -(s0**2), as in Python)
  SymInt unary() {
    // Every nesting (parentheses, calls, repeated signs) passes here: bound the recursion.
    if (++depth_ > kMaxDepth) error("expression nested too deeply");
    SymInt v(0);
    if (peek_minus()) {
      ++pos_;
      v = -unary();
    } else {
      v = atom();
      if (eat("**")) v = pow(v, unary());
    }
    --depth_;
    return v;
  }
  std::string ident() {
    skip();
    size_t start = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
      ++pos_;
    return s_.substr(start, pos_ - start);
  }
  std::vector<SymInt> call_args() {
    std::vector<SymInt> args;
    if (eat(")")) return args;
    while (true) {
      // keyword arguments (positive=True) are skipped
      size_t save = pos_;
      std::string id = ident();
      if (!id.empty() && eat("=")) {
        ident();
      } else {
        pos_ = save;
        args.push_back(expr());
      }
      if (eat(")")) return args;
      expect(",");
    }
  }
  SymInt atom() {
    skip();
    if (pos_ >= s_.size()) error("unexpected end");
    char c = s_[pos_];
    if (c == '(') {
      ++pos_;
      SymInt v = expr();
      expect(")");
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t start = pos_;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      try {
        return SymInt(std::stoll(s_.substr(start, pos_ - start)));
      } catch (const std::exception&) {
        error("integer out of range");
      }
    }
    std::string id = ident();
    if (id.empty()) error("expected a name or number");
    if (!eat("(")) return SymInt::symbol(id);
    if (id == "Symbol") {
      skip();
      if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"'))
        error("expected a quoted name");
      char q = s_[pos_++];
      size_t end = s_.find(q, pos_);
      if (end == std::string::npos) error("unterminated name");
      std::string name = s_.substr(pos_, end - pos_);
      pos_ = end + 1;
      while (!eat(")")) {
        expect(",");
        ident();
        if (eat("=")) ident();
      }
      return SymInt::symbol(name);
    }
    std::vector<SymInt> a = call_args();
    if (a.empty()) error(id + " needs arguments");
    auto need = [&](size_t n) {
      if (a.size() != n) error(id + " takes " + std::to_string(n) + " arguments");
    };
    if (id == "Integer") {
      need(1);
      return a[0];
    }
    if (id == "Add") {
      SymInt r(0);
      for (auto& x : a) r = r + x;
      return r;
    }
    if (id == "Mul") {
      SymInt r(1);
      for (auto& x : a) r = r * x;
      return r;
    }
    if (id == "Pow") {
      need(2);
      return pow(a[0], a[1]);
    }
    if (id == "FloorDiv" || id == "floor_divide") {
      need(2);
      return a[0].floordiv(a[1]);
    }
    if (id == "Mod" || id == "PythonMod") {
      need(2);
      return a[0].mod(a[1]);
    }
    if (id == "Max") {
      if (a.empty()) error("Max() needs at least one argument");
      SymInt r = a[0];
      for (size_t i = 1; i < a.size(); ++i) r = SymInt::max(r, a[i]);
      return r;
    }
    if (id == "Min") {
      if (a.empty()) error("Min() needs at least one argument");
      SymInt r = a[0];
      for (size_t i = 1; i < a.size(); ++i) r = SymInt::min(r, a[i]);
      return r;
    }
    if (id == "CeilDiv") {
      need(2);
      return (a[0] + a[1] - SymInt(1)).floordiv(a[1]);
    }
    error("unknown function " + id);
  }

  static constexpr int kMaxDepth = 200;
  static constexpr int64_t kMaxExponent = 64;
  const std::string& s_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

SymInt SymInt::parse(const std::string& text) { return Parser(text).parse_all(); }

}  // namespace anvil
