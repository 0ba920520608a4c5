// oneDNN's convolution (Debian's libdnnl 2.x) for the convolution extern (conv.h): fp32, and
// bf16 where the CPU has AVX512-BF16 or AMX-BF16; groups, stride, asymmetric padding,
// dilation, bias, the fused residual add (a sum post-op: the destination is first filled with
// the residual) and the fused activation (eltwise post-ops after it); 1-D convolutions as
// height-1 2-D ones.
//
// Layouts: the primitive is created with format `any` for source, weights and destination, so
// oneDNN picks its layouts (nhwc for its brgemm kernels on AVX-512, blocked nChw16c, ...). The
// input, output and residual (each dense NCHW or channels-last, described by its strides; other
// inputs are copied to NCHW first) are reordered to and from those layouts around the
// convolution when they differ: a graph that keeps convolution activations channels-last
// (passes/conv_layout.cpp) has no reorder around them.
// Weights are reordered per call, or once per constant set when the extern says the weight is
// an immutable constant (attribute weight_constant, set by the CPU codegen): the reordered copy
// is kept in the run's PackedWeightCache keyed by the weight's address and layout.
//
// Primitives (convolution and reorders) are cached per problem, process-wide, behind a mutex.
// Threading as gemm_onednn.h's default: the work is split over anvil's pool and each piece is
// one oneDNN call with OpenMP held to one thread (oneDNN never starts a thread). A batch of at
// least as many images as the pool has threads is split into single images, a smaller one into
// bands of output rows (each band's call reads its input rows and is padded only where the
// image is). An OpenMP team sized to the pool measured far slower on this shared 2-core
// machine (docs/performance.md). Inside a parallel region: one call on the calling thread.
#include <cstdlib>
#include <string>

#include "runtime/cpu_features.h"
#include "runtime/gemm_onednn.h"
#include "runtime/kernels/conv.h"

#ifdef ANVIL_HAVE_ONEDNN

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "runtime/onednn_util.h"
#include "runtime/kernels/kernel_util.h"
#include "runtime/packed_weights.h"

namespace anvil::runtime::kern {

namespace {

using dt = dnnl::memory::data_type;
using Dims = dnnl::memory::dims;
using Md = dnnl::memory::desc;

std::atomic<size_t> g_runs{0};

/// Below this many multiply-adds a convolution is one call on the calling thread; the
/// environment variable ANVIL_CONV_PARALLEL_MACS overrides it (tests, measurements).
int64_t parallel_macs() {
  const char* v = std::getenv("ANVIL_CONV_PARALLEL_MACS");
  return v ? std::atoll(v) : int64_t{1} << 18;
}

/// Output channels per block of a dense convolution split by channels (a multiple of the
/// AVX-512 vector, so that blocks keep oneDNN's fast kernels).
constexpr int64_t kChannelBlock = 16;

/// The blocks a convolution splits into by channels: its groups, or blocks of kChannelBlock
/// output channels when it has one group.
int64_t channel_units(const ConvGeom& g) {
  return g.groups > 1 ? g.groups : (g.o + kChannelBlock - 1) / kChannelBlock;
}

/// Whether a convolution with fewer images than threads splits over blocks of output channels
/// (or groups) rather than bands of output rows: where one image's weights outweigh its input
/// (late stages: 7x7 or 14x14 images, hundreds of channels), a band would re-read every weight
/// for a few rows, and 7 or 14 rows do not divide evenly over the threads. At least one block
/// per thread. ANVIL_CONV_SPLIT=bands or =channels forces a choice (measurements, tests).
bool split_channels(const ConvGeom& g, int threads) {
  const char* env = std::getenv("ANVIL_CONV_SPLIT");
  const std::string mode = env ? env : "";
  if (mode == "bands" || channel_units(g) < threads) return false;
  if (mode == "channels") return true;
  return g.o * g.cg() * g.kh * g.kw >= g.c * g.h * g.w;
}

using onednn::engine;
using onednn::OmpThreads;

/// One oneDNN call's problem: images [n] of the geometry, the user layouts' strides, dtype,
/// bias, activation and the OpenMP threads the primitive is created for.
using Key = std::vector<int64_t>;
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = 1469598103934665603ull;
    for (int64_t x : k) h = (h ^ static_cast<size_t>(x)) * 1099511628211ull;
    return h;
  }
};

