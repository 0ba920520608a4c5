// Casts (to.dtype, to.dtype_layout, to.device, _to_copy, type_as), copies (clone, contiguous,
// lift_fresh_copy), views that only alias (alias, detach), and no-ops (dropout in inference,
// _assert_tensor_metadata). Part of the "unary.cpp" rows of ops.def.
//
// Casts return the input itself (sharing storage, like torch) when nothing changes and `copy` is
// false; copies are contiguous. Reference kernels run on the CPU: a cast that asks for another
// device type than the tensor's raises Error.
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {
namespace {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;

/// torch.export's Layout code for torch.strided, the only layout anvil supports.
constexpr int64_t kLayoutStrided = 7;

/// Static type of argument `self` (or `name`).
const TensorType& in_type(const Node& node, const std::string& name = "self") {
  return ir::shape_args::type(node, name);
}

/// Throws unless the layout argument (if present) is strided.
void check_layout_static(const Node& node) {
  const ir::Arg* a = node.arg("layout");
  if (!a || a->kind == ir::Arg::Kind::kNone) return;
  if ((a->kind == ir::Arg::Kind::kLayout || a->kind == ir::Arg::Kind::kInt) &&
      a->i != kLayoutStrided)
    ir::shape_args::fail(node, "only the strided layout is supported",
                         str("layout ", kLayoutStrided, " (torch.strided)"), str("layout ", a->i));
}

void check_layout(const KernelContext& ctx) {
  const RValue& v = ctx.raw("layout");
  if (auto* i = std::get_if<int64_t>(&v); i && *i != kLayoutStrided)
    ctx.fail("only the strided layout is supported", str("layout ", kLayoutStrided),
             str("layout ", *i));
}

/// The device argument `name` of a node, if present.
std::optional<Device> static_device(const Node& node, const std::string& name) {
  const ir::Arg* a = node.arg(name);
  if (!a || a->kind == ir::Arg::Kind::kNone) return std::nullopt;
  if (a->kind != ir::Arg::Kind::kDevice)
    ir::shape_args::fail(node, "argument '" + name + "' is not a device", "Device", "another kind");
  return a->device;
}

/// Output type of a cast of `t` to an optional dtype and device.
TensorType cast_type(const TensorType& t, std::optional<DType> dtype,
                     std::optional<Device> device) {
  TensorType out;
  out.dtype = dtype.value_or(t.dtype);
  out.sizes = t.sizes;
  out.device = device.value_or(t.device);
  return out;
}

/// The node's memory_format argument (torch.export's code), if given.
std::optional<int64_t> memory_format(const KernelContext& ctx) {
  const ir::Arg* mf = ctx.node().arg("memory_format");
  if (mf && mf->kind == ir::Arg::Kind::kMemoryFormat) return mf->i;
  return std::nullopt;
}

/// Casts `x` to `dtype` on `device` (both optional). Returns `x` itself when the dtype does not
/// change and `copy` is false; otherwise a copy in x's layout (PyTorch's preserve_format), or a
/// contiguous one when the node asks for memory_format=torch.contiguous_format.
Tensor cast(const KernelContext& ctx, const Tensor& x, std::optional<DType> dtype,
            std::optional<Device> device, bool copy) {
  if (device && device->type != x.device().type)
    ctx.fail("reference kernels cannot move tensors between devices", x.device().str(),
             device->str());
  const DType dt = dtype.value_or(x.dtype());
  if (!is_float8(dt)) check_supported(dt, ctx.where());  // float8: Tensor::copy_from converts
  if (dt == x.dtype() && !copy) return x;
  return copy_in_format(x, dt, memory_format(ctx));
}

/// dropout's inference-only rule: train with p > 0 is not supported; p must lie in [0, 1].
void check_dropout(double p, bool train, const std::string& where) {
  if (p < 0 || p > 1)
    throw Error("dropout probability has to be between 0 and 1", where, "0 <= p <= 1", str(p));
  if (train && p > 0)
    throw Error("dropout with train=True and p > 0 is not supported for inference", where,
                "train=False or p == 0", str("train=True, p=", p));
}

}  // namespace

// ---- casts

std::vector<TensorType> shape_to_dtype(const Node& node) {
  return {cast_type(in_type(node), ir::shape_args::dtype(node, "dtype"), std::nullopt)};
}

std::vector<RValue> kernel_to_dtype(KernelContext& ctx) {
  const std::optional<DType> dt = ctx.dtype_arg("dtype");
  if (!dt) ctx.fail("argument 'dtype' is missing", "a dtype", "None");
  return {cast(ctx, ctx.tensor("self"), dt, std::nullopt, ctx.bool_arg("copy", false))};
}

std::vector<TensorType> shape_to_dtype_layout(const Node& node) {
  check_layout_static(node);
  return {cast_type(in_type(node), ir::shape_args::dtype(node, "dtype"),
                    static_device(node, "device"))};
}

std::vector<RValue> kernel_to_dtype_layout(KernelContext& ctx) {
  check_layout(ctx);
  return {cast(ctx, ctx.tensor("self"), ctx.dtype_arg("dtype"), ctx.device_arg("device"),
               ctx.bool_arg("copy", false))};
}

std::vector<TensorType> shape_to_device(const Node& node) {
  return {cast_type(in_type(node), ir::shape_args::dtype(node, "dtype"),
                    static_device(node, "device"))};
}

std::vector<RValue> kernel_to_device(KernelContext& ctx) {
  return {cast(ctx, ctx.tensor("self"), ctx.dtype_arg("dtype"), ctx.device_arg("device"),
               ctx.bool_arg("copy", false))};
}

std::vector<TensorType> shape_to_copy(const Node& node) {
  check_layout_static(node);
  return {cast_type(in_type(node), ir::shape_args::dtype(node, "dtype"),
                    static_device(node, "device"))};
}

std::vector<RValue> kernel_to_copy(KernelContext& ctx) {
  check_layout(ctx);
  return {cast(ctx, ctx.tensor("self"), ctx.dtype_arg("dtype"), ctx.device_arg("device"),
               /*copy=*/true)};
}

std::vector<TensorType> shape_type_as(const Node& node) {
  return {cast_type(in_type(node), in_type(node, "other").dtype, std::nullopt)};
}

std::vector<RValue> kernel_type_as(KernelContext& ctx) {
  return {cast(ctx, ctx.tensor("self"), ctx.tensor("other").dtype(), std::nullopt, false)};
}

// ---- copies and aliases

std::vector<TensorType> shape_clone(const Node& node) {
  return {cast_type(in_type(node), std::nullopt, std::nullopt)};
}
std::vector<RValue> kernel_clone(KernelContext& ctx) {
  const Tensor& x = ctx.tensor("self");
  return {copy_in_format(x, x.dtype(), memory_format(ctx))};  // preserve_format by default
}

std::vector<TensorType> shape_contiguous(const Node& node) {
  return {cast_type(in_type(node), std::nullopt, std::nullopt)};
}
std::vector<RValue> kernel_contiguous(KernelContext& ctx) {
  const Tensor& x = ctx.tensor("self");
  const std::optional<int64_t> mf = memory_format(ctx);
  if (mf && (*mf == 2 || *mf == 3)) {  // x.contiguous(memory_format=torch.channels_last)
    if (x.strides() == memory_format_strides(x.sizes(), *mf)) return {x};
    return {copy_in_format(x, x.dtype(), mf)};
  }
  return {x.contiguous()};
}

std::vector<TensorType> shape_lift_fresh_copy(const Node& node) {
  return {cast_type(in_type(node), std::nullopt, std::nullopt)};
}
std::vector<RValue> kernel_lift_fresh_copy(KernelContext& ctx) {
  return {ctx.tensor("self").clone()};
}

std::vector<TensorType> shape_alias(const Node& node) {
  return {cast_type(in_type(node), std::nullopt, std::nullopt)};
}
std::vector<RValue> kernel_alias(KernelContext& ctx) { return {ctx.tensor("self")}; }

std::vector<TensorType> shape_detach(const Node& node) {
  return {cast_type(in_type(node), std::nullopt, std::nullopt)};
}
std::vector<RValue> kernel_detach(KernelContext& ctx) { return {ctx.tensor("self")}; }

// ---- no-ops

std::vector<TensorType> shape_dropout(const Node& node) {
  check_dropout(ir::shape_args::float_(node, "p"), ir::shape_args::bool_(node, "train", false),
                node_where(node));
  // dropout's tensor is `input`; dropout_ (run as dropout plus a write, ir/inplace.h) calls it self
  const char* x = ir::shape_args::has(node, "input") ? "input" : "self";
  return {cast_type(in_type(node, x), std::nullopt, std::nullopt)};
}

std::vector<RValue> kernel_dropout(KernelContext& ctx) {
  check_dropout(ctx.float_arg("p"), ctx.bool_arg("train", false), ctx.where());
  return {ctx.tensor(ctx.has("input") ? "input" : "self")};
}

// native_dropout(input, p, train) -> (output, mask): train=False (or p == 0) gives the input and
// an all-True bool mask; train=None means training, as in ATen.

std::vector<TensorType> shape_native_dropout(const Node& node) {
  const bool train = !ir::shape_args::has(node, "train") || ir::shape_args::bool_(node, "train", true);
  check_dropout(ir::shape_args::float_(node, "p"), train, node_where(node));
  TensorType out = cast_type(in_type(node, "input"), std::nullopt, std::nullopt);
  TensorType mask = out;
  mask.dtype = DType::kBool;
  return {out, mask};
}

std::vector<RValue> kernel_native_dropout(KernelContext& ctx) {
  const bool train = !ctx.has("train") || ctx.bool_arg("train", true);
  check_dropout(ctx.float_arg("p"), train, ctx.where());
  const Tensor& x = ctx.tensor("input");
  Tensor mask = Tensor::empty(x.sizes(), DType::kBool);
  bool* m = mask.data<bool>();
  for (int64_t i = 0; i < mask.numel(); ++i) m[i] = true;
  return {x, mask};
}

std::vector<TensorType> shape_assert_tensor_metadata(const Node& node) {
  const TensorType& t = in_type(node, "a");
  if (std::optional<DType> dt = ir::shape_args::dtype(node, "dtype"); dt && *dt != t.dtype)
    ir::shape_args::fail(node, "tensor metadata assertion failed: dtype", dtype_name(*dt),
                         dtype_name(t.dtype));
  if (ir::shape_args::has(node, "size")) {
    const std::vector<SymInt> size = ir::shape_args::symints(node, "size");
    bool ok = size.size() == t.sizes.size();
    for (size_t i = 0; ok && i < size.size(); ++i) {
      auto a = size[i].maybe_constant(), b = t.sizes[i].maybe_constant();
      if (a && b && *a != *b) ok = false;
    }
    if (!ok)
      ir::shape_args::fail(node, "tensor metadata assertion failed: size", sym_shape_str(size),
                           sym_shape_str(t.sizes));
  }
  check_layout_static(node);
  return {};
}

std::vector<RValue> kernel_assert_tensor_metadata(KernelContext& ctx) {
  const Tensor& a = ctx.tensor("a");
  if (std::optional<DType> dt = ctx.dtype_arg("dtype"); dt && *dt != a.dtype())
    ctx.fail("tensor metadata assertion failed: dtype", dtype_name(*dt), dtype_name(a.dtype()));
  if (ctx.has("size")) {
    const std::vector<int64_t> size = ctx.ints("size");
    if (size != a.sizes())
      ctx.fail("tensor metadata assertion failed: size", shape_str(size), shape_str(a.sizes()));
  }
  if (ctx.has("stride")) {
    // Strides of size-0/1 dims are arbitrary; compare the others.
    const std::vector<int64_t> stride = ctx.ints("stride");
    bool ok = stride.size() == a.strides().size();
    for (size_t i = 0; ok && i < stride.size(); ++i)
      if (a.sizes()[i] > 1 && stride[i] != a.strides()[i]) ok = false;
    if (!ok)
      ctx.fail("tensor metadata assertion failed: stride", shape_str(stride),
               shape_str(a.strides()));
  }
  if (std::optional<Device> d = ctx.device_arg("device")) {
    const Device have = a.device();
    if (d->type != have.type || (d->index >= 0 && have.index >= 0 && d->index != have.index))
      ctx.fail("tensor metadata assertion failed: device", d->str(), have.str());
  }
  check_layout(ctx);
  return {};
}

}  // namespace anvil::ops
