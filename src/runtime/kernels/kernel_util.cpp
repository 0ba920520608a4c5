// Shared helpers of the runtime's extern kernels (see kernel_util.h).
#include "runtime/kernels/kernel_util.h"


namespace anvil::runtime::kern {

std::optional<Tensor> opt_input(const ExternCall& call, int32_t i) {
  if (i >= call.num_inputs()) return std::nullopt;
  const AnvilRtTensor& t = call.input(i);
  if (t.ndim == -1) return std::nullopt;
  return call.input_tensor(i);
}

Tensor checked_output(const ExternCall& call, int32_t i, const Shape& sizes,
                      std::optional<DType> dtype) {
  ANVIL_CHECK(i < call.num_outputs(), call.target(), "missing output", str(i + 1, " output(s)"),
              std::to_string(call.num_outputs()));
  Tensor out = call.output_tensor(i);
  ANVIL_CHECK(out.sizes() == sizes, call.target(), str("output ", i, " has the wrong sizes"),
              shape_str(sizes), shape_str(out.sizes()));
  if (dtype)
    ANVIL_CHECK(out.dtype() == *dtype, call.target(), str("output ", i, " has the wrong dtype"),
                dtype_name(*dtype), dtype_name(out.dtype()));
  ANVIL_CHECK(out.numel() == 0 || out.is_contiguous(), call.target(),
              str("output ", i, " must be contiguous"), "contiguous strides",
              shape_str(out.strides()));
  return out;
}

Tensor wrap_buffer(void* data, DType dtype, const Shape& sizes) {
  auto storage =
      Storage::wrap(data, static_cast<size_t>(shape_numel(sizes)) * dtype_size(dtype), nullptr);
  return Tensor(std::move(storage), dtype, sizes, Tensor::contiguous_strides(sizes), 0);
}

int available_threads() {
  return ThreadPool::in_parallel_region() ? 1 : current_thread_pool().num_threads();
}

namespace {

/// Same-dtype copy of positions [begin, end) of a coalesced layout.
void copy_same(char* dst, const char* src, size_t es, const Shape& sizes,
               const std::array<Shape, 2>& st, int64_t begin, int64_t end) {
  const size_t nd = sizes.size();
  if (nd > 0 && st[0][nd - 1] == 1 && st[1][nd - 1] == 1) {
    // Contiguous inner runs: memcpy row pieces.
    const int64_t inner = sizes[nd - 1];
    Shape outer(sizes.begin(), sizes.end() - 1);
    std::array<Shape, 2> ost = {Shape(st[0].begin(), st[0].end() - 1),
                                Shape(st[1].begin(), st[1].end() - 1)};
    int64_t pos = begin;
    while (pos < end) {
      const int64_t row = pos / inner, col = pos % inner;
      const int64_t n = std::min(inner - col, end - pos);
      for_each_offsets<2>(outer, ost, row, row + 1, [&](const std::array<int64_t, 2>& o) {
        std::memcpy(dst + (o[0] + col) * es, src + (o[1] + col) * es, static_cast<size_t>(n) * es);
      });
      pos += n;
    }
    return;
  }
  for_each_offsets<2>(sizes, st, begin, end, [&](const std::array<int64_t, 2>& o) {
    copy_element(dst + o[0] * es, src + o[1] * es, es);
  });
}

}  // namespace

void copy_cast(const Tensor& dst, const Tensor& src) {
  ANVIL_CHECK(dst.sizes() == src.sizes(), "runtime::copy_cast", "shape mismatch",
              shape_str(dst.sizes()), shape_str(src.sizes()));
  const int64_t n = dst.numel();
  if (n == 0) return;
  Shape sizes = dst.sizes();
  std::array<Shape, 2> st = {dst.strides(), src.strides()};
  coalesce<2>(sizes, st);
  char* d = static_cast<char*>(dst.data_ptr());
  const char* s = static_cast<const char*>(src.data_ptr());
  const DType dd = dst.dtype(), sd = src.dtype();
  auto body = [&](int64_t begin, int64_t end) {
    if (dd == sd) {
      copy_same(d, s, dst.element_size(), sizes, st, begin, end);
      return;
    }
    ANVIL_DISPATCH_REAL(dd, "runtime::copy_cast", D, {
      D* dp = reinterpret_cast<D*>(d);
      ANVIL_DISPATCH_REAL(sd, "runtime::copy_cast", S, {
        const S* sp = reinterpret_cast<const S*>(s);
        for_each_offsets<2>(sizes, st, begin, end, [&](const std::array<int64_t, 2>& o) {
          dp[o[0]] = cast_value<D, S>(sp[o[1]]);
        });
      });
    });
  };
  if (n < (int64_t{1} << 16)) {
    body(0, n);
    return;
  }
  parallel_for(0, n, int64_t{1} << 15, body);
}

std::vector<int64_t> read_indices(const Tensor& index, const std::string& where,
                                  const std::string& what) {
  std::vector<int64_t> v(static_cast<size_t>(index.numel()));
  if (v.empty()) return v;
  const std::array<Shape, 1> st = {index.strides()};
  size_t i = 0;
  if (index.dtype() == DType::kInt64) {
    const int64_t* p = static_cast<const int64_t*>(index.data_ptr());
    for_each_offsets<1>(index.sizes(), st, 0, index.numel(),
                        [&](const std::array<int64_t, 1>& o) { v[i++] = p[o[0]]; });
  } else if (index.dtype() == DType::kInt32) {
    const int32_t* p = static_cast<const int32_t*>(index.data_ptr());
    for_each_offsets<1>(index.sizes(), st, 0, index.numel(),
                        [&](const std::array<int64_t, 1>& o) { v[i++] = p[o[0]]; });
  } else {
    throw Error(str("'", what, "' must be an integer tensor"), where, "int64 or int32",
                dtype_name(index.dtype()));
  }
  return v;
}

}  // namespace anvil::runtime::kern
