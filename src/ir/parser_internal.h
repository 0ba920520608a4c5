// Private to the text-IR parser (ir/parser.h): the TextParser class shared by its sources.
//
//   parser.cpp         graph level: sections (attributes, symbols, inputs, outputs), nodes, the
//                      end-of-input checks, and parse_graph
//   parser_lexer.cpp   positions and errors, tokens and literals (strings, names, numbers,
//                      symbolic expressions, devices)
//   parser_values.cpp  value names and types, node results, argument values and lists
//
// Not for use outside src/ir/parser*.cpp.
#pragma once

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/graph.h"
#include "ir/parser.h"

namespace anvil::ir::detail {

/// One element of a bracketed list before the list's kind is known.
struct Elem {
  enum class Kind { kRef, kNone, kInt, kFloat, kBool } kind;
  Value* value = nullptr;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  size_t pos = 0;
};

/// Recursive-descent parser over the text (grammar in ir/parser.h); positions are byte offsets
/// turned into line:col for errors.
class TextParser {
 public:
  /// Reads `text`; both references must outlive the parser.
  TextParser(const std::string& text, const ParseOptions& options)
      : text_(text), options_(options), graph_(std::make_unique<Graph>()) {}

  /// Parses the whole text into a graph (throws Error on bad input). Call once.
  std::unique_ptr<Graph> parse();

 private:
  // ---- graph level (parser.cpp) ---------------------------------------------------------------
  /// attributes { name = "string" ... }, after the '{'.
  void parse_attributes();
  /// A symbol range bound: an int, inf or -inf.
  int64_t bound();
  /// symbols { name in [lo, hi] ... }, after the '{'.
  void parse_symbols();
  /// inputs { result = kind ["target"] [persistent] [constant N] ... }, after the '{'.
  void parse_inputs();
  /// outputs { kind ["target"] (%ref | None) ... }, after the '{'.
  void parse_outputs();
  /// One node statement: [^name:] [results =] target(args).
  void parse_node();
  /// End-of-input checks: unknown op targets and values used but never defined.
  void finish();

  // ---- positions, errors and tokens (parser_lexer.cpp) ----------------------------------------
  /// "<source>:LINE:COL" of byte offset `pos`.
  std::string location(size_t pos) const;
  /// Text of the token that starts at `pos`, for messages.
  std::string describe(size_t pos) const;
  /// Throws the Error (what, location of `pos`, expected, actual).
  [[noreturn]] void fail_at(size_t pos, const std::string& expected, const std::string& actual,
                            const std::string& what = "syntax error") const;
  /// Throws a syntax error at the current position, describing the token found there.
  [[noreturn]] void fail(const std::string& expected) const;
  /// True at the end of the text.
  bool at_end() const { return pos_ >= text_.size(); }
  /// The current character, '\0' at the end.
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  /// The character at `p`, '\0' past the end.
  char peek_at(size_t p) const { return p < text_.size() ? text_[p] : '\0'; }
  /// [A-Za-z0-9_].
  static bool is_name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  }
  /// Skips whitespace and '#' comments.
  void skip();
  /// Consumes `c` (after whitespace) when it is next; returns whether it was.
  bool eat(char c);
  /// Consumes `c` or fails with `expected`.
  void expect(char c, const std::string& expected);
  /// [A-Za-z0-9_.]+ at the current position (after whitespace); "" when there is none.
  std::string dotted_ident();
  /// Consumes the word `w` or fails.
  void expect_word(const std::string& w);
  /// A section keyword followed by '{' at the current position, without consuming it.
  std::string peek_section();
  /// A quoted string with its escapes decoded.
  std::string string_lit();
  /// A name: bare [A-Za-z0-9_]+ or a quoted string. `what` describes it in errors.
  std::string name(const std::string& what, bool skip_ws = true);
  /// '%' name, returned without resolving.
  std::string ref_name();
  /// Lexes an int or float literal (including inf, -inf, nan). Returns false when none is here.
  bool number(Elem& out);
  /// An integer literal; `what` describes it in errors.
  int64_t int_lit(const std::string& what);
  /// Raw text of a symbolic expression up to ',' or `close` at bracket depth 0, parsed.
  SymInt symexpr(char close);
  /// Comma-separated symbolic expressions up to and including `close`.
  std::vector<SymInt> symexpr_list(char close);
  /// A device: cpu, cpu:N, cuda or cuda:N.
  Device device_lit();

  // ---- values, types and arguments (parser_values.cpp) ----------------------------------------
  /// The value called `n`; creates a placeholder for a forward reference.
  Value* resolve(const std::string& n, size_t pos);
  /// A fresh value called `n` for a definition (fills a forward placeholder).
  Value* define(const std::string& n, size_t pos);
  /// Parses a value type and stores it into `v`.
  void value_type(Value* v);
  /// dtype[sizes]{strides}@device, with the dtype word (at `start`) already read.
  TensorType tensor_type(const std::string& dtype_word, size_t start);
  /// result := '%' name ':' vtype | '_'. Returns null for '_'.
  Value* result();
  /// One argument: ['*'] name '=' value.
  Arg arg();
  /// One list element: a reference, None, a number or a bool.
  Elem elem();
  /// List elements up to and including ']'.
  std::vector<Elem> elems();
  /// Checks that every element is one of the allowed kinds.
  void require(const std::vector<Elem>& es, std::initializer_list<Elem::Kind> ok,
               const std::string& expected);
  /// A list with a type tag (`tag[`, already consumed up to and including '[').
  void tagged_list(Arg& a, const std::string& tag);
  /// A list without a tag: its kind follows from the elements (see the grammar).
  void untagged_list(Arg& a);
  /// `code(` N `)` for layout(N) and memory_format(N).
  int64_t code_call(const std::string& what);
  /// An argument value (see the grammar) into `a`.
  void value(Arg& a);

  const std::string& text_;
  const ParseOptions& options_;
  std::unique_ptr<Graph> graph_;
  size_t pos_ = 0;
  std::map<std::string, size_t> forward_;                  // used-before-defined name -> first use
  std::map<std::string, std::pair<int, size_t>> unknown_;  // target -> (count, first position)
};

}  // namespace anvil::ir::detail
