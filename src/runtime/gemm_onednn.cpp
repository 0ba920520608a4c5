// ANVIL_GEMM_LIB_ONEDNN (runtime/gemm_onednn.h): AnvilGemmCall -> a cached oneDNN matmul.
//
// The primitive computes dst = act(alpha * src * weights + sum_scale * dst_old + bias):
// alpha is the output scale, beta the `sum` post-op, a per-column bias a broadcast `binary_add`
// post-op and the activation an `eltwise` post-op, all in the primitive's store. oneDNN 2.6 has
// no fast kernel for a per-row bias ([M,1] binary or bias operands fall to its reference code),
// nor for a broadcast bias into a strided C (ldc > n), so such a bias is written into C first
// (C = beta * C + bias) and summed with scale 1: the activation stays fused. Operands are strided memory descriptors: transposes cost no copy.
#include "runtime/gemm_onednn.h"

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "runtime/gemm_call.h"

#ifdef ANVIL_HAVE_ONEDNN

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/half.h"
#include "core/thread_pool.h"
#include "runtime/onednn_util.h"
#include "core/dtype.h"

namespace anvil::runtime {

namespace {

using dt = dnnl::memory::data_type;
using Dims = dnnl::memory::dims;

constexpr int32_t kF32 = static_cast<int32_t>(DType::kFloat32);
constexpr int32_t kBf16 = static_cast<int32_t>(DType::kBFloat16);
constexpr int32_t kF16 = static_cast<int32_t>(DType::kFloat16);
constexpr int32_t kS8 = static_cast<int32_t>(DType::kInt8);
constexpr int32_t kS32 = static_cast<int32_t>(DType::kInt32);

/// Below this many multiply-adds a product runs as one single-threaded call.
constexpr int64_t kParallelWork = int64_t{1} << 18;

dt dnnl_type(int32_t code) {
  switch (code) {
    case kF32: return dt::f32;
    case kBf16: return dt::bf16;
    case kS8: return dt::s8;
    case kS32: return dt::s32;
    default: return dt::undef;
  }
}

size_t elem_bytes(int32_t code) {
  return code == kS8 ? 1 : (code == kBf16 || code == kF16) ? 2 : 4;
}

using onednn::engine;
using onednn::OmpThreads;

/// Everything that defines a primitive (sizes, strides, dtypes, epilogue, OpenMP threads).
struct Key {
  std::array<int64_t, 16> v;
  bool operator==(const Key& o) const { return v == o.v; }
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = 1469598103934665603ull;
    for (int64_t x : k.v) h = (h ^ static_cast<size_t>(x)) * 1099511628211ull;
    return h;
  }
};

struct Prim {
  dnnl::matmul matmul;
  dnnl::memory::desc a_md, b_md, c_md, bias_md, scratch_md;
  size_t scratch_bytes = 0;
  bool col_bias = false;
};

/// One block's problem: the call restricted to rows / columns, with the resolved epilogue.
struct Block {
  int32_t a_dt, b_dt, c_dt;
  bool ta, tb;
  int64_t m, n, k, lda, ldb, ldc;
  float alpha, sum_scale;
  bool col_bias;
  int32_t act;
  int threads;
};

int64_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

Key key_of(const Block& b) {
  return Key{{b.a_dt, b.b_dt, b.c_dt, b.ta, b.tb, b.m, b.n, b.k, b.lda, b.ldb, b.ldc,
              float_bits(b.alpha), float_bits(b.sum_scale), b.col_bias, b.act, b.threads}};
}

Prim create(const Block& b) {
  Prim p;
  p.a_md = dnnl::memory::desc({b.m, b.k}, dnnl_type(b.a_dt), b.ta ? Dims{1, b.lda} : Dims{b.lda, 1});
  p.b_md = dnnl::memory::desc({b.k, b.n}, dnnl_type(b.b_dt), b.tb ? Dims{1, b.ldb} : Dims{b.ldb, 1});
  p.c_md = dnnl::memory::desc({b.m, b.n}, dnnl_type(b.c_dt), Dims{b.ldc, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (b.alpha != 1.0f) attr.set_output_scales(0, {b.alpha});
  dnnl::post_ops ops;
  if (b.sum_scale != 0.0f) ops.append_sum(b.sum_scale);
  if (b.col_bias) {
    p.bias_md = dnnl::memory::desc({1, b.n}, dnnl_type(b.c_dt), Dims{b.n, 1});
    ops.append_binary(dnnl::algorithm::binary_add, p.bias_md);
    p.col_bias = true;
  }
  switch (b.act) {
    case ANVIL_GEMM_ACT_RELU: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f); break;
    case ANVIL_GEMM_ACT_RELU6: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, 0.0f, 6.0f); break;
    case ANVIL_GEMM_ACT_GELU_ERF: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_erf, 0.0f, 0.0f); break;
    case ANVIL_GEMM_ACT_GELU_TANH: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f); break;
    case ANVIL_GEMM_ACT_SILU: ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, 1.0f, 0.0f); break;
    default: break;
  }
  attr.set_post_ops(ops);
  const dnnl::matmul::desc desc(p.a_md, p.b_md, p.c_md);
  const dnnl::matmul::primitive_desc pd(desc, attr, engine());
  p.scratch_md = pd.scratchpad_desc();
  p.scratch_bytes = p.scratch_md.get_size();
  p.matmul = dnnl::matmul(pd);
  return p;
}

