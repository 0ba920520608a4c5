// Runtime extern kernels for the joining / tiling ops: aten.cat.default, aten.stack.default and
// aten.repeat.default, and aten.masked_scatter.default. Inputs may have any strides and (cat / stack) differing dtypes: each is
// converted into the preallocated output's dtype (the promoted one) while it is copied. cat
// skips legacy empty 1-D tensors ([0]) like torch.
#include "runtime/kernels/kernel_util.h"

namespace anvil::runtime {

namespace {

/// The tensor-list inputs of cat / stack (count from the "tensors" attribute).
std::vector<Tensor> list_inputs(const ExternCall& call) {
  const int64_t count = call.attr_int("tensors", call.num_inputs());
  ANVIL_CHECK(count >= 1 && count <= call.num_inputs(), call.target(), "bad tensor-list length",
              str("1 to ", call.num_inputs()), std::to_string(count));
  std::vector<Tensor> ts;
  for (int32_t i = 0; i < count; ++i) {
    ANVIL_CHECK(call.input(i).ndim != -1, call.target(), str("tensor list entry ", i, " is None"),
                "a tensor", "None");
    ts.push_back(call.input_tensor(i));
  }
  return ts;
}

/// True for the legacy empty 1-D tensor cat ignores.
bool legacy_empty(const Tensor& t) { return t.dim() == 1 && t.size(0) == 0; }

/// The runtime kernel of aten.cat.default.
int cat_extern(ExternCall& call) {
  const std::string where = call.target();
  const std::vector<Tensor> ts = list_inputs(call);
  const Tensor* ref = nullptr;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (legacy_empty(ts[i])) continue;
    ANVIL_CHECK(ts[i].dim() > 0, where,
                str("a 0-dim tensor (at position ", i, ") cannot be concatenated"), "rank >= 1",
                "0");
    if (!ref) ref = &ts[i];
  }
  if (!ref) {  // every input is a legacy empty tensor
    kern::checked_output(call, 0, {0});
    return 0;
  }
  const int64_t rank = ref->dim();
  const int64_t d = wrap_dim(call.attr_int("dim", 0), rank, where);
  Shape sizes = ref->sizes();
  sizes[d] = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (legacy_empty(ts[i])) continue;
    ANVIL_CHECK(ts[i].dim() == rank, where, str("tensors must have the same rank (tensor ", i, ")"),
                shape_str(ref->sizes()), shape_str(ts[i].sizes()));
    for (int64_t k = 0; k < rank; ++k)
      ANVIL_CHECK(
          k == d || ts[i].size(k) == ref->size(k), where,
          str("sizes of tensors must match except in dim ", d, " (tensor ", i, ", dim ", k, ")"),
          shape_str(ref->sizes()), shape_str(ts[i].sizes()));
    sizes[d] += ts[i].size(d);
  }
  const Tensor out = kern::checked_output(call, 0, sizes);
  int64_t off = 0;
  for (const Tensor& t : ts) {
    if (legacy_empty(t)) continue;
    kern::copy_cast(out.slice(d, off, off + t.size(d)), t);
    off += t.size(d);
  }
  return 0;
}

/// The runtime kernel of aten.stack.default.
int stack_extern(ExternCall& call) {
  const std::string where = call.target();
  const std::vector<Tensor> ts = list_inputs(call);
  for (size_t i = 1; i < ts.size(); ++i)
    ANVIL_CHECK(ts[i].sizes() == ts[0].sizes(), where,
                str("stack expects each tensor to be equal size (entry ", i, ")"),
                shape_str(ts[0].sizes()), shape_str(ts[i].sizes()));
  const int64_t d = wrap_dim(call.attr_int("dim", 0), ts[0].dim() + 1, where);
  Shape sizes = ts[0].sizes();
  sizes.insert(sizes.begin() + d, static_cast<int64_t>(ts.size()));
  const Tensor out = kern::checked_output(call, 0, sizes);
  if (out.numel() == 0) return 0;
  for (size_t i = 0; i < ts.size(); ++i)
    kern::copy_cast(out.select(d, static_cast<int64_t>(i)), ts[i]);
  return 0;
}