/// A created convolution with the reorders around it (null where the layouts already agree;
/// res_reorder, the residual into the destination, exists whenever the problem has one).
struct Prim {
  dnnl::convolution_forward conv;
  Md src_user, src, wei_user, wei, bias, dst, dst_user, res_user, scratch;
  std::unique_ptr<dnnl::reorder> src_reorder, wei_reorder, dst_reorder, res_reorder;
  std::string impl;
  bool fast = false;  // not one of oneDNN's reference implementations
};

/// 64-byte aligned, thread-local scratch `slot` (0: scratchpad, 1: source, 2: destination).
void* thread_buffer(int slot, size_t bytes) {
  struct Buf {
    void* p = nullptr;
    size_t size = 0;
    ~Buf() { std::free(p); }
  };
  thread_local Buf bufs[3];
  Buf& b = bufs[slot];
  if (bytes > b.size) {
    std::free(b.p);
    b.size = (std::max<size_t>(bytes, 64) + 63) / 64 * 64;
    b.p = std::aligned_alloc(64, b.size);
    if (!b.p) throw Error("out of memory for oneDNN convolution scratch", "conv_onednn");
  }
  return b.p;
}

dt dnnl_type(DType d) { return d == DType::kBFloat16 ? dt::bf16 : dt::f32; }

/// The problem of `n` images: geometry, source / destination strides, dtype, bias, threads.
/// One oneDNN call: `n` images, input rows [.., + h) with padding pad_top / pad_bottom giving
/// `oh` output rows (a band of the geometry's rows, or all of them), the user layouts' strides.
struct Problem {
  const ConvGeom* g;
  int64_t n, h, oh, pad_top, pad_bottom;
  Dims src_strides;  // [N, C, H, W] strides of the user's source
  Dims dst_strides;  // [N, O, OH, OW] strides of the user's destination
  Dims res_strides;  // and of the residual (empty: none)
  DType dtype;
  bool bias;
};

Key key_of(const Problem& p) {
  const ConvGeom& g = *p.g;
  Key k{p.n,          g.c,
        p.h,          g.w,
        g.o,          g.groups,
        g.kh,         g.kw,
        g.sh,         g.sw,
        g.dh,         g.dw,
        p.pad_top,    g.pad_left,
        p.pad_bottom, g.pad_right,
        p.oh,         g.oh,
        g.ow,         static_cast<int64_t>(g.act),
        p.bias,       static_cast<int64_t>(p.dtype)};
  if (g.act == ConvAct::kClamp) {  // the bounds' bits
    uint32_t lo, hi;
    std::memcpy(&lo, &g.act_lo, 4);
    std::memcpy(&hi, &g.act_hi, 4);
    k.push_back(lo);
    k.push_back(hi);
  }
  k.push_back(static_cast<int64_t>(p.res_strides.size()));
  for (const Dims* d : {&p.src_strides, &p.dst_strides, &p.res_strides})
    k.insert(k.end(), d->begin(), d->end());
  return k;
}

Dims weight_dims(const ConvGeom& g) {
  return g.groups > 1 ? Dims{g.groups, g.og(), g.cg(), g.kh, g.kw} : Dims{g.o, g.c, g.kh, g.kw};
}

std::unique_ptr<dnnl::reorder> reorder_if(const Md& from, const Md& to) {
  if (from == to) return nullptr;
  return std::make_unique<dnnl::reorder>(
      dnnl::reorder::primitive_desc(engine(), from, engine(), to));
}

