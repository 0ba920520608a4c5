// Runtime extern kernels for aten.embedding_bag.padding_idx and aten.repeat_interleave.Tensor,
// and the Tensor-level implementations they share with the reference kernels (embedding_bag.h).
#include "runtime/kernels/embedding_bag.h"

#include "runtime/kernels/kernel_util.h"

namespace anvil::runtime::kern {

namespace {

/// The per-bag [start, end) ranges into the flattened indices.
std::vector<std::pair<int64_t, int64_t>> bag_ranges(const Tensor& indices,
                                                    const std::optional<Tensor>& offsets,
                                                    int64_t bags, bool include_last,
                                                    const std::string& where) {
  std::vector<std::pair<int64_t, int64_t>> r;
  if (indices.dim() == 2) {
    const int64_t l = indices.size(1);
    for (int64_t b = 0; b < bags; ++b) r.emplace_back(b * l, (b + 1) * l);
    return r;
  }
  const int64_t n = indices.numel();
  const std::vector<int64_t> off = read_indices(*offsets, where, "offsets");
  if (!off.empty())
    ANVIL_CHECK(off[0] == 0, where,
                "offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
                "from position 0",
                "0", std::to_string(off[0]));
  for (int64_t b = 0; b < bags; ++b) {
    const int64_t s = off[b];
    const int64_t e = (b + 1 < static_cast<int64_t>(off.size()) && (include_last || b + 1 < bags))
                          ? off[b + 1]
                          : n;
    ANVIL_CHECK(s >= 0 && s <= e && e <= n, where,
                str("offsets of bag ", b, " are out of order or out of range"),
                str("0 <= offsets[", b, "] <= offsets[", b + 1, "] <= ", n), str(s, ", ", e));
    r.emplace_back(s, e);
  }
  return r;
}

/// The per-bag reduction in type A into `out` [B, D]; fills the per-bag counts and, in mode
/// max, the winning row of every output element.
template <typename A>
void bag_typed(const Tensor& w, const std::vector<int64_t>& idx,
               const std::vector<std::pair<int64_t, int64_t>>& ranges, const Tensor* psw,
               const EmbeddingBagArgs& a, Tensor& out, std::vector<int64_t>& counts,
               std::vector<int64_t>& argmax) {
  const int64_t d = w.size(1);
  const A* wp = w.data<A>();
  const A* pp = psw ? psw->data<A>() : nullptr;
  A* op = out.data<A>();
  for (size_t b = 0; b < ranges.size(); ++b) {
    A* row = op + static_cast<int64_t>(b) * d;
    std::fill(row, row + d, A(0));
    int64_t cnt = 0;
    for (int64_t i = ranges[b].first; i < ranges[b].second; ++i) {
      const int64_t k = idx[static_cast<size_t>(i)];
      if (k == a.padding_idx) continue;
      const A* src = wp + k * d;
      if (a.mode == 2) {
        int64_t* am = argmax.data() + static_cast<int64_t>(b) * d;
        for (int64_t j = 0; j < d; ++j)
          if (cnt == 0 || src[j] > row[j]) {
            row[j] = src[j];
            am[j] = k;
          }
      } else {
        const A s = pp ? pp[i] : A(1);
        for (int64_t j = 0; j < d; ++j) row[j] += s * src[j];
      }
      ++cnt;
    }
    if (a.mode == 1 && cnt > 0)
      for (int64_t j = 0; j < d; ++j) row[j] /= static_cast<A>(cnt);
    counts[b] = cnt;
  }
}

}  // namespace

int64_t embedding_bag_num_bags(const Shape& weight, const Shape& indices, const Shape* offsets,
                               const EmbeddingBagArgs& a, const std::string& where) {
  ANVIL_CHECK(weight.size() == 2, where, "weight has to be a 2-D tensor", "[num_weights, D]",
              shape_str(weight));
  ANVIL_CHECK(a.mode >= 0 && a.mode <= 2, where, "unknown embedding_bag mode",
              "0 (sum), 1 (mean) or 2 (max)", std::to_string(a.mode));
  if (indices.size() == 2) return indices[0];
  ANVIL_CHECK(indices.size() == 1, where, "input has to be a 1-D or 2-D tensor", "1-D or 2-D",
              shape_str(indices));
  ANVIL_CHECK(offsets && offsets->size() == 1, where,
              "offsets has to be a 1-D tensor when input is 1-D", "1-D offsets",
              offsets ? shape_str(*offsets) : std::string("none"));
  const int64_t bags = (*offsets)[0] - (a.include_last_offset ? 1 : 0);
  ANVIL_CHECK(bags >= 0, where, "include_last_offset needs at least one offset", ">= 1 offsets",
              shape_str(*offsets));
  return bags;
}

void embedding_bag(const Tensor& weight, const Tensor& indices,
                   const std::optional<Tensor>& offsets,
                   const std::optional<Tensor>& per_sample_weights, const EmbeddingBagArgs& a,
                   const Tensor& output, const Tensor& offset2bag, const Tensor& bag_size,
                   const Tensor& max_indices, const std::string& where) {
  const Shape osz = offsets ? offsets->sizes() : Shape{};
  const int64_t bags =
      embedding_bag_num_bags(weight.sizes(), indices.sizes(), offsets ? &osz : nullptr, a, where);
  ANVIL_CHECK(is_floating(weight.dtype()) && !is_float8(weight.dtype()), where,
              "embedding_bag needs a floating weight", "f16, bf16, f32 or f64",
              dtype_name(weight.dtype()));
  const int64_t n = indices.numel(), rows = weight.size(0), d = weight.size(1);
  if (per_sample_weights) {
    ANVIL_CHECK(a.mode == 0, where, "per_sample_weights is only supported for mode='sum'", "mode 0",
                std::to_string(a.mode));
    ANVIL_CHECK(per_sample_weights->dtype() == weight.dtype() &&
                    per_sample_weights->sizes() == indices.sizes(),
                where, "per_sample_weights must have the dtype of weight and the shape of input",
                str(dtype_name(weight.dtype()), shape_str(indices.sizes())),
                per_sample_weights->type_str());
  }
  const std::vector<int64_t> idx = read_indices(indices, where, "indices");
  for (int64_t k : idx)
    ANVIL_CHECK(k >= 0 && k < rows, where, str("index ", k, " is out of range"),
                str("an index in [0, ", rows - 1, "]"), std::to_string(k));
  const auto ranges = bag_ranges(indices, offsets, bags, a.include_last_offset, where);
  ANVIL_CHECK(output.dim() == 2 && output.size(0) == bags && output.size(1) == d, where,
              "output 0 has the wrong sizes", str("[", bags, ", ", d, "]"), output.type_str());
  const DType adt = weight.dtype() == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  const Tensor w = weight.to(adt).contiguous();
  std::optional<Tensor> psw;
  if (per_sample_weights) psw = per_sample_weights->to(adt).contiguous();
  Tensor acc = Tensor::empty({bags, d}, adt);
  std::vector<int64_t> counts(static_cast<size_t>(bags), 0);
  std::vector<int64_t> argmax(a.mode == 2 ? static_cast<size_t>(bags * d) : 0, 0);
  if (adt == DType::kFloat64)
    bag_typed<double>(w, idx, ranges, psw ? &*psw : nullptr, a, acc, counts, argmax);
  else
    bag_typed<float>(w, idx, ranges, psw ? &*psw : nullptr, a, acc, counts, argmax);
  copy_cast(output, acc);
  // offset2bag: [n] or [0].
  if (offset2bag.numel() > 0) {
    ANVIL_CHECK(offset2bag.numel() == n, where, "output 1 (offset2bag) has the wrong size",
                str("0 or ", n), offset2bag.type_str());
    std::vector<int64_t> o2b(static_cast<size_t>(n), 0);
    for (size_t b = 0; b < ranges.size(); ++b)
      for (int64_t i = ranges[b].first; i < ranges[b].second; ++i)
        o2b[static_cast<size_t>(i)] = static_cast<int64_t>(b);
    copy_cast(offset2bag, Tensor::from_vector(o2b, offset2bag.sizes()));
  }
  // bag_size: the number of non-padding indices per bag, in every mode.
  std::vector<int64_t> bs(static_cast<size_t>(bag_size.numel()), 0);
  for (size_t b = 0; b < counts.size() && b < bs.size(); ++b) bs[b] = counts[b];
  if (!bs.empty()) copy_cast(bag_size, Tensor::from_vector(bs, bag_size.sizes()));
  // max_indices: the winning rows in mode max; a copy of bag_size otherwise.
  if (max_indices.numel() > 0) {
    std::vector<int64_t> mi(static_cast<size_t>(max_indices.numel()), 0);
    const std::vector<int64_t>& from = a.mode == 2 ? argmax : bs;
    std::copy(from.begin(), from.begin() + std::min(from.size(), mi.size()), mi.begin());
    copy_cast(max_indices, Tensor::from_vector(mi, max_indices.sizes()));
  }
}

int64_t repeat_interleave_size(const Tensor& repeats, const std::string& where) {
  ANVIL_CHECK(repeats.dim() <= 1, where, "repeats has to be a 1-D tensor", "1-D",
              repeats.type_str());
  ANVIL_CHECK(repeats.dtype() == DType::kInt64 || repeats.dtype() == DType::kInt32, where,
              "repeats has to be an int64 or int32 tensor", "int64 or int32",
              dtype_name(repeats.dtype()));
  int64_t total = 0;
  for (int64_t r : read_indices(repeats, where, "repeats")) {
    ANVIL_CHECK(r >= 0, where, "repeats can not be negative", ">= 0", std::to_string(r));
    total += r;
  }
  return total;
}

void repeat_interleave(const Tensor& repeats, const Tensor& out, const std::string& where) {
  const int64_t total = repeat_interleave_size(repeats, where);
  ANVIL_CHECK(out.numel() == total, where,
              "the sum of repeats does not match the output size (output_size)",
              std::to_string(out.numel()), std::to_string(total));
  std::vector<int64_t> v;
  v.reserve(static_cast<size_t>(total));
  const std::vector<int64_t> reps = read_indices(repeats, where, "repeats");
  for (size_t i = 0; i < reps.size(); ++i)
    v.insert(v.end(), static_cast<size_t>(reps[i]), static_cast<int64_t>(i));
  copy_cast(out, Tensor::from_vector(v, out.sizes()));
}

}  // namespace anvil::runtime::kern

