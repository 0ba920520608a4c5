// SymInt: an integer that is either a constant or an expression over named symbols
// (torch.export's symbolic sizes such as s77, 2*s77, s77 + 1), with [min, max] ranges.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace anvil {

/// Inclusive range of a symbol's values. kSymMax stands for "unbounded" (torch's int_oo).
struct SymRange {
  static constexpr int64_t kSymMax = std::numeric_limits<int64_t>::max();
  int64_t min = 0;
  int64_t max = kSymMax;
  bool contains(int64_t v) const { return v >= min && v <= max; }
  std::string str() const;  // "[1, 64]" or "[2, inf]"
  bool operator==(const SymRange& o) const { return min == o.min && max == o.max; }
};

/// Symbol name -> value, for evaluating expressions.
using SymEnv = std::map<std::string, int64_t>;
/// Symbol name -> range.
using SymRanges = std::map<std::string, SymRange>;

/// An immutable integer expression. Constants fold eagerly; commutative operands are kept in a
/// canonical order so that structurally equal expressions compare equal.
class SymInt {
 public:
  struct Node;
  SymInt(int64_t value = 0);  // NOLINT: constants convert implicitly
  static SymInt symbol(const std::string& name);

  bool is_constant() const { return node_ == nullptr; }
  /// The constant value; throws Error when this is symbolic.
  int64_t constant() const;
  std::optional<int64_t> maybe_constant() const;
  /// The symbol name when this is exactly one symbol.
  std::optional<std::string> as_symbol() const;

  SymInt operator+(const SymInt& o) const;
  SymInt operator-(const SymInt& o) const;
  SymInt operator*(const SymInt& o) const;
  SymInt operator-() const;
  /// Python floor division and modulo.
  SymInt floordiv(const SymInt& o) const;
  SymInt mod(const SymInt& o) const;
  static SymInt max(const SymInt& a, const SymInt& b);
  static SymInt min(const SymInt& a, const SymInt& b);

  /// Structural equality (after canonicalisation).
  bool operator==(const SymInt& o) const;
  bool operator!=(const SymInt& o) const { return !(*this == o); }

  /// Evaluates with every symbol bound in `env`; throws Error naming a missing symbol.
  int64_t evaluate(const SymEnv& env) const;
  /// This expression with the symbols of `values` replaced by their expressions (others kept).
  SymInt substitute(const std::map<std::string, SymInt>& values) const;
  /// Interval bounds given symbol ranges (unknown symbols are [0, inf]).
  SymRange bounds(const SymRanges& ranges) const;
  void collect_symbols(std::set<std::string>& out) const;
  /// Text form, parseable by parse(): "s77", "2*s77 + 1", "(s0//2)", "Max(s0, 4)".
  std::string str() const;
  /// Parses the text form, or the sympy strings torch.export writes
  /// ("Symbol('s77', positive=True, integer=True)", "2*s77", "FloorDiv(s0, 2)", "Mod(s0, 4)").
  static SymInt parse(const std::string& text);

  const std::shared_ptr<const Node>& node() const { return node_; }
  /// Wraps an expression node (used by the expression builders).
  static SymInt from_node(std::shared_ptr<const Node> n) { return SymInt(std::move(n)); }

 private:
  explicit SymInt(std::shared_ptr<const Node> n) : value_(0), node_(std::move(n)) {}
  int64_t value_ = 0;
  std::shared_ptr<const Node> node_;  // null for constants
};

/// Evaluates every element of a symbolic shape.
std::vector<int64_t> evaluate_shape(const std::vector<SymInt>& shape, const SymEnv& env);
/// "[s77, 256]".
std::string sym_shape_str(const std::vector<SymInt>& shape);

}  // namespace anvil
