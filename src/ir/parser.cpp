// Text-IR parser, part 1 of 3 (see ir/parser_internal.h): parse_graph and the graph level of
// the grammar in ir/parser.h: the section order, the attributes, symbols, inputs and outputs
// sections, node statements, and the checks at the end of the input (unknown ops, undefined
// values).
#include "ir/parser.h"

#include <array>
#include <cmath>

#include "core/error.h"
#include "ir/inplace.h"
#include "ir/op_schema.h"
#include "ir/parser_internal.h"
#include "ir/printer.h"

namespace anvil::ir {
namespace detail {

std::unique_ptr<Graph> TextParser::parse() {
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

void TextParser::parse_attributes() {
  while (!eat('}')) {
    std::string key = name("an attribute name or '}'");
    expect('=', "'=' after the attribute name");
    graph_->attributes[key] = string_lit();
  }
}

int64_t TextParser::bound() {
  size_t start = (skip(), pos_);
  Elem e;
  if (!number(e) || (e.kind == Elem::Kind::kFloat && !std::isinf(e.f)))
    fail_at(start, "an integer bound, inf or -inf", describe(start));
  if (e.kind == Elem::Kind::kInt) return e.i;
  return e.f > 0 ? SymRange::kSymMax : -SymRange::kSymMax;
}

void TextParser::parse_symbols() {
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

void TextParser::parse_inputs() {
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

void TextParser::parse_outputs() {
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

void TextParser::parse_node() {
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
  const OpSchema* functional = node->schema ? nullptr : inplace_functional(node->target);
  const OpSchema* out_form = node->schema || functional ? nullptr : out_functional(node->target);
  if (!node->schema && !functional && !out_form) {
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
  if (out_form) {  // aten.X.out: the functional op plus a write into out (ir/inplace.h)
    append_out_form(*graph_, std::move(node), *out_form);
    return;
  }
  if (functional) {  // aten.X_.O: the functional op plus a write (ir/inplace.h)
    append_inplace(*graph_, std::move(node), *functional);
    return;
  }
  graph_->append(std::move(node));
}

void TextParser::finish() {
  if (!unknown_.empty() && !options_.allow_unknown_ops) {
    std::string list;
    for (const auto& [target, info] : unknown_) {
      if (!list.empty()) list += ", ";
      list +=
          target + " x" + std::to_string(info.first) + " (first at " + location(info.second) + ")";
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

}  // namespace detail

std::unique_ptr<Graph> parse_graph(const std::string& text, const ParseOptions& options) {
  return detail::TextParser(text, options).parse();
}

}  // namespace anvil::ir
