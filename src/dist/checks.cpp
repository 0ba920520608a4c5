// Argument checks and fingerprints (checks.h).
#include "dist/checks.h"

#include <algorithm>
#include <cstring>

#include "core/allocator.h"
#include "core/error.h"
#include "dist/reduce.h"

namespace anvil::dist::detail {

std::string tensor_desc(const Tensor& t) {
  return t.defined() ? t.type_str() : std::string("undefined");
}

void check_tensor(const Tensor& t, const Device& device, const std::string& where,
                  const std::string& role) {
  if (!t.defined())
    throw Error(str("the ", role, " tensor is undefined"), where, "a defined tensor", "undefined");
  const Device d = t.device();
  const bool same = d.type == device.type &&
                    (device.is_cpu() || device.index < 0 || concrete(d).index == device.index);
  if (!same)
    throw Error(device.is_cpu() ? str("the ", role, " tensor is on ", d.str(),
                                      ", not on the CPU (this backend moves host memory)")
                                : str("the ", role, " tensor is on ", d.str(),
                                      ", not on the group's device ", device.str(),
                                      " (a group uses one device: multi-device ops are not "
                                      "supported)"),
                where, device.str(), d.str());
  if (!is_collective_dtype(t.dtype()))  // (the message's text built only for a failure)
    check_collective_dtype(t.dtype(), str(where, " (", role, ")"));
}

void check_output(const Tensor& t, const Device& device, const std::string& where,
                  const std::string& role) {
  check_tensor(t, device, where, role);
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.size(d) > 1 && t.stride(d) == 0)
      throw Error(str("the ", role,
                      " tensor overlaps itself (an expanded view) and cannot be "
                      "written"),
                  where, "a dense tensor", str("stride 0 in dim ", d));
}

void check_rank(int rank, int size, const std::string& where, const std::string& role) {
  if (rank < 0 || rank >= size)
    throw Error(str(role, " rank ", rank, " is outside the group"), where,
                str("0 <= ", role, " < ", size), std::to_string(rank));
}

void check_same_dtype(const Tensor& out, const Tensor& in, const std::string& where) {
  if (out.dtype() != in.dtype())
    throw Error("the output dtype differs from the input dtype", where, dtype_name(in.dtype()),
                dtype_name(out.dtype()));
}

void check_all_gather(const Tensor& out, const Tensor& in, int world, const std::string& where) {
  check_same_dtype(out, in, where);
  Shape flat = in.sizes(), stacked = in.sizes();
  if (flat.empty())
    flat = {world};
  else
    flat[0] *= world;
  stacked.insert(stacked.begin(), world);
  if (out.sizes() != flat && out.sizes() != stacked)
    throw Error("the output tensor of all_gather has the wrong shape", where,
                str(shape_str(flat), " (or ", shape_str(stacked), ") for input ",
                    shape_str(in.sizes()), " on ", world, " ranks"),
                shape_str(out.sizes()));
}

void check_reduce_scatter(const Tensor& out, const Tensor& in, int world,
                          const std::string& where) {
  check_same_dtype(out, in, where);
  if (in.dim() == 0)
    throw Error("reduce_scatter needs an input with at least one dim", where, "dim >= 1", "0-d");
  if (in.size(0) % world != 0)
    throw Error(
        str("dim 0 of the input (", in.size(0), ") is not divisible by the group size ", world),
        where, str("a multiple of ", world), std::to_string(in.size(0)));
  Shape want = in.sizes();
  want[0] /= world;
  if (out.sizes() != want)
    throw Error("the output tensor of reduce_scatter has the wrong shape", where, shape_str(want),
                shape_str(out.sizes()));
}

