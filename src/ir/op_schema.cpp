#include "ir/op_schema.h"

#include "core/error.h"

namespace anvil::ir {

const char* op_category_name(OpCategory c) {
  switch (c) {
    case OpCategory::kPointwise: return "pointwise";
    case OpCategory::kReduction: return "reduction";
    case OpCategory::kView: return "view";
    case OpCategory::kExtern: return "extern";
    case OpCategory::kCollective: return "collective";
    case OpCategory::kControlFlow: return "control_flow";
    case OpCategory::kCreation: return "creation";
    case OpCategory::kSym: return "sym";
    case OpCategory::kMeta: return "meta";
  }
  return "?";
}

std::string canonical_target(const std::string& target) {
  const std::string prefix = "torch.ops.";
  return target.rfind(prefix, 0) == 0 ? target.substr(prefix.size()) : target;
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
