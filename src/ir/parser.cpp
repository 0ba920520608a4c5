#include "ir/parser.h"

#include <array>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>

#include "core/error.h"
#include "ir/op_schema.h"
#include "ir/printer.h"

namespace anvil::ir {

namespace {

/// One element of a bracketed list before the list's kind is known.
struct Elem {
  enum class Kind { kRef, kNone, kInt, kFloat, kBool } kind;
  Value* value = nullptr;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  size_t pos = 0;
};

/// Recursive-descent parser over the text; positions are byte offsets turned into line:col for
/// errors.
class TextParser {
 public:
  TextParser(const std::string& text, const ParseOptions& options)
      : text_(text), options_(options), graph_(std::make_unique<Graph>()) {}

  std::unique_ptr<Graph> parse() {
    expect_word("graph");
    expect('{', "'{' after 'graph'");
    int stage = 0;  // 1 attributes, 2 symbols, 3 inputs, 4 nodes, 5 outputs
    while (true) {
      skip();
      if (peek() == '}') break;
      if (at_end()) fail("'}' closing the graph");
      size_t start = pos_;
      std::string word = peek_section();
      if (!word.empty()) {
        int s = word == "attributes" ? 1 : word == "symbols" ? 2 : word == "inputs" ? 3 : 5;
        if (s <= stage)
          fail_at(start, "sections in the order attributes, symbols, inputs, nodes, outputs",
                  "'" + word + "' here");
        stage = s;
        dotted_ident();
        expect('{', "'{'");
        const std::array<void (TextParser::*)(), 4> sections = {
            &TextParser::parse_attributes, &TextParser::parse_symbols, &TextParser::parse_inputs,
            &TextParser::parse_outputs};
        (this->*sections[s == 5 ? 3 : s - 1])();
        continue;
      }
      if (stage > 4) fail_at(start, "'}' (nodes come before the outputs section)", describe(start));
      stage = 4;
      parse_node();
    }
    ++pos_;
    skip();
    if (!at_end()) fail("end of input after the graph's '}'");
    finish();
    return std::move(graph_);
  }

