// models/model.json (torch.export schema 8.x, PyTorch 2.11 to 2.15) -> ir::Graph.
#include <algorithm>
#include <optional>
#include <set>

#include "frontend/pt2_internal.h"
#include "ir/inplace.h"
#include "ir/op_schema.h"

namespace anvil::frontend::detail {
namespace {

// The export schema anvil reads: major 8, as PyTorch 2.11 (8.17) to 2.15 (8.20) write it
// (tests/fixtures and tests/fixtures_215 hold exports of both).
constexpr int64_t kSchemaMajor = 8;
constexpr int64_t kSchemaOldestMinor = 17;
constexpr int64_t kSchemaNewestMinor = 20;
constexpr const char* kSchemaOldestTorch = "2.11";
constexpr const char* kSchemaNewestTorch = "2.15";
constexpr int64_t kRangeUnbounded = int64_t{1} << 62;  // larger maxima mean "no upper bound"

const char* value_kind_name(ir::ValueKind k) {
  switch (k) {
    case ir::ValueKind::kTensor:
      return "a tensor";
    case ir::ValueKind::kSymInt:
      return "a SymInt";
    case ir::ValueKind::kSymFloat:
      return "a SymFloat";
    case ir::ValueKind::kSymBool:
      return "a SymBool";
  }
  return "?";
}

/// Positional argument names of the higher-order ops, whose arguments the export leaves unnamed.
const std::vector<std::string>* higher_order_arg_names(const std::string& target) {
  static const std::vector<std::string> kCond = {"pred", "true_fn", "false_fn", "operands"};
  static const std::vector<std::string> kWhile = {"cond_fn", "body_fn", "carried_inputs",
                                                  "additional_inputs"};
  static const std::vector<std::string> kAutocast = {"device_type", "dtype", "enabled",
                                                     "cache_enabled", "fn"};
  static const std::vector<std::string> kSetGrad = {"enabled", "fn"};
  if (target == "higher_order.wrap_with_autocast") return &kAutocast;
  if (target == "higher_order.wrap_with_set_grad_enabled") return &kSetGrad;
  if (target == "higher_order.cond") return &kCond;
  if (target == "higher_order.while_loop") return &kWhile;
  return inlined_hop_arg_names(target);
}

/// Turns the JSON of one exported program into a Graph, one section at a time.
class GraphBuilder {
 public:
  GraphBuilder(const JField& root, ir::Graph& g) : root_(root), g_(g) {}

  void build() {
    check_schema_version();
    JField gm = root_.at("graph_module");
    JField graph = gm.at("graph");
    JField sig = gm.at("signature");
    JField nodes = graph.at("nodes");
    check_targets(nodes);
    tensor_values_.emplace(graph.at("tensor_values"));
    tensor_values_->expect_object();
    for (const char* key : {"sym_int_values", "sym_float_values", "sym_bool_values"})
      if (auto f = graph.get(key)) f->expect_object();
    sym_int_values_ = graph.get("sym_int_values");
    build_inputs(graph.at("inputs"), sig.at("input_specs"));
    size_t i = 0;
    for (const JField& n : nodes.items()) build_node(n, i++);
    build_outputs(graph.at("outputs"), sig.at("output_specs"));
    build_ranges();
    if (auto v = root_.get("torch_version")) g_.attributes["torch_version"] = v->as_string();
    share_ranges(g_);
  }

  /// Builds a higher-order op's subgraph from its `graph` object: every input is a user input,
  /// every output a user output (an as_graph argument carries no signature).
  void build_sub(const JField& graph) {
    JField nodes = graph.at("nodes");
    check_targets(nodes);
    tensor_values_.emplace(graph.at("tensor_values"));
    tensor_values_->expect_object();
    sym_int_values_ = graph.get("sym_int_values");
    size_t i = 0;
    for (const JField& in : graph.at("inputs").items()) add_input(in, ir::InputSpec{}, "", i++);
    i = 0;
    for (const JField& n : nodes.items()) build_node(n, i++);
    for (const JField& out : graph.at("outputs").items()) {
      ir::OutputSpec spec;
      spec.value = output_value(out);
      g_.output_specs().push_back(spec);
    }
  }

