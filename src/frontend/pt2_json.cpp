// Checked JSON access and the torch.export leaf decoders (dtype, device, symbolic ints).
#include <cctype>
#include <cmath>
#include <limits>

#include "frontend/pt2_internal.h"

namespace anvil::frontend::detail {

std::string JsonSource::where(const std::string& path) const {
  std::string out = archive + ": " + entry;
  if (!path.empty()) out += ": " + path;
  return out;
}

Json parse_json(const std::string& text, const JsonSource& src) {
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    throw Error("invalid JSON", src.where(""), "a well-formed JSON document", e.what());
  }
}

// ---- JField ----------------------------------------------------------------------------------

std::string JField::type_name() const {
  switch (j_->type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "object";
    case Json::value_t::array:
      return "array";
    case Json::value_t::string:
      return "string";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "integer";
    case Json::value_t::number_float:
      return "float";
    default:
      return "binary";
  }
}

void JField::fail(const std::string& what, const std::string& expected,
                  const std::string& actual) const {
  throw Error(what, where(), expected, actual);
}

void JField::expect_object() const {
  if (!j_->is_object()) fail("wrong JSON type", "an object", type_name());
}

void JField::expect_array() const {
  if (!j_->is_array()) fail("wrong JSON type", "an array", type_name());
}

JField JField::at(const std::string& key) const {
  expect_object();
  auto it = j_->find(key);
  if (it == j_->end()) fail("missing field '" + key + "'", "field '" + key + "'", "none");
  return JField(*it, *src_, path_.empty() ? key : path_ + "." + key);
}

std::optional<JField> JField::get(const std::string& key) const {
  expect_object();
  auto it = j_->find(key);
  if (it == j_->end() || it->is_null()) return std::nullopt;
  return JField(*it, *src_, path_.empty() ? key : path_ + "." + key);
}

std::vector<JField> JField::items() const {
  expect_array();
  std::vector<JField> out;
  out.reserve(j_->size());
  for (size_t i = 0; i < j_->size(); ++i)
    out.emplace_back((*j_)[i], *src_, path_ + "[" + std::to_string(i) + "]");
  return out;
}

std::vector<std::pair<std::string, JField>> JField::members() const {
  expect_object();
  std::vector<std::pair<std::string, JField>> out;
  out.reserve(j_->size());
  for (auto it = j_->begin(); it != j_->end(); ++it)
    out.emplace_back(it.key(),
                     JField(it.value(), *src_, path_.empty() ? it.key() : path_ + "." + it.key()));
  return out;
}

std::pair<std::string, JField> JField::union_member() const {
  expect_object();
  if (j_->size() != 1)
    fail("malformed union", "an object with exactly one member (such as as_tensor)",
         std::to_string(j_->size()) + " members");
  auto it = j_->begin();
  return {it.key(), JField(it.value(), *src_, path_ + "." + it.key())};
}

int64_t JField::as_int() const {
  if (j_->is_number_unsigned()) {
    auto u = j_->get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail("integer out of range", "a 64-bit signed integer", std::to_string(u));
    return static_cast<int64_t>(u);
  }
  if (!j_->is_number_integer()) fail("wrong JSON type", "an integer", type_name());
  return j_->get<int64_t>();
}

