// Text-IR parser, part 2 of 3 (see ir/parser_internal.h): byte positions and error messages,
// and the tokens and literals of the grammar in ir/parser.h (whitespace and comments, names,
// strings, numbers, symbolic size expressions, devices).
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <limits>

#include "core/error.h"
#include "ir/parser_internal.h"

namespace anvil::ir::detail {

std::string TextParser::location(size_t pos) const {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < pos && i < text_.size(); ++i) {
    if (text_[i] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  return options_.source_name + ":" + std::to_string(line) + ":" + std::to_string(col);
}

std::string TextParser::describe(size_t pos) const {
  if (pos >= text_.size()) return "end of input";
  size_t end = pos;
  auto word = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
  };
  if (word(text_[pos])) {
    while (end < text_.size() && word(text_[end])) ++end;
  } else if (text_[pos] == '"') {
    end = text_.find('"', pos + 1);
    end = end == std::string::npos ? text_.size() : end + 1;
  } else {
    end = pos + 1;
  }
  std::string tok = text_.substr(pos, std::min<size_t>(end - pos, 40));
  return "'" + tok + "'";
}

void TextParser::fail_at(size_t pos, const std::string& expected, const std::string& actual,
                         const std::string& what) const {
  throw Error(what, location(pos), expected, actual);
}

void TextParser::fail(const std::string& expected) const {
  fail_at(pos_, expected, describe(pos_));
}

void TextParser::skip() {
  while (!at_end()) {
    char c = text_[pos_];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++pos_;
    } else if (c == '#') {
      while (!at_end() && text_[pos_] != '\n') ++pos_;
    } else {
      break;
    }
  }
}

bool TextParser::eat(char c) {
  skip();
  if (peek() != c) return false;
  ++pos_;
  return true;
}

void TextParser::expect(char c, const std::string& expected) {
  if (!eat(c)) fail(expected);
}

std::string TextParser::dotted_ident() {
  skip();
  size_t start = pos_;
  while (!at_end() && (is_name_char(text_[pos_]) || text_[pos_] == '.')) ++pos_;
  return text_.substr(start, pos_ - start);
}

void TextParser::expect_word(const std::string& w) {
  skip();
  size_t start = pos_;
  if (dotted_ident() != w) fail_at(start, "'" + w + "'", describe(start));
}

std::string TextParser::peek_section() {
  size_t save = pos_;
  std::string w = dotted_ident();
  bool section =
      (w == "attributes" || w == "symbols" || w == "inputs" || w == "outputs") && eat('{');
  pos_ = save;
  return section ? w : "";
}

std::string TextParser::string_lit() {
  skip();
  size_t start = pos_;
  if (peek() != '"') fail("a string");
  ++pos_;
  std::string out;
  while (true) {
    if (at_end() || peek() == '\n') fail_at(start, "a closing '\"'", "an unterminated string");
    char c = text_[pos_++];
    if (c == '"') return out;
    if (c != '\\') {
      out += c;
      continue;
    }
    char e = peek();
    ++pos_;
    switch (e) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case 'x': {
        auto hex = [&](char h) { return std::isxdigit(static_cast<unsigned char>(h)); };
        if (!hex(peek_at(pos_)) || !hex(peek_at(pos_ + 1)))
          fail_at(pos_ - 2, "two hex digits after \\x", describe(pos_));
        out += static_cast<char>(std::stoi(text_.substr(pos_, 2), nullptr, 16));
        pos_ += 2;
        break;
      }
      default:
        fail_at(pos_ - 2, "an escape \\\" \\\\ \\n \\t \\r or \\xHH", describe(pos_ - 1));
    }
  }
}

std::string TextParser::name(const std::string& what, bool skip_ws) {
  if (skip_ws) skip();
  if (peek() == '"') return string_lit();
  size_t start = pos_;
  while (!at_end() && is_name_char(text_[pos_])) ++pos_;
  if (start == pos_) fail(what);
  return text_.substr(start, pos_ - start);
}

std::string TextParser::ref_name() {
  skip();
  if (peek() != '%') fail("a value reference '%name'");
  size_t start = pos_++;
  std::string n = name("a value name after '%'", false);
  if (n.empty()) fail_at(start, "a non-empty value name", "'%\"\"'");
  return n;
}