/// The process-wide primitive cache (onednn_util.h).
onednn::PrimitiveCache<Key, Prim, KeyHash>& cache() {
  // never destroyed: calls may run during static destruction
  static auto* c = new onednn::PrimitiveCache<Key, Prim, KeyHash>;
  return *c;
}

std::shared_ptr<const Prim> primitive(const Block b) {
  return cache().get(key_of(b), [&] { return create(b); });
}

/// 64-byte aligned scratch of this thread.
void* thread_scratch(size_t bytes) {
  struct Buf {
    void* p = nullptr;
    size_t size = 0;
    ~Buf() { std::free(p); }
  };
  thread_local Buf buf;
  if (bytes > buf.size) {
    std::free(buf.p);
    buf.size = (bytes + 63) / 64 * 64;
    buf.p = std::aligned_alloc(64, buf.size);
    if (!buf.p) throw Error("out of memory for oneDNN scratch", "runtime::onednn_gemm");
  }
  return buf.p;
}

/// C = beta * C + bias (beta 0: C is not read), bias[i] per row or bias[j] per column, in C's
/// dtype: the bias oneDNN cannot fuse fast, then added by the primitive's sum post-op.
void seed_bias(const Block& b, void* c, const void* bias, float beta, bool per_row) {
  for (int64_t i = 0; i < b.m; ++i) {
    if (b.c_dt == kF32) {
      float* row = static_cast<float*>(c) + i * b.ldc;
      const float* bv = static_cast<const float*>(bias);
      for (int64_t j = 0; j < b.n; ++j)
        row[j] = (beta == 0.0f ? 0.0f : beta * row[j]) + bv[per_row ? i : j];
    } else {
      BFloat16* row = static_cast<BFloat16*>(c) + i * b.ldc;
      const BFloat16* bv = static_cast<const BFloat16*>(bias);
      for (int64_t j = 0; j < b.n; ++j)
        row[j] = BFloat16((beta == 0.0f ? 0.0f : beta * float(row[j])) + float(bv[per_row ? i : j]));
    }
  }
}

/// One block (the call restricted to rows or columns, `bias` offset to them) on the calling
/// thread with `b.threads` OpenMP threads. oneDNN 2.6 runs a broadcast bias post-op fast only
/// into a dense C (ldc == n; a strided one falls to its reference code) and never a per-row one,
/// so those biases are seeded into C and summed (the activation stays fused).
void run_block(Block b, const AnvilGemmCall& g, const void* a, const void* bm, void* c,
               const void* bias) {
  const bool col = bias && g.bias_kind == ANVIL_GEMM_BIAS_COL;
  const bool row = bias && g.bias_kind == ANVIL_GEMM_BIAS_ROW;
  b.col_bias = col && b.ldc == b.n;
  const bool seed = row || (col && !b.col_bias);
  b.sum_scale = seed ? 1.0f : g.beta;
  OmpThreads omp(b.threads);
  if (seed) seed_bias(b, c, bias, g.beta, row);
  const std::shared_ptr<const Prim> p = primitive(b);
  thread_local std::unique_ptr<dnnl::stream> stream;
  if (!stream) stream = std::make_unique<dnnl::stream>(engine());
  dnnl::memory am(p->a_md, engine(), const_cast<void*>(a));
  dnnl::memory bmem(p->b_md, engine(), const_cast<void*>(bm));
  dnnl::memory cm(p->c_md, engine(), c);
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bmem}, {DNNL_ARG_DST, cm}};
  if (p->scratch_bytes)
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 dnnl::memory(p->scratch_md, engine(), thread_scratch(p->scratch_bytes)));
  if (p->col_bias) {
    const int idx = b.sum_scale != 0.0f ? 1 : 0;  // the binary post-op's position
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(idx) | DNNL_ARG_SRC_1,
                 dnnl::memory(p->bias_md, engine(), const_cast<void*>(bias)));
  }
  p->matmul.execute(*stream, args);
  stream->wait();
}

