// Small scanners over generated source text. Generated code is unbounded input (a long kernel is
// hundreds of kilobytes), so nothing here uses std::regex: libstdc++'s regex recurses per
// character and overflowed the stack on a BLOOM kernel. Each function is one linear pass.
#pragma once

#include <cctype>
#include <string>

namespace anvil::codegen {

/// A C identifier character ([A-Za-z0-9_], regex's \w).
inline bool is_ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

/// True when `word` occurs in `text` as a whole identifier (regex \bword\b).
inline bool contains_word(const std::string& text, const std::string& word) {
  if (word.empty()) return false;
  for (size_t pos = text.find(word); pos != std::string::npos; pos = text.find(word, pos + 1)) {
    const bool left = pos == 0 || !is_ident_char(text[pos - 1]);
    const size_t end = pos + word.size();
    const bool right = end == text.size() || !is_ident_char(text[end]);
    if (left && right) return true;
  }
  return false;
}

/// A cursor over one line: each `eat_*` consumes a token at the front and says whether it was
/// there; a failed eat leaves the cursor where it was.
class LineScanner {
 public:
  explicit LineScanner(const std::string& line) : s_(line) {}
  bool done() const { return i_ == s_.size(); }
  size_t pos() const { return i_; }
  /// The literal `lit`.
  bool eat(const std::string& lit) {
    if (s_.compare(i_, lit.size(), lit) != 0) return false;
    i_ += lit.size();
    return true;
  }
  /// Zero or more spaces / tabs.
  void eat_blanks() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }
  /// One or more characters of `pred` into `out`.
  template <typename Pred>
  bool eat_while(Pred pred, std::string* out = nullptr) {
    size_t j = i_;
    while (j < s_.size() && pred(s_[j])) ++j;
    if (j == i_) return false;
    if (out) *out = s_.substr(i_, j - i_);
    i_ = j;
    return true;
  }
  bool eat_ident(std::string* out = nullptr) { return eat_while(is_ident_char, out); }
  bool eat_digits(std::string* out = nullptr) {
    return eat_while([](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; },
                     out);
  }
  /// The rest of the line up to the last occurrence of `lit` (which must exist at or after the
  /// cursor) into `out`; the cursor moves past `lit`.
  bool eat_until_last(const std::string& lit, std::string* out) {
    const size_t at = s_.rfind(lit);
    if (at == std::string::npos || at < i_) return false;
    *out = s_.substr(i_, at - i_);
    i_ = at + lit.size();
    return true;
  }

 private:
  const std::string& s_;
  size_t i_ = 0;
};

}  // namespace anvil::codegen
