#include "ir/op_schema.h"

#include <unordered_map>

#include "core/error.h"

namespace anvil::ir {

std::string canonical_target(const std::string& target) {
  const std::string prefix = "torch.ops.";
  return target.rfind(prefix, 0) == 0 ? target.substr(prefix.size()) : target;
}

const char* lowering_name(Lowering lowering) {
  static const char* kNames[] = {"Pointwise",     "Reduction", "View", "Creation",   "Gemm",
                                 "InPlace",       "Extern",    "DataDependent",   "Decompose",
                                 "Sym",           "Meta",      "Collective",      "ControlFlow",
                                 "None"};
  return kNames[static_cast<int>(lowering)];
}

namespace {
// Set once by the ops layer before main (a constant-initialised pointer: no ordering issue).
const std::vector<OpSchema>* g_op_table = nullptr;
}  // namespace

void register_op_table(const std::vector<OpSchema>* table) { g_op_table = table; }

const std::vector<OpSchema>& all_ops() {
  if (!g_op_table)
    throw Error("no op table is registered", "anvil::ir::all_ops",
                "the ops layer (libanvil_ops, linked whole) in the program", "none");
  return *g_op_table;
}

const OpSchema* find_op(const std::string& target) {
  static const std::unordered_map<std::string, const OpSchema*> kByName = [] {
    std::unordered_map<std::string, const OpSchema*> m;
    for (const auto& op : all_ops()) m.emplace(op.name, &op);
    return m;
  }();
  auto it = kByName.find(canonical_target(target));
  return it == kByName.end() ? nullptr : it->second;
}

namespace {
const char* kind_name(const RValue& v) {
  static const char* kNames[] = {"None",  "Tensor", "Tensor[]", "Tensor?[]", "int",
                                 "float", "bool",   "str",      "int[]",     "float[]",
                                 "bool[]", "ScalarType", "Device"};
  return kNames[v.index()];
}
}  // namespace

KernelContext::KernelContext(const Node& node, std::vector<RValue> args)
    : node_(node), args_(std::move(args)) {
  ANVIL_INTERNAL_ASSERT(args_.size() == node_.args.size(), "KernelContext arg count mismatch");
}

const RValue& KernelContext::raw(const std::string& name) const {
  static const RValue kNone;
  for (size_t i = 0; i < args_.size(); ++i)
    if (node_.args[i].name == name) return args_[i];
  return kNone;
}

bool KernelContext::has(const std::string& name) const {
  return !std::holds_alternative<std::monostate>(raw(name));
}

std::string KernelContext::where() const { return "node " + node_.name + " (" + node_.target + ")"; }

void KernelContext::fail(const std::string& what, const std::string& expected,
                         const std::string& actual) const {
  throw Error(what, where(), expected, actual);
}

const Tensor& KernelContext::tensor(const std::string& name) const {
  const RValue& v = raw(name);
  if (auto* t = std::get_if<Tensor>(&v)) return *t;
  fail("argument '" + name + "' is missing or not a tensor", "Tensor", kind_name(v));
}

std::optional<Tensor> KernelContext::opt_tensor(const std::string& name) const {
  const RValue& v = raw(name);
  if (std::holds_alternative<std::monostate>(v)) return std::nullopt;
  return tensor(name);
}

std::vector<Tensor> KernelContext::tensors(const std::string& name) const {
  const RValue& v = raw(name);
  if (auto* t = std::get_if<std::vector<Tensor>>(&v)) return *t;
  if (auto* t = std::get_if<std::vector<std::optional<Tensor>>>(&v)) {
    std::vector<Tensor> out;
    for (const auto& o : *t) {
      if (!o) fail("argument '" + name + "' holds None", "Tensor[]", "Tensor?[]");
      out.push_back(*o);
    }
    return out;
  }
  fail("argument '" + name + "' is missing or not a tensor list", "Tensor[]", kind_name(v));
}

std::vector<std::optional<Tensor>> KernelContext::opt_tensors(const std::string& name) const {
  const RValue& v = raw(name);
  if (auto* t = std::get_if<std::vector<std::optional<Tensor>>>(&v)) return *t;
  if (auto* t = std::get_if<std::vector<Tensor>>(&v)) return {t->begin(), t->end()};
  fail("argument '" + name + "' is missing or not a tensor list", "Tensor?[]", kind_name(v));
}

int64_t KernelContext::int_arg(const std::string& name) const {
  const RValue& v = raw(name);
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  if (auto* b = std::get_if<bool>(&v)) return *b;
  fail("argument '" + name + "' is missing or not an int", "int", kind_name(v));
}

int64_t KernelContext::int_arg(const std::string& name, int64_t dflt) const {
  return has(name) ? int_arg(name) : dflt;
}

double KernelContext::float_arg(const std::string& name) const {
  const RValue& v = raw(name);
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (auto* b = std::get_if<bool>(&v)) return *b;
  fail("argument '" + name + "' is missing or not a number", "float", kind_name(v));
}

double KernelContext::float_arg(const std::string& name, double dflt) const {
  return has(name) ? float_arg(name) : dflt;
}

bool KernelContext::bool_arg(const std::string& name, bool dflt) const {
  const RValue& v = raw(name);
  if (std::holds_alternative<std::monostate>(v)) return dflt;
  if (auto* b = std::get_if<bool>(&v)) return *b;
  if (auto* i = std::get_if<int64_t>(&v)) return *i != 0;
  fail("argument '" + name + "' is not a bool", "bool", kind_name(v));
}

std::string KernelContext::string_arg(const std::string& name, const std::string& dflt) const {
  const RValue& v = raw(name);
  if (std::holds_alternative<std::monostate>(v)) return dflt;
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  fail("argument '" + name + "' is not a string", "str", kind_name(v));
}

std::vector<int64_t> KernelContext::ints(const std::string& name) const {
  const RValue& v = raw(name);
  if (auto* l = std::get_if<std::vector<int64_t>>(&v)) return *l;
  if (auto* i = std::get_if<int64_t>(&v)) return {*i};
  fail("argument '" + name + "' is missing or not an int list", "int[]", kind_name(v));
}

std::vector<int64_t> KernelContext::ints(const std::string& name,
                                         const std::vector<int64_t>& dflt) const {
  return has(name) ? ints(name) : dflt;
}

std::optional<DType> KernelContext::dtype_arg(const std::string& name) const {
  const RValue& v = raw(name);
  if (std::holds_alternative<std::monostate>(v)) return std::nullopt;
  if (auto* d = std::get_if<DType>(&v)) return *d;
  fail("argument '" + name + "' is not a dtype", "ScalarType", kind_name(v));
}

std::optional<Device> KernelContext::device_arg(const std::string& name) const {
  const RValue& v = raw(name);
  if (std::holds_alternative<std::monostate>(v)) return std::nullopt;
  if (auto* d = std::get_if<Device>(&v)) return *d;
  fail("argument '" + name + "' is not a device", "Device", kind_name(v));
}

bool KernelContext::is_float_scalar(const std::string& name) const {
  return std::holds_alternative<double>(raw(name));
}

}  // namespace anvil::ir

