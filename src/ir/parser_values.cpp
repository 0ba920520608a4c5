// Text-IR parser, part 3 of 3 (see ir/parser_internal.h): value names (definitions and forward
// references), value and tensor types, node results, and argument values including the tagged
// and untagged lists of the grammar in ir/parser.h.
#include "core/error.h"
#include "ir/parser_internal.h"
#include "ir/printer.h"

namespace anvil::ir::detail {

Value* TextParser::resolve(const std::string& n, size_t pos) {
  if (Value* v = graph_->find_value(n)) return v;
  Value* v = graph_->new_value(n);
  forward_.emplace(n, pos);
  return v;
}

Value* TextParser::define(const std::string& n, size_t pos) {
  if (Value* v = graph_->find_value(n)) {
    auto it = forward_.find(n);
    if (it == forward_.end())
      fail_at(pos, "a value name not defined before", "%" + n + " (defined twice)");
    forward_.erase(it);
    return v;
  }
  return graph_->new_value(n);
}

void TextParser::value_type(Value* v) {
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

TensorType TextParser::tensor_type(const std::string& dtype_word, size_t start) {
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
              std::to_string(t.strides.size()) + " strides for " + std::to_string(t.sizes.size()) +
                  " sizes");
  }
  if (eat('@')) t.device = device_lit();
  return t;
}

Value* TextParser::result() {
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
Arg TextParser::arg() {
  Arg a;
  a.kwarg = eat('*');
  a.name = name("an argument name");
  expect('=', "'=' after argument '" + a.name + "'");
  value(a);
  return a;
}

Elem TextParser::elem() {
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

std::vector<Elem> TextParser::elems() {
  std::vector<Elem> out;
  if (eat(']')) return out;
  while (true) {
    out.push_back(elem());
    if (eat(']')) return out;
    expect(',', "',' or ']'");
  }
}

void TextParser::require(const std::vector<Elem>& es, std::initializer_list<Elem::Kind> ok,
                         const std::string& expected) {
  for (const Elem& e : es) {
    bool good = false;
    for (auto k : ok) good = good || e.kind == k;
    if (!good) fail_at(e.pos, expected, describe(e.pos));
  }
}

void TextParser::tagged_list(Arg& a, const std::string& tag) {
  using K = Elem::Kind;
  std::vector<Elem> es = elems();
  if (tag == "int") {
    require(es, {K::kInt}, "an int in int[...]");
    a.kind = Arg::Kind::kInts;
    for (const Elem& e : es) a.ints.push_back(e.i);
  } else if (tag == "float") {
    require(es, {K::kInt, K::kFloat}, "a number in float[...]");
    a.kind = Arg::Kind::kFloats;
    for (const Elem& e : es) a.floats.push_back(e.kind == K::kInt ? static_cast<double>(e.i) : e.f);
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

void TextParser::untagged_list(Arg& a) {
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
    for (const Elem& e : es) a.floats.push_back(e.kind == K::kInt ? static_cast<double>(e.i) : e.f);
  } else {
    a.kind = Arg::Kind::kInts;
    for (const Elem& e : es) a.ints.push_back(e.i);
  }
}

int64_t TextParser::code_call(const std::string& what) {
  expect('(', "'(' after " + what);
  int64_t c = int_lit("an integer code");
  expect(')', "')'");
  return c;
}

void TextParser::value(Arg& a) {
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

}  // namespace anvil::ir::detail