namespace {

/// Validates one split list against dim 0 and returns the element counts.
std::vector<int64_t> split_counts(const std::vector<int64_t>& splits, int64_t d0, int64_t row,
                                  int world, const std::string& where, const char* which) {
  std::vector<int64_t> counts(static_cast<size_t>(world));
  if (splits.empty()) {
    if (d0 % world != 0)
      throw Error(str("dim 0 of the ", which, " tensor (", d0,
                      ") does not divide equally across group size ", world,
                      " and no split sizes were given"),
                  where, str("a multiple of ", world), std::to_string(d0));
    for (auto& c : counts) c = d0 / world * row;
    return counts;
  }
  if (static_cast<int64_t>(splits.size()) != world)
    throw Error(str("number of ", which, " split sizes not equal to group size"), where,
                std::to_string(world), std::to_string(splits.size()));
  int64_t sum = 0;
  for (size_t j = 0; j < splits.size(); ++j) {
    if (splits[j] < 0)
      throw Error(str(which, " split size ", j, " is negative"), where, ">= 0",
                  std::to_string(splits[j]));
    sum += splits[j];
    counts[j] = splits[j] * row;
  }
  if (sum != d0)
    throw Error(str(which, " split sizes don't match total dim 0 size"), where, str("sum ", d0),
                str("sum ", sum));
  return counts;
}

}  // namespace

std::pair<std::vector<int64_t>, std::vector<int64_t>> check_all_to_all(
    const Tensor& out, const Tensor& in, const std::vector<int64_t>& out_splits,
    const std::vector<int64_t>& in_splits, int world, const std::string& where) {
  check_same_dtype(out, in, where);
  if (in.dim() == 0 || out.dim() == 0)
    throw Error("all_to_all_single needs tensors with at least one dim", where, "dim >= 1",
                str(tensor_desc(in), " -> ", tensor_desc(out)));
  const Shape in_row(in.sizes().begin() + 1, in.sizes().end());
  const Shape out_row(out.sizes().begin() + 1, out.sizes().end());
  if (in_row != out_row)
    throw Error("all_to_all_single: input and output rows differ in shape", where,
                shape_str(in_row), shape_str(out_row));
  const int64_t row = shape_numel(in_row);
  return {split_counts(out_splits, out.size(0), row, world, where, "output"),
          split_counts(in_splits, in.size(0), row, world, where, "input")};
}

void check_per_rank_list(size_t n, int world, const std::string& what, const std::string& where) {
  if (static_cast<int64_t>(n) != world)
    throw Error(str("the ", what,
                    " is not valid for the number of participants: it needs one "
                    "tensor per rank"),
                where, str(world, " tensors"), str(n, " tensors"));
}

void check_like(const Tensor& t, const Tensor& ref, const std::string& where,
                const std::string& role) {
  if (t.dtype() != ref.dtype())
    throw Error(str("the ", role, " tensor has another dtype than the op's tensors"), where,
                dtype_name(ref.dtype()), dtype_name(t.dtype()));
  if (t.numel() != ref.numel())
    throw Error(str("tensor operand counts must be same: the ", role, " tensor has ", t.numel(),
                    " elements"),
                where, str(shape_str(ref.sizes()), " (", ref.numel(), " elements)"),
                str(shape_str(t.sizes()), " (", t.numel(), " elements)"));
  if (t.sizes() != ref.sizes())
    throw Error(str("the ", role, " tensor has another shape than the op's tensors"), where,
                shape_str(ref.sizes()), shape_str(t.sizes()));
}

void check_list_sizes(size_t outs, size_t ins, const std::string& where) {
  if (outs != ins)
    throw Error("tensor input/output lists must have the same size", where, std::to_string(ins),
                std::to_string(outs));
}

namespace {
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
}  // namespace

Tensor encode_fingerprint(const std::string& desc) {
  Tensor t = Tensor::empty({kFingerprintBytes}, DType::kUInt8);
  uint8_t* p = t.data<uint8_t>();
  const uint64_t h = fnv1a(desc);
  std::memcpy(p, &h, 8);
  const size_t n = std::min(desc.size(), static_cast<size_t>(kFingerprintBytes - 9));
  std::memcpy(p + 8, desc.data(), n);  // the rest stays zero: NUL-terminated
  return t;
}

std::string decode_fingerprint(const uint8_t* p, uint64_t& hash) {
  std::memcpy(&hash, p, 8);
  const char* s = reinterpret_cast<const char*>(p + 8);
  return std::string(s, strnlen(s, kFingerprintBytes - 8));
}

}  // namespace anvil::dist::detail
