// Helpers for the IR tests: build Args, Values and Nodes by hand, and round-trip a graph through
// the text form.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/op_schema.h"
#include "ir/parser.h"
#include "ir/printer.h"

namespace anvil::irtest {

using ir::Arg;
using K = ir::Arg::Kind;

/// Symbolic size `name`.
inline SymInt sym(const std::string& name) { return SymInt::symbol(name); }

/// A tensor type with default (empty) strides.
inline ir::TensorType tt(DType dtype, std::vector<SymInt> sizes) {
  ir::TensorType t;
  t.dtype = dtype;
  t.sizes = std::move(sizes);
  return t;
}

/// An argument of kind `kind` called `name`; callers fill the payload.
inline Arg make_arg(const std::string& name, K kind, bool kwarg = false) {
  Arg a;
  a.name = name;
  a.kind = kind;
  a.kwarg = kwarg;
  return a;
}
inline Arg tensor_arg(const std::string& name, ir::Value* v) {
  Arg a = make_arg(name, K::kTensor);
  a.value = v;
  return a;
}
inline Arg int_arg(const std::string& name, int64_t i, bool kwarg = false) {
  Arg a = make_arg(name, K::kInt, kwarg);
  a.i = i;
  return a;
}
inline Arg float_arg(const std::string& name, double f) {
  Arg a = make_arg(name, K::kFloat);
  a.f = f;
  return a;
}
inline Arg bool_arg(const std::string& name, bool b, bool kwarg = false) {
  Arg a = make_arg(name, K::kBool, kwarg);
  a.b = b;
  return a;
}
inline Arg dtype_arg(const std::string& name, DType d, bool kwarg = true) {
  Arg a = make_arg(name, K::kScalarType, kwarg);
  a.dtype = d;
  return a;
}
inline Arg device_arg(const std::string& name, Device d, bool kwarg = true) {
  Arg a = make_arg(name, K::kDevice, kwarg);
  a.device = d;
  return a;
}

/// An input spec of `kind` for `target` (parameter / buffer / constant name).
inline ir::InputSpec input_spec(ir::InputKind kind, const std::string& target = "") {
  ir::InputSpec s;
  s.kind = kind;
  s.target = target;
  return s;
}

/// A fresh (not yet produced) value: tensor of `type`, or SymInt with symbolic value `s`.
inline ir::Value* tensor_value(ir::Graph& g, const std::string& name, ir::TensorType type) {
  ir::Value* v = g.new_value(name);
  v->type = std::move(type);
  return v;
}
inline ir::Value* symint_value(ir::Graph& g, const std::string& name, SymInt s) {
  ir::Value* v = g.new_value(name, ir::ValueKind::kSymInt);
  v->sym = std::move(s);
  return v;
}

/// Appends a node; its name is `name` or, when empty, the first output's name.
inline ir::Node* add_node(ir::Graph& g, const std::string& target, std::vector<Arg> args,
                          std::vector<ir::Value*> outputs, bool as_list = false,
                          const std::string& name = "") {
  auto n = std::make_unique<ir::Node>();
  n->target = target;
  n->schema = ir::find_op(target);
  n->args = std::move(args);
  n->outputs = std::move(outputs);
  n->outputs_as_list = as_list;
  n->name = name;
  if (name.empty())
    for (ir::Value* v : n->outputs)
      if (v) {
        n->name = v->name;
        break;
      }
  return g.append(std::move(n));
}

/// print -> parse -> graphs_equal -> print again gives the same text. Returns the parsed graph.
inline std::unique_ptr<ir::Graph> expect_round_trip(const ir::Graph& g,
                                                    bool allow_unknown = false) {
  std::string text = ir::print_graph(g);
  ir::ParseOptions opts;
  opts.allow_unknown_ops = allow_unknown;
  std::unique_ptr<ir::Graph> back = ir::parse_graph(text, opts);
  std::string diff;
  EXPECT_TRUE(ir::graphs_equal(g, *back, &diff)) << diff << "\n" << text;
  EXPECT_EQ(ir::print_graph(*back), text);
  return back;
}

}  // namespace anvil::irtest