 private:
  /// Subgraphs see the symbol ranges of the whole program.
  static void share_ranges(ir::Graph& g) {
    for (ir::Node* n : g.nodes())
      for (auto& sub : n->subgraphs) {
        sub->symbol_ranges = g.symbol_ranges;
        share_ranges(*sub);
      }
  }

  /// True while the arguments of an auto_functionalized node are read: only its op may be an
  /// operator argument.
  bool operator_arg_ok_ = false;

  // ---- header ----
  /// The schema's major version must be the one anvil reads (kSchemaMajor): a newer major is
  /// an incompatible format, named with both versions and the PyTorch that wrote it. A newer
  /// minor only adds optional fields (torch's serde rule), so it is read.
  void check_schema_version() {
    JField v = root_.at("schema_version");
    int64_t major = v.at("major").as_int();
    int64_t minor = v.at("minor").as_int();
    if (major != kSchemaMajor) {
      std::string writer;
      if (auto t = root_.get("torch_version"); t && t->json().is_string())
        writer = str(" (written by PyTorch ", t->as_string(), ")");
      v.fail(major > kSchemaMajor ? "schema version too new for this anvil"
                                  : "schema version too old for this anvil",
             str("schema ", kSchemaMajor, ".x, which anvil reads (PyTorch ",
                 kSchemaOldestTorch, " to ", kSchemaNewestTorch, " write ", kSchemaMajor, ".",
                 kSchemaOldestMinor, " to ", kSchemaMajor, ".", kSchemaNewestMinor, ")"),
             str(major, ".", minor, writer));
    }
    g_.attributes["schema_version"] = str(major, ".", minor);
  }

  /// Collects every target the op table lacks and raises one Error listing them with counts.
  void check_targets(const JField& nodes) {
    std::vector<std::pair<std::string, int>> unknown;
    size_t total = 0;
    for (const JField& n : nodes.items()) {
      n.expect_object();
      const std::string& target = n.at("target").as_string();
      if (ir::find_op(target) || ir::inplace_functional(target) || ir::out_functional(target) ||
          native_collective(ir::canonical_target(target)))
        continue;
      std::string t = ir::canonical_target(target);
      auto it =
          std::find_if(unknown.begin(), unknown.end(), [&](const auto& p) { return p.first == t; });
      if (it == unknown.end())
        unknown.emplace_back(t, 1);
      else
        ++it->second;
      ++total;
    }
    if (unknown.empty()) return;
    std::string list;
    for (const auto& [t, count] : unknown)
      list += (list.empty() ? "" : ", ") + (t.empty() ? std::string("<empty target>") : t) + " ×" +
              std::to_string(count);
    throw Error("unsupported ops: " + list, nodes.where(), "targets in anvil's op table",
                str(total, total == 1 ? " node" : " nodes", " with unsupported targets"));
  }

  // ---- values ----
  ir::TensorType tensor_type(const std::string& name, const JField& at) {
    const Json& tv = tensor_values_->json();
    auto it = tv.find(name);
    if (it == tv.end())
      at.fail("value has no graph.tensor_values entry", "an entry for '" + name + "'", "none");
    JField meta(*it, at.source(), "graph_module.graph.tensor_values." + name);
    meta.expect_object();
    ir::TensorType t;
    t.dtype = decode_dtype(meta.at("dtype"));
    for (const JField& s : meta.at("sizes").items()) {
      SymInt v = decode_sym_int(s);
      if (v.is_constant() && v.constant() < 0)
        s.fail("negative size", "a size >= 0", std::to_string(v.constant()));
      t.sizes.push_back(v);
    }
    if (auto strides = meta.get("strides")) {
      for (const JField& s : strides->items()) t.strides.push_back(decode_sym_int(s));
      if (!t.strides.empty() && t.strides.size() != t.sizes.size())
        strides->fail("strides and sizes differ in length", str(t.sizes.size(), " strides"),
                      str(t.strides.size()));
    }
    if (auto layout = meta.get("layout")) {
      int64_t l = layout->as_int();
      if (l != 7 && l != 0) layout->fail("unsupported layout", "strided (7)", std::to_string(l));
    }
    t.device = decode_device(meta.at("device"));
    return t;
  }

