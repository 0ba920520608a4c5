// Contiguous stand-ins for the tensors of a host-engine op (internal to src/dist): the run_*
// primitives see contiguous CPU tensors only.
#pragma once

#include "core/tensor.h"

namespace anvil::dist::detail {

/// A contiguous buffer standing in for `t`: t itself when contiguous, else a copy.
inline Tensor contiguous_buffer(const Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); }
/// A contiguous output buffer for `t`: t itself when contiguous, else a new tensor.
inline Tensor output_buffer(const Tensor& t) {
  return t.is_contiguous() ? t : Tensor::empty(t.sizes(), t.dtype());
}
/// Copies `buf` back into `t` when buf is a stand-in (not t's own memory).
inline void copy_back(Tensor& t, const Tensor& buf) {
  if (buf.storage() != t.storage() || buf.storage_offset() != t.storage_offset()) t.copy_from(buf);
}
/// The elements [off, off + numel(sizes)) of a 1-d contiguous tensor, viewed as `sizes`.
inline Tensor flat_part(const Tensor& flat, int64_t off, const Shape& sizes) {
  const int64_t n = shape_numel(sizes);
  return flat.slice(0, off, off + n).view(sizes);
}

}  // namespace anvil::dist::detail
