#include "core/tensor.h"

#include <cstring>
#include <numeric>

#include "anvil/anvil_fp8.h"
#include "core/allocator.h"

namespace anvil {

Tensor::Tensor(std::shared_ptr<Storage> storage, DType dtype, Shape sizes, Shape strides,
               int64_t storage_offset)
    : storage_(std::move(storage)),
      dtype_(dtype),
      sizes_(std::move(sizes)),
      strides_(std::move(strides)),
      offset_(storage_offset) {
  ANVIL_CHECK(sizes_.size() == strides_.size(), "Tensor", "sizes and strides differ in rank",
              std::to_string(sizes_.size()), std::to_string(strides_.size()));
}

int64_t shape_numel(const Shape& s) {
  for (int64_t d : s)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : s)
    if (__builtin_mul_overflow(n, d, &n))
      throw Error("shape has too many elements", "shape_numel", "fewer than 2^63 elements",
                  shape_str(s));
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const std::string& where) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      throw Error(str("shapes cannot broadcast at dim ", i), where, shape_str(a), shape_str(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Shape Tensor::contiguous_strides(const Shape& sizes) {
  Shape st(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    st[i] = acc;
    // (An empty tensor's other dims may be huge: their product can leave int64.)
    if (__builtin_mul_overflow(acc, std::max<int64_t>(sizes[i], 1), &acc) && i > 0)
      throw Error("sizes too large for contiguous strides", "Tensor::contiguous_strides",
                  "a product of sizes (empty dims counted as 1) below 2^63", shape_str(sizes));
  }
  return st;
}

Tensor Tensor::empty(const Shape& sizes, DType dtype) {
  for (int64_t s : sizes)
    ANVIL_CHECK(s >= 0, "Tensor::empty", "negative size", "sizes >= 0", shape_str(sizes));
  if (!is_float8(dtype)) check_supported(dtype, "Tensor::empty");  // float8: stored and cast
  int64_t nbytes = 0;
  if (__builtin_mul_overflow(shape_numel(sizes), static_cast<int64_t>(dtype_size(dtype)), &nbytes))
    throw Error("tensor is too large", "Tensor::empty", "fewer than 2^63 bytes",
                str(dtype_name(dtype), shape_str(sizes)));
  auto st = Storage::allocate(static_cast<size_t>(nbytes));
  return Tensor(std::move(st), dtype, sizes, contiguous_strides(sizes), 0);
}

Tensor Tensor::full(const Shape& sizes, double value, DType dtype) {
  Tensor t = empty(sizes, dtype);
  t.fill(value);
  return t;
}

Tensor Tensor::scalar(double value, DType dtype) { return full({}, value, dtype); }

int64_t Tensor::numel() const { return shape_numel(sizes_); }

int64_t wrap_dim(int64_t d, int64_t rank, const std::string& where) {
  const int64_t n = rank == 0 ? 1 : rank;
  if (d < -n || d >= n)
    throw Error("dimension out of range", where, str("a dim in [", -n, ", ", n - 1, "]"),
                std::to_string(d));
  return d < 0 ? d + n : d;
}

int64_t Tensor::wrap_dim(int64_t d, bool for_insert) const {
  return ::anvil::wrap_dim(d, dim() + (for_insert ? 1 : 0), "Tensor::wrap_dim");
}

size_t Tensor::index_dim(int64_t d, const char* where) const {
  if (sizes_.empty())
    throw Error("a 0-d tensor has no dimensions", where, "a tensor with at least one dim",
                str("dim ", d, " of ", type_str()));
  try {
    return static_cast<size_t>(wrap_dim(d));
  } catch (const Error& e) {
    throw Error(e.what_part(), where, e.expected(), e.actual());
  }
}

void* Tensor::data_ptr() const {
  ANVIL_CHECK(defined(), "Tensor::data_ptr", "tensor is undefined", "a defined tensor", "none");
  return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size());
}

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;  // as torch: no elements, any strides
  int64_t expected = 1;
  for (size_t i = sizes_.size(); i-- > 0;) {
    if (sizes_[i] == 1) continue;
    if (strides_[i] != expected) return false;
    expected *= sizes_[i];
  }
  return true;
}

namespace {

/// Element loops below run on the host: device memory there would be a crash, not an error.
void require_host(const Tensor& t, const char* where) {
  ANVIL_CHECK(t.device().is_cpu(), where,
              "the tensor is in device memory; host code cannot read it (copy it with "
              "to(Device::cpu()) first)",
              "a cpu tensor", t.device().str());
}

}  // namespace