  /// as_strided without a storage_offset takes self's (PyTorch's default): written explicitly
  /// from the export's record of self, so the compiler need not trace views to find it.
  void explicit_storage_offset(ir::Node& node) {
    auto off = std::find_if(node.args.begin(), node.args.end(),
                            [](const ir::Arg& a) { return a.name == "storage_offset"; });
    const ir::Arg* self = node.arg("self");
    if ((off != node.args.end() && off->kind != ir::Arg::Kind::kNone) || !self || !self->value)
      return;
    const Json& tv = tensor_values_->json();
    auto it = tv.find(self->value->name);
    if (it == tv.end()) return;
    JField meta(*it, tensor_values_->source(),
                "graph_module.graph.tensor_values." + self->value->name);
    auto so = meta.get("storage_offset");
    if (!so) return;
    const SymInt v = decode_sym_int(*so);
    if (!v.is_constant()) return;  // symbolic: the compiler derives it from the views
    ir::Arg a;
    a.name = "storage_offset";
    a.kind = ir::Arg::Kind::kInt;
    a.i = v.constant();
    if (off != node.args.end()) *off = a;
    else node.args.push_back(a);
  }

  void check_new_name(const std::string& name, const JField& at) {
    if (name.empty()) at.fail("empty value name", "a name", "\"\"");
    if (g_.find_value(name)) at.fail("duplicate value name", "a name defined once", name);
  }

  /// The symbolic value recorded for SymInt `name` (an opaque symbol when none is recorded).
  SymInt sym_value(const std::string& name) {
    if (sym_int_values_) {
      if (auto f = sym_int_values_->get(name)) return decode_sym_int(*f);
    }
    return SymInt::symbol(name);
  }

  /// Defines a node output of `kind` called `name`.
  ir::Value* define(const std::string& name, ir::ValueKind kind, const JField& at) {
    check_new_name(name, at);
    ir::TensorType type;
    SymInt sym;
    if (kind == ir::ValueKind::kTensor) type = tensor_type(name, at);
    if (kind == ir::ValueKind::kSymInt) sym = sym_value(name);
    ir::Value* v = g_.new_value(name, kind);
    v->type = std::move(type);
    v->sym = sym;
    return v;
  }

  ir::Value* ref(const std::string& name, ir::ValueKind want, const JField& at) {
    ir::Value* v = g_.find_value(name);
    if (!v)
      at.fail("reference to an undefined value", "a value defined earlier in the graph",
              "'" + name + "'");
    if (v->kind != want)
      at.fail("reference to a value of the wrong kind", value_kind_name(want),
              str(value_kind_name(v->kind), " '", name, "'"));
    return v;
  }

  /// {"name": "x"} -> the tensor value x.
  ir::Value* tensor_ref(const JField& f) {
    JField name = f.at("name");
    return ref(name.as_string(), ir::ValueKind::kTensor, name);
  }

  /// A SymIntArgument ({"as_name": ...} or {"as_int": ...}).
  ir::IntRef sym_int_ref(const JField& f) {
    auto [kind, v] = f.union_member();
    if (kind == "as_int") return ir::IntRef{v.as_int(), nullptr};
    if (kind == "as_name") return ir::IntRef{0, ref(v.as_string(), ir::ValueKind::kSymInt, v)};
    f.fail("unknown SymInt argument kind", "as_name or as_int", kind);
  }

