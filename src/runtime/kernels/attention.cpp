// Runtime extern kernel for aten.scaled_dot_product_attention.default, with the semantics of the
// reference kernel (src/ops/attention.cpp, torch >= 2.5's math path):
//   * f16 / bf16 are computed in fp32 (f64 in f64) and rounded once;
//   * scores = scale * q @ k^T (+ mask): a bool mask adds 0 / -inf, a float mask is added,
//     is_causal masks j > i (top-left aligned) and excludes an explicit mask;
//   * softmax is "safe": a fully masked row gives zeros, a NaN row gives NaN (fp32 rows: a
//     vectorised pass with a polynomial exp, vec_math.h);
//   * batch dims broadcast; enable_gqa maps query head h to key/value head h / (Hq / Hkv)
//     without copying.
// Work is split into (batch x head, block of query rows) units on the thread pool. Computed in
// fp32 (f32, f16, bf16), K^T and V of every batch x head are first packed once (in parallel over
// batch x head) into the panels of anvil's packed GEMM kernel (gemm_packed.h), and each unit runs
// QK^T and PV through that kernel on its rows; f64 runs the two GEMMs through runtime::gemm
// (OpenBLAS). Operands are used in place when they have unit-stride rows or columns.
#include "runtime/kernels/gemm_packed.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/kernels/vec_math.h"
#include "runtime/rt_api.h"

// -O2's "very cheap" vectoriser cost model keeps loops whose count is unknown scalar (the
// softmax rows).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("vect-cost-model=dynamic")
#endif