const char* byte_ptr(const void* p) { return static_cast<const char*>(p); }

/// The fp32 / bf16 / int8 product over the pool (threading mode of the file comment). Row
/// blocks keep each block's C dense (oneDNN's fast kernels need that); only a product with
/// fewer than 32 rows is split by columns.
void native_gemm(const AnvilGemmCall& g) {
  Block b{g.a_dtype, g.b_dtype, g.c_dtype, g.trans_a != 0, g.trans_b != 0, g.m, g.n, g.k,
          g.lda, g.ldb, g.ldc, g.alpha, g.beta, false, g.activation, 1};
  const size_t ea = elem_bytes(g.a_dtype), eb = elem_bytes(g.b_dtype), ec = elem_bytes(g.c_dtype);
  const void* bias = g.bias_kind == ANVIL_GEMM_BIAS_NONE ? nullptr : g.bias;
  const bool row_bias = bias && g.bias_kind == ANVIL_GEMM_BIAS_ROW;
  ThreadPool& pool = current_thread_pool();
  const int threads = ThreadPool::in_parallel_region() ? 1 : pool.num_threads();
  const bool small = threads <= 1 || g.m * g.n * g.k < kParallelWork || (g.m < 32 && g.n < 128);
  if (small || onednn_threading() == OneDnnThreading::kOmp) {
    b.threads = small ? 1 : threads;
    return run_block(b, g, g.a, g.b, g.c, bias);
  }
  if (g.m >= 32) {  // row blocks: rows [r0, r1) of op(A), C and a row bias
    pool.parallel_for(0, g.m, std::max<int64_t>(16, (g.m + threads - 1) / threads),
                      [&](int64_t r0, int64_t r1) {
                        Block blk = b;
                        blk.m = r1 - r0;
                        run_block(blk, g, byte_ptr(g.a) + (b.ta ? r0 : r0 * g.lda) * ea, g.b,
                                  static_cast<char*>(g.c) + r0 * g.ldc * ec,
                                  row_bias ? byte_ptr(bias) + r0 * ec : bias);
                      });
    return;
  }
  const int64_t grain = ((g.n + threads - 1) / threads + 63) / 64 * 64;
  pool.parallel_for(0, g.n, grain, [&](int64_t c0, int64_t c1) {
    Block blk = b;
    blk.n = c1 - c0;
    run_block(blk, g, g.a, byte_ptr(g.b) + (b.tb ? c0 * g.ldb : c0) * eb,
              static_cast<char*>(g.c) + c0 * ec,
              bias && !row_bias ? byte_ptr(bias) + c0 * ec : bias);
  });
}

float load16(const void* p, int32_t code, int64_t i) {
  return code == kBf16 ? float(static_cast<const BFloat16*>(p)[i])
         : code == kF16 ? float(static_cast<const Half*>(p)[i])
                        : static_cast<const float*>(p)[i];
}

/// `rows` x `cols` stored bf16 / fp16 / fp32 elements (row stride ld) as compact fp32, rows
/// split over the pool.
std::vector<float> widen(const void* p, int32_t code, int64_t rows, int64_t cols, int64_t ld) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(cols, 1)),
               [&](int64_t r0, int64_t r1) {
                 for (int64_t r = r0; r < r1; ++r)
                   for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = load16(p, code, r * ld + c);
               });
  return out;
}