 private:
  // ---- errors and positions -------------------------------------------------------------------
  std::string location(size_t pos) const {
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
  /// Text of the token that starts at `pos`, for messages.
  std::string describe(size_t pos) const {
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
  [[noreturn]] void fail_at(size_t pos, const std::string& expected, const std::string& actual,
                            const std::string& what = "syntax error") const {
    throw Error(what, location(pos), expected, actual);
  }
  [[noreturn]] void fail(const std::string& expected) const {
    fail_at(pos_, expected, describe(pos_));
  }

  // ---- lexing ---------------------------------------------------------------------------------
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }
  char peek_at(size_t p) const { return p < text_.size() ? text_[p] : '\0'; }
  static bool is_name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  }
  void skip() {
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
  bool eat(char c) {
    skip();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void expect(char c, const std::string& expected) {
    if (!eat(c)) fail(expected);
  }
  /// [A-Za-z0-9_.]+ at the current position (after whitespace); "" when there is none.
  std::string dotted_ident() {
    skip();
    size_t start = pos_;
    while (!at_end() && (is_name_char(text_[pos_]) || text_[pos_] == '.')) ++pos_;
    return text_.substr(start, pos_ - start);
  }
  void expect_word(const std::string& w) {
    skip();
    size_t start = pos_;
    if (dotted_ident() != w) fail_at(start, "'" + w + "'", describe(start));
  }
  /// A section keyword followed by '{' at the current position, without consuming it.
  std::string peek_section() {
    size_t save = pos_;
    std::string w = dotted_ident();
    bool section =
        (w == "attributes" || w == "symbols" || w == "inputs" || w == "outputs") && eat('{');
    pos_ = save;
    return section ? w : "";
  }
  std::string string_lit() {
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
  /// A name: bare [A-Za-z0-9_]+ or a quoted string. `what` describes it in errors.
  std::string name(const std::string& what, bool skip_ws = true) {
    if (skip_ws) skip();
    if (peek() == '"') return string_lit();
    size_t start = pos_;
    while (!at_end() && is_name_char(text_[pos_])) ++pos_;
    if (start == pos_) fail(what);
    return text_.substr(start, pos_ - start);
  }
  /// '%' name, returned without resolving.
  std::string ref_name() {
    skip();
    if (peek() != '%') fail("a value reference '%name'");
    size_t start = pos_++;
    std::string n = name("a value name after '%'", false);
    if (n.empty()) fail_at(start, "a non-empty value name", "'%\"\"'");
    return n;
  }
  /// Lexes an int or float literal (including inf, -inf, nan). Returns false when none is here.
  bool number(Elem& out) {
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
  int64_t int_lit(const std::string& what) {
    Elem e;
    size_t start = (skip(), pos_);
    if (!number(e) || e.kind != Elem::Kind::kInt) fail_at(start, what, describe(start));
    return e.i;
  }
  /// Raw text of a symbolic expression up to ',' or `close` at bracket depth 0, parsed.
  SymInt symexpr(char close) {
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
  std::vector<SymInt> symexpr_list(char close) {
    std::vector<SymInt> out;
    if (eat(close)) return out;
    while (true) {
      out.push_back(symexpr(close));
      if (eat(close)) return out;
      expect(',', std::string("',' or '") + close + "'");
    }
  }
  Device device_lit() {
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

  // ---- values ---------------------------------------------------------------------------------
  /// The value called `n`; creates a placeholder for a forward reference.
  Value* resolve(const std::string& n, size_t pos) {
    if (Value* v = graph_->find_value(n)) return v;
    Value* v = graph_->new_value(n);
    forward_.emplace(n, pos);
    return v;
  }
  /// A fresh value called `n` for a definition (fills a forward placeholder).
  Value* define(const std::string& n, size_t pos) {
    if (Value* v = graph_->find_value(n)) {
      auto it = forward_.find(n);
      if (it == forward_.end())
        fail_at(pos, "a value name not defined before", "%" + n + " (defined twice)");
      forward_.erase(it);
      return v;
    }
    return graph_->new_value(n);
  }
  /// Parses a value type and stores it into `v`.
  void value_type(Value* v) {
    skip();
    size_t start = pos_;
    std::string w = dotted_ident();
    if (w == "SymInt") {
      expect('(', "'(' after SymInt");
      v->kind = ValueKind::kSymInt;
      v->sym = symexpr(')');
      expect(')', "')'");
      return;
    }
    if (w == "SymFloat" || w == "SymBool") {
      v->kind = w == "SymFloat" ? ValueKind::kSymFloat : ValueKind::kSymBool;
      return;
    }
    v->kind = ValueKind::kTensor;
    v->type = tensor_type(w, start);
  }
  TensorType tensor_type(const std::string& dtype_word, size_t start) {
    TensorType t;
    try {
      t.dtype = dtype_from_name(dtype_word);
    } catch (const Error&) {
      fail_at(start, "a type: a dtype such as f32 with sizes, SymInt(...), SymFloat or SymBool",
              describe(start));
    }
    expect('[', "'[' starting the sizes");
    t.sizes = symexpr_list(']');
    skip();
    if (peek() == '{') {
      ++pos_;
      t.strides = symexpr_list('}');
      if (t.strides.size() != t.sizes.size())
        fail_at(start, "one stride per size",
                std::to_string(t.strides.size()) + " strides for " +
                    std::to_string(t.sizes.size()) + " sizes");
    }
    if (eat('@')) t.device = device_lit();
    return t;
  }
  /// result := '%' name ':' vtype | '_'. Returns null for '_'.
  Value* result() {
    skip();
    size_t start = pos_;
    if (peek() == '_' && !is_name_char(peek_at(pos_ + 1)) && peek_at(pos_ + 1) != '.') {
      ++pos_;
      return nullptr;
    }
    if (peek() != '%') fail("a result '%name: type' or '_'");
    std::string n = ref_name();
    Value* v = define(n, start);
    expect(':', "':' and the type of %" + n);
    value_type(v);
    return v;
  }

  // ---- sections -------------------------------------------------------------------------------
  void parse_attributes() {
    while (!eat('}')) {
      std::string key = name("an attribute name or '}'");
      expect('=', "'=' after the attribute name");
      graph_->attributes[key] = string_lit();
    }
  }
  int64_t bound() {
    size_t start = (skip(), pos_);
    Elem e;
    if (!number(e) || (e.kind == Elem::Kind::kFloat && !std::isinf(e.f)))
      fail_at(start, "an integer bound, inf or -inf", describe(start));
    if (e.kind == Elem::Kind::kInt) return e.i;
    return e.f > 0 ? SymRange::kSymMax : -SymRange::kSymMax;
  }
  void parse_symbols() {
    while (!eat('}')) {
      std::string sym = name("a symbol name or '}'");
      expect_word("in");
      expect('[', "'['");
      SymRange r;
      r.min = bound();
      expect(',', "','");
      r.max = bound();
      expect(']', "']'");
      graph_->symbol_ranges[sym] = r;
    }
  }
  void parse_inputs() {
    while (!eat('}')) {
      // Parsed into a detached Value first: Graph::add_input creates the graph's value.
      skip();
      size_t start = pos_;
      Value tmp;
      bool present = !(peek() == '_' && !is_name_char(peek_at(pos_ + 1)));
      if (present) {
        tmp.name = ref_name();
        if (graph_->find_value(tmp.name))
          fail_at(start, "a value name not defined before", "%" + tmp.name + " (defined twice)");
        expect(':', "':' and the type of %" + tmp.name);
        value_type(&tmp);
      } else {
        ++pos_;
      }
      expect('=', "'=' and the input kind");
      skip();
      size_t kpos = pos_;
      InputSpec spec;
      std::string kind = dotted_ident();
      try {
        spec.kind = input_kind_from_name(kind);
      } catch (const Error& e) {
        fail_at(kpos, e.expected(), describe(kpos));
      }
      skip();
      if (peek() == '"') spec.target = string_lit();
      size_t save = pos_;
      std::string w = dotted_ident();
      if (w == "persistent" || w == "non_persistent") {
        spec.persistent = w == "persistent";
        save = pos_;
        w = dotted_ident();
      }
      if (w == "constant") {
        spec.constant_int = int_lit("an integer after 'constant'");
      } else {
        pos_ = save;
      }
      if (present) {
        Value* v = graph_->add_input(tmp.name, tmp.type, spec);
        v->kind = tmp.kind;
        v->sym = tmp.sym;
      } else {
        graph_->input_specs().push_back(spec);
      }
    }
  }
  void parse_outputs() {
    while (!eat('}')) {
      skip();
      size_t kpos = pos_;
      OutputSpec spec;
      std::string kind = dotted_ident();
      try {
        spec.kind = output_kind_from_name(kind);
      } catch (const Error& e) {
        fail_at(kpos, std::string("'}' or ") + e.expected(), describe(kpos));
      }
      skip();
      if (peek() == '"') spec.target = string_lit();
      skip();
      size_t vpos = pos_;
      if (peek() == '%') {
        spec.value = resolve(ref_name(), vpos);
      } else if (dotted_ident() != "None") {
        fail_at(vpos, "the output value '%name' or None", describe(vpos));
      }
      graph_->output_specs().push_back(spec);
    }
  }

  // ---- nodes ----------------------------------------------------------------------------------
  void parse_node() {
    skip();
    auto node = std::make_unique<Node>();
    bool named = false;
    if (peek() == '^') {
      ++pos_;
      node->name = name("a node name after '^'", false);
      named = true;
      expect(':', "':' after the node name");
    }
    skip();
    size_t save = pos_;
    bool has_results = true;
    if (peek() == '(' || peek() == '[') {
      char close = peek() == '(' ? ')' : ']';
      node->outputs_as_list = peek() == '[';
      ++pos_;
      if (!eat(close)) {
        while (true) {
          node->outputs.push_back(result());
          if (eat(close)) break;
          expect(',', std::string("',' or '") + close + "'");
        }
      }
    } else if (peek() == '%') {
      node->outputs.push_back(result());
    } else if (dotted_ident() == "_") {
      node->outputs.push_back(nullptr);
    } else {
      pos_ = save;
      has_results = false;
    }
    if (has_results) expect('=', "'=' and the op after the results");
    skip();
    size_t tpos = pos_;
    node->target = peek() == '"' ? string_lit() : dotted_ident();
    if (node->target.empty()) fail_at(tpos, "an op target such as aten.add.Tensor", describe(tpos));
    node->schema = find_op(node->target);
    if (!node->schema) {
      auto& u = unknown_[node->target];
      if (u.first++ == 0) u.second = tpos;
    }
    expect('(', "'(' after the op target");
    if (!eat(')')) {
      while (true) {
        node->args.push_back(arg());
        if (eat(')')) break;
        expect(',', "',' or ')' in the argument list");
      }
    }
    if (!named) {
      node->name.clear();
      for (Value* v : node->outputs)
        if (v) {
          node->name = v->name;
          break;
        }
    }
    graph_->append(std::move(node));
  }

  Arg arg() {
    Arg a;
    a.kwarg = eat('*');
    a.name = name("an argument name");
    expect('=', "'=' after argument '" + a.name + "'");
    value(a);
    return a;
  }

  /// One list element: a reference, None, a number or a bool.
  Elem elem() {
    skip();
    Elem e;
    e.pos = pos_;
    if (peek() == '%') {
      e.kind = Elem::Kind::kRef;
      e.value = resolve(ref_name(), e.pos);
      return e;
    }
    if (number(e)) return e;
    std::string w = dotted_ident();
    if (w == "None")
      e.kind = Elem::Kind::kNone;
    else if (w == "True" || w == "False")
      e.kind = Elem::Kind::kBool, e.b = w == "True";
    else
      fail_at(e.pos, "a list element: %value, None, a number, True or False", describe(e.pos));
    return e;
  }
  std::vector<Elem> elems() {
    std::vector<Elem> out;
    if (eat(']')) return out;
    while (true) {
      out.push_back(elem());
      if (eat(']')) return out;
      expect(',', "',' or ']'");
    }
  }
  /// Checks that every element is one of the allowed kinds.
  void require(const std::vector<Elem>& es, std::initializer_list<Elem::Kind> ok,
               const std::string& expected) {
    for (const Elem& e : es) {
      bool good = false;
      for (auto k : ok) good = good || e.kind == k;
      if (!good) fail_at(e.pos, expected, describe(e.pos));
    }
  }
  /// A list with a type tag (`tag[`, already consumed up to and including '[').
  void tagged_list(Arg& a, const std::string& tag) {
    using K = Elem::Kind;
    std::vector<Elem> es = elems();
    if (tag == "int") {
      require(es, {K::kInt}, "an int in int[...]");
      a.kind = Arg::Kind::kInts;
      for (const Elem& e : es) a.ints.push_back(e.i);
    } else if (tag == "float") {
      require(es, {K::kInt, K::kFloat}, "a number in float[...]");
      a.kind = Arg::Kind::kFloats;
      for (const Elem& e : es)
        a.floats.push_back(e.kind == K::kInt ? static_cast<double>(e.i) : e.f);
    } else if (tag == "bool") {
      require(es, {K::kBool}, "True or False in bool[...]");
      a.kind = Arg::Kind::kBools;
      for (const Elem& e : es) a.bools.push_back(e.b);
    } else if (tag == "Tensor" || tag == "Tensor?") {
      bool opt = tag == "Tensor?";
      if (opt)
        require(es, {K::kRef, K::kNone}, "%value or None in Tensor?[...]");
      else
        require(es, {K::kRef}, "%value in Tensor[...]");
      a.kind = opt ? Arg::Kind::kOptTensors : Arg::Kind::kTensors;
      for (const Elem& e : es) a.values.push_back(e.value);
    } else {  // SymInt
      require(es, {K::kRef, K::kInt}, "%value or an int in SymInt[...]");
      a.kind = Arg::Kind::kSymInts;
      for (const Elem& e : es) a.symints.push_back(IntRef{e.i, e.value});
    }
  }
  /// A list without a tag: its kind follows from the elements (see the grammar).
  void untagged_list(Arg& a) {
    using K = Elem::Kind;
    size_t start = pos_ - 1;
    std::vector<Elem> es = elems();
    bool refs = false, nones = false, bools = false, floats = false, ints = false;
    for (const Elem& e : es) {
      refs |= e.kind == K::kRef;
      nones |= e.kind == K::kNone;
      bools |= e.kind == K::kBool;
      floats |= e.kind == K::kFloat;
      ints |= e.kind == K::kInt;
    }
    if (int(refs || nones) + int(bools) + int(floats || ints) > 1)
      fail_at(start, "a list of one kind (write SymInt[...] for values mixed with ints)",
              "a mixed list");
    if (refs || nones) {
      a.kind = nones ? Arg::Kind::kOptTensors : Arg::Kind::kTensors;
      for (const Elem& e : es) a.values.push_back(e.value);
    } else if (bools) {
      a.kind = Arg::Kind::kBools;
      for (const Elem& e : es) a.bools.push_back(e.b);
    } else if (floats) {
      a.kind = Arg::Kind::kFloats;
      for (const Elem& e : es)
        a.floats.push_back(e.kind == K::kInt ? static_cast<double>(e.i) : e.f);
    } else {
      a.kind = Arg::Kind::kInts;
      for (const Elem& e : es) a.ints.push_back(e.i);
    }
  }
  /// `code(` N `)` for layout(N) and memory_format(N).
  int64_t code_call(const std::string& what) {
    expect('(', "'(' after " + what);
    int64_t c = int_lit("an integer code");
    expect(')', "')'");
    return c;
  }
  void value(Arg& a) {
    using K = Arg::Kind;
    skip();
    size_t start = pos_;
    char c = peek();
    if (c == '%') {
      a.kind = K::kTensor;
      a.value = resolve(ref_name(), start);
      return;
    }
    if (c == '"') {
      a.kind = K::kString;
      a.s = string_lit();
      return;
    }
    if (c == '[') {
      ++pos_;
      untagged_list(a);
      return;
    }
    Elem e;
    if (number(e)) {
      if (e.kind == Elem::Kind::kInt)
        a.kind = K::kInt, a.i = e.i;
      else
        a.kind = K::kFloat, a.f = e.f;
      return;
    }
    std::string w = dotted_ident();
    if (w.empty()) fail_at(start, "an argument value", describe(start));
    if (w == "None") return;  // kNone
    if (w == "True" || w == "False") {
      a.kind = K::kBool;
      a.b = w == "True";
      return;
    }
    skip();
    if (w == "Tensor" && peek() == '?' && peek_at(pos_ + 1) == '[') {
      pos_ += 2;
      tagged_list(a, "Tensor?");
      return;
    }
    if ((w == "int" || w == "float" || w == "bool" || w == "Tensor" || w == "SymInt") &&
        peek() == '[') {
      ++pos_;
      tagged_list(a, w);
      return;
    }
    if (w == "SymInt" && peek() == '(') {
      ++pos_;
      Elem x = elem();
      if (x.kind != Elem::Kind::kRef && x.kind != Elem::Kind::kInt)
        fail_at(x.pos, "%value or an int in SymInt(...)", describe(x.pos));
      expect(')', "')'");
      a.kind = K::kSymInt;
      a.symints.push_back(IntRef{x.i, x.value});
      return;
    }
    if (w == "device" && peek() == '(') {
      ++pos_;
      a.kind = K::kDevice;
      a.device = device_lit();
      expect(')', "')' after the device");
      return;
    }
    if (w == "layout" && peek() == '(') {
      a.kind = K::kLayout;
      a.i = code_call("layout");
      return;
    }
    if (w == "memory_format" && peek() == '(') {
      a.kind = K::kMemoryFormat;
      a.i = code_call("memory_format");
      return;
    }
    for (int64_t code = 0; code < 16; ++code) {
      const char *l = layout_name(code), *m = memory_format_name(code);
      if ((l && w == l) || (m && w == m)) {
        a.kind = l && w == l ? K::kLayout : K::kMemoryFormat;
        a.i = code;
        return;
      }
    }
    try {
      a.dtype = dtype_from_name(w);
      a.kind = K::kScalarType;
    } catch (const Error&) {
      fail_at(start,
              "an argument value: %value, a number, True/False, None, a string, a list, "
              "a dtype, device(...), a layout or a memory format",
              describe(start));
    }
  }

  // ---- end of input ---------------------------------------------------------------------------
  void finish() {
    if (!unknown_.empty() && !options_.allow_unknown_ops) {
      std::string list;
      for (const auto& [target, info] : unknown_) {
        if (!list.empty()) list += ", ";
        list += target + " x" + std::to_string(info.first) + " (first at " + location(info.second) +
                ")";
      }
      throw Error("graph uses " + std::to_string(unknown_.size()) + " op(s) not in the op table",
                  options_.source_name, "targets from src/ops/ops.def", list);
    }
    if (!forward_.empty()) {
      auto first = forward_.begin();
      for (auto it = forward_.begin(); it != forward_.end(); ++it)
        if (it->second < first->second) first = it;
      fail_at(first->second, "a value defined by an input or a node",
              "%" + first->first + " (used but never defined)", "undefined value");
    }
  }

  const std::string& text_;
  const ParseOptions& options_;
  std::unique_ptr<Graph> graph_;
  size_t pos_ = 0;
  std::map<std::string, size_t> forward_;                  // used-before-defined name -> first use
  std::map<std::string, std::pair<int, size_t>> unknown_;  // target -> (count, first position)
};

}  // namespace

std::unique_ptr<Graph> parse_graph(const std::string& text, const ParseOptions& options) {
  return TextParser(text, options).parse();
}

}  // namespace anvil::ir
