#include "ir/printer.h"

#include <bit>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <set>

#include "core/error.h"
#include "ir/op_schema.h"

namespace anvil::ir {

namespace {

constexpr const char* kLayoutNames[] = {nullptr,
                                        "torch.sparse_coo",
                                        "torch.sparse_csr",
                                        "torch.sparse_csc",
                                        "torch.sparse_bsr",
                                        "torch.sparse_bsc",
                                        "torch._mkldnn",
                                        "torch.strided"};
constexpr const char* kMemoryFormatNames[] = {nullptr, "torch.contiguous_format",
                                              "torch.channels_last", "torch.channels_last_3d",
                                              "torch.preserve_format"};

bool is_bare(const std::string& s, bool allow_dot) {
  if (s.empty()) return false;
  for (char c : s) {
    bool ok = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (allow_dot && c == '.');
    if (!ok) return false;
  }
  return true;
}

/// A name as written after `%`, `^` or as a key: bare when possible, else quoted.
std::string name_text(const std::string& s) { return is_bare(s, false) ? s : quote_string(s); }

std::string ref(const Value* v) { return v ? "%" + name_text(v->name) : "None"; }

std::string int_ref(const IntRef& r) { return r.value ? ref(r.value) : std::to_string(r.constant); }

template <typename T, typename F>
std::string join(const std::vector<T>& xs, F&& f) {
  std::string out;
  for (size_t i = 0; i < xs.size(); ++i) out += (i ? ", " : "") + f(xs[i]);
  return out;
}

std::string bound_text(int64_t v) {
  if (v == SymRange::kSymMax) return "inf";
  if (v == -SymRange::kSymMax) return "-inf";
  return std::to_string(v);
}

std::string value_def(const Value* v) {
  if (!v) return "_";
  return ref(v) + ": " + print_value_type(*v);
}

/// Default node name: the first output's name, or "" for nodes without outputs.
std::string default_node_name(const Node& n) {
  for (const Value* v : n.outputs)
    if (v) return v->name;
  return "";
}

}  // namespace

const char* layout_name(int64_t code) {
  if (code < 0 || code >= static_cast<int64_t>(std::size(kLayoutNames))) return nullptr;
  return kLayoutNames[code];
}

const char* memory_format_name(int64_t code) {
  if (code < 0 || code >= static_cast<int64_t>(std::size(kMemoryFormatNames))) return nullptr;
  return kMemoryFormatNames[code];
}

std::string device_text(const Device& d) {
  std::string out = d.type == Device::Type::kCPU ? "cpu" : "cuda";
  if (d.index >= 0) out += ":" + std::to_string(d.index);
  return out;
}

std::string format_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  // Fewest significant digits that read back exactly, then Python's repr layout: positional
  // for decimal exponents in [-4, 16), scientific otherwise.
  char buf[64];
  int digits = 1;
  for (; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string e = buf;  // "-d.ddde+XX"
  std::string sign = e[0] == '-' ? "-" : "";
  size_t epos = e.find('e');
  std::string mant = e.substr(sign.size(), epos - sign.size());
  std::string d;  // significant digits
  for (char c : mant)
    if (c != '.') d += c;
  int exp = std::atoi(e.c_str() + epos + 1);
  if (exp < -4 || exp >= 16) return sign + mant + e.substr(epos);
  if (exp < 0) return sign + "0." + std::string(-exp - 1, '0') + d;
  if (static_cast<int>(d.size()) <= exp + 1)
    return sign + d + std::string(exp + 1 - d.size(), '0') + ".0";
  return sign + d.substr(0, exp + 1) + "." + d.substr(exp + 1);
}

std::string quote_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (u < 0x20 || u == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", u);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::vector<SymInt> contiguous_strides(const std::vector<SymInt>& sizes) {
  std::vector<SymInt> out(sizes.size());
  SymInt acc(1);
  for (size_t i = sizes.size(); i-- > 0;) {
    out[i] = acc;
    acc = acc * sizes[i];
  }
  return out;
}

std::string print_type(const TensorType& t) {
  std::string out = std::string(dtype_name(t.dtype)) + sym_shape_str(t.sizes);
  if (!t.strides.empty() && t.strides != contiguous_strides(t.sizes))
    out += "{" + join(t.strides, [](const SymInt& s) { return s.str(); }) + "}";
  if (t.device != Device{}) out += "@" + device_text(t.device);
  return out;
}

std::string print_value_type(const Value& v) {
  switch (v.kind) {
    case ValueKind::kTensor:
      return print_type(v.type);
    case ValueKind::kSymInt:
      return "SymInt(" + v.sym.str() + ")";
    case ValueKind::kSymFloat:
      return "SymFloat";
    case ValueKind::kSymBool:
      return "SymBool";
  }
  return "?";
}

std::string print_arg_value(const Arg& a) {
  using K = Arg::Kind;
  switch (a.kind) {
    case K::kNone:
      return "None";
    case K::kTensor:
      return ref(a.value);
    case K::kTensors:
      return (a.values.empty() ? "Tensor[" : "[") + join(a.values, ref) + "]";
    case K::kOptTensors:
      return "Tensor?[" + join(a.values, ref) + "]";
    case K::kInt:
      return std::to_string(a.i);
    case K::kFloat:
      return format_float(a.f);
    case K::kBool:
      return a.b ? "True" : "False";
    case K::kString:
      return quote_string(a.s);
    case K::kGraph:
      return "graph(" + name_text(a.s) + ")";
    case K::kInts:
      return "[" + join(a.ints, [](int64_t x) { return std::to_string(x); }) + "]";
    case K::kFloats:
      return (a.floats.empty() ? "float[" : "[") + join(a.floats, format_float) + "]";
    case K::kBools: {
      std::vector<bool> bs = a.bools;
      std::string body;
      for (size_t i = 0; i < bs.size(); ++i)
        body += std::string(i ? ", " : "") + (bs[i] ? "True" : "False");
      return (bs.empty() ? "bool[" : "[") + body + "]";
    }
    case K::kSymInt:
      return "SymInt(" + (a.symints.empty() ? std::string() : int_ref(a.symints[0])) + ")";
    case K::kSymInts:
      return "SymInt[" + join(a.symints, int_ref) + "]";
    case K::kScalarType:
      return dtype_name(a.dtype);
    case K::kDevice:
      return "device(" + device_text(a.device) + ")";
    case K::kLayout: {
      const char* n = layout_name(a.i);
      return n ? std::string(n) : "layout(" + std::to_string(a.i) + ")";
    }
    case K::kMemoryFormat: {
      const char* n = memory_format_name(a.i);
      return n ? std::string(n) : "memory_format(" + std::to_string(a.i) + ")";
    }
  }
  return "?";
}

std::string print_node(const Node& n) {
  std::string out;
  if (n.name != default_node_name(n)) out += "^" + name_text(n.name) + ": ";
  if (n.outputs_as_list) {
    out += "[" + join(n.outputs, value_def) + "] = ";
  } else if (n.outputs.size() == 1) {
    out += value_def(n.outputs[0]) + " = ";
  } else if (n.outputs.size() > 1) {
    out += "(" + join(n.outputs, value_def) + ") = ";
  }
  out += is_bare(n.target, true) ? n.target : quote_string(n.target);
  out += "(" +
         join(n.args,
              [](const Arg& a) {
                return (a.kwarg ? "*" : "") + name_text(a.name) + "=" + print_arg_value(a);
              }) +
         ")";
  return out;
}

std::string print_graph(const Graph& g, const PrintOptions& options) {
  std::string out = "graph {\n";
  if (options.attributes && !g.attributes.empty()) {
    out += "  attributes {\n";
    for (const auto& [k, v] : g.attributes)
      out += "    " + name_text(k) + " = " + quote_string(v) + "\n";
    out += "  }\n";
  }
  if (!g.symbol_ranges.empty()) {
    out += "  symbols {\n";
    for (const auto& [name, r] : g.symbol_ranges)
      out +=
          "    " + name_text(name) + " in [" + bound_text(r.min) + ", " + bound_text(r.max) + "]\n";
    out += "  }\n";
  }
  if (!g.input_specs().empty()) {
    out += "  inputs {\n";
    for (const InputSpec& s : g.input_specs()) {
      out += "    " + value_def(s.value) + " = " + input_kind_name(s.kind);
      if (!s.target.empty()) out += " " + quote_string(s.target);
      if (s.kind == InputKind::kBuffer && s.persistent) out += " persistent";
      if (!s.persistent) out += " non_persistent";
      if (s.constant_int) out += " constant " + std::to_string(*s.constant_int);
      out += "\n";
    }
    out += "  }\n";
  }
  for (const Node* n : g.nodes()) out += "  " + print_node(*n) + "\n";
  if (!g.output_specs().empty()) {
    out += "  outputs {\n";
    for (const OutputSpec& s : g.output_specs()) {
      out += std::string("    ") + output_kind_name(s.kind);
      if (!s.target.empty()) out += " " + quote_string(s.target);
      out += " " + ref(s.value) + "\n";
    }
    out += "  }\n";
  }
  // subgraphs of higher-order ops, after the graph that uses them (the parser does not read
  // them back: IR text with control flow is for reading)
  for (const Node* n : g.nodes())
    for (const Arg& a : n->args) {
      if (a.kind != Arg::Kind::kGraph || a.i < 0 || a.i >= static_cast<int64_t>(n->subgraphs.size()))
        continue;
      std::string sub = print_graph(*n->subgraphs[static_cast<size_t>(a.i)], {});
      out += "  subgraph " + name_text(a.s) + " of " + name_text(n->name) + " ";
      for (size_t i = 0; i < sub.size(); ++i) {
        out += sub[i];
        if (sub[i] == '\n' && i + 1 < sub.size()) out += "  ";
      }
    }
  return out + "}\n";
}

// ---- structural equality ---------------------------------------------------------------------

namespace {

/// Collects the first difference between two graphs.
class Differ {
 public:
  bool fail(const std::string& where, const std::string& a, const std::string& b) {
    if (diff_.empty()) diff_ = where + ": " + a + " vs " + b;
    return false;
  }
  const std::string& diff() const { return diff_; }

