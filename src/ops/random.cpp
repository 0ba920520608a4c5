// Random ops: randn / rand (sizes from `size`), randn_like / rand_like (self's sizes) and
// randperm (a permutation of 0 .. n-1, anvil's own stream).
// Shape rules: float32 unless dtype is given (the *_like ops: self's dtype), a floating dtype
// required. Reference kernels draw from the process-wide anvil::default_generator() with
// PyTorch CPU's algorithms (core/random.h), so a fresh process (seed 0, or ANVIL_SEED) gives the
// values torch gives after torch.manual_seed(0). These ops are never folded, merged or removed
// (passes::has_side_effects); compiled code reaches the runtime's per-Model generator through
// extern_call (docs/externs.md).
#include "core/error.h"
#include <cstdint>

#include "core/random.h"
#include "ops/common.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;
namespace sa = ir::shape_args;

constexpr DType kDefaultFloat = DType::kFloat32;  // torch.get_default_dtype()

/// True for the dtypes the generator fills.
bool random_dtype(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kFloat16 ||
         d == DType::kBFloat16;
}

/// The output type of a random op with `sizes` and `dtype` (checked: floating, sizes >= 0).
std::vector<TensorType> random_type(const Node& node, DType dtype, std::vector<SymInt> sizes,
                                    Device device) {
  if (!random_dtype(dtype))
    sa::fail(node, "random sampling needs a floating dtype", "f32, f64, f16 or bf16",
             dtype_name(dtype));
  for (const SymInt& s : sizes)
    if (s.is_constant() && s.constant() < 0)
      sa::fail(node, "cannot create a tensor with a negative dimension", "sizes >= 0",
               sym_shape_str(sizes));
  TensorType t;
  t.dtype = dtype;
  t.sizes = std::move(sizes);
  t.device = device;
  return {t};
}

/// The device argument of a factory, or `dflt`.
Device arg_device(const Node& node, Device dflt) {
  const ir::Arg* a = node.arg("device");
  return a && a->kind == ir::Arg::Kind::kDevice ? a->device : dflt;
}

/// Shape rule of randn / rand.
std::vector<TensorType> factory_type(const Node& node) {
  return random_type(node, sa::dtype(node, "dtype").value_or(kDefaultFloat),
                     sa::symints(node, "size"), arg_device(node, Device::cpu()));
}

/// Shape rule of randn_like / rand_like.
std::vector<TensorType> like_type(const Node& node) {
  const TensorType& self = sa::type(node, "self");
  return random_type(node, sa::dtype(node, "dtype").value_or(self.dtype), self.sizes,
                     arg_device(node, self.device));
}

/// A new tensor of `sizes` / `dtype` filled by the default generator (normal or uniform).
Tensor sample(const KernelContext& ctx, const Shape& sizes, DType dtype, bool normal) {
  if (!random_dtype(dtype))
    ctx.fail("random sampling needs a floating dtype", "f32, f64, f16 or bf16",
             dtype_name(dtype));
  for (int64_t s : sizes)
    if (s < 0)
      ctx.fail("cannot create a tensor with a negative dimension", "sizes >= 0", shape_str(sizes));
  Tensor out = Tensor::empty(sizes, dtype);
  if (normal)
    default_generator().normal_(out);
  else
    default_generator().uniform_(out);
  return out;
}

/// rand_like / randn_like: a tensor of self's sizes in self's layout when it is dense (PyTorch's
/// empty_like), its samples drawn in memory order as PyTorch's kernel fills it.
Tensor sample_like(const KernelContext& ctx, bool normal) {
  const Tensor& self = ctx.tensor("self");
  const DType dtype = ctx.dtype_arg("dtype").value_or(self.dtype());
  Tensor out = empty_like_layout(self, dtype);
  if (out.is_contiguous()) return sample(ctx, self.sizes(), dtype, normal);
  Tensor flat(out.storage(), dtype, {out.numel()}, {1}, out.storage_offset());
  Tensor drawn = sample(ctx, {out.numel()}, dtype, normal);
  flat.copy_from(drawn);
  return out;
}

}  // namespace

std::vector<TensorType> shape_randn(const Node& node) { return factory_type(node); }
std::vector<RValue> kernel_randn(KernelContext& ctx) {
  return {sample(ctx, ctx.ints("size"), ctx.dtype_arg("dtype").value_or(kDefaultFloat), true)};
}

std::vector<TensorType> shape_rand(const Node& node) { return factory_type(node); }
std::vector<RValue> kernel_rand(KernelContext& ctx) {
  return {sample(ctx, ctx.ints("size"), ctx.dtype_arg("dtype").value_or(kDefaultFloat), false)};
}

std::vector<TensorType> shape_randn_like(const Node& node) { return like_type(node); }
std::vector<RValue> kernel_randn_like(KernelContext& ctx) { return {sample_like(ctx, true)}; }

std::vector<TensorType> shape_rand_like(const Node& node) { return like_type(node); }
std::vector<RValue> kernel_rand_like(KernelContext& ctx) { return {sample_like(ctx, false)}; }

// ---- randperm(n, dtype=int64): a random permutation of 0 .. n-1 from the default generator
// (RandomGenerator::randperm_, anvil's own stream, not PyTorch's values).

namespace {

/// The largest n whose permutation `dtype` holds exactly (0: not a randperm dtype).
int64_t randperm_limit(DType dtype) {
  switch (dtype) {
    case DType::kInt64: return INT64_MAX;
    case DType::kInt32: return int64_t{1} << 31;
    case DType::kInt16: return int64_t{1} << 15;
    case DType::kInt8: return 128;
    case DType::kUInt8: return 256;
    case DType::kFloat64: return (int64_t{1} << 53) + 1;
    case DType::kFloat32: return (int64_t{1} << 24) + 1;
    case DType::kFloat16: return (int64_t{1} << 11) + 1;
    case DType::kBFloat16: return (int64_t{1} << 8) + 1;
    default: return 0;
  }
}

/// Checks randperm's n against `dtype`; `where` names the node.
void check_randperm(int64_t n, DType dtype, const std::string& where) {
  const int64_t limit = randperm_limit(dtype);
  if (limit == 0)
    throw Error("randperm needs an integer or floating dtype", where,
                "i64, i32, i16, i8, u8, f64, f32, f16 or bf16", dtype_name(dtype));
  if (n < 0) throw Error("randperm needs n >= 0", where, ">= 0", std::to_string(n));
  if (n > limit)
    throw Error("randperm: n is too large for the result dtype", where,
                str("n <= ", limit, " for ", dtype_name(dtype)), std::to_string(n));
}

}  // namespace

std::vector<TensorType> shape_randperm(const Node& node) {
  const DType dtype = sa::dtype(node, "dtype").value_or(DType::kInt64);
  const SymInt n = sa::symint(node, "n");
  try {
    check_randperm(n.is_constant() ? n.constant() : 0, dtype, node_where(node));
  } catch (const Error& e) {
    sa::fail(node, e.what(), "a valid n and dtype", str(n.str(), " of ", dtype_name(dtype)));
  }
  TensorType t;
  t.dtype = dtype;
  t.sizes = {n};
  t.device = arg_device(node, Device::cpu());
  return {t};
}

std::vector<RValue> kernel_randperm(KernelContext& ctx) {
  const int64_t n = ctx.int_arg("n");
  const DType dtype = ctx.dtype_arg("dtype").value_or(DType::kInt64);
  check_randperm(n, dtype, ctx.where());
  Tensor out = Tensor::empty({n}, dtype);
  default_generator().randperm_(out);
  return {out};
}

}  // namespace anvil::ops