/// The runtime kernel of aten.repeat.default.
int repeat_extern(ExternCall& call) {
  const std::string where = call.target();
  const Tensor t = call.input_tensor(0);
  const std::vector<int64_t> reps = call.attr_ints("repeats");
  ANVIL_CHECK(reps.size() >= static_cast<size_t>(t.dim()), where,
              "repeat: number of repeat dims can not be smaller than the tensor's rank",
              str(">= ", t.dim()), std::to_string(reps.size()));
  const size_t pad = reps.size() - static_cast<size_t>(t.dim());
  Shape out_sizes(reps.size()), sizes, src_strides;
  for (size_t i = 0; i < reps.size(); ++i) {
    ANVIL_CHECK(reps[i] >= 0, where, "repeat: repeats must be non-negative", ">= 0",
                std::to_string(reps[i]));
    const int64_t s = i < pad ? 1 : t.size(static_cast<int64_t>(i - pad));
    out_sizes[i] = s * reps[i];
    // The input viewed as [r0, s0, r1, s1, ...] with stride 0 on the repeat dims.
    sizes.push_back(reps[i]);
    src_strides.push_back(0);
    sizes.push_back(s);
    src_strides.push_back(i < pad ? 0 : t.stride(static_cast<int64_t>(i - pad)));
  }
  const Tensor out = kern::checked_output(call, 0, out_sizes, t.dtype());
  if (out.numel() == 0) return 0;
  const Tensor src(t.storage(), t.dtype(), sizes, src_strides, t.storage_offset());
  const Tensor dst(out.storage(), out.dtype(), sizes, Tensor::contiguous_strides(sizes), 0);
  kern::copy_cast(dst, src);
  return 0;
}

/// The runtime kernel of aten.masked_scatter.default: self broadcast with mask, the positions
/// where mask is True (row-major) filled from source's elements in order.
int masked_scatter_extern(ExternCall& call) {
  const std::string where = call.target();
  const Tensor self = call.input_tensor(0), mask = call.input_tensor(1);
  const Tensor source = call.input_tensor(2);
  ANVIL_CHECK(mask.dtype() == DType::kBool, where, "masked_scatter needs a bool mask", "bool",
              dtype_name(mask.dtype()));
  const Shape sizes = broadcast_shapes(self.sizes(), mask.sizes(), where);
  const Tensor out = kern::checked_output(call, 0, sizes, self.dtype());
  if (out.numel() == 0) return 0;
  kern::copy_cast(out, self.expand(sizes));
  const Tensor m = mask.expand(sizes);
  const Tensor src = source.contiguous();
  const size_t es = out.element_size();
  char* po = static_cast<char*>(out.data_ptr());
  const char* ps = static_cast<const char*>(src.data_ptr());
  const bool* pm = static_cast<const bool*>(m.data_ptr());
  int64_t i = 0, k = 0;
  bool short_source = false;
  for_each_offset(m.sizes(), m.strides(), [&](int64_t off) {
    if (pm[off] && !short_source) {
      if (k >= src.numel()) {
        short_source = true;
      } else {
        std::memcpy(po + i * es, ps + k * es, es);
        ++k;
      }
    }
    ++i;
  });
  ANVIL_CHECK(!short_source, where,
              "masked_scatter: source has fewer elements than mask has True values",
              str(">= ", k + 1, " elements"), str(src.numel()));
  return 0;
}

}  // namespace

/// Registers the join / tile externs.
void register_shape_externs() {
  register_extern("aten.cat.default", cat_extern);
  register_extern("aten.stack.default", stack_extern);
  register_extern("aten.repeat.default", repeat_extern);
  register_extern("aten.masked_scatter.default", masked_scatter_extern);
}

}  // namespace anvil::runtime