/// g's activation as eltwise post-ops (oneDNN 2.x: hardswish takes no parameters, swish's
/// alpha scales sigmoid's argument; hardsigmoid is a linear map clipped to [0, 1]).
void append_activation(dnnl::post_ops& ops, const ConvGeom& g) {
  using alg = dnnl::algorithm;
  auto add = [&ops](alg a, float alpha, float beta) { ops.append_eltwise(1.0f, a, alpha, beta); };
  switch (g.act) {
    case ConvAct::kNone:
      return;
    case ConvAct::kRelu:
      return add(alg::eltwise_relu, 0.0f, 0.0f);
    case ConvAct::kClamp:
      return add(alg::eltwise_clip, g.act_lo, g.act_hi);
    case ConvAct::kHardswish:
      return add(alg::eltwise_hardswish, 0.0f, 0.0f);
    case ConvAct::kHardsigmoid:
      add(alg::eltwise_linear, 1.0f / 6.0f, 0.5f);
      return add(alg::eltwise_clip, 0.0f, 1.0f);
    case ConvAct::kSilu:
      return add(alg::eltwise_swish, 1.0f, 0.0f);
    case ConvAct::kSigmoid:
      return add(alg::eltwise_logistic, 0.0f, 0.0f);
    case ConvAct::kGelu:
      return add(alg::eltwise_gelu_erf, 0.0f, 0.0f);
    case ConvAct::kGeluTanh:
      return add(alg::eltwise_gelu_tanh, 0.0f, 0.0f);
  }
}

Prim create(const Problem& p) {
  const ConvGeom& g = *p.g;
  const dt type = dnnl_type(p.dtype);
  Prim r;
  r.src_user = Md({p.n, g.c, p.h, g.w}, type, p.src_strides);
  r.wei_user = Md(weight_dims(g), type,
                  g.groups > 1 ? dnnl::memory::format_tag::goihw : dnnl::memory::format_tag::oihw);
  // The band's rows of the whole NCHW output.
  r.dst_user = Md({p.n, g.o, p.oh, g.ow}, type, p.dst_strides);  // the band's rows of it
  const bool residual = !p.res_strides.empty();
  if (residual) r.res_user = Md({p.n, g.o, p.oh, g.ow}, type, p.res_strides);
  const Md src_any({p.n, g.c, p.h, g.w}, type, dnnl::memory::format_tag::any);
  const Md wei_any(weight_dims(g), type, dnnl::memory::format_tag::any);
  const Md dst_any({p.n, g.o, p.oh, g.ow}, type, dnnl::memory::format_tag::any);
  const Md bias_md = p.bias ? Md({g.o}, type, dnnl::memory::format_tag::x) : Md();
  const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                             dnnl::algorithm::convolution_direct, src_any, wei_any,
                                             bias_md, dst_any, {g.sh, g.sw}, {g.dh - 1, g.dw - 1},
                                             {p.pad_top, g.pad_left}, {p.pad_bottom, g.pad_right});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (g.act != ConvAct::kNone || residual) {
    dnnl::post_ops ops;
    // sum: dst = conv + dst, the destination holding the residual (a binary add post-op with
    // the residual as its operand sent oneDNN 2.6 to its slower gemm implementation)
    if (residual) ops.append_sum(1.0f);
    append_activation(ops, g);
    attr.set_post_ops(ops);
  }
  OmpThreads omp(1);  // oneDNN plans its work for the threads it sees at creation
  const dnnl::convolution_forward::primitive_desc pd(desc, attr, engine());
  r.impl = pd.impl_info_str();
  r.fast = r.impl.rfind("ref", 0) != 0;
  r.src = pd.src_desc();
  r.wei = pd.weights_desc();
  r.bias = bias_md;
  r.dst = pd.dst_desc();
  r.scratch = pd.scratchpad_desc();
  r.conv = dnnl::convolution_forward(pd);
  r.src_reorder = reorder_if(r.src_user, r.src);
  r.wei_reorder = reorder_if(r.wei_user, r.wei);
  r.dst_reorder = reorder_if(r.dst, r.dst_user);
  if (residual)
    r.res_reorder = std::make_unique<dnnl::reorder>(
        dnnl::reorder::primitive_desc(engine(), r.res_user, engine(), r.dst));
  return r;
}

/// The process-wide primitive cache (onednn_util.h).
onednn::PrimitiveCache<Key, Prim, KeyHash>& cache() {
  // never destroyed: calls may run during static destruction
  static auto* c = new onednn::PrimitiveCache<Key, Prim, KeyHash>;
  return *c;
}