Tensor Tensor::to(Device device) const {
  ANVIL_CHECK(defined(), "Tensor::to(device)", "tensor is undefined", "a defined tensor", "none");
  device = concrete(device);
  const Device from = this->device();
  if (from == device) return *this;
  if (from.is_cpu()) {
    const Tensor src = contiguous();
    auto st = Storage::allocate(src.nbytes(), device, /*zero=*/false);
    if (src.nbytes() > 0)
      device_allocator(device).copy(st->data(), device, src.data_ptr(), from, src.nbytes());
    return Tensor(std::move(st), dtype_, sizes_, src.strides(), 0);
  }
  // device -> host or another device: the whole storage, so any view keeps its layout
  const size_t n = storage_->nbytes();
  auto st = Storage::allocate(n, device, /*zero=*/false);
  if (n > 0)
    device_allocator(from).copy(st->data(), device, storage_->data(), from, n);
  return Tensor(std::move(st), dtype_, sizes_, strides_, offset_);
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::clone() const {
  require_host(*this, "Tensor::clone");
  Tensor out = empty(sizes_, dtype_);
  out.copy_from(*this);
  return out;
}

namespace {

/// Tensor::copy_from where either side is float8.
void copy_float8(Tensor& out, const Tensor& src, const std::vector<int64_t>& src_off) {
  // float8 values convert through float32, as PyTorch's casts do (include/anvil/anvil_fp8.h)
  const int32_t sf = is_float8(src.dtype()) ? static_cast<int32_t>(src.dtype()) : 0;
  const DType dt = out.dtype();
  const int32_t df = is_float8(dt) ? static_cast<int32_t>(dt) : 0;
  std::vector<float> vals(src_off.size());
  if (sf == 0) {
    ANVIL_DISPATCH_ALL(src.dtype(), "Tensor::copy_from (to float8)", S, {
      const S* sp = static_cast<const S*>(src.data_ptr());
      for (size_t i = 0; i < vals.size(); ++i) vals[i] = cast_value<float, S>(sp[src_off[i]]);
    });
  }
  const uint8_t* s8 = static_cast<const uint8_t*>(src.data_ptr());
  size_t i = 0;
  if (df != 0) {
    uint8_t* dst = static_cast<uint8_t*>(out.data_ptr());
    for_each_offset(out.sizes(), out.strides(), [&](int64_t o) {
      const size_t k = i++;
      if (sf == df)
        dst[o] = s8[src_off[k]];  // same format: the bits
      else
        dst[o] = anvil_f32_to_fp8(df, sf != 0 ? anvil_fp8_to_f32(sf, s8[src_off[k]]) : vals[k]);
    });
    return;
  }
  ANVIL_DISPATCH_ALL(dt, "Tensor::copy_from (from float8)", D, {
    D* dst = static_cast<D*>(out.data_ptr());
    for_each_offset(out.sizes(), out.strides(), [&](int64_t o) {
      dst[o] = cast_value<D, float>(anvil_fp8_to_f32(sf, s8[src_off[i++]]));
    });
  });
}

}  // namespace

Tensor Tensor::to(DType dtype, bool copy) const {
  if (dtype == dtype_ && !copy) return *this;
  require_host(*this, "Tensor::to(dtype)");
  Tensor out = empty(sizes_, dtype);
  out.copy_from(*this);
  return out;
}

void Tensor::copy_from(const Tensor& src) {
  ANVIL_CHECK(src.sizes() == sizes_, "Tensor::copy_from", "shape mismatch", shape_str(sizes_),
              shape_str(src.sizes()));
  if (numel() == 0) return;
  require_host(*this, "Tensor::copy_from");
  require_host(src, "Tensor::copy_from");
  if (src.dtype() == dtype_ && is_contiguous() && src.is_contiguous()) {
    std::memmove(data_ptr(), src.data_ptr(), nbytes());
    return;
  }
  // Gather source offsets in row-major order, then scatter into destination order.
  std::vector<int64_t> src_off;
  src_off.reserve(static_cast<size_t>(numel()));
  for_each_offset(src.sizes(), src.strides(), [&](int64_t o) { src_off.push_back(o); });
  if (is_float8(dtype_) || is_float8(src.dtype())) {
    copy_float8(*this, src, src_off);
    return;
  }
  ANVIL_DISPATCH_ALL(dtype_, "Tensor::copy_from", D, {
    D* dst = static_cast<D*>(data_ptr());
    ANVIL_DISPATCH_ALL(src.dtype(), "Tensor::copy_from", S, {
      const S* sp = static_cast<const S*>(src.data_ptr());
      size_t i = 0;
      for_each_offset(sizes_, strides_,
                      [&](int64_t o) { dst[o] = cast_value<D, S>(sp[src_off[i++]]); });
    });
  });
}


void Tensor::fill(double value) {
  require_host(*this, "Tensor::fill");
  if (is_float8(dtype_)) {  // through float32, as PyTorch's fill_ converts
    const uint8_t v = anvil_f32_to_fp8(static_cast<int32_t>(dtype_), static_cast<float>(value));
    uint8_t* p = static_cast<uint8_t*>(data_ptr());
    for_each_offset(sizes_, strides_, [&](int64_t o) { p[o] = v; });
    return;
  }
  ANVIL_DISPATCH_ALL(dtype_, "Tensor::fill", T, {
    T* p = static_cast<T*>(data_ptr());
    T v = cast_value<T, double>(value);
    for_each_offset(sizes_, strides_, [&](int64_t o) { p[o] = v; });
  });
}

Tensor Tensor::as_strided(const Shape& sizes, const Shape& strides, int64_t storage_offset) const {
  ANVIL_CHECK(sizes.size() == strides.size(), "Tensor::as_strided", "sizes and strides differ in rank",
              std::to_string(sizes.size()), std::to_string(strides.size()));
  ANVIL_CHECK(defined(), "Tensor::as_strided", "tensor is undefined", "a defined tensor", "none");
  for (int64_t sz : sizes)
    ANVIL_CHECK(sz >= 0, "Tensor::as_strided", "negative size", "sizes >= 0", shape_str(sizes));
  // Bounds: the largest reachable element must lie inside the storage.
  if (shape_numel(sizes) > 0) {
    int64_t hi = storage_offset, lo = storage_offset;
    for (size_t i = 0; i < sizes.size(); ++i) {
      int64_t span = (sizes[i] - 1) * strides[i];
      if (span > 0) hi += span; else lo += span;
    }
    int64_t capacity = static_cast<int64_t>(storage_->nbytes() / element_size());
    ANVIL_CHECK(lo >= 0 && hi < capacity, "Tensor::as_strided", "view exceeds its storage",
                str("elements in [0, ", capacity, ")"), str("[", lo, ", ", hi, "]"));
  }
  return Tensor(storage_, dtype_, sizes, strides, storage_offset);
}

Tensor Tensor::view(const Shape& req) const {
  Shape sizes = req;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      ANVIL_CHECK(infer < 0, "Tensor::view", "only one dimension can be -1", "one -1",
                  shape_str(req));
      infer = static_cast<int64_t>(i);
    } else {
      ANVIL_CHECK(sizes[i] >= 0, "Tensor::view", "negative size", "sizes >= -1", shape_str(req));
      known *= sizes[i];
    }
  }
  if (infer >= 0) {
    ANVIL_CHECK(known != 0 && numel() % known == 0, "Tensor::view", "cannot infer the -1 dim",
                str(numel(), " elements"), shape_str(req));
    sizes[infer] = numel() / known;
  }
  ANVIL_CHECK(shape_numel(sizes) == numel(), "Tensor::view", "element count changes",
              str(shape_str(sizes_), " (", numel(), " elements)"), shape_str(sizes));
  // Compute strides compatible with the current layout (torch's computeStride).
  Shape new_strides(sizes.size());
  if (numel() == 0 || sizes_.empty()) return as_strided(sizes, contiguous_strides(sizes), offset_);
  int64_t view_d = static_cast<int64_t>(sizes.size()) - 1;
  int64_t chunk_base_stride = strides_.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t td = dim() - 1; td >= 0; --td) {
    tensor_numel *= sizes_[td];
    if (td == 0 || (sizes_[td - 1] != 1 && strides_[td - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
        new_strides[view_d] = view_numel * chunk_base_stride;
        view_numel *= sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel)
        throw Error("view is not compatible with the input's strides; use reshape",
                    "Tensor::view", shape_str(sizes_), str("strides ", shape_str(strides_)));
      if (td > 0) {
        chunk_base_stride = strides_[td - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  while (view_d >= 0) new_strides[view_d--] = 1;  // trailing size-1 dims
  return as_strided(sizes, new_strides, offset_);
}

Tensor Tensor::reshape(const Shape& sizes) const {
  try {
    return view(sizes);
  } catch (const Error&) {
    return clone().view(sizes);
  }
}

Tensor Tensor::permute(const Shape& dims) const {
  ANVIL_CHECK(static_cast<int64_t>(dims.size()) == dim(), "Tensor::permute",
              "number of dims does not match rank", std::to_string(dim()),
              std::to_string(dims.size()));
  Shape sz(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t d = wrap_dim(dims[i]);
    ANVIL_CHECK(!seen[d], "Tensor::permute", "repeated dim", "a permutation", shape_str(dims));
    seen[d] = true;
    sz[i] = sizes_[d];
    st[i] = strides_[d];
  }
  return Tensor(storage_, dtype_, sz, st, offset_);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  if (dim() == 0) return *this;
  d0 = wrap_dim(d0);
  d1 = wrap_dim(d1);
  Shape sz = sizes_, st = strides_;
  std::swap(sz[d0], sz[d1]);
  std::swap(st[d0], st[d1]);
  return Tensor(storage_, dtype_, sz, st, offset_);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, true);
  Shape sz = sizes_, st = strides_;
  int64_t s = d < dim() ? sizes_[d] * strides_[d] : 1;
  sz.insert(sz.begin() + d, 1);
  st.insert(st.begin() + d, s);
  return Tensor(storage_, dtype_, sz, st, offset_);
}

Tensor Tensor::squeeze(int64_t d) const {
  if (dim() == 0) return *this;
  d = wrap_dim(d);
  if (sizes_[d] != 1) return *this;
  Shape sz = sizes_, st = strides_;
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return Tensor(storage_, dtype_, sz, st, offset_);
}

Tensor Tensor::expand(const Shape& req) const {
  ANVIL_CHECK(req.size() >= sizes_.size(), "Tensor::expand", "target has fewer dims than input",
              shape_str(sizes_), shape_str(req));
  size_t lead = req.size() - sizes_.size();
  Shape sz(req.size()), st(req.size());
  for (size_t i = 0; i < req.size(); ++i) {
    if (i < lead) {
      ANVIL_CHECK(req[i] >= 0, "Tensor::expand", "-1 is not allowed for a new leading dim",
                  "a size >= 0", shape_str(req));
      sz[i] = req[i];
      st[i] = 0;
      continue;
    }
    int64_t have = sizes_[i - lead], want = req[i] == -1 ? have : req[i];
    ANVIL_CHECK(want >= 0, "Tensor::expand", str("negative size for dim ", i), "a size >= 0 or -1",
                shape_str(req));
    if (have == want) {
      sz[i] = have;
      st[i] = strides_[i - lead];
    } else {
      ANVIL_CHECK(have == 1, "Tensor::expand", str("dim ", i, " is not 1 and cannot expand"),
                  shape_str(sizes_), shape_str(req));
      sz[i] = want;
      st[i] = 0;
    }
  }
  return Tensor(storage_, dtype_, sz, st, offset_);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_dim(d);
  ANVIL_CHECK(step > 0, "Tensor::slice", "step must be positive", "> 0", std::to_string(step));
  int64_t n = sizes_[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::min(std::max<int64_t>(start, 0), n);
  end = std::min(std::max<int64_t>(end, start), n);
  Shape sz = sizes_, st = strides_;
  sz[d] = (end - start + step - 1) / step;
  st[d] = strides_[d] * step;
  return Tensor(storage_, dtype_, sz, st, offset_ + start * strides_[d]);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap_dim(d);
  int64_t n = sizes_[d];
  ANVIL_CHECK(index >= -n && index < n, "Tensor::select", str("index out of range for dim ", d),
              str("[", -n, ", ", n - 1, "]"), std::to_string(index));
  if (index < 0) index += n;
  Shape sz = sizes_, st = strides_;
  sz.erase(sz.begin() + d);
  st.erase(st.begin() + d);
  return Tensor(storage_, dtype_, sz, st, offset_ + index * strides_[d]);
}

double Tensor::item_at(int64_t linear) const {
  ANVIL_CHECK(linear >= 0 && linear < numel(), "Tensor::item_at", "index out of range",
              str("[0, ", numel(), ")"), std::to_string(linear));
  int64_t off = 0;
  for (size_t i = sizes_.size(); i-- > 0;) {
    off += (linear % sizes_[i]) * strides_[i];
    linear /= sizes_[i];
  }
  double out = 0;
  require_host(*this, "Tensor::item_at");
  ANVIL_DISPATCH_ALL(dtype_, "Tensor::item_at", T,
                     { out = cast_value<double, T>(static_cast<const T*>(data_ptr())[off]); });
  return out;
}

double Tensor::item() const {
  ANVIL_CHECK(numel() == 1, "Tensor::item", "tensor must have one element", "1",
              std::to_string(numel()));
  return item_at(0);
}

std::vector<double> Tensor::to_doubles() const {
  std::vector<double> out;
  require_host(*this, "Tensor::to_doubles");
  out.reserve(static_cast<size_t>(numel()));
  if (is_float8(dtype_)) {
    const uint8_t* p = static_cast<const uint8_t*>(data_ptr());
    const int32_t format = static_cast<int32_t>(dtype_);
    for_each_offset(sizes_, strides_, [&](int64_t o) { out.push_back(anvil_fp8_to_f32(format, p[o])); });
    return out;
  }
  ANVIL_DISPATCH_ALL(dtype_, "Tensor::to_doubles", T, {
    const T* p = static_cast<const T*>(data_ptr());
    for_each_offset(sizes_, strides_, [&](int64_t o) { out.push_back(cast_value<double, T>(p[o])); });
  });
  return out;
}

std::string Tensor::type_str() const { return std::string(dtype_name(dtype_)) + shape_str(sizes_); }

}  // namespace anvil