  // ---- arguments ----
  ir::Arg parse_arg(const JField& named) {
    named.expect_object();
    ir::Arg a;
    a.name = named.at("name").as_string();
    if (auto k = named.get("kind")) {
      int64_t kind = k->as_int();
      if (kind < 0 || kind > 2) k->fail("unknown argument kind", "0, 1 or 2", std::to_string(kind));
      a.kwarg = kind == 2;
    }
    auto [kind, v] = named.at("arg").union_member();
    using K = ir::Arg::Kind;
    if (kind == "as_none") {
      a.kind = K::kNone;
    } else if (kind == "as_tensor") {
      a.kind = K::kTensor;
      a.value = tensor_ref(v);
    } else if (kind == "as_tensors") {
      a.kind = K::kTensors;
      for (const JField& t : v.items()) a.values.push_back(tensor_ref(t));
    } else if (kind == "as_optional_tensors") {
      a.kind = K::kOptTensors;
      for (const JField& t : v.items()) a.values.push_back(optional_tensor(t));
    } else if (kind == "as_optional_tensor") {
      a.value = optional_tensor(v);
      a.kind = a.value ? K::kTensor : K::kNone;
    } else if (kind == "as_int") {
      a.kind = K::kInt;
      a.i = v.as_int();
    } else if (kind == "as_float") {
      a.kind = K::kFloat;
      a.f = v.as_double();
    } else if (kind == "as_bool") {
      a.kind = K::kBool;
      a.b = v.as_bool();
    } else if (kind == "as_string") {
      a.kind = K::kString;
      a.s = v.as_string();
    } else if (kind == "as_ints") {
      a.kind = K::kInts;
      for (const JField& x : v.items()) a.ints.push_back(x.as_int());
    } else if (kind == "as_floats") {
      a.kind = K::kFloats;
      for (const JField& x : v.items()) a.floats.push_back(x.as_double());
    } else if (kind == "as_bools") {
      a.kind = K::kBools;
      for (const JField& x : v.items()) a.bools.push_back(x.as_bool());
    } else if (kind == "as_sym_int") {
      a.kind = K::kSymInt;
      a.symints.push_back(sym_int_ref(v));
    } else if (kind == "as_sym_ints") {
      a.kind = K::kSymInts;
      for (const JField& x : v.items()) a.symints.push_back(sym_int_ref(x));
    } else if (kind == "as_sym_float" || kind == "as_sym_bool") {
      // A constant becomes a float / bool; a reference is carried like a SymInt reference to a
      // value whose kind says what it holds.
      auto [k2, x] = v.union_member();
      bool is_float = kind == "as_sym_float";
      if (k2 == "as_name") {
        a.kind = K::kSymInt;
        a.symints.push_back(ir::IntRef{
            0,
            ref(x.as_string(), is_float ? ir::ValueKind::kSymFloat : ir::ValueKind::kSymBool, x)});
      } else if (is_float && k2 == "as_float") {
        a.kind = K::kFloat;
        a.f = x.as_double();
      } else if (!is_float && k2 == "as_bool") {
        a.kind = K::kBool;
        a.b = x.as_bool();
      } else {
        v.fail("unknown argument kind", is_float ? "as_name or as_float" : "as_name or as_bool",
               k2);
      }
    } else if (kind == "as_operator" && operator_arg_ok_) {  // auto_functionalized's op
      a.kind = K::kString;
      a.s = v.as_string();
    } else if (kind == "as_scalar_type") {
      a.kind = K::kScalarType;
      a.dtype = decode_dtype(v);
    } else if (kind == "as_device") {
      a.kind = K::kDevice;
      a.device = decode_device(v);
    } else if (kind == "as_layout") {
      a.kind = K::kLayout;
      a.i = v.as_int();
    } else if (kind == "as_memory_format") {
      a.kind = K::kMemoryFormat;
      a.i = v.as_int();
    } else if (kind == "as_graph") {
      a.kind = K::kGraph;
      a.s = v.at("name").as_string();
      auto sub = std::make_shared<ir::Graph>();
      GraphBuilder(root_, *sub).build_sub(v.at("graph"));
      a.i = static_cast<int64_t>(pending_subgraphs_.size());
      pending_subgraphs_.push_back(std::move(sub));
    } else {
      named.at("arg").fail("unsupported argument kind",
                           "tensors, ints, floats, bools, strings, dtypes, devices or SymInts",
                           kind);
    }
    return a;
  }

  ir::Value* optional_tensor(const JField& f) {
    auto [kind, v] = f.union_member();
    if (kind == "as_none") return nullptr;
    if (kind == "as_tensor") return tensor_ref(v);
    f.fail("unknown optional tensor kind", "as_tensor or as_none", kind);
  }