std::shared_ptr<const Prim> primitive(const Problem p) {
  return cache().get(key_of(p), [&] { return create(p); });
}

dnnl::stream& thread_stream() {
  thread_local std::unique_ptr<dnnl::stream> s;
  if (!s) s = std::make_unique<dnnl::stream>(engine());
  return *s;
}

/// "onednn:" + the dims, dtype and blocking of a oneDNN layout: equal strings, equal layouts.
std::string layout_key(const Md& md) {
  const dnnl_memory_desc_t& d = md.data;
  std::string k =
      str("onednn:", static_cast<int>(d.data_type), ":", d.format_kind, ":", d.extra.flags);
  for (int i = 0; i < d.ndims; ++i) k += str(":", d.dims[i], "/", d.padded_dims[i]);
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  for (int i = 0; i < d.ndims; ++i) k += str(",", b.strides[i]);
  for (int i = 0; i < b.inner_nblks; ++i) k += str(";", b.inner_blks[i], "@", b.inner_idxs[i]);
  return k;
}

/// The weights in the primitive's layout: `w` itself, a copy reordered now (kept in `hold`), or
/// the copy kept in `constants` for this address and layout.
const void* prepared_weights(const Prim& p, const void* w, PackedWeightCache* constants,
                             std::shared_ptr<const void>& hold) {
  if (!p.wei_reorder) return w;
  auto reorder = [&p, w]() {
    const size_t bytes = p.wei.get_size();
    std::shared_ptr<char> buf(static_cast<char*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)),
                              [](char* q) { std::free(q); });
    if (!buf) throw Error("out of memory reordering convolution weights", "conv_onednn");
    OmpThreads omp(1);
    dnnl::memory from(p.wei_user, engine(), const_cast<void*>(w));
    dnnl::memory to(p.wei, engine(), buf.get());
    p.wei_reorder->execute(thread_stream(), from, to);
    thread_stream().wait();
    return PackedWeightCache::Derived{std::shared_ptr<const void>(buf, buf.get()),
                                      static_cast<int64_t>(bytes)};
  };
  if (constants) {
    hold = constants->derived(w, layout_key(p.wei), reorder).object;
  } else {
    hold = reorder().object;
  }
  return hold.get();
}

/// One oneDNN call: source reorder, the residual into the destination (when there is one and
/// it is not already there), convolution, destination reorder, on the calling thread (OpenMP
/// held to one thread).
void run_call(const Prim& p, const void* x, const void* w, const void* bias, void* out,
              const void* res) {
  OmpThreads omp(1);
  dnnl::stream& s = thread_stream();
  dnnl::memory src(p.src_user, engine(), const_cast<void*>(x));
  if (p.src_reorder) {
    dnnl::memory to(p.src, engine(), thread_buffer(1, p.src.get_size()));
    p.src_reorder->execute(s, src, to);
    src = to;
  }
  dnnl::memory dst_user(p.dst_user, engine(), out);
  dnnl::memory dst =
      p.dst_reorder ? dnnl::memory(p.dst, engine(), thread_buffer(2, p.dst.get_size())) : dst_user;
  if (res && (p.dst_reorder || res != out || p.res_user != p.dst_user)) {
    dnnl::memory from(p.res_user, engine(), const_cast<void*>(res));
    p.res_reorder->execute(s, from, dst);
  }
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, src},
      {DNNL_ARG_WEIGHTS, dnnl::memory(p.wei, engine(), const_cast<void*>(w))},
      {DNNL_ARG_DST, dst}};
  if (bias) args.emplace(DNNL_ARG_BIAS, dnnl::memory(p.bias, engine(), const_cast<void*>(bias)));
  if (const size_t bytes = p.scratch.get_size())
    args.emplace(DNNL_ARG_SCRATCHPAD, dnnl::memory(p.scratch, engine(), thread_buffer(0, bytes)));
  p.conv.execute(s, args);
  if (p.dst_reorder) p.dst_reorder->execute(s, dst, dst_user);
  s.wait();
}