double JField::as_double() const {
  if (j_->is_number()) return j_->get<double>();
  if (j_->is_string()) {
    const auto& s = j_->get_ref<const std::string&>();
    if (s == "Infinity" || s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-Infinity" || s == "-inf") return -std::numeric_limits<double>::infinity();
    if (s == "NaN" || s == "nan") return std::numeric_limits<double>::quiet_NaN();
    fail("not a number", "a number, Infinity, -Infinity or NaN", "\"" + s + "\"");
  }
  fail("wrong JSON type", "a number", type_name());
}

bool JField::as_bool() const {
  if (!j_->is_boolean()) fail("wrong JSON type", "a boolean", type_name());
  return j_->get<bool>();
}

const std::string& JField::as_string() const {
  if (!j_->is_string()) fail("wrong JSON type", "a string", type_name());
  return j_->get_ref<const std::string&>();
}

// ---- leaves ----------------------------------------------------------------------------------

DType decode_dtype(const JField& f) {
  int64_t code = f.as_int();
  DType t;
  try {
    t = dtype_from_code(code);
  } catch (const Error&) {
    f.fail("unknown dtype code", "a torch.export ScalarType code (1-13, 28-32)",
           std::to_string(code));
  }
  // float8 tensors are stored, cast and multiplied by aten._scaled_mm (docs/usage.md)
  if (!is_float8(t) && !is_supported(t)) f.fail("unsupported dtype", "a dtype anvil computes with", dtype_name(t));
  return t;
}

Device decode_device(const JField& f) {
  const std::string& type = f.at("type").as_string();
  std::optional<int64_t> index;
  if (auto i = f.get("index")) index = i->as_int();
  if (type == "cpu") return Device::cpu();
  if (type == "cuda") {
    if (index && (*index < -1 || *index > 1024))
      f.fail("bad device index", "-1 to 1024", std::to_string(*index));
    return Device{Device::Type::kCUDA, index ? static_cast<int>(*index) : -1};
  }
  f.fail("unsupported device", "cpu or cuda", type);
}

SymInt decode_sym_int(const JField& f) {
  auto [kind, v] = f.union_member();
  if (kind == "as_int") return SymInt(v.as_int());
  if (kind == "as_expr") {
    JField text = v.at("expr_str");
    return parse_sym_expr(text.as_string(), text);
  }
  f.fail("unknown SymInt kind", "as_int or as_expr", kind);
}

namespace {

/// Walks an expression with the grammar SymInt::parse accepts, bounding the magnitude of any
/// constant that folding can produce (symbols count as 1) and the number of factors products can
/// expand to, so that a hostile string cannot overflow, recurse deeply or expand without end.
class ExprGuard {
 public:
  struct Bound {
    double mag = 1;    // largest |constant| folding can produce
    double terms = 1;  // factors/terms the folded expression can hold
  };
  static constexpr size_t kMaxLength = 4096;
  static constexpr int kMaxDepth = 64;
  static constexpr double kMaxMag = 4.0e18 / 4;  // < 2^62
  static constexpr double kMaxTerms = 1024;
  static constexpr double kMaxExponent = 64;

  explicit ExprGuard(const std::string& s) : s_(s) {}

  /// Returns an empty string when the text is safe to fold, else the reason it is not.
  std::string check() {
    if (s_.size() > kMaxLength) return "expression longer than 4096 characters";
    try {
      Bound b = expr(0);
      skip();
      if (pos_ != s_.size()) return "unexpected text at offset " + std::to_string(pos_);
      (void)b;
    } catch (const std::string& why) {
      return why;
    }
    return "";
  }

 private:
  Bound limit(Bound b) {
    if (!(b.mag <= kMaxMag)) throw std::string("constant too large");
    if (!(b.terms <= kMaxTerms)) throw std::string("expression expands too much");
    return b;
  }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(const char* tok) {
    skip();
    size_t n = std::char_traits<char>::length(tok);
    if (s_.compare(pos_, n, tok) == 0) {
      pos_ += n;
      return true;
    }
    return false;
  }
  Bound expr(int depth) {
    if (depth > kMaxDepth) throw std::string("expression nested too deeply");
    Bound v = term(depth);
    while (true) {
      if (eat("+") || eat("-")) {
        Bound r = term(depth);
        v = limit({v.mag + r.mag, v.terms + r.terms});
      } else {
        return v;
      }
    }
  }
  Bound term(int depth) {
    Bound v = unary(depth);
    while (true) {
      if (eat("//") || eat("%")) {
        Bound r = unary(depth);
        v = limit({std::max(v.mag, r.mag), v.terms + r.terms});
      } else if (eat("*")) {
        if (s_.compare(pos_, 1, "*") == 0) {
          ++pos_;
          v = power(v, unary(depth));
        } else {
          Bound r = unary(depth);
          v = limit({v.mag * r.mag, v.terms + r.terms});
        }
      } else {
        return v;
      }
    }
  }
  Bound power(Bound b, Bound e) {
    if (e.mag > kMaxExponent) throw std::string("exponent too large");
    return limit({std::pow(std::max(b.mag, 1.0), e.mag), b.terms * std::max(e.mag, 1.0)});
  }
  Bound unary(int depth) {
    if (depth > kMaxDepth) throw std::string("expression nested too deeply");
    skip();
    if (pos_ < s_.size() && s_[pos_] == '-') {
      ++pos_;
      return unary(depth + 1);
    }
    return atom(depth);
  }
  std::string ident() {
    skip();
    size_t start = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
      ++pos_;
    return s_.substr(start, pos_ - start);
  }
  Bound atom(int depth) {
    skip();
    if (pos_ >= s_.size()) throw std::string("unexpected end");
    char c = s_[pos_];
    if (c == '(') {
      ++pos_;
      Bound v = expr(depth + 1);
      if (!eat(")")) throw std::string("expected ')'");
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t start = pos_;
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      if (pos_ - start > 18) throw std::string("integer literal too large");
      return limit({std::stod(s_.substr(start, pos_ - start)), 1});
    }
    std::string id = ident();
    if (id.empty())
      throw std::string("expected a name or number at offset ") + std::to_string(pos_);
    if (!eat("(")) return {1, 1};
    if (id == "Symbol") {
      skip();
      if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"'))
        throw std::string("expected a quoted name");
      char q = s_[pos_++];
      size_t end = s_.find(q, pos_);
      if (end == std::string::npos) throw std::string("unterminated name");
      pos_ = end + 1;
      while (!eat(")")) {
        if (!eat(",")) throw std::string("expected ','");
        ident();
        if (eat("=")) ident();
      }
      return {1, 1};
    }
    std::vector<Bound> a;
    if (!eat(")")) {
      while (true) {
        size_t save = pos_;
        std::string key = ident();
        if (!key.empty() && eat("=")) {
          ident();
        } else {
          pos_ = save;
          a.push_back(expr(depth + 1));
        }
        if (eat(")")) break;
        if (!eat(",")) throw std::string("expected ','");
      }
    }
    Bound r{0, 0};
    if (id == "Mul") {
      r = {1, 0};
      for (const Bound& x : a) r = limit({r.mag * x.mag, r.terms + x.terms});
      return r;
    }
    if (id == "Pow" && a.size() == 2) return power(a[0], a[1]);
    if (id == "CeilDiv" && a.size() == 2)
      return limit({a[0].mag + a[1].mag + 1, a[0].terms + a[1].terms});
    for (const Bound& x : a) {
      // Add sums; Integer, FloorDiv, Mod, Max, Min stay within their largest operand.
      r.mag = id == "Add" ? r.mag + x.mag : std::max(r.mag, x.mag);
      r.terms += x.terms;
    }
    return limit(r);
  }

  const std::string& s_;
  size_t pos_ = 0;
};

}  // namespace

SymInt parse_sym_expr(const std::string& text, const JField& f) {
  std::string why = ExprGuard(text).check();
  if (!why.empty())
    f.fail("cannot parse symbolic expression: " + why,
           "a sympy expression such as "
           "Mul(Integer(2), Symbol('s0', positive=True, integer=True))",
           text.size() > 200 ? text.substr(0, 200) + "..." : text);
  try {
    return SymInt::parse(text);
  } catch (const Error& e) {
    f.fail("cannot parse symbolic expression: " + e.what_part(), e.expected(), e.actual());
  } catch (const std::exception& e) {
    f.fail("cannot parse symbolic expression", "a valid expression", e.what());
  }
}

}  // namespace anvil::frontend::detail
