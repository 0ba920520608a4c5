// Runtime extern kernels for sorting along a dim: aten.sort.default / .stable, aten.argsort.default
// / .stable and aten.topk.default, in the reference kernels' order (core/sort_order.h: stable,
// NaN last ascending and first descending; topk takes the first k of the descending order when
// `largest`, else of the ascending one). Lines are split over the runtime thread pool.
#include "core/sort_order.h"
#include "runtime/kernels/kernel_util.h"

namespace anvil::runtime {

namespace {

/// Sorts every line of input 0 along attribute `dim` into values (output `vi`, or none when -1)
/// and indices (output `ii`), keeping the first `k` (-1: all) of each line.
int sort_lines(ExternCall& call, int32_t vi, int32_t ii, bool descending, int64_t k) {
  const std::string where = call.target();
  const Tensor self = call.input_tensor(0);
  const int64_t dim = wrap_dim(call.attr_int("dim", -1), self.dim(), where);
  const int64_t n = self.dim() == 0 ? 1 : self.size(dim);
  if (k < 0) k = n;
  ANVIL_CHECK(k <= n, where, "selected index k out of range", str("0 <= k <= ", n), str(k));
  Shape out_sizes = self.sizes();
  if (self.dim() > 0) out_sizes[static_cast<size_t>(dim)] = k;
  std::optional<Tensor> values;
  if (vi >= 0) values = kern::checked_output(call, vi, out_sizes, self.dtype());
  const Tensor indices = kern::checked_output(call, ii, out_sizes, DType::kInt64);
  if (indices.numel() == 0 || self.numel() == 0) return 0;
  const SortLines lines_of = sort_line_offsets(self, values ? *values : indices, indices, dim);
  const auto& in_off = lines_of.in;
  const auto& v_off = lines_of.values;
  const auto& i_off = lines_of.indices;
  const int64_t lines = static_cast<int64_t>(in_off.size()) / n;
  ANVIL_DISPATCH_REAL(self.dtype(), where, T, {
    using C = kern::CmpType<T>;
    const T* px = static_cast<const T*>(self.data_ptr());
    T* pv = values ? static_cast<T*>(values->data_ptr()) : nullptr;
    int64_t* pi = indices.data<int64_t>();
    parallel_for(0, lines, kern::grain_for(n * 8), [&](int64_t b, int64_t e) {
      std::vector<int64_t> order;
      for (int64_t l = b; l < e; ++l) {
        const int64_t* src = in_off.data() + l * n;
        sort_order<C>(n, [&](int64_t j) { return static_cast<C>(px[src[j]]); }, descending,
                      order);
        for (int64_t j = 0; j < k; ++j) {
          const size_t o = static_cast<size_t>(l * k + j);
          if (pv) pv[v_off[o]] = px[src[order[static_cast<size_t>(j)]]];
          pi[i_off[o]] = order[static_cast<size_t>(j)];
        }
      }
    });
  });
  return 0;
}

/// aten.sort.default / aten.sort.stable: values and indices.
int sort_extern(ExternCall& call) {
  return sort_lines(call, 0, 1, call.attr_bool("descending", false), -1);
}

/// aten.argsort.default / aten.argsort.stable: indices only.
int argsort_extern(ExternCall& call) {
  return sort_lines(call, -1, 0, call.attr_bool("descending", false), -1);
}

/// aten.topk.default: the first k values and indices (sorted=False gives the same order).
int topk_extern(ExternCall& call) {
  const int64_t k = call.attr_int("k");
  ANVIL_CHECK(k >= 0, call.target(), "selected index k out of range", "k >= 0", str(k));
  return sort_lines(call, 0, 1, call.attr_bool("largest", true), k);
}

}  // namespace

/// Registers the sorting externs.
void register_sort_externs() {
  register_extern("aten.sort.default", sort_extern);
  register_extern("aten.sort.stable", sort_extern);
  register_extern("aten.argsort.default", argsort_extern);
  register_extern("aten.argsort.stable", argsort_extern);
  register_extern("aten.topk.default", topk_extern);
}

}  // namespace anvil::runtime