/// [N, C, H, W] strides of t, an input (c, h, w: g's c, h, w) or an output / residual (g's o,
/// oh, ow) of the convolution (1-D and unbatched shapes as their 2-D / batched views), or empty
/// when t is neither dense NCHW nor dense channels-last.
Dims user_strides(const ConvGeom& g, const Tensor& t, int64_t c, int64_t h, int64_t w) {
  const int64_t b0 = g.unbatched ? 0 : 1;
  const int64_t sc = t.stride(b0), sw = t.stride(-1);
  const int64_t sh = g.spatial == 2 ? t.stride(-2) : w * sw;
  const int64_t sn = g.unbatched ? c * h * w : t.stride(0);
  const Dims nchw{c * h * w, h * w, w, 1}, nhwc{h * w * c, 1, w * c, c};
  auto same = [&](const Dims& want) {  // strides of size-1 dims never matter
    const int64_t sizes[4] = {g.n, c, h, w}, got[4] = {sn, sc, sh, sw};
    for (int i = 0; i < 4; ++i)
      if (sizes[i] > 1 && got[i] != want[static_cast<size_t>(i)]) return false;
    return true;
  };
  if (same(nchw)) return nchw;
  if (same(nhwc)) return nhwc;
  return {};
}

}  // namespace

bool onednn_conv_supports(const ConvGeom& g, DType dtype) {
  if (!onednn_available() || g.c == 0 || g.kh * g.kw == 0) return false;
  if (dtype == DType::kFloat32) return true;
  if (dtype != DType::kBFloat16) return false;
  static const bool bf16 = cpu_supports("avx512bf16") || cpu_supports("amx-bf16");
  return bf16;
}