namespace anvil::runtime {

namespace {

/// aten.embedding_bag.padding_idx: weight, indices, offsets, per_sample_weights?; attrs
/// scale_grad_by_freq, mode, sparse, include_last_offset, padding_idx. Four outputs.
int embedding_bag_extern(ExternCall& call) {
  ANVIL_CHECK(call.num_outputs() == 4, call.target(), "embedding_bag has four outputs", "4",
              std::to_string(call.num_outputs()));
  kern::EmbeddingBagArgs a;
  a.mode = call.attr_int("mode", 0);
  a.include_last_offset = call.attr_bool("include_last_offset", false);
  a.padding_idx = call.attr_int("padding_idx", -1);
  kern::embedding_bag(call.input_tensor(0), call.input_tensor(1), kern::opt_input(call, 2),
                      kern::opt_input(call, 3), a, call.output_tensor(0), call.output_tensor(1),
                      call.output_tensor(2), call.output_tensor(3), call.target());
  return 0;
}

/// aten.repeat_interleave.Tensor: repeats; attr output_size.
int repeat_interleave_extern(ExternCall& call) {
  const Tensor repeats = call.input_tensor(0);
  kern::repeat_interleave(repeats, call.output_tensor(0), call.target());
  return 0;
}

}  // namespace

/// Registers the embedding_bag / repeat_interleave externs.
void register_embedding_bag_externs() {
  register_extern("aten.embedding_bag.padding_idx", embedding_bag_extern);
  register_extern("aten._embedding_bag.default", embedding_bag_extern);
  register_extern("aten.repeat_interleave.Tensor", repeat_interleave_extern);
}

}  // namespace anvil::runtime