  // ---- nodes ----
  void build_node(const JField& raw, size_t index) {
    std::string label = raw.path();
    if (auto nm = raw.get("name")) label += " (" + nm->as_string() + ")";
    JField n = raw.relabel(label);
    auto node = std::make_unique<ir::Node>();
    const std::string& target = n.at("target").as_string();
    const std::string canonical = ir::canonical_target(target);
    const char* native = native_collective(canonical);  // legacy c10d_functional namespace
    node->schema = ir::find_op(native ? std::string(native) : target);
    const ir::OpSchema* functional = node->schema ? nullptr : ir::inplace_functional(target);
    const ir::OpSchema* out_form =
        node->schema || functional ? nullptr : ir::out_functional(target);
    ANVIL_INTERNAL_ASSERT(node->schema || functional || out_form,
                          "target vanished from the op table: " + target);
    node->target = native ? std::string(native) : canonical;
    pending_subgraphs_.clear();
    const std::vector<std::string>* positional = higher_order_arg_names(node->target);
    operator_arg_ok_ = node->target.rfind("higher_order.auto_functionalized", 0) == 0;
    size_t pos = 0;
    for (const JField& in : n.at("inputs").items()) {
      ir::Arg a = parse_arg(in);
      // torch.export writes higher-order ops' arguments without names: name them by position
      if (a.name.empty() && positional)
        a.name = pos < positional->size() ? (*positional)[pos]
                                          : "arg" + std::to_string(pos - positional->size());
      ++pos;
      if (node->arg(a.name)) in.fail("duplicate argument name", "unique names", a.name);
      node->args.push_back(std::move(a));
    }
    if (native) rewrite_legacy_collective(*node, canonical, n);
    if (node->target == "aten.as_strided.default") explicit_storage_offset(*node);
    node->subgraphs = std::move(pending_subgraphs_);
    pending_subgraphs_.clear();
    if (node->target == "higher_order.wrap_with_autocast" ||
        node->target == "higher_order.wrap_with_set_grad_enabled" ||
        inlined_hop_arg_names(node->target))
      return inline_region_node(n, *node);
    JField outs = n.at("outputs");
    std::vector<JField> out_items = outs.items();
    for (const JField& o : out_items) {
      auto [kind, v] = o.union_member();
      if (kind == "as_tensor") {
        node->outputs.push_back(define(v.at("name").as_string(), ir::ValueKind::kTensor, v));
      } else if (kind == "as_tensors" || kind == "as_optional_tensors") {
        node->outputs_as_list = out_items.size() == 1;
        for (const JField& t : v.items()) {
          if (kind == "as_tensors") {
            node->outputs.push_back(define(t.at("name").as_string(), ir::ValueKind::kTensor, t));
            continue;
          }
          auto [k2, x] = t.union_member();
          if (k2 == "as_none") {
            node->outputs.push_back(nullptr);
          } else if (k2 == "as_tensor") {
            node->outputs.push_back(define(x.at("name").as_string(), ir::ValueKind::kTensor, x));
          } else {
            t.fail("unknown optional tensor kind", "as_tensor or as_none", k2);
          }
        }
      } else if (kind == "as_sym_int" || kind == "as_sym_float" || kind == "as_sym_bool") {
        auto [k2, x] = v.union_member();
        ir::ValueKind vk = kind == "as_sym_int"     ? ir::ValueKind::kSymInt
                           : kind == "as_sym_float" ? ir::ValueKind::kSymFloat
                                                    : ir::ValueKind::kSymBool;
        if (k2 == "as_name")
          node->outputs.push_back(define(x.as_string(), vk, x));
        else
          node->outputs.push_back(nullptr);  // a constant result
      } else if (kind == "as_none") {
        node->outputs.push_back(nullptr);
      } else {
        o.fail("unsupported output kind", "as_tensor, as_tensors or a SymInt", kind);
      }
    }
    std::string name;
    if (auto nm = n.get("name")) name = nm->as_string();
    if (name.empty()) {
      auto first = std::find_if(node->outputs.begin(), node->outputs.end(),
                                [](ir::Value* v) { return v != nullptr; });
      name = first != node->outputs.end() ? (*first)->name : "node_" + std::to_string(index);
    }
    if (!node_names_.insert(name).second) n.fail("duplicate node name", "unique names", name);
    node->name = name;
    if (auto md = n.get("metadata")) {
      for (const auto& [key, val] : md->members()) node->metadata[key] = val.as_string();
    }
    if (out_form) {  // aten.X.out: the functional op plus a write into out (ir/inplace.h)
      const ir::Node* write = nullptr;
      try {
        write = ir::append_out_form(g_, std::move(node), *out_form);
      } catch (const Error& e) {
        n.fail("out= op cannot be imported as its functional form",
               std::string(out_form->name) + " plus a write into out", e.what());
      }
      for (const ir::Value* in : write->input_values())  // the functional node's new name
        if (in && in->producer) node_names_.insert(in->producer->name);
      return;
    }
    if (functional) {  // aten.X_.O: the functional op plus a write (ir/inplace.h)
      const ir::Node* copy = nullptr;
      try {
        copy = ir::append_inplace(g_, std::move(node), *functional);
      } catch (const Error& e) {  // the functional op's shape rule refused the arguments
        n.fail("in-place op cannot be imported as its functional form",
               std::string(functional->name) + " plus copy_", e.what());
      }
      node_names_.insert(copy->args[1].value->name);
      return;
    }
    g_.append(std::move(node));
  }