bool conv_onednn(const ConvGeom& g, const Tensor& x, const Tensor& weight,
                 const std::optional<Tensor>& bias, const Tensor& out, PackedWeightCache* constants,
                 const Tensor* residual) {
  ANVIL_CHECK(onednn_conv_supports(g, x.dtype()), "conv_onednn",
              "oneDNN does not take this convolution", "fp32 or bf16 (AVX512-BF16) with oneDNN",
              dtype_name(x.dtype()));
  const Dims out_strides = user_strides(g, out, g.o, g.oh, g.ow);
  ANVIL_CHECK(!out_strides.empty() && out.dtype() == x.dtype(), "conv_onednn",
              "the output must be dense NCHW or channels-last with the input's dtype",
              dtype_name(x.dtype()), out.type_str() + " strides " + shape_str(out.strides()));
  Tensor xs = x;
  Dims strides = user_strides(g, x, g.c, g.h, g.w);
  if (strides.empty()) {  // broadcast or sliced input: an NCHW copy
    xs = x.contiguous();
    strides = user_strides(g, xs, g.c, g.h, g.w);
  }
  const Tensor w = weight.is_contiguous() ? weight : weight.contiguous();
  if (!weight.is_contiguous()) constants = nullptr;  // the copy's address is not the constant's
  std::optional<Tensor> b;
  if (bias) b = bias->is_contiguous() ? *bias : bias->contiguous();
  std::optional<Tensor> res;
  Dims res_strides;
  if (residual) {
    ANVIL_CHECK(residual->dtype() == out.dtype() && residual->sizes() == out.sizes(), "conv_onednn",
                "the residual must have the output's dtype and sizes", out.type_str(),
                residual->type_str());
    // The output's own memory in its layout is used in place; a dense residual elsewhere is
    // read by the reorder into the destination; anything else is copied first.
    res = *residual;
    res_strides = user_strides(g, *res, g.o, g.oh, g.ow);
    const auto* r0 = static_cast<const char*>(res->data_ptr());
    const auto* o0 = static_cast<const char*>(out.data_ptr());
    const bool overlap = r0 < o0 + out.nbytes() && o0 < r0 + res->nbytes();
    if (res_strides.empty() || (overlap && (r0 != o0 || res_strides != out_strides))) {
      res = residual->to(residual->dtype(), /*copy=*/true);
      res_strides = user_strides(g, *res, g.o, g.oh, g.ow);
    }
  }
  // Work items over the pool: one call per image when the batch feeds every thread (an image's
  // reordered source and destination stay in cache: batched calls measured up to 2x slower on
  // 1x1 layers), else blocks of output channels (or of groups) where the weights outweigh the
  // input (split_channels), else bands of output rows (all images; each band reads its input
  // rows, padded only at the image's edges). Below parallel_macs() multiply-adds: one call.
  const int64_t macs = g.n * g.o * g.oh * g.ow * g.cg() * g.kh * g.kw;
  const int threads = macs < parallel_macs() ? 1 : available_threads();
  const bool by_image = threads <= 1 || g.n >= threads;
  const int64_t units = channel_units(g);
  const bool by_channel = !by_image && split_channels(g, threads);
  const int64_t total = by_image ? g.n : by_channel ? units : g.oh;
  const int64_t items = by_image ? g.n : std::min<int64_t>(threads, total);
  const int64_t per = (total + items - 1) / items;
  struct Item {
    std::shared_ptr<const Prim> prim;
    const void* w = nullptr;
    int64_t x_offset = 0, out_offset = 0, res_offset = 0;  // elements
    int64_t w_offset = 0, bias_offset = 0;                 // elements (channel blocks)
  };
  std::vector<Item> work;
  const int64_t ekh = g.dh * (g.kh - 1) + 1;
  try {  // a problem oneDNN has no primitive for stays on the other paths
    for (int64_t i0 = 0; i0 < total; i0 += per) {
      const int64_t i1 = std::min(total, i0 + per);
      const Problem whole{&g,      g.n,         g.h,         g.oh,      g.pad_top,    g.pad_bottom,
                          strides, out_strides, res_strides, x.dtype(), b.has_value()};
      Problem pr = whole;
      Item it;
      if (by_channel) {  // output channels [o0, o1) (groups [i0, i1) when grouped)
        ConvGeom sub = g;
        const int64_t og = g.og(), o0 = g.groups > 1 ? i0 * og : i0 * kChannelBlock;
        sub.o = (g.groups > 1 ? i1 * og : std::min(g.o, i1 * kChannelBlock)) - o0;
        if (g.groups > 1) {
          sub.groups = i1 - i0;
          sub.c = sub.groups * g.cg();
          it.x_offset = i0 * g.cg() * strides[1];
        }
        it.out_offset = o0 * out_strides[1];
        it.res_offset = res ? o0 * res_strides[1] : 0;
        it.w_offset = o0 * g.cg() * g.kh * g.kw;
        it.bias_offset = o0;
        pr.g = &sub;
        it.prim = primitive(pr);  // created (or found) while `sub` lives
        work.push_back(it);
        continue;
      }
      const int64_t step = by_image ? 0 : 2;  // the [N, C, H, W] dim the items split
      it.out_offset = i0 * out_strides[step];
      it.res_offset = res ? i0 * res_strides[step] : 0;
      if (by_image) {
        pr.n = i1 - i0;
        it.x_offset = i0 * strides[0];
      } else {
        const int64_t lo = i0 * g.sh - g.pad_top, hi = (i1 - 1) * g.sh - g.pad_top + ekh;
        const int64_t in_lo = std::max<int64_t>(lo, 0), in_hi = std::min(hi, g.h);
        if (in_hi <= in_lo) {  // a band of padding only: one call for everything
          work.clear();
          work.push_back(Item{primitive(whole), nullptr, 0, 0, 0});
          break;
        }
        pr.h = in_hi - in_lo;
        pr.oh = i1 - i0;
        pr.pad_top = in_lo - lo;
        pr.pad_bottom = hi - in_hi;
        it.x_offset = in_lo * strides[2];
      }
      it.prim = primitive(pr);
      work.push_back(it);
    }
  } catch (const dnnl::error&) {
    return false;
  }
  for (const Item& it : work)
    if (!it.prim->fast) return false;
  try {
    const int64_t es = static_cast<int64_t>(dtype_size(x.dtype()));
    std::vector<std::shared_ptr<const void>> holds(work.size());
    for (size_t i = 0; i < work.size(); ++i) {  // weights per distinct layout, before the split
      for (size_t j = 0; j < i && !work[i].w; ++j)
        if (work[j].prim->wei == work[i].prim->wei && work[j].w_offset == work[i].w_offset)
          work[i].w = work[j].w;
      if (!work[i].w)
        work[i].w = prepared_weights(
            *work[i].prim, static_cast<const char*>(w.data_ptr()) + work[i].w_offset * es,
            constants, holds[i]);
    }
    const auto* bp = b ? static_cast<const char*>(b->data_ptr()) : nullptr;
    const auto* xb = static_cast<const char*>(xs.data_ptr());
    auto* ob = static_cast<char*>(out.data_ptr());
    const auto* rb = res ? static_cast<const char*>(res->data_ptr()) : nullptr;
    ++g_runs;
    auto run_item = [&](const Item& it) {
      run_call(*it.prim, xb + it.x_offset * es, it.w, bp ? bp + it.bias_offset * es : nullptr,
               ob + it.out_offset * es,
               rb ? rb + it.res_offset * es : nullptr);
    };
    if (work.size() == 1) {
      run_item(work[0]);
      return true;
    }
    current_thread_pool().parallel_for(0, static_cast<int64_t>(work.size()), 1,
                                       [&](int64_t c0, int64_t c1) {
                                         for (int64_t c = c0; c < c1; ++c)
                                           run_item(work[static_cast<size_t>(c)]);
                                       });
    return true;
  } catch (const dnnl::error& e) {
    throw Error("oneDNN rejected the convolution", "conv_onednn",
                str("a primitive for input ", x.type_str(), " weight ", weight.type_str()),
                e.what());
  }
}

