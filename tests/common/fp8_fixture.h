// float8 tensors in fixtures: .npy has no float8 type, so tests/fixtures/gen/export_fp8.py saves
// a float8 tensor as its bytes (uint8). These helpers reinterpret such bytes as the float8 dtype
// a package or graph expects, and compare float8 results by their bits.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/check.h"
#include "core/tensor.h"

namespace anvil::test {

/// `t` (a uint8 fixture array) as `dtype` when `dtype` is float8 (the same bytes), else `t`
/// converted to `dtype`.
inline Tensor fixture_as(const Tensor& t, DType dtype) {
  if (!is_float8(dtype)) return t.to(dtype);
  EXPECT_EQ(t.dtype(), DType::kUInt8) << "float8 fixtures hold the bytes as uint8";
  const Tensor c = t.contiguous();
  return Tensor(c.storage(), dtype, c.sizes(), c.strides(), c.storage_offset());
}

/// The bytes of a float8 (or uint8) host tensor, row-major.
inline std::vector<uint8_t> bytes_of(const Tensor& t) {
  const Tensor c = t.contiguous();
  std::vector<uint8_t> out(static_cast<size_t>(c.numel()));
  if (!out.empty()) std::memcpy(out.data(), c.data_ptr(), out.size());
  return out;
}

/// Expects `got` to equal the fixture output `want`: bit for bit for float8 (`want` holds the
/// bytes; with `nan_bits` false any NaN code matches any NaN code), exactly for other dtypes (NaN
/// where NaN, infinities equal) unless `tol` > 0.
inline void expect_fixture_output(const Tensor& got, const Tensor& want, const std::string& label,
                                  double tol = 0, bool nan_bits = true) {
  ASSERT_EQ(got.sizes(), want.sizes()) << label;
  if (is_float8(got.dtype())) {
    const auto g = bytes_of(got), w = bytes_of(want);
    const Tensor gf = got.to(DType::kFloat32), wf = fixture_as(want, got.dtype()).to(DType::kFloat32);
    const float* gv = static_cast<const float*>(gf.data_ptr());
    const float* wv = static_cast<const float*>(wf.data_ptr());
    size_t bad = 0, first = g.size();
    for (size_t i = 0; i < g.size(); ++i) {
      if (!nan_bits && gv[i] != gv[i] && wv[i] != wv[i]) continue;  // both NaN
      if (g[i] != w[i] && bad++ == 0) first = i;
    }
    EXPECT_EQ(bad, 0u) << label << " (" << got.type_str() << "): " << bad
                       << " bytes differ, the first at " << first << ": got "
                       << (first < g.size() ? int(g[first]) : -1) << ", want "
                       << (first < g.size() ? int(w[first]) : -1);
    return;
  }
  int64_t at = -1;
  const double err = rel_error(got.to_doubles(), want.to_doubles(), &at);
  EXPECT_LE(err, tol) << label << " (" << got.type_str() << "), first bad element " << at;
}

}  // namespace anvil::test