  bool same_ref(const std::string& where, const Value* a, const Value* b) {
    if (!a || !b) return (a == b) || fail(where, ref(a), ref(b));
    return a->name == b->name || fail(where, ref(a), ref(b));
  }

  bool same_type(const std::string& where, const TensorType& a, const TensorType& b) {
    auto strides = [](const TensorType& t) {
      return t.strides.empty() ? contiguous_strides(t.sizes) : t.strides;
    };
    if (a.dtype != b.dtype || a.sizes != b.sizes || a.device != b.device ||
        strides(a) != strides(b))
      return fail(where, print_type(a), print_type(b));
    return true;
  }

  bool same_value(const std::string& where, const Value* a, const Value* b) {
    if (!same_ref(where, a, b)) return false;
    if (!a) return true;
    if (a->kind != b->kind)
      return fail(where + " kind", print_value_type(*a), print_value_type(*b));
    if (a->kind == ValueKind::kTensor) return same_type(where + " type", a->type, b->type);
    if (a->kind == ValueKind::kSymInt && a->sym != b->sym)
      return fail(where + " symbolic value", a->sym.str(), b->sym.str());
    return true;
  }

  bool same_arg(const std::string& where, const Arg& a, const Arg& b) {
    if (a.name != b.name || a.kwarg != b.kwarg || a.kind != b.kind)
      return fail(where, (a.kwarg ? "*" : "") + a.name + "=" + print_arg_value(a),
                  (b.kwarg ? "*" : "") + b.name + "=" + print_arg_value(b));
    using K = Arg::Kind;
    bool eq = true;
    switch (a.kind) {
      case K::kNone:
        break;
      case K::kTensor:
        return same_ref(where, a.value, b.value);
      case K::kTensors:
      case K::kOptTensors:
        if (a.values.size() != b.values.size()) eq = false;
        for (size_t i = 0; eq && i < a.values.size(); ++i)
          if (!same_ref(where + "[" + std::to_string(i) + "]", a.values[i], b.values[i]))
            return false;
        break;
      case K::kInt:
      case K::kLayout:
      case K::kMemoryFormat:
        eq = a.i == b.i;
        break;
      case K::kFloat:
        eq = same_float(a.f, b.f);
        break;
      case K::kBool:
        eq = a.b == b.b;
        break;
      case K::kString:
      case K::kGraph:  // subgraphs compare by name
        eq = a.s == b.s;
        break;
      case K::kInts:
        eq = a.ints == b.ints;
        break;
      case K::kFloats:
        eq = a.floats.size() == b.floats.size();
        for (size_t i = 0; eq && i < a.floats.size(); ++i)
          eq = same_float(a.floats[i], b.floats[i]);
        break;
      case K::kBools:
        eq = a.bools == b.bools;
        break;
      case K::kSymInt:
      case K::kSymInts:
        eq = a.symints.size() == b.symints.size();
        for (size_t i = 0; eq && i < a.symints.size(); ++i) {
          const IntRef &x = a.symints[i], &y = b.symints[i];
          eq = (x.value == nullptr) == (y.value == nullptr) &&
               (x.value ? x.value->name == y.value->name : x.constant == y.constant);
        }
        break;
      case K::kScalarType:
        eq = a.dtype == b.dtype;
        break;
      case K::kDevice:
        eq = a.device == b.device;
        break;
    }
    return eq || fail(where, print_arg_value(a), print_arg_value(b));
  }