namespace anvil::ir::shape_args {

namespace {
std::string where(const Node& node) { return "node " + node.name + " (" + node.target + ")"; }
const Arg& need(const Node& node, const std::string& name, const char* expected) {
  const Arg* a = node.arg(name);
  if (!a || a->kind == Arg::Kind::kNone)
    fail(node, "argument '" + name + "' is missing", expected, "absent");
  return *a;
}
SymInt ref_value(const Node& node, const IntRef& r) {
  if (!r.value) return SymInt(r.constant);
  if (r.value->kind != ValueKind::kSymInt)
    fail(node, "int argument refers to a non-int value", "a SymInt value", r.value->name);
  return r.value->sym;
}
}  // namespace

void fail(const Node& node, const std::string& what, const std::string& expected,
          const std::string& actual) {
  throw Error(what, where(node), expected, actual);
}

bool has(const Node& node, const std::string& name) {
  const Arg* a = node.arg(name);
  return a && a->kind != Arg::Kind::kNone;
}

const TensorType& type(const Node& node, const std::string& name) {
  const Arg& a = need(node, name, "Tensor");
  if (a.kind != Arg::Kind::kTensor || !a.value)
    fail(node, "argument '" + name + "' is not a tensor", "Tensor", "another kind");
  return a.value->type;
}

int64_t int_(const Node& node, const std::string& name, std::optional<int64_t> dflt) {
  if (!has(node, name) && dflt) return *dflt;
  const Arg& a = need(node, name, "int");
  switch (a.kind) {
    case Arg::Kind::kInt: return a.i;
    case Arg::Kind::kBool: return a.b;
    case Arg::Kind::kSymInt: return ref_value(node, a.symints.at(0)).constant();
    default: fail(node, "argument '" + name + "' is not an int", "int", "another kind");
  }
}

double float_(const Node& node, const std::string& name, std::optional<double> dflt) {
  if (!has(node, name) && dflt) return *dflt;
  const Arg& a = need(node, name, "float");
  switch (a.kind) {
    case Arg::Kind::kFloat: return a.f;
    case Arg::Kind::kInt: return static_cast<double>(a.i);
    case Arg::Kind::kBool: return a.b;
    default: fail(node, "argument '" + name + "' is not a number", "float", "another kind");
  }
}

bool bool_(const Node& node, const std::string& name, bool dflt) {
  if (!has(node, name)) return dflt;
  const Arg& a = *node.arg(name);
  if (a.kind == Arg::Kind::kBool) return a.b;
  if (a.kind == Arg::Kind::kInt) return a.i != 0;
  fail(node, "argument '" + name + "' is not a bool", "bool", "another kind");
}

std::vector<SymInt> symints(const Node& node, const std::string& name,
                            std::optional<std::vector<SymInt>> dflt) {
  if (!has(node, name) && dflt) return *dflt;
  const Arg& a = need(node, name, "int[]");
  std::vector<SymInt> out;
  switch (a.kind) {
    case Arg::Kind::kInts:
      for (int64_t v : a.ints) out.emplace_back(v);
      return out;
    case Arg::Kind::kInt:
      return {SymInt(a.i)};
    case Arg::Kind::kSymInt:
    case Arg::Kind::kSymInts:
      for (const auto& r : a.symints) out.push_back(ref_value(node, r));
      return out;
    default:
      fail(node, "argument '" + name + "' is not an int list", "int[]", "another kind");
  }
}

SymInt symint(const Node& node, const std::string& name, std::optional<SymInt> dflt) {
  if (!has(node, name) && dflt) return *dflt;
  const Arg& a = need(node, name, "int");
  if (a.kind == Arg::Kind::kInt) return SymInt(a.i);
  if (a.kind == Arg::Kind::kSymInt) return ref_value(node, a.symints.at(0));
  fail(node, "argument '" + name + "' is not an int", "int or SymInt", "another kind");
}

std::optional<DType> dtype(const Node& node, const std::string& name) {
  if (!has(node, name)) return std::nullopt;
  const Arg& a = *node.arg(name);
  if (a.kind == Arg::Kind::kScalarType) return a.dtype;
  fail(node, "argument '" + name + "' is not a dtype", "ScalarType", "another kind");
}

std::vector<std::optional<TensorType>> types(const Node& node, const std::string& name) {
  const Arg& a = need(node, name, "Tensor[]");
  if (a.kind != Arg::Kind::kTensors && a.kind != Arg::Kind::kOptTensors)
    fail(node, "argument '" + name + "' is not a tensor list", "Tensor[]", "another kind");
  std::vector<std::optional<TensorType>> out;
  for (Value* v : a.values) out.push_back(v ? std::optional<TensorType>(v->type) : std::nullopt);
  return out;
}

}  // namespace anvil::ir::shape_args