size_t onednn_conv_cached_primitives() {
  return cache().size();
}

size_t onednn_conv_runs() { return g_runs.load(); }

}  // namespace anvil::runtime::kern

#else  // !ANVIL_HAVE_ONEDNN

namespace anvil::runtime::kern {

bool onednn_conv_supports(const ConvGeom&, DType) { return false; }
bool conv_onednn(const ConvGeom&, const Tensor&, const Tensor&, const std::optional<Tensor>&,
                 const Tensor&, PackedWeightCache*, const Tensor*) {
  return false;
}
size_t onednn_conv_cached_primitives() { return 0; }
size_t onednn_conv_runs() { return 0; }

}  // namespace anvil::runtime::kern

#endif  // ANVIL_HAVE_ONEDNN

namespace anvil::runtime::kern {

namespace {
/// Convolutions of fewer multiply-adds stay on im2col (conv_path): on the zoo's EfficientNet-B0
/// and MobileNetV3 at 64x64, 2^12 to 2^18 measured alike and better than 0.
constexpr int64_t kOneDnnMinMacs = int64_t{1} << 16;
}  // namespace

ConvPath conv_path(const ConvGeom& g, DType dtype) {
  const char* env = std::getenv("ANVIL_CONV");
  const std::string mode = env ? env : "";
  const bool dw_dtype =
      dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16;
  if (mode == "im2col") return ConvPath::kIm2col;
  if (mode == "onednn" && onednn_conv_supports(g, dtype)) return ConvPath::kOneDnn;
  if (g.depthwise() && dw_dtype) return ConvPath::kDirect;
  if (mode == "direct") return ConvPath::kIm2col;  // the paths before oneDNN
  // Tiny convolutions (squeeze-and-excitation 1x1 convolutions on a 1x1 image) cost more in
  // oneDNN's per-call work (reorders, lookups) than they compute.
  const char* min_env = std::getenv("ANVIL_CONV_ONEDNN_MIN_MACS");
  const int64_t min_macs = min_env ? std::atoll(min_env) : kOneDnnMinMacs;
  if (g.n * g.o * g.oh * g.ow * g.cg() * g.kh * g.kw < min_macs) return ConvPath::kIm2col;
  return onednn_conv_supports(g, dtype) ? ConvPath::kOneDnn : ConvPath::kIm2col;
}

}  // namespace anvil::runtime::kern