  /// An autocast or set_grad_enabled region, a torch.map, invoke_subgraph or auto_functionalized
  /// node: its nodes go into the graph (pt2_autocast.cpp, pt2_hops.cpp); each output is an alias
  /// of the inlined result.
  void inline_region_node(const JField& n, ir::Node& hop) {
    const std::string what = hop.target.substr(hop.target.find('.') + 1);  // wrap_with_autocast
    hop.name = what == "wrap_with_autocast"           ? "autocast"
               : what == "wrap_with_set_grad_enabled" ? "set_grad"
                                                      : what;
    if (auto nm = n.get("name"); nm && !nm->as_string().empty()) hop.name = nm->as_string();
    std::vector<std::optional<JField>> names;
    for (const JField& o : n.at("outputs").items()) {
      auto [kind, v] = o.union_member();
      if (kind == "as_tensor") names.push_back(v);
      else if (kind == "as_tensors")
        for (const JField& t : v.items()) names.push_back(t);
      else if (kind == "as_none")
        names.push_back(std::nullopt);
      else
        o.fail("unsupported output kind of " + what, "as_tensor or as_tensors", kind);
    }
    std::vector<ir::Value*> results;
    if (!inlined_hop_arg_names(hop.target)) {
      results = inline_region(g_, hop, node_names_);
    } else {
      try {
        results = inline_hop(g_, hop, names.size(), node_names_);
      } catch (const Error& e) {
        n.fail("cannot import " + what, "a " + what + " anvil can inline", e.what());
      }
    }
    if (names.size() != results.size())
      n.fail(what + " outputs do not match its subgraph", str(results.size()),
             str(names.size()));
    for (size_t k = 0; k < names.size(); ++k) {
      if (!names[k]) continue;  // a None output (a mutating op's result)
      if (!results[k] || !results[k]->is_tensor())
        n.fail(what + " returns a non-tensor", "tensor outputs", "another kind");
      auto alias = std::make_unique<ir::Node>();
      alias->schema = ir::find_op("aten.alias.default");
      alias->target = "aten.alias.default";
      ir::Arg self;
      self.name = "self";
      self.kind = ir::Arg::Kind::kTensor;
      self.value = results[k];
      alias->args = {self};
      ir::Value* out = define(names[k]->at("name").as_string(), ir::ValueKind::kTensor, *names[k]);
      alias->outputs = {out};
      alias->name = out->name;
      if (!node_names_.insert(alias->name).second)
        n.fail("duplicate node name", "unique names", alias->name);
      g_.append(std::move(alias));
    }
  }