namespace anvil::runtime {

namespace {

/// The resolved problem: operands, sizes, per-batch offsets and strides.
struct Sdpa {
  Tensor q, k, v, out;
  std::optional<Tensor> mask;
  int64_t l = 0, s = 0, e = 0, ev = 0;
  double scale = 1.0;
  bool causal = false;
  // Element offset of each output batch position's matrix in q, k, v and the mask.
  std::vector<int64_t> off_q, off_k, off_v, off_m;
  int64_t m_rs = 0, m_cs = 0;  // mask row / column strides (0 where broadcast)
};

/// Offsets of the matrices of `t` (batch dims = all but the last `inner` dims, right-aligned
/// against `batch`) for every row-major position of `batch`; broadcast dims contribute 0 and the
/// last batch dim (the head dim) is divided by `head_rep` (grouped-query attention).
std::vector<int64_t> batch_offsets(const Tensor& t, int64_t inner, const Shape& batch,
                                   int64_t head_rep) {
  const int64_t rb = static_cast<int64_t>(batch.size());
  const int64_t rt = std::max<int64_t>(t.dim() - inner, 0);
  const int64_t nb = shape_numel(batch);
  std::vector<int64_t> offs(static_cast<size_t>(nb), 0);
  for (int64_t b = 0; b < nb; ++b) {
    int64_t rem = b, off = 0;
    for (int64_t j = rb - 1; j >= 0; --j) {
      const int64_t idx = rem % batch[j];
      rem /= batch[j];
      const int64_t tj = j - (rb - rt);
      if (tj < 0 || t.size(tj) == 1) continue;
      const int64_t i = (tj == rt - 1 && head_rep > 1) ? idx / head_rep : idx;
      off += i * t.stride(tj);
    }
    offs[b] = off;
  }
  return offs;
}

/// In-place safe softmax of `n` values.
template <typename F>
void safe_softmax(F* row, int64_t n) {
  F mx = -std::numeric_limits<F>::infinity();
  bool nan = false;
  for (int64_t j = 0; j < n; ++j) {
    if (std::isnan(row[j])) nan = true;
    mx = std::max(mx, row[j]);
  }
  if (nan) {
    std::fill(row, row + n, std::numeric_limits<F>::quiet_NaN());
    return;
  }
  if (mx == -std::numeric_limits<F>::infinity()) {
    std::fill(row, row + n, F(0));
    return;
  }
  F sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    row[j] = std::exp(row[j] - mx);
    sum += row[j];
  }
  const F inv = F(1) / sum;
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
}

/// The fp32 softmax of one row, vectorised (vec_math.h's exp; 16 partial maxima and sums, so
/// the sum's order differs from a sequential one by rounding only); same special cases as
/// safe_softmax. Compiled per ISA below.
ANVIL_VEC_INLINE void softmax_row_f32(float* __restrict row, int64_t n) {
  constexpr int kLanes = 16;
  float mx[kLanes], sum[kLanes];
  int nan[kLanes];
  for (int l = 0; l < kLanes; ++l) {
    mx[l] = -std::numeric_limits<float>::infinity();
    sum[l] = 0.0f;
    nan[l] = 0;
  }
  const int64_t full = n / kLanes * kLanes;
  for (int64_t j = 0; j < full; j += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float v = row[j + l];
      nan[l] |= v != v;
      mx[l] = v > mx[l] ? v : mx[l];
    }
  float m = -std::numeric_limits<float>::infinity();
  bool any_nan = false;
  for (int64_t j = full; j < n; ++j) {
    any_nan |= row[j] != row[j];
    m = row[j] > m ? row[j] : m;
  }
  for (int l = 0; l < kLanes; ++l) {
    any_nan |= nan[l] != 0;
    m = mx[l] > m ? mx[l] : m;
  }
  if (any_nan) {
    std::fill(row, row + n, std::numeric_limits<float>::quiet_NaN());
    return;
  }
  if (m == -std::numeric_limits<float>::infinity()) {
    std::fill(row, row + n, 0.0f);
    return;
  }
  for (int64_t j = 0; j < n; ++j) row[j] = kern::exp_approx(row[j] - m);
  for (int64_t j = 0; j < full; j += kLanes)
    for (int l = 0; l < kLanes; ++l) sum[l] += row[j + l];
  float total = 0.0f;
  for (int l = 0; l < kLanes; ++l) total += sum[l];
  for (int64_t j = full; j < n; ++j) total += row[j];
  const float inv = 1.0f / total;
  for (int64_t j = 0; j < n; ++j) row[j] *= inv;
}

#if defined(__x86_64__)
__attribute__((target("avx512f"))) void softmax_row_avx512(float* row, int64_t n) {
  softmax_row_f32(row, n);
}
__attribute__((target("avx2,fma"))) void softmax_row_avx2(float* row, int64_t n) {
  softmax_row_f32(row, n);
}
#endif

/// The fp32 row softmax for the CPU's widest vectors.
void softmax_row(float* row, int64_t n) {
#if defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx512) return softmax_row_avx512(row, n);
  if (avx2) return softmax_row_avx2(row, n);
#endif
  softmax_row_f32(row, n);
}

/// Per-thread buffers of one worker.
template <typename F>
struct Scratch {
  std::vector<F> q, k, v, scores, out;
};

/// Adds the causal or explicit mask to query row gi of batch position b (`s` scores, the first
/// keys), then applies the softmax.
template <typename F, typename M>
void mask_softmax_row(const Sdpa& a, int64_t b, int64_t gi, F* row, int64_t s) {
  const F neg_inf = -std::numeric_limits<F>::infinity();
  if (a.causal)
    for (int64_t j = gi + 1; j < s; ++j) row[j] += neg_inf;
  if constexpr (!std::is_void_v<M>) {
    const M* mp = static_cast<const M*>(a.mask->data_ptr()) + a.off_m[b] + gi * a.m_rs;
    for (int64_t j = 0; j < s; ++j) {
      if constexpr (std::is_same_v<M, bool>) {
        if (!mp[j * a.m_cs]) row[j] += neg_inf;
      } else {
        row[j] += cast_value<F, M>(mp[j * a.m_cs]);
      }
    }
  }
  if constexpr (std::is_same_v<F, float>)
    softmax_row(row, s);
  else
    safe_softmax(row, s);
}

/// Rows [i0, i1) of batch position `b`, computed in F with mask element type M (void: none).
template <typename F, typename M>
void sdpa_block(const Sdpa& a, int64_t b, int64_t i0, int64_t i1, Scratch<F>& sc) {
  // With is_causal, keys j >= i1 are masked for every row of the block: their softmax weights are
  // exactly 0 (for finite scores), so the block reads only the first min(S, i1) keys and values.
  const int64_t m = i1 - i0, s = a.causal ? std::min(a.s, i1) : a.s;
  const kern::MatArg<F> qa = kern::matrix_arg<F>(a.q, a.off_q[b] + i0 * a.q.stride(-2), m, a.e,
                                                 a.q.stride(-2), a.q.stride(-1), sc.q);
  const kern::MatArg<F> ka =
      kern::matrix_arg<F>(a.k, a.off_k[b], s, a.e, a.k.stride(-2), a.k.stride(-1), sc.k);
  const kern::MatArg<F> va =
      kern::matrix_arg<F>(a.v, a.off_v[b], s, a.ev, a.v.stride(-2), a.v.stride(-1), sc.v);
  sc.scores.resize(static_cast<size_t>(std::max<int64_t>(m * s, 1)));
  F* scores = sc.scores.data();
  const int64_t lds = std::max<int64_t>(s, 1);
  runtime::gemm(qa.trans, !ka.trans, m, s, a.e, static_cast<F>(a.scale), qa.data, qa.ld, ka.data,
             ka.ld, F(0), scores, lds);
  for (int64_t i = 0; i < m; ++i) mask_softmax_row<F, M>(a, b, i0 + i, scores + i * s, s);
  const int64_t out_off = (b * a.l + i0) * a.ev;
  if (a.out.dtype() == dtype_of<F>()) {
    F* o = static_cast<F*>(a.out.data_ptr()) + out_off;
    runtime::gemm(false, va.trans, m, a.ev, s, F(1), scores, lds, va.data, va.ld, F(0), o,
               std::max<int64_t>(a.ev, 1));
    return;
  }
  sc.out.resize(static_cast<size_t>(std::max<int64_t>(m * a.ev, 1)));
  runtime::gemm(false, va.trans, m, a.ev, s, F(1), scores, lds, va.data, va.ld, F(0), sc.out.data(),
             std::max<int64_t>(a.ev, 1));
  ANVIL_DISPATCH_FLOAT(a.out.dtype(), "aten.scaled_dot_product_attention.default", T, {
    T* o = static_cast<T*>(a.out.data_ptr()) + out_off;
    for (int64_t i = 0; i < m * a.ev; ++i) o[i] = cast_value<T, F>(sc.out[i]);
  });
}

/// The most floats the packed K^T and V of one call may take (64 MiB).
constexpr int64_t kMaxPackedKvFloats = int64_t{16} << 20;

/// K^T (E x S) and V (S x Ev) of every batch position, packed for sgemm_packed.
struct PackedKv {
  int64_t kt_floats = 0, v_floats = 0;
  std::vector<float> data;  // batch position b: K^T at b * (kt + v), V after it
  const float* kt(int64_t b) const { return data.data() + b * (kt_floats + v_floats); }
  const float* v(int64_t b) const { return kt(b) + kt_floats; }
};

/// Packs K^T and V of every batch position (in parallel over them; grouped-query heads that
/// share a key / value matrix are packed once per query head, which costs little).
PackedKv pack_kv(const Sdpa& a) {
  const int64_t nb = static_cast<int64_t>(a.off_q.size());
  PackedKv p;
  p.kt_floats = packed_b_floats(a.e, a.s);
  p.v_floats = packed_b_floats(a.s, a.ev);
  p.data.resize(static_cast<size_t>(std::max<int64_t>(nb * (p.kt_floats + p.v_floats), 1)));
  parallel_for(0, nb, 1, [&](int64_t b0, int64_t b1) {
    std::vector<float> sk, sv;
    for (int64_t b = b0; b < b1; ++b) {
      auto* dst = const_cast<float*>(p.kt(b));
      if (a.s > 0 && a.e > 0) {  // op(B) = K^T: K stored [S, E] row-major is B stored N x K
        const auto ka =
            kern::matrix_arg<float>(a.k, a.off_k[b], a.s, a.e, a.k.stride(-2), a.k.stride(-1), sk);
        pack_b(!ka.trans, a.e, a.s, ka.data, ka.ld, dst);
      }
      if (a.s > 0 && a.ev > 0) {
        const auto va =
            kern::matrix_arg<float>(a.v, a.off_v[b], a.s, a.ev, a.v.stride(-2), a.v.stride(-1), sv);
        pack_b(va.trans, a.s, a.ev, va.data, va.ld, dst + p.kt_floats);
      }
    }
  });
  return p;
}

/// Rows [i0, i1) of batch position `b` in fp32 through the packed kernel (K^T and V in `kv`).
template <typename M>
void sdpa_block_packed(const Sdpa& a, const PackedKv& kv, int64_t b, int64_t i0, int64_t i1,
                       Scratch<float>& sc) {
  // With is_causal the block reads only the first min(S, i1) keys (see sdpa_block).
  const int64_t m = i1 - i0, s = a.causal ? std::min(a.s, i1) : a.s;
  const kern::MatArg<float> qa = kern::matrix_arg<float>(a.q, a.off_q[b] + i0 * a.q.stride(-2), m,
                                                         a.e, a.q.stride(-2), a.q.stride(-1), sc.q);
  const int64_t lds = std::max<int64_t>(s, 1);
  sc.scores.resize(static_cast<size_t>(std::max<int64_t>(m * s, 1)));
  float* scores = sc.scores.data();
  sgemm_packed(qa.trans, m, s, a.e, static_cast<float>(a.scale), qa.data, qa.ld, kv.kt(b), nullptr,
               false, scores, lds, 0, s);
  for (int64_t i = 0; i < m; ++i) mask_softmax_row<float, M>(a, b, i0 + i, scores + i * s, s);
  const int64_t out_off = (b * a.l + i0) * a.ev, ldo = std::max<int64_t>(a.ev, 1);
  float* o =
      a.out.dtype() == DType::kFloat32 ? static_cast<float*>(a.out.data_ptr()) + out_off : nullptr;
  if (!o) {
    sc.out.resize(static_cast<size_t>(std::max<int64_t>(m * a.ev, 1)));
    o = sc.out.data();
  }
  sgemm_packed(false, m, a.ev, s, 1.0f, scores, lds, kv.v(b), nullptr, false, o, ldo, 0, a.ev,
               GemmIsa::kAuto, nullptr, GemmAct::kNone, std::max<int64_t>(a.s, 1));
  if (a.out.dtype() == DType::kFloat32) return;
  ANVIL_DISPATCH_FLOAT(a.out.dtype(), "aten.scaled_dot_product_attention.default", T, {
    T* ot = static_cast<T*>(a.out.data_ptr()) + out_off;
    for (int64_t i = 0; i < m * a.ev; ++i) ot[i] = cast_value<T, float>(sc.out[i]);
  });
}

/// Runs every (batch position, row block) unit on the thread pool: row blocks of at most 64
/// rows, smaller while there are fewer than two units per thread, of near-equal size.
template <typename F, typename M>
void sdpa_run(const Sdpa& a) {
  const int64_t nb = static_cast<int64_t>(a.off_q.size());
  const int threads = kern::available_threads();
  int64_t rows = 64;
  while (rows > 8 && nb * ((a.l + rows - 1) / rows) < 2 * threads) rows /= 2;
  const int64_t blocks = (a.l + rows - 1) / rows;
  rows = (a.l + blocks - 1) / blocks;  // balanced: 197 rows as 50 + 50 + 50 + 47
  // fp32 through the packed kernel unless the packed K^T and V of every batch position would
  // take more than kMaxPackedKvFloats (long sequences: the GEMMs then read K and V in place)
  bool packed = false;
  PackedKv kv;
  if constexpr (std::is_same_v<F, float>) {
    packed = nb * (packed_b_floats(a.e, a.s) + packed_b_floats(a.s, a.ev)) <= kMaxPackedKvFloats;
    if (packed) kv = pack_kv(a);
  }
  parallel_for(0, nb * blocks, 1, [&](int64_t u0, int64_t u1) {
    Scratch<F> sc;
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t b = u / blocks, i0 = (u % blocks) * rows;
      if (i0 >= a.l) continue;
      if constexpr (std::is_same_v<F, float>) {
        if (packed) {
          sdpa_block_packed<M>(a, kv, b, i0, std::min(i0 + rows, a.l), sc);
          continue;
        }
      }
      sdpa_block<F, M>(a, b, i0, std::min(i0 + rows, a.l), sc);
    }
  });
}

