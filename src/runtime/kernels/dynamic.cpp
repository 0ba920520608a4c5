// Extern kernels of ops whose result size is data-dependent (passes/lower_dynamic.cpp):
//   anvil.nonzero   (self)       -> rows int64 (capacity, rank), count int64 (1)
//   anvil.mask_rows (self, mask) -> rows self.dtype (capacity, self.shape[k:]), count int64 (1)
// Each writes its rows at the start of the rows buffer (contiguous, in row-major order of the
// true elements, as PyTorch's nonzero / x[mask]) and the number of rows into `count`; the
// generated code then stores the count in its run-time symbol. More rows than the capacity is
// an error (the capacity comes from the export's range of the count); with attribute "exact"
// (a count the export fixed with torch._check) any other number of rows is.
#include <cstring>

#include "core/error.h"
#include "runtime/externs.h"

namespace anvil::runtime {

namespace {

/// True elements of `t` (row-major order): their linear indices.
std::vector<int64_t> true_positions(const Tensor& t) {
  const Tensor c = t.is_contiguous() ? t : t.clone();
  std::vector<int64_t> pos;
  const int64_t n = c.numel();
  const size_t es = c.element_size();
  const auto* p = static_cast<const unsigned char*>(c.data_ptr());
  for (int64_t i = 0; i < n; ++i) {
    bool nz = false;
    for (size_t b = 0; b < es && !nz; ++b) nz = p[static_cast<size_t>(i) * es + b] != 0;
    if (nz) pos.push_back(i);
  }
  return pos;
}

/// Floating-point -0.0 is zero: bytes alone do not say it. Re-checks float / half inputs.
std::vector<int64_t> nonzero_positions(const Tensor& t) {
  if (!is_floating(t.dtype())) return true_positions(t);
  const std::vector<double> v = t.to_doubles();
  std::vector<int64_t> pos;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != 0) pos.push_back(static_cast<int64_t>(i));
  return pos;
}

/// Checks the rows / count outputs and that `rows` fit in the capacity.
void check_outputs(ExternCall& call, int64_t rows) {
  ANVIL_CHECK(call.num_outputs() == 2, call.target(), "needs a rows and a count output",
              "2 outputs", std::to_string(call.num_outputs()));
  const AnvilRtTensor& cnt = call.output(1);
  ANVIL_CHECK(call.output_dtype(1) == DType::kInt64 && cnt.ndim == 1 && cnt.sizes[0] == 1,
              call.target(), "the count output must be int64 [1]", "int64[1]", "another tensor");
  const AnvilRtTensor& out = call.output(0);
  ANVIL_CHECK(out.ndim >= 1, call.target(), "the rows output needs a leading dim", "rank >= 1",
              std::to_string(out.ndim));
  if (call.attr_bool("exact", false) && rows != out.sizes[0])
    throw Error("a data-dependent size differs from the size the export asserted", call.target(),
                str(out.sizes[0], " rows"), str(rows, " rows"));
  if (rows > out.sizes[0])
    throw Error("a data-dependent size exceeds the capacity the model was compiled for",
                call.target(), str("at most ", out.sizes[0], " rows (the export's range)"),
                str(rows, " rows"));
  *static_cast<int64_t*>(cnt.data) = rows;
}

int nonzero_extern(ExternCall& call) {
  const Tensor self = call.input_tensor(0);
  const std::vector<int64_t> pos = nonzero_positions(self);
  check_outputs(call, static_cast<int64_t>(pos.size()));
  const int64_t rank = self.dim();
  ANVIL_CHECK(call.output_dtype(0) == DType::kInt64 && call.output(0).ndim == 2 &&
                  call.output(0).sizes[1] == rank,
              call.target(), "the rows output must be int64 [capacity, rank]",
              str("int64[*, ", rank, "]"), "another shape");
  auto* out = static_cast<int64_t*>(call.output(0).data);
  for (size_t r = 0; r < pos.size(); ++r) {
    int64_t rest = pos[r];
    for (int64_t d = rank; d-- > 0;) {
      out[r * static_cast<size_t>(rank) + static_cast<size_t>(d)] = rest % self.size(d);
      rest /= self.size(d);
    }
  }
  return 0;
}

int mask_rows_extern(ExternCall& call) {
  const Tensor self = call.input_tensor(0);
  const Tensor mask = call.input_tensor(1);
  const int64_t k = mask.dim();
  ANVIL_CHECK(k >= 1 && k <= self.dim(), call.target(), "the mask's rank",
              str("1..", self.dim()), std::to_string(k));
  for (int64_t d = 0; d < k; ++d)
    if (mask.size(d) != self.size(d))
      throw Error(str("the shape of the mask does not match the indexed tensor at dim ", d),
                  call.target(), shape_str(self.sizes()), shape_str(mask.sizes()));
  const std::vector<int64_t> pos = true_positions(mask);
  check_outputs(call, static_cast<int64_t>(pos.size()));
  ANVIL_CHECK(call.output_dtype(0) == self.dtype(), call.target(), "the rows dtype",
              dtype_name(self.dtype()), dtype_name(call.output_dtype(0)));
  const Tensor src = self.is_contiguous() ? self : self.clone();
  int64_t row = 1;
  for (int64_t d = k; d < self.dim(); ++d) row *= self.size(d);
  const size_t row_bytes = static_cast<size_t>(row) * src.element_size();
  const auto* in = static_cast<const char*>(src.data_ptr());
  auto* out = static_cast<char*>(call.output(0).data);
  for (size_t r = 0; r < pos.size(); ++r)
    std::memcpy(out + r * row_bytes, in + static_cast<size_t>(pos[r]) * row_bytes, row_bytes);
  return 0;
}

}  // namespace

void register_dynamic_externs() {
  register_extern("anvil.nonzero", nonzero_extern);
  register_extern("anvil.mask_rows", mask_rows_extern);
}

}  // namespace anvil::runtime