  // ---- signature ----
  void build_inputs(const JField& inputs, const JField& specs) {
    std::vector<JField> ins = inputs.items(), sps = specs.items();
    if (ins.size() != sps.size())
      specs.fail("signature does not match the graph inputs",
                 str(ins.size(), " input specs (one per graph input)"), std::to_string(sps.size()));
    for (size_t i = 0; i < ins.size(); ++i) {
      auto [skind, s] = sps[i].union_member();
      ir::InputSpec spec;
      std::string spec_name;  // the placeholder the spec names
      if (skind == "user_input") {
        spec.kind = ir::InputKind::kUserInput;
        auto [ak, av] = s.at("arg").union_member();
        if (ak == "as_tensor") spec_name = av.at("name").as_string();
        if (ak == "as_sym_int") {
          auto [k2, x] = av.union_member();
          if (k2 == "as_name") spec_name = x.as_string();
        }
      } else if (skind == "parameter" || skind == "buffer" || skind == "tensor_constant") {
        spec.kind = skind == "parameter" ? ir::InputKind::kParameter
                    : skind == "buffer"  ? ir::InputKind::kBuffer
                                         : ir::InputKind::kConstant;
        spec_name = s.at("arg").at("name").as_string();
        spec.target = s.at(skind == "parameter" ? "parameter_name"
                           : skind == "buffer"  ? "buffer_name"
                                                : "tensor_constant_name")
                          .as_string();
        if (spec.target.empty()) s.fail("empty target name", "a state_dict name", "\"\"");
        if (skind == "buffer") spec.persistent = s.at("persistent").as_bool();
      } else {
        sps[i].fail("unsupported input kind", "user_input, parameter, buffer or tensor_constant",
                    skind);
      }
      add_input(ins[i], spec, spec_name, i);
    }
  }

  void add_input(const JField& in, ir::InputSpec spec, const std::string& spec_name, size_t i) {
    auto [kind, v] = in.union_member();
    std::string name;
    ir::ValueKind vk = ir::ValueKind::kTensor;
    if (kind == "as_tensor") {
      name = v.at("name").as_string();
    } else if (kind == "as_sym_int") {
      auto [k2, x] = v.union_member();
      if (k2 != "as_name") x.fail("unsupported SymInt input", "as_name", k2);
      name = x.as_string();
      vk = ir::ValueKind::kSymInt;
    } else if (kind == "as_int" || kind == "as_bool" || kind == "as_none") {
      if (spec.kind != ir::InputKind::kUserInput)
        in.fail("constant graph input for a non-user input", "a tensor", kind);
      name = "const_input_" + std::to_string(i);
      vk = ir::ValueKind::kSymInt;
      if (kind == "as_int") spec.constant_int = v.as_int();
      if (kind == "as_bool") spec.constant_int = v.as_bool() ? 1 : 0;
    } else {
      in.fail("unsupported graph input kind", "as_tensor or as_sym_int", kind);
    }
    if (!spec_name.empty() && spec_name != name)
      in.fail("graph input does not match its input spec", "'" + spec_name + "'", "'" + name + "'");
    if (spec.kind != ir::InputKind::kUserInput && vk != ir::ValueKind::kTensor)
      in.fail("parameter, buffer or constant input is not a tensor", "as_tensor", kind);
    check_new_name(name, in);
    ir::TensorType type;
    if (vk == ir::ValueKind::kTensor) type = tensor_type(name, in);
    ir::Value* value = g_.add_input(name, std::move(type), spec);
    if (vk == ir::ValueKind::kSymInt) {
      value->kind = vk;
      value->sym = spec.constant_int ? SymInt(*spec.constant_int) : sym_value(name);
    }
  }

  /// The value a graph output argument names (null for constant outputs).
  ir::Value* output_value(const JField& out) {
    auto [kind, v] = out.union_member();
    if (kind == "as_tensor") return tensor_ref(v);
    if (kind == "as_sym_int") {
      ir::IntRef r = sym_int_ref(v);
      return r.value;
    }
    if (kind == "as_none" || kind == "as_int" || kind == "as_float" || kind == "as_bool" ||
        kind == "as_string")
      return nullptr;
    out.fail("unsupported graph output kind", "as_tensor, as_sym_int or a constant", kind);
  }