/// Dispatches on the mask's element type.
template <typename F>
void sdpa_dispatch(const Sdpa& a) {
  if (!a.mask) return sdpa_run<F, void>(a);
  switch (a.mask->dtype()) {
    case DType::kBool:
      return sdpa_run<F, bool>(a);
    case DType::kFloat32:
      return sdpa_run<F, float>(a);
    case DType::kFloat64:
      return sdpa_run<F, double>(a);
    case DType::kFloat16:
      return sdpa_run<F, Half>(a);
    case DType::kBFloat16:
      return sdpa_run<F, BFloat16>(a);
    default:
      throw Error("attn_mask must be bool or floating", "aten.scaled_dot_product_attention.default",
                  "bool or a float dtype", dtype_name(a.mask->dtype()));
  }
}

/// Batch dims of a tensor (all but the last two).
Shape batch_of(const Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end() - 2); }

/// The runtime kernel of aten.scaled_dot_product_attention.default.
int sdpa_extern(ExternCall& call) {
  const std::string where = call.target();
  Sdpa a;
  a.q = call.input_tensor(0);
  a.k = call.input_tensor(1);
  a.v = call.input_tensor(2);
  a.mask = kern::opt_input(call, 3);
  for (const Tensor* t : {&a.q, &a.k, &a.v})
    ANVIL_CHECK(t->dim() >= 2, where, "query, key and value must have at least 2 dims", "rank >= 2",
                t->type_str());
  const DType dt = a.q.dtype();
  ANVIL_CHECK(a.k.dtype() == dt && a.v.dtype() == dt, where,
              "query, key and value must share a dtype", dtype_name(dt),
              str(dtype_name(a.k.dtype()), ", ", dtype_name(a.v.dtype())));
  ANVIL_CHECK(is_floating(dt) && !is_float8(dt), where,
              "attention needs f16, bf16, f32 or f64 inputs", "a float dtype", dtype_name(dt));
  const double dropout = call.attr_float("dropout_p", 0.0);
  ANVIL_CHECK(dropout == 0.0, where, "dropout is not supported at inference", "dropout_p=0",
              str(dropout));
  a.l = a.q.size(-2);
  a.e = a.q.size(-1);
  a.s = a.k.size(-2);
  a.ev = a.v.size(-1);
  ANVIL_CHECK(a.k.size(-1) == a.e, where, "query and key head sizes differ", a.q.type_str(),
              a.k.type_str());
  ANVIL_CHECK(a.v.size(-2) == a.s, where, "key and value sequence lengths differ", a.k.type_str(),
              a.v.type_str());
  Shape bq = batch_of(a.q), bk = batch_of(a.k), bv = batch_of(a.v);
  int64_t rep_k = 1, rep_v = 1;
  if (call.attr_bool("enable_gqa", false)) {
    ANVIL_CHECK(a.q.dim() >= 3 && a.k.dim() >= 3 && a.v.dim() >= 3, where,
                "enable_gqa needs query, key and value with a head dim (-3)", "rank >= 3",
                a.q.type_str() + ", " + a.k.type_str() + ", " + a.v.type_str());
    const int64_t hq = a.q.size(-3), hk = a.k.size(-3), hv = a.v.size(-3);
    if (!(hq == hk && hk == hv)) {
      ANVIL_CHECK(hk > 0 && hv > 0 && hq % hk == 0 && hq % hv == 0, where,
                  "number of heads in key and value must divide the number of heads in query",
                  str("key/value heads dividing ", hq), str(hk, " and ", hv));
      rep_k = hq / hk;
      rep_v = hq / hv;
      bk.back() = hq;
      bv.back() = hq;
    }
  }
  Shape scores_batch, batch;
  try {
    scores_batch = broadcast_shapes(bq, bk, where);
    batch = broadcast_shapes(scores_batch, bv, where);
  } catch (const Error&) {
    throw Error(
        "batch / head dims of query, key and value do not broadcast (for grouped-query "
        "attention pass enable_gqa=True)",
        where, "broadcastable batch dims",
        a.q.type_str() + ", " + a.k.type_str() + ", " + a.v.type_str());
  }
  a.scale =
      call.has_attr("scale") ? call.attr_float("scale") : 1.0 / std::sqrt(static_cast<double>(a.e));
  a.causal = call.attr_bool("is_causal", false);
  if (a.mask) {
    const Tensor& m = *a.mask;
    ANVIL_CHECK(!a.causal, where, "an explicit attn_mask must not be set when is_causal=True",
                "attn_mask=None", m.type_str());
    ANVIL_CHECK(m.dtype() == DType::kBool || (is_floating(m.dtype()) && !is_float8(m.dtype())),
                where, "attn_mask must be bool or floating", "bool or a float dtype",
                dtype_name(m.dtype()));
    Shape scores_shape = scores_batch;
    scores_shape.push_back(a.l);
    scores_shape.push_back(a.s);
    bool ok = m.dim() <= static_cast<int64_t>(scores_shape.size());
    for (int64_t d = 1; ok && d <= m.dim(); ++d) {
      const int64_t ms = m.size(-d), want = scores_shape[scores_shape.size() - d];
      ok = ms == want || ms == 1;
    }
    ANVIL_CHECK(ok, where, "attn_mask does not broadcast to the attention scores' shape",
                shape_str(scores_shape), m.type_str());
    a.m_cs = m.dim() >= 1 && m.size(-1) != 1 ? m.stride(-1) : 0;
    a.m_rs = m.dim() >= 2 && m.size(-2) != 1 ? m.stride(-2) : 0;
    a.off_m = batch_offsets(m, 2, batch, 1);
  }
  Shape out_sizes = batch;
  out_sizes.push_back(a.l);
  out_sizes.push_back(a.ev);
  a.out = kern::checked_output(call, 0, out_sizes, dt);
  if (a.out.numel() == 0) return 0;
  a.off_q = batch_offsets(a.q, 2, batch, 1);
  a.off_k = batch_offsets(a.k, 2, batch, rep_k);
  a.off_v = batch_offsets(a.v, 2, batch, rep_v);
  if (dt == DType::kFloat64)
    sdpa_dispatch<double>(a);
  else
    sdpa_dispatch<float>(a);
  return 0;
}

}  // namespace

/// Registers the attention extern.
void register_attention_externs() {
  register_extern("aten.scaled_dot_product_attention.default", sdpa_extern);
}

}  // namespace anvil::runtime