  bool same_node(const std::string& where, const Node& a, const Node& b) {
    if (a.target != b.target) return fail(where + " target", a.target, b.target);
    if (a.schema != b.schema)
      return fail(where + " schema", a.schema ? a.schema->name : "none",
                  b.schema ? b.schema->name : "none");
    if (a.name != b.name) return fail(where + " name", a.name, b.name);
    if (a.outputs_as_list != b.outputs_as_list)
      return fail(where + " output form", a.outputs_as_list ? "list" : "tuple",
                  b.outputs_as_list ? "list" : "tuple");
    if (a.outputs.size() != b.outputs.size())
      return fail(where + " output count", std::to_string(a.outputs.size()),
                  std::to_string(b.outputs.size()));
    for (size_t i = 0; i < a.outputs.size(); ++i)
      if (!same_value(where + " output " + std::to_string(i), a.outputs[i], b.outputs[i]))
        return false;
    if (a.args.size() != b.args.size())
      return fail(where + " argument count", std::to_string(a.args.size()),
                  std::to_string(b.args.size()));
    for (size_t i = 0; i < a.args.size(); ++i)
      if (!same_arg(where + " argument " + std::to_string(i), a.args[i], b.args[i])) return false;
    return true;
  }

 private:
  static bool same_float(double x, double y) {
    if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
    return std::bit_cast<uint64_t>(x) == std::bit_cast<uint64_t>(y);
  }
  std::string diff_;
};

bool compare(const Graph& a, const Graph& b, Differ& d) {
  const auto &ia = a.input_specs(), &ib = b.input_specs();
  if (ia.size() != ib.size())
    return d.fail("input count", std::to_string(ia.size()), std::to_string(ib.size()));
  for (size_t i = 0; i < ia.size(); ++i) {
    std::string w = "input " + std::to_string(i);
    const InputSpec &x = ia[i], &y = ib[i];
    if (x.kind != y.kind)
      return d.fail(w + " kind", input_kind_name(x.kind), input_kind_name(y.kind));
    if (x.target != y.target) return d.fail(w + " target", x.target, y.target);
    if (x.persistent != y.persistent)
      return d.fail(w + " persistent", x.persistent ? "true" : "false",
                    y.persistent ? "true" : "false");
    if (x.constant_int != y.constant_int)
      return d.fail(w + " constant", x.constant_int ? std::to_string(*x.constant_int) : "none",
                    y.constant_int ? std::to_string(*y.constant_int) : "none");
    if (!d.same_value(w, x.value, y.value)) return false;
  }
  if (a.inputs().size() != b.inputs().size())
    return d.fail("graph input count", std::to_string(a.inputs().size()),
                  std::to_string(b.inputs().size()));
  for (size_t i = 0; i < a.inputs().size(); ++i)
    if (!d.same_ref("graph input " + std::to_string(i), a.inputs()[i], b.inputs()[i])) return false;
  if (a.symbol_ranges != b.symbol_ranges) {
    std::set<std::string> names;
    for (const auto& m : {&a.symbol_ranges, &b.symbol_ranges})
      for (const auto& kv : *m) names.insert(kv.first);
    for (const auto& n : names) {
      auto x = a.symbol_ranges.find(n), y = b.symbol_ranges.find(n);
      std::string xs = x == a.symbol_ranges.end() ? "absent" : x->second.str();
      std::string ys = y == b.symbol_ranges.end() ? "absent" : y->second.str();
      if (xs != ys) return d.fail("symbol " + n, xs, ys);
    }
  }
  if (a.attributes != b.attributes) {
    std::set<std::string> keys;
    for (const auto& m : {&a.attributes, &b.attributes})
      for (const auto& kv : *m) keys.insert(kv.first);
    for (const auto& k : keys) {
      auto x = a.attributes.find(k), y = b.attributes.find(k);
      std::string xs = x == a.attributes.end() ? "absent" : quote_string(x->second);
      std::string ys = y == b.attributes.end() ? "absent" : quote_string(y->second);
      if (xs != ys) return d.fail("attribute " + k, xs, ys);
    }
  }
  auto na = a.nodes(), nb = b.nodes();
  for (size_t i = 0; i < std::min(na.size(), nb.size()); ++i)
    if (!d.same_node("node " + std::to_string(i) + " (" + na[i]->name + ")", *na[i], *nb[i]))
      return false;
  if (na.size() != nb.size())
    return d.fail("node count", std::to_string(na.size()), std::to_string(nb.size()));
  const auto &oa = a.output_specs(), &ob = b.output_specs();
  if (oa.size() != ob.size())
    return d.fail("output count", std::to_string(oa.size()), std::to_string(ob.size()));
  for (size_t i = 0; i < oa.size(); ++i) {
    std::string w = "output " + std::to_string(i);
    if (oa[i].kind != ob[i].kind)
      return d.fail(w + " kind", output_kind_name(oa[i].kind), output_kind_name(ob[i].kind));
    if (oa[i].target != ob[i].target) return d.fail(w + " target", oa[i].target, ob[i].target);
    if (!d.same_ref(w, oa[i].value, ob[i].value)) return false;
  }
  return true;
}

}  // namespace

bool graphs_equal(const Graph& a, const Graph& b, std::string* diff) {
  Differ d;
  bool eq = compare(a, b, d);
  if (!eq && diff) *diff = d.diff();
  return eq;
}

}  // namespace anvil::ir