/// bf16 / fp16 widened: the operands converted to fp32, the fused fp32 primitive, the result
/// rounded once into C. The only fp16 path (oneDNN 2.x has no CPU fp16 matmul); for bf16 a
/// candidate of the autotuner (variant 2).
void widened_gemm(const AnvilGemmCall& g) {
  const int32_t in = g.a_dtype;
  const std::vector<float> a = g.trans_a ? widen(g.a, in, g.k, g.m, g.lda)
                                         : widen(g.a, in, g.m, g.k, g.lda);
  const std::vector<float> b = g.trans_b ? widen(g.b, in, g.n, g.k, g.ldb)
                                         : widen(g.b, in, g.k, g.n, g.ldb);
  const int64_t bias_len = g.bias_kind == ANVIL_GEMM_BIAS_ROW ? g.m : g.n;
  std::vector<float> bias;
  if (g.bias) bias = widen(g.bias, g.c_dtype, 1, bias_len, bias_len);
  AnvilGemmCall w = g;
  w.a_dtype = w.b_dtype = w.c_dtype = kF32;
  w.a = a.data();
  w.lda = g.trans_a ? g.m : g.k;
  w.b = b.data();
  w.ldb = g.trans_b ? g.k : g.n;
  w.bias = g.bias ? bias.data() : nullptr;
  if (g.c_dtype == kF32) return native_gemm(w);
  std::vector<float> c = g.beta != 0.0f ? widen(g.c, g.c_dtype, g.m, g.n, g.ldc)
                                        : std::vector<float>(static_cast<size_t>(g.m * g.n));
  w.c = c.data();
  w.ldc = g.n;
  native_gemm(w);
  parallel_for(0, g.m, std::max<int64_t>(1, 16384 / g.n), [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        const float v = c[i * g.n + j];
        if (g.c_dtype == kBf16) static_cast<BFloat16*>(g.c)[i * g.ldc + j] = BFloat16(v);
        else static_cast<Half*>(g.c)[i * g.ldc + j] = Half(v);
      }
  });
}

/// bf16 variant 2 only: on this CPU (AVX512-BF16, no AMX) widening measured on par with oneDNN's
/// bf16 kernels at M >= 256 and slower below (docs/performance.md), so auto keeps them.
bool bf16_widened(const AnvilGemmCall& g) { return g.variant == kOneDnnVariantWiden; }

}  // namespace

bool onednn_available() {
  static const bool on = [] {  // ANVIL_ONEDNN=0: off at run time (before / after benchmarks)
    const char* v = std::getenv("ANVIL_ONEDNN");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

size_t onednn_cached_primitives() {
  return cache().size();
}

void onednn_gemm(const AnvilGemmCall& g) {
  const bool bf16_in = g.a_dtype == kBf16 && g.b_dtype == kBf16;
  const bool f16_in = g.a_dtype == kF16 && g.b_dtype == kF16;
  const bool f32 = g.a_dtype == kF32 && g.b_dtype == kF32 && g.c_dtype == kF32;
  const bool s8 = g.a_dtype == kS8 && g.b_dtype == kS8 && g.c_dtype == kS32;
  if (!(f32 || s8 || ((bf16_in || f16_in) && (g.c_dtype == g.a_dtype || g.c_dtype == kF32))))
    throw Error("oneDNN GEMM does not take these dtypes", gemm_call_str(g),
                "fp32, bf16 -> bf16|fp32, fp16 -> fp16|fp32, int8 -> int32", "");
  if (s8 && (g.alpha != 1.0f || g.beta != 0.0f || g.bias || g.activation != ANVIL_GEMM_ACT_NONE))
    throw Error("oneDNN int8 GEMM is exact only without an epilogue", gemm_call_str(g),
                "alpha 1, beta 0, no bias, no activation", "");
  try {
    if (f16_in || (bf16_in && bf16_widened(g))) return widened_gemm(g);
    native_gemm(g);
  } catch (const dnnl::error& e) {
    throw Error("oneDNN rejected the GEMM", gemm_call_str(g), "a primitive oneDNN creates",
                e.what());
  }
}

}  // namespace anvil::runtime

#else  // !ANVIL_HAVE_ONEDNN

namespace anvil::runtime {

bool onednn_available() { return false; }
size_t onednn_cached_primitives() { return 0; }
void onednn_gemm(const AnvilGemmCall& g) {
  throw Error("GEMM library not available in this runtime", gemm_call_str(g),
              "a runtime built with oneDNN (libdnnl-dev, -DANVIL_ONEDNN=ON)", "oneDNN (3)");
}

}  // namespace anvil::runtime

#endif  // ANVIL_HAVE_ONEDNN

namespace anvil::runtime {

namespace {
OneDnnThreading initial_threading() {
  const char* v = std::getenv("ANVIL_ONEDNN_THREADING");
  return v && std::string(v) == "omp" ? OneDnnThreading::kOmp : OneDnnThreading::kPoolChunks;
}
OneDnnThreading g_threading = initial_threading();
}  // namespace

OneDnnThreading onednn_threading() { return g_threading; }
void set_onednn_threading(OneDnnThreading mode) { g_threading = mode; }

}  // namespace anvil::runtime