  void build_outputs(const JField& outputs, const JField& specs) {
    std::vector<JField> outs = outputs.items(), sps = specs.items();
    if (outs.size() != sps.size())
      specs.fail("signature does not match the graph outputs",
                 str(outs.size(), " output specs (one per graph output)"),
                 std::to_string(sps.size()));
    static const std::pair<const char*, std::pair<ir::OutputKind, const char*>> kKinds[] = {
        {"user_output", {ir::OutputKind::kUserOutput, nullptr}},
        {"loss_output", {ir::OutputKind::kLossOutput, nullptr}},
        {"buffer_mutation", {ir::OutputKind::kBufferMutation, "buffer_name"}},
        {"parameter_mutation", {ir::OutputKind::kParameterMutation, "parameter_name"}},
        {"gradient_to_parameter", {ir::OutputKind::kGradient, "parameter_name"}},
        {"gradient_to_user_input", {ir::OutputKind::kGradient, "user_input_name"}},
        {"user_input_mutation", {ir::OutputKind::kUserInputMutation, "user_input_name"}},
        {"token", {ir::OutputKind::kToken, nullptr}}};
    for (size_t i = 0; i < outs.size(); ++i) {
      auto [skind, s] = sps[i].union_member();
      // (skind is compared through a reference: clang 14, the fuzz build's compiler, cannot
      // capture a structured binding.)
      const std::string& kind_name = skind;
      auto it = std::find_if(std::begin(kKinds), std::end(kKinds),
                             [&](const auto& k) { return kind_name == k.first; });
      if (it == std::end(kKinds))
        sps[i].fail("unknown output kind", "user_output, buffer_mutation, ...", skind);
      ir::OutputSpec spec;
      spec.kind = it->second.first;
      if (it->second.second) spec.target = s.at(it->second.second).as_string();
      spec.value = output_value(outs[i]);
      // The spec's own argument must name the same value.
      JField arg = s.at("arg");
      std::string spec_name;
      if (skind == "user_output") {
        auto [ak, av] = arg.union_member();
        if (ak == "as_tensor") spec_name = av.at("name").as_string();
      } else {
        spec_name = arg.at("name").as_string();
      }
      if (!spec_name.empty() && (!spec.value || spec.value->name != spec_name))
        outs[i].fail("graph output does not match its output spec", "'" + spec_name + "'",
                     spec.value ? "'" + spec.value->name + "'" : "a constant");
      g_.output_specs().push_back(spec);
    }
  }

  void build_ranges() {
    auto rc = root_.get("range_constraints");
    if (!rc) return;
    for (const auto& [sym, r] : rc->members()) {
      SymRange range;
      if (auto lo = r.get("min_val")) range.min = lo->as_int();
      if (auto hi = r.get("max_val")) {
        const Json& j = hi->json();
        bool unbounded = (j.is_number_unsigned() && j.get<uint64_t>() >= kRangeUnbounded) ||
                         (j.is_number_float() && j.get<double>() >= 4.0e18) ||
                         (j.is_string() && hi->as_double() > 0);  // "Infinity"
        if (!unbounded) {
          int64_t v = hi->as_int();
          unbounded = v >= kRangeUnbounded;
          range.max = unbounded ? SymRange::kSymMax : v;
        }
      }
      if (range.min > range.max) r.fail("empty symbol range", "min_val <= max_val", range.str());
      if (sym.empty()) r.fail("empty symbol name", "a symbol such as s77", "\"\"");
      g_.symbol_ranges[sym] = range;
    }
  }

  const JField& root_;
  ir::Graph& g_;
  std::optional<JField> tensor_values_;
  std::optional<JField> sym_int_values_;
  std::set<std::string> node_names_;
  std::vector<std::shared_ptr<ir::Graph>> pending_subgraphs_;  // of the node being built
};

}  // namespace

std::unique_ptr<ir::Graph> build_graph(const Json& model, const JsonSource& src) {
  auto g = std::make_unique<ir::Graph>();
  JField root(model, src, "");
  root.expect_object();
  GraphBuilder(root, *g).build();
  g->attributes["archive"] = src.archive;
  return g;
}

}  // namespace anvil::frontend::detail