bool TextParser::number(Elem& out) {
  skip();
  size_t start = pos_, p = pos_;
  out.pos = start;
  if (peek_at(p) == '-') ++p;
  if (text_.compare(p, 3, "inf") == 0 && !is_name_char(peek_at(p + 3))) {
    pos_ = p + 3;
    out.kind = Elem::Kind::kFloat;
    out.f = p == start ? std::numeric_limits<double>::infinity()
                       : -std::numeric_limits<double>::infinity();
    return true;
  }
  if (p == start && text_.compare(p, 3, "nan") == 0 && !is_name_char(peek_at(p + 3))) {
    pos_ = p + 3;
    out.kind = Elem::Kind::kFloat;
    out.f = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (!std::isdigit(static_cast<unsigned char>(peek_at(p)))) return false;
  bool is_float = false;
  while (std::isdigit(static_cast<unsigned char>(peek_at(p)))) ++p;
  if (peek_at(p) == '.') {
    is_float = true;
    ++p;
    while (std::isdigit(static_cast<unsigned char>(peek_at(p)))) ++p;
  }
  if (peek_at(p) == 'e' || peek_at(p) == 'E') {
    size_t q = p + 1;
    if (peek_at(q) == '+' || peek_at(q) == '-') ++q;
    if (std::isdigit(static_cast<unsigned char>(peek_at(q)))) {
      is_float = true;
      p = q;
      while (std::isdigit(static_cast<unsigned char>(peek_at(p)))) ++p;
    }
  }
  if (is_name_char(peek_at(p))) fail_at(start, "a number", describe(start));
  std::string tok = text_.substr(start, p - start);
  pos_ = p;
  errno = 0;
  if (is_float) {
    out.kind = Elem::Kind::kFloat;
    out.f = std::strtod(tok.c_str(), nullptr);
  } else {
    out.kind = Elem::Kind::kInt;
    out.i = std::strtoll(tok.c_str(), nullptr, 10);
    if (errno == ERANGE) fail_at(start, "a 64-bit integer", "'" + tok + "' (out of range)");
  }
  return true;
}

int64_t TextParser::int_lit(const std::string& what) {
  Elem e;
  size_t start = (skip(), pos_);
  if (!number(e) || e.kind != Elem::Kind::kInt) fail_at(start, what, describe(start));
  return e.i;
}

SymInt TextParser::symexpr(char close) {
  skip();
  size_t start = pos_;
  int depth = 0;
  while (!at_end()) {
    char c = text_[pos_];
    if (c == '(') ++depth;
    if (c == ')' && depth > 0) {
      --depth;
    } else if (depth == 0 && (c == ',' || c == close || c == '\n')) {
      break;
    }
    ++pos_;
  }
  std::string expr = text_.substr(start, pos_ - start);
  while (!expr.empty() && std::isspace(static_cast<unsigned char>(expr.back()))) expr.pop_back();
  if (expr.empty())
    fail_at(start, "a size expression such as 4, s77 or 2*s77 + 1", describe(start));
  try {
    return SymInt::parse(expr);
  } catch (const Error& e) {
    fail_at(start, "a size expression such as 4, s77 or 2*s77 + 1", "'" + expr + "'",
            "bad symbolic expression: " + e.what_part());
  }
}

std::vector<SymInt> TextParser::symexpr_list(char close) {
  std::vector<SymInt> out;
  if (eat(close)) return out;
  while (true) {
    out.push_back(symexpr(close));
    if (eat(close)) return out;
    expect(',', std::string("',' or '") + close + "'");
  }
}

Device TextParser::device_lit() {
  skip();
  size_t start = pos_;
  std::string kind = dotted_ident();
  Device d;
  if (kind == "cpu")
    d.type = Device::Type::kCPU;
  else if (kind == "cuda")
    d.type = Device::Type::kCUDA;
  else
    fail_at(start, "a device: cpu, cpu:N, cuda or cuda:N", describe(start));
  if (peek() == ':') {
    ++pos_;
    size_t p = pos_;
    if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("a device index");
    int64_t idx = int_lit("a device index");
    if (idx > std::numeric_limits<int>::max()) fail_at(p, "a device index", describe(p));
    d.index = static_cast<int>(idx);
  }
  return d;
}

}  // namespace anvil::ir::detail
