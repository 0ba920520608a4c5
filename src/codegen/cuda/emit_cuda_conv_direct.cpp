// anvil's direct convolution kernels on the CUDA target (conv() in emit_cuda_conv.cpp emits
// them instead of cuDNN's call): depthwise convolutions (depthwise_kernel) and convolutions of at
// most 4 input channels, a vision network's stem (stem_kernel). Fp32 accumulation; the bias,
// a fused residual and the activation are applied in the store; no host path behind them.
#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "codegen/c_expr.h"
#include "codegen/cuda/conv_internal.h"
#include "core/env_switch.h"
#include "passes/stem_rule.h"

namespace anvil::codegen::cuda::ext {

namespace {

/// Whether a direct kernel can take `g`'s geometry: 2-D, batched, a constant kernel size, and
/// the output's spatial sizes what the geometry gives (the direct kernels trust them; cuDNN
/// checks them).
bool direct_geometry(const ConvGeom& g) {
  if (g.spatial != 2 || g.unbatched) return false;
  const std::vector<SymInt>& ws = g.w->sizes;
  if (!(ws[2].is_constant() && ws[3].is_constant())) return false;
  for (int d = 0; d < 2; ++d) {
    const SymInt &in = g.x->sizes[2 + d], &out = g.y->sizes[2 + d];
    if (!in.is_constant() || !out.is_constant()) return false;
    const int64_t span = g.dilation[d] * (ws[2 + d].constant() - 1) + 1;
    const int64_t want = (in.constant() + g.pad_begin[d] + g.pad_end[d] - span) / g.stride[d] + 1;
    if (out.constant() != want || out.constant() <= 0) return false;
  }
  return true;
}

}  // namespace

/// Whether the depthwise convolution of `g` runs on the direct kernel below (the default;
/// ANVIL_CUDA_DEPTHWISE=0 at compile time keeps cuDNN): 2-D, batched, one input channel per
/// group, constant kernel size. On an H200 it took ConvNeXt-T at bf16 batch 32 from 6.74 to
/// 5.34 ms (cuDNN's depthwise engines ran at 50-85 GB/s there).
bool direct_depthwise(const ConvGeom& g) {
  if (!env_switch("ANVIL_CUDA_DEPTHWISE", true)) return false;
  if (g.spatial != 2 || g.unbatched || g.groups <= 1) return false;
  const std::vector<SymInt>& ws = g.w->sizes;
  if (!(ws[1].is_constant() && ws[1].constant() == 1)) return false;
  return direct_geometry(g);
}

namespace {

/// The taps of a depthwise convolution for `tw` neighbouring outputs of one row: for each
/// kernel row, the row's weights in registers and each input of the span read once, added to
/// every output it feeds (unrolled here: which output and tap each input meets is constant).
/// Each output sums its taps in the same order as one thread per output would.
std::string depthwise_taps(const ConvGeom& g, int64_t tw, const std::string& weight) {
  const TensorView &x = *g.x, &w = *g.w;
  const int64_t kw = w.sizes[3].constant(), sw = g.stride[1], dw = g.dilation[1];
  const int64_t span = (tw - 1) * sw + (kw - 1) * dw + 1;
  std::ostringstream in;
  in << "    const int64_t dw_x0 = u3 * " << tw * sw << " - " << g.pad_begin[1] << ";\n";
  in << "#pragma unroll\n    for (int64_t dw_r = 0; dw_r < " << paren(w.sizes[2])
     << "; ++dw_r) {\n";
  in << "      const int64_t dw_y = u2 * " << g.stride[0] << " - " << g.pad_begin[0] << " + dw_r * "
     << g.dilation[0] << ";\n";
  in << "      if (dw_y < 0 || dw_y >= dw_H) continue;\n";
  in << "      float dw_w[" << kw << "];\n";
  in << "#pragma unroll\n      for (int64_t dw_q = 0; dw_q < " << kw << "; ++dw_q) dw_w[dw_q] = "
     << "static_cast<float>(" << weight << ");\n";
  for (int64_t t = 0; t < span; ++t) {
    std::ostringstream uses;
    for (int64_t j = 0; j < tw; ++j)
      for (int64_t q = 0; q < kw; ++q)
        if (j * sw + q * dw == t) uses << " a" << j << " += dw_v * dw_w[" << q << "];";
    if (uses.str().empty()) continue;  // a gap between dilated taps
    in << "      if (dw_x0 + " << t << " >= 0 && dw_x0 + " << t << " < dw_W) {\n";
    in << "        const float dw_v = static_cast<float>("
       << load(x.dtype, "v0",
               offset_of(x, {"u0", "dw_c", "dw_y", "(dw_x0 + " + std::to_string(t) + ")"}))
       << ");\n       " << uses.str() << "\n      }\n";
  }
  in << "    }\n";
  return in.str();
}

/// The direct kernels' parameters: input v0, weight v1, bias v2, residual v3, output y0.
void conv_params(KernelText& k, const ConvGeom& g) {
  k.params.push_back({"v0", g.x});
  k.params.push_back({"v1", g.w});
  if (g.bias) k.params.push_back({"v2", g.bias});
  if (g.residual) k.params.push_back({"v3", g.residual});
  k.params.push_back({"y0", g.y});
}

/// Statements applying the bias, the fused residual and the activation to output value `a` of
/// channel `ch` at `at` (index variables n, k, oy, ox).
std::string output_epilogue(const ConvGeom& g, const std::string& ch,
                            const std::vector<std::string>& at) {
  std::ostringstream in;
  if (g.bias)
    in << "    a += " << load(g.bias->dtype, "v2", ch + " * " + paren(g.bias->strides[0])) << ";\n";
  if (g.residual)
    in << "    a += " << load(g.residual->dtype, "v3", offset_of(*g.residual, at)) << ";\n";
  in << activation(g, "a");
  return in.str();
}

/// Statements finishing output value `a` of channel `ch` at `at`: the epilogue, the store.
std::string finish_output(const ConvGeom& g, const std::string& ch,
                          const std::vector<std::string>& at) {
  return output_epilogue(g, ch, at) + "    " + store(g.y->dtype, "y0", offset_of(*g.y, at), "a") +
         "\n";
}

/// A depthwise convolution whose input and output rows are dense (NCHW-like views, constant
/// strides), opt-in (ANVIL_CUDA_DW_TILED=1 at compile time) until measured on a GPU: a block
/// per (image, channel, band of output rows) stages the band's input rows with their halo in
/// shared memory (coalesced reads along the rows, zeros for the padding), then each thread
/// computes outputs of the band from shared memory, neighbouring threads writing neighbouring
/// outputs of a row. Returns "" where it does not apply (channels-last views, a tile over 32
/// KiB). The per-thread kernel read each input through the caches several times (1-row spans
/// per output group): 150-370 GB/s in ConvNeXt-T and EfficientNet-B0 at batch 32 on an H200.
std::string tiled_depthwise(const Program& p, const ExternStep& e, const ConvGeom& g) {
  if (!env_switch("ANVIL_CUDA_DW_TILED", false)) return "";
  const TensorView &x = *g.x, &w = *g.w, &y = *g.y;
  for (const TensorView* t : {&x, &y, &w})
    for (const auto* list : {&t->sizes, &t->strides})
      for (const SymInt& d : *list)
        if (!d.is_constant()) return "";  // (a symbolic batch: the per-thread kernel)
  if (x.strides[3].constant() != 1 || y.strides[3].constant() != 1) return "";
  const int64_t n = y.sizes[0].constant(), k = y.sizes[1].constant(), oh = y.sizes[2].constant(),
                ow = y.sizes[3].constant(), kh = w.sizes[2].constant(), kw = w.sizes[3].constant();
  const int64_t cols = (ow - 1) * g.stride[1] + (kw - 1) * g.dilation[1] + 1;  // a tile row
  // about 512 outputs per block (2 per thread), fewer rows while the tile and the weights
  // pass 32 KiB
  int64_t th = std::min<int64_t>(oh, (512 + ow - 1) / ow);
  const auto rows_of = [&](int64_t t) {
    return (t - 1) * g.stride[0] + (kh - 1) * g.dilation[0] + 1;
  };
  const auto bytes = [&](int64_t t) { return (rows_of(t) * cols + kh * kw) * 4; };
  while (th > 1 && bytes(th) > 32 * 1024) --th;
  if (bytes(th) > 32 * 1024) return "";
  const int64_t rows = rows_of(th), bands = (oh + th - 1) / th, blocks = n * k * bands;
  if (blocks >= (int64_t{1} << 31)) return "";
  const int64_t threads = std::min<int64_t>(256, (th * ow + 31) / 32 * 32);
  std::ostringstream in;
  in << "  __shared__ float dt_in[" << rows * cols << "];  // the band's input rows, padded\n";
  in << "  __shared__ float dt_w[" << kh * kw << "];\n";
  in << "  for (int64_t dt_b = blockIdx.x; dt_b < " << blocks << "; dt_b += gridDim.x) {\n";
  in << "    const int64_t u0 = dt_b / " << k * bands << ", u1 = dt_b / " << bands << " % " << k
     << ", dt_band = dt_b % " << bands << ";\n";
  in << "    const int64_t dt_c = u1 / " << k / g.groups
     << ";  // the output channel's input channel\n";
  in << "    const int64_t dt_oy0 = dt_band * " << th << ", dt_iy0 = dt_oy0 * " << g.stride[0]
     << " - " << g.pad_begin[0] << ";\n";
  in << "    __syncthreads();  // the previous band's outputs are done with the tile\n";
  in << "    for (int dt_i = threadIdx.x; dt_i < " << kh * kw << "; dt_i += blockDim.x)\n";
  in << "      dt_w[dt_i] = static_cast<float>("
     << load(w.dtype, "v1",
             offset_of(w, {"u1", "0", "(dt_i / " + std::to_string(kw) + ")",
                           "(dt_i % " + std::to_string(kw) + ")"}))
     << ");\n";
  in << "    for (int dt_i = threadIdx.x; dt_i < " << rows * cols << "; dt_i += blockDim.x) {\n";
  in << "      const int64_t dt_y = dt_iy0 + dt_i / " << cols << ", dt_x = dt_i % " << cols << " - "
     << g.pad_begin[1] << ";\n";
  in << "      dt_in[dt_i] = dt_y >= 0 && dt_y < " << paren(x.sizes[2])
     << " && dt_x >= 0 && dt_x < " << paren(x.sizes[3]) << " ? static_cast<float>("
     << load(x.dtype, "v0", offset_of(x, {"u0", "dt_c", "dt_y", "dt_x"})) << ") : 0.0f;\n";
  in << "    }\n    __syncthreads();\n";
  in << "    for (int dt_o = threadIdx.x; dt_o < " << th * ow << "; dt_o += blockDim.x) {\n";
  in << "      const int64_t u2 = dt_oy0 + dt_o / " << ow << ", u3 = dt_o % " << ow << ";\n";
  in << "      if (u2 >= " << oh << ") break;  // the last band's missing rows\n";
  in << "      const float* dt_p = dt_in + dt_o / " << ow << " * " << g.stride[0] * cols
     << " + u3 * " << g.stride[1] << ";\n";
  in << "      float a = 0;\n";
  in << "#pragma unroll\n      for (int dt_r = 0; dt_r < " << kh << "; ++dt_r)\n";
  in << "#pragma unroll\n        for (int dt_q = 0; dt_q < " << kw << "; ++dt_q)\n";
  in << "          a += dt_p[dt_r * " << g.dilation[0] * cols << " + dt_q * " << g.dilation[1]
     << "] * dt_w[dt_r * " << kw << " + dt_q];\n";
  in << finish_output(g, "u1", {"u0", "u1", "u2", "u3"});
  in << "    }\n  }\n";
  KernelText kt;
  conv_params(kt, g);
  kt.body = in.str();
  kt.grid = std::to_string(blocks);
  kt.block = std::to_string(threads);
  return "// " + e.name + ": " + node_list(e) + " (" + e.target +
         "): a depthwise convolution, anvil's direct kernel (plane-tiled: " + std::to_string(th) +
         " output rows per block)\n" + finish(p, e, kt);
}

}  // namespace

/// A depthwise convolution (multiplier 1) of a channels-last input into a channels-last output,
/// both dense along the channels, by default for kernels of 49 taps or more (7x7: ConvNeXt-T at
/// bf16 batch 32 on an H200 went 3.055 -> 2.827 ms, its 7x7 convolutions 0.145 -> 0.105 ms at
/// stage 1) and not for smaller ones (EfficientNet-B0 2.10 -> 2.21, MobileNetV3-Small 0.555 ->
/// 0.592 ms with their 3x3 and 5x5 ones on it); ANVIL_CUDA_DW_VEC=1 / 0 at compile time takes it
/// for every kernel size / none. Each thread computes `tw` (up to 4) neighbouring outputs of a
/// row for `vec` neighbouring channels (8 bytes of each: 4 16-bit values or 2 float32), each
/// input read as one 8-byte vector (a warp: 256 contiguous bytes); a block takes a window of
/// channels for many output positions, its weights staged once in shared memory as
/// [tap][channel] floats and read as one vector per tap. The per-thread kernel read each
/// weight from another line per thread of a warp and each input 2 bytes at a time: 268 GB/s on
/// ConvNeXt-T's 7x7 convolutions at bf16 batch 32 on an H200. Returns "" where it does not
/// apply. Unaligned base pointers (a caller's view) take scalar loads and stores, decided once
/// per launch.
std::string vector_depthwise(const Program& p, const ExternStep& e, const ConvGeom& g) {
  const TensorView &x = *g.x, &w = *g.w, &y = *g.y;
  if (const std::optional<bool> on = env_switch("ANVIL_CUDA_DW_VEC")) {
    if (!*on) return "";
  } else if (!w.sizes[2].is_constant() || !w.sizes[3].is_constant() ||
             w.sizes[2].constant() * w.sizes[3].constant() < 49) {
    return "";
  }
  for (const TensorView* t : {&x, &y, &w}) {
    if (!t->offset.is_constant()) return "";
    for (const auto* list : {&t->sizes, &t->strides})
      for (const SymInt& d : *list)
        if (!d.is_constant()) return "";  // (a symbolic batch: the per-thread kernel)
  }
  if (x.dtype != y.dtype) return "";
  const int64_t bytes = static_cast<int64_t>(dtype_size(x.dtype));
  if (!(x.dtype == DType::kFloat32 || x.dtype == DType::kBFloat16 || x.dtype == DType::kFloat16))
    return "";
  const int64_t vec = 8 / bytes;
  const int64_t c = x.sizes[1].constant();
  if (y.sizes[1].constant() != c || g.groups != c || c % vec != 0) return "";
  for (const TensorView* t : {&x, &y}) {
    if (t->strides[1].constant() != 1 || t->offset.constant() % vec != 0) return "";
    for (int d : {0, 2, 3})
      if (t->strides[d].constant() % vec != 0) return "";
  }
  const int64_t n = y.sizes[0].constant(), oh = y.sizes[2].constant(), ow = y.sizes[3].constant(),
                kh = w.sizes[2].constant(), kw = w.sizes[3].constant(), taps = kh * kw;
  int64_t tw = std::min<int64_t>(4, ow);
  while (tw > 1 && (tw - 1) * g.stride[1] + (kw - 1) * g.dilation[1] + 1 > 64) --tw;
  const int64_t span = (tw - 1) * g.stride[1] + (kw - 1) * g.dilation[1] + 1;
  const int64_t cv = c / vec;              // channel vectors
  int64_t cw = std::min<int64_t>(cv, 32);  // channel vectors per block
  // the staged weights: a row of the window's channels per tap, padded by one vector so that
  // the staging's stores (consecutive taps of a channel) spread over the banks
  while (cw > 1 && taps * (cw + 1) * vec * 4 > 40 * 1024) cw = (cw + 1) / 2;
  if (taps * (cw + 1) * vec * 4 > 40 * 1024) return "";
  const int64_t cwv = cw * vec, row = cwv + vec, by = std::max<int64_t>(1, 256 / cw),
                windows = (cv + cw - 1) / cw;
  const int64_t owg = (ow + tw - 1) / tw, groups = n * oh * owg;
  // Blocks loop over position groups with their staged weights: about 4 rounds each where that
  // still leaves at least 512 blocks (the staging is a block's fixed cost: with 2048 blocks,
  // ConvNeXt-T's stage-1 ones at batch 32 made 1.2 rounds each), all of them where fewer.
  const int64_t rounds = (groups + by - 1) / by;
  const int64_t chunks = std::min<int64_t>(
      rounds, std::max<int64_t>((rounds + 3) / 4, (512 + windows - 1) / windows));
  if (windows * chunks >= (int64_t{1} << 31)) return "";
  // 32-bit index arithmetic where every element offset of the views fits (fewer registers:
  // ConvNeXt-T's 7x7 kernels took 94-96 with 64-bit indices, 2 blocks per SM)
  const auto fits = [](const TensorView* v) {
    if (v == nullptr) return true;
    if (!v->offset.is_constant()) return false;
    int64_t last = v->offset.constant();
    for (size_t d = 0; d < v->sizes.size(); ++d) {
      if (!v->sizes[d].is_constant() || !v->strides[d].is_constant()) return false;
      last += (v->sizes[d].constant() - 1) * std::abs(v->strides[d].constant());
    }
    return last < (int64_t{1} << 30);
  };
  const bool narrow = fits(&x) && fits(&y) && fits(&w) && fits(g.bias) && fits(g.residual) &&
                      groups + chunks * by < (int64_t{1} << 30);
  const std::string ix = narrow ? "int" : "int64_t";  // the kernel's index type
  const std::string ty = storage_type(x.dtype, Dialect::kCuda);
  const std::string wv = vec == 4 ? "float4" : "float2";
  const char* lane[] = {"x", "y", "z", "w"};
  std::ostringstream in;
  in << "  __shared__ __align__(16) float dv_w[" << taps * row
     << "];  // [tap][channel of the block's window], rows of " << row << "\n";
  in << "  const " << ix << " dv_lane = threadIdx.x % " << cw << ", dv_py = threadIdx.x / " << cw
     << ";\n";
  in << "  const " << ix << " dv_c0 = blockIdx.x % " << windows << " * " << cwv
     << ", dv_chunk = blockIdx.x / " << windows << ";\n";
  // read in the weights' own order ([channel][tap]: a warp's loads are contiguous)
  in << "  for (int dv_i = threadIdx.x; dv_i < " << taps * cwv << "; dv_i += blockDim.x) {\n";
  in << "    const " << ix << " dv_cl = dv_i / " << taps << ", dv_t = dv_i % " << taps
     << ", dv_ch = dv_c0 + dv_cl;\n";
  in << "    dv_w[dv_t * " << row << " + dv_cl] = dv_ch < " << c << " ? static_cast<float>("
     << load(w.dtype, "v1",
             offset_of(w, {"dv_ch", "0", "(dv_t / " + std::to_string(kw) + ")",
                           "(dv_t % " + std::to_string(kw) + ")"}))
     << ") : 0.0f;\n";
  in << "  }\n  __syncthreads();\n";
  in << "  const " << ix << " u1 = dv_c0 + dv_lane * " << vec
     << ";  // the thread's first channel\n";
  in << "  if (u1 >= " << c << ") return;\n";
  in << "  const bool dv_vec = ((reinterpret_cast<uintptr_t>(v0) | "
        "reinterpret_cast<uintptr_t>(y0)) & 7) == 0;\n";
  // (the launch has `chunks` blocks per window; any multiple of `windows` covers the work)
  in << "  for (" << ix << " dv_g = dv_chunk * " << by << " + dv_py; dv_g < " << groups
     << "; dv_g += static_cast<" << ix << ">(gridDim.x / " << windows << ") * " << by << ") {\n";
  in << "    const " << ix << " u3 = dv_g % " << owg << ", u2 = dv_g / " << owg << " % " << oh
     << ", u0 = dv_g / " << owg * oh << ";\n";
  in << "    float";
  for (int64_t j = 0; j < tw; ++j)
    for (int64_t l = 0; l < vec; ++l) in << (j || l ? ", " : " ") << "a" << j << "_" << l << " = 0";
  in << ";\n";
  in << "    const " << ix << " dv_x0 = u3 * " << tw * g.stride[1] << " - " << g.pad_begin[1]
     << ";\n";
  in << "#pragma unroll\n    for (" << ix << " dv_r = 0; dv_r < " << kh << "; ++dv_r) {\n";
  in << "      const " << ix << " dv_y = u2 * " << g.stride[0] << " - " << g.pad_begin[0]
     << " + dv_r * " << g.dilation[0] << ";\n";
  in << "      if (dv_y < 0 || dv_y >= " << x.sizes[2].constant() << ") continue;\n";
  in << "      const " << wv << "* dv_wr = reinterpret_cast<const " << wv << "*>(dv_w + dv_r * "
     << kw * row << " + dv_lane * " << vec << ");\n";
  for (int64_t q = 0; q < kw; ++q)
    in << "      const " << wv << " dv_w" << q << " = dv_wr[" << q * (cw + 1) << "];\n";
  for (int64_t t = 0; t < span; ++t) {
    std::ostringstream uses;
    for (int64_t j = 0; j < tw; ++j)
      for (int64_t q = 0; q < kw; ++q)
        if (j * g.stride[1] + q * g.dilation[1] == t)
          for (int64_t l = 0; l < vec; ++l)
            uses << " a" << j << "_" << l << " += dv_v[" << l << "] * dv_w" << q << "." << lane[l]
                 << ";";
    if (uses.str().empty()) continue;  // a gap between dilated taps
    in << "      if (dv_x0 + " << t << " >= 0 && dv_x0 + " << t << " < " << x.sizes[3].constant()
       << ") {\n";
    in << "        const " << ix
       << " dv_at = " << offset_of(x, {"u0", "u1", "dv_y", "(dv_x0 + " + std::to_string(t) + ")"})
       << ";\n";
    in << "        alignas(8) " << ty << " dv_e[" << vec << "];\n";
    in << "        if (dv_vec) {\n";
    in << "          *reinterpret_cast<uint2*>(dv_e) = __ldg(reinterpret_cast<const uint2*>(v0 + "
          "dv_at));\n";
    in << "        } else {\n";
    in << "#pragma unroll\n          for (int dv_l = 0; dv_l < " << vec
       << "; ++dv_l) dv_e[dv_l] = v0[dv_at + dv_l];\n";
    in << "        }\n";
    in << "        float dv_v[" << vec << "];\n";
    in << "#pragma unroll\n        for (int dv_l = 0; dv_l < " << vec
       << "; ++dv_l) dv_v[dv_l] = " << load(x.dtype, "dv_e", "dv_l") << ";\n";
    in << "       " << uses.str() << "\n      }\n";
  }
  in << "    }\n";
  for (int64_t j = 0; j < tw; ++j) {
    in << "    if (u3 * " << tw << " + " << j << " < " << ow << ") {\n";
    in << "    const " << ix << " dv_ox = u3 * " << tw << " + " << j << ";\n";
    in << "    alignas(8) " << ty << " dv_o[" << vec << "];\n";
    for (int64_t l = 0; l < vec; ++l) {
      in << "    {\n    const " << ix << " dv_ch = u1 + " << l << ";\n";
      in << "    float a = a" << j << "_" << l << ";\n";
      in << output_epilogue(g, "dv_ch", {"u0", "dv_ch", "u2", "dv_ox"});
      in << "    " << store(y.dtype, "dv_o", std::to_string(l), "a") << "\n    }\n";
    }
    const std::string at = offset_of(y, {"u0", "u1", "u2", "dv_ox"});
    in << "    if (dv_vec) {\n";
    in << "      *reinterpret_cast<uint2*>(y0 + " << at
       << ") = *reinterpret_cast<const uint2*>(dv_o);\n";
    in << "    } else {\n";
    in << "#pragma unroll\n      for (int dv_l = 0; dv_l < " << vec << "; ++dv_l) y0[" << at
       << " + dv_l] = dv_o[dv_l];\n";
    in << "    }\n    }\n";
  }
  in << "  }\n";
  KernelText kt;
  conv_params(kt, g);
  kt.body = in.str();
  const int64_t threads = cw * by;
  kt.block = std::to_string(threads);
  // One full wave (ANVIL_CUDA_DW_RESIDENT=0 at compile time: the fixed grid): ConvNeXt-T's
  // stage-1 7x7 convolutions at bf16 batch 32 launched 628 blocks where an H200 held 396 (3
  // per SM at 72 registers), so 232 ran their 4 rounds as a second wave on 59 % of the SMs; at
  // most `chunks` blocks per window, as many as the device holds. Measured there: the model
  // 2.567 -> 2.460 ms b2b, those convolutions 0.110 -> 0.096 ms (synchronized profile).
  kt.grid = std::to_string(windows * chunks);
  if (env_switch("ANVIL_CUDA_DW_RESIDENT", true)) {
    kt.guard = "  static std::atomic<int> dv_resident[64];\n";
    kt.grid = "static_cast<unsigned>(" + std::to_string(windows) + " * std::min<int64_t>(" +
              std::to_string(chunks) +
              ", std::max<int64_t>(1, anvil_resident_blocks(dv_resident, " + e.name +
              "_kernel, " + std::to_string(threads) + ", 0) / " + std::to_string(windows) +
              ")))";
  }
  // Opt-in (ANVIL_CUDA_DW_MINBLOCKS=N at compile time): registers bounded for N blocks per SM.
  // The kernel stalls on its loads at 30 % occupancy there, but bounding it for 4 blocks of
  // 240 threads (68 registers) made ConvNeXt-T slower (2.460 -> 2.545 ms with the full wave).
  if (const char* v = std::getenv("ANVIL_CUDA_DW_MINBLOCKS"); v != nullptr && std::atoll(v) > 0)
    kt.bounds = std::to_string(threads) + ", " + std::to_string(std::atoll(v));
  return "// " + e.name + ": " + node_list(e) + " (" + e.target +
         "): a depthwise convolution, anvil's direct kernel (channels-last vectors: " +
         std::to_string(vec) + " channels x " + std::to_string(tw) + " outputs per thread)\n" +
         finish(p, e, kt);
}

/// A depthwise convolution: each thread computes `tw` (up to 4) neighbouring outputs of a row
/// (in the input's memory order: NCHW or NHWC alike), the taps read through the caches, fp32
/// accumulation, the bias, residual and activation applied in the store.
std::string depthwise_kernel(const Program& p, const ExternStep& e, const ConvGeom& g) {
  if (std::string v = vector_depthwise(p, e, g); !v.empty()) return v;
  if (std::string tiled = tiled_depthwise(p, e, g); !tiled.empty()) return tiled;
  const TensorView &x = *g.x, &w = *g.w, &y = *g.y;
  const int64_t ow = y.sizes[3].constant(), kw = w.sizes[3].constant();
  int64_t tw = std::min<int64_t>(4, ow);
  while (tw > 1 && (tw - 1) * g.stride[1] + (kw - 1) * g.dilation[1] + 1 > 64) --tw;
  std::ostringstream in;
  in << "    const int64_t dw_c = u1 / (" << paren(w.sizes[0]) << " / " << g.groups
     << ");  // the output channel's input channel\n";
  in << "    const int64_t dw_H = " << paren(x.sizes[2]) << ", dw_W = " << paren(x.sizes[3])
     << ";\n";
  in << "    float";
  for (int64_t j = 0; j < tw; ++j) in << (j ? ", a" : " a") << j << " = 0";
  in << ";\n";
  // opt-in (ANVIL_CUDA_DW_STAGED=1): with the channels innermost in the input's memory (the
  // threads' order), a warp's threads are neighbouring channels and each reads its own channel's
  // weights: 32 different lines per load. The block stages its window of channels' weights
  // (at most 256: the block's threads) in shared memory as [tap][channel], read coalesced.
  const int64_t taps = w.sizes[2].constant() * kw, channels = w.sizes[0].constant();
  const int64_t window = std::min<int64_t>(channels, 256);
  bool staged = env_switch("ANVIL_CUDA_DW_STAGED", false) && x.strides[1].is_constant() &&
                x.strides[1].constant() == 1 && taps * window * dtype_size(w.dtype) <= 32 * 1024;
  // (the channels strictly innermost: base % channels below is the block's first channel)
  for (int d : {0, 2, 3})
    staged = staged && x.strides[d].is_constant() && x.strides[d].constant() > 1;
  std::string weight = load(w.dtype, "v1", offset_of(w, {"u1", "0", "dw_r", "dw_q"}));
  std::string decl, prologue;  // the staged weights' array, their filling per block
  if (staged) {
    const std::string ty = storage_type(w.dtype, Dialect::kCuda);
    weight = load(w.dtype, "dw_s",
                  "(dw_r * " + std::to_string(kw) + " + dw_q) * " + std::to_string(window) +
                      " + (u1 - dw_c0 + " + std::to_string(channels) + ") % " +
                      std::to_string(channels));
    std::ostringstream pro;
    pro << "    __syncthreads();  // the previous window's taps are done\n";
    pro << "    dw_c0 = base % " << channels << ";  // the channel of the block's first thread\n";
    pro << "    for (int dw_i = threadIdx.x; dw_i < " << taps * window
        << "; dw_i += blockDim.x) {\n";
    pro << "      const int64_t dw_ch = (dw_c0 + dw_i / " << taps << ") % " << channels
        << ", dw_t = dw_i % " << taps << ";\n";
    pro << "      dw_s[dw_t * " << window << " + dw_i / " << taps << "] = "
        << "v1["
        << offset_of(w, {"dw_ch", "0", "(dw_t / " + std::to_string(kw) + ")",
                         "(dw_t % " + std::to_string(kw) + ")"})
        << "];\n";
    pro << "    }\n    __syncthreads();\n";
    decl = "  __shared__ " + ty + " dw_s[" + std::to_string(taps * window) +
           "];  // [tap][channel of the block's window]\n  int64_t dw_c0 = 0;\n";
    prologue = pro.str();
  }
  in << depthwise_taps(g, tw, weight);
  for (int64_t j = 0; j < tw; ++j) {
    in << "    if (u3 * " << tw << " + " << j << " < " << ow << ") {\n";
    in << "    const int64_t dw_ox = u3 * " << tw << " + " << j << ";\n";
    in << "    float a = a" << j << ";\n";
    in << finish_output(g, "u1", {"u0", "u1", "u2", "dw_ox"});
    in << "    }\n";
  }
  TensorView groups = y;  // the threads' index space: [N, K, OH, ceil(OW / tw)]
  groups.sizes[3] = SymInt((ow + tw - 1) / tw);
  KernelText k;
  conv_params(k, g);
  // the input's memory order: each output reads kh * kw inputs, so neighbouring threads read
  // neighbouring addresses (an NHWC input with an NCHW output read one per 32-byte sector)
  k.body = decl + elementwise_loop(groups, in.str(), &x, prologue);
  k.grid = elementwise_grid(groups);
  return "// " + e.name + ": " + node_list(e) + " (" + e.target +
         "): a depthwise convolution, anvil's direct kernel\n" + finish(p, e, k);
}

namespace {

/// The stem rule's view of `g` (passes/stem_rule.h); false where the weight's sizes are not
/// constant.
bool stem_shape(const ConvGeom& g, passes::StemConv& s) {
  const std::vector<SymInt>& ws = g.w->sizes;
  for (const SymInt& d : ws)
    if (!d.is_constant()) return false;
  s.dtype = g.x->dtype;
  s.k = ws[0].constant(), s.c = ws[1].constant(), s.kh = ws[2].constant(), s.kw = ws[3].constant();
  s.stride_h = g.stride[0], s.stride_w = g.stride[1];
  s.dil_h = g.dilation[0], s.dil_w = g.dilation[1];
  s.batch = g.y->sizes[0].is_constant() ? g.y->sizes[0].constant() : -1;
  return true;
}

/// Whether the tensor-core stem kernel takes `g`.
bool stem_mma_geom(const ConvGeom& g) {
  passes::StemConv s;
  return stem_shape(g, s) && passes::stem_mma(s);
}

}  // namespace

/// Whether the convolution of `g` runs on one of the direct kernels for few input channels (a
/// vision network's stem: 3 channels of an image, 3x3 to 7x7, stride 2 or 4) below, the default
/// (ANVIL_CUDA_STEM=0 at compile time keeps cuDNN): one group, and the rule of
/// passes/stem_rule.h (the tensor-core kernel, or the scalar one).
bool direct_stem(const ConvGeom& g) {
  if (!env_switch("ANVIL_CUDA_STEM", true)) return false;
  if (g.groups != 1 || !direct_geometry(g)) return false;
  passes::StemConv s;
  return stem_shape(g, s) && (passes::stem_mma(s) || passes::stem_scalar(s));
}

namespace {

/// The tensor-core stem kernel (passes/stem_rule.h): a block stages the weights once as
/// [K][kdim / 2 + 4] 32-bit pairs of 16-bit values (k = tap x 4 + channel, zeros past the
/// channels and the taps), then for each of its tiles of 8 x 16 output positions of one image
/// the tile's input patch as [rows][cols][4 channels] (zeros in the padding and past the
/// channels); warp w computes rows 2w and 2w + 1 of the tile (two m16 tiles) by all K channels
/// (K / 8 n8 tiles) with mma.sync m16n8k16, fp32 accumulation, the A operand gathered from the
/// patch through a table of per-pair offsets (an implicit im2col). The k pairs past the taps
/// read zeros, not the patch, so an infinite input never meets a padded zero weight.
std::string stem_mma_kernel(const Program& p, const ExternStep& e, const ConvGeom& g) {
  const TensorView &x = *g.x, &w = *g.w, &y = *g.y;
  passes::StemConv s;
  stem_shape(g, s);
  const int64_t kdim = passes::stem_mma_kdim(s), pairs = kdim / 2, ws = pairs + 4;
  const int64_t taps = s.kh * s.kw, tap_pairs = taps * 2;
  const int64_t th = passes::kStemTileRows, tw = passes::kStemTileCols;
  const int64_t rows = (th - 1) * s.stride_h + s.kh, cols = (tw - 1) * s.stride_w + s.kw;
  const int64_t n = y.sizes[0].constant(), oh = y.sizes[2].constant(), ow = y.sizes[3].constant();
  const int64_t ty = (oh + th - 1) / th, tx = (ow + tw - 1) / tw, tiles = n * ty * tx;
  const int64_t rounds = (tiles + 1023) / 1024, blocks = (tiles + rounds - 1) / rounds;
  const int64_t ntiles = s.k / 8;
  const std::string mma = std::string("mma.sync.aligned.m16n8k16.row.col.f32.") +
                          (s.dtype == DType::kBFloat16 ? "bf16.bf16" : "f16.f16") + ".f32";
  // two channels in one 4-byte store: channels dense, every position's pair 4-byte aligned
  bool pair = y.offset.is_constant() && y.offset.constant() % 2 == 0;
  for (size_t d = 0; d < 4; ++d) {
    const SymInt& st = y.strides[d];
    pair = pair && st.is_constant() && (d == 1 ? st.constant() == 1 : st.constant() % 2 == 0);
  }
  std::ostringstream in;
  if (pair) in << "  const bool sm_pair = (reinterpret_cast<uintptr_t>(y0) & 3) == 0;\n";
  in << "  __shared__ __align__(16) uint32_t sm_w[" << s.k * ws << "];  // [K][" << ws
     << "] pairs of k = tap * 4 + channel\n";
  in << "  __shared__ __align__(16) uint32_t sm_x[" << rows * cols * 2 << "];  // [" << rows
     << "][" << cols << "][4 channels]\n";
  in << "  __shared__ int sm_koff[" << pairs << "];  // pair -> offset in a position's patch\n";
  in << "  for (int sm_i = threadIdx.x; sm_i < " << s.k * pairs << "; sm_i += blockDim.x) {\n";
  in << "    const int sm_o = sm_i / " << pairs << ", sm_p = sm_i % " << pairs
     << ", sm_tap = sm_p / 2, sm_c = sm_p % 2 * 2;\n";
  in << "    uint32_t sm_lo = 0, sm_hi = 0;\n";
  in << "    if (sm_tap < " << taps << ") {\n";
  in << "      const int sm_r = sm_tap / " << s.kw << ", sm_q = sm_tap % " << s.kw << ";\n";
  in << "      if (sm_c < " << s.c << ") sm_lo = v1["
     << offset_of(w, {"sm_o", "sm_c", "sm_r", "sm_q"}) << "];\n";
  in << "      if (sm_c + 1 < " << s.c << ") sm_hi = v1["
     << offset_of(w, {"sm_o", "(sm_c + 1)", "sm_r", "sm_q"}) << "];\n";
  in << "    }\n";
  in << "    sm_w[sm_o * " << ws << " + sm_p] = sm_lo | sm_hi << 16;\n  }\n";
  in << "  for (int sm_p = threadIdx.x; sm_p < " << pairs << "; sm_p += blockDim.x)\n";
  in << "    sm_koff[sm_p] = sm_p < " << tap_pairs << " ? (sm_p / 2 / " << s.kw << " * " << cols
     << " + sm_p / 2 % " << s.kw << ") * 2 + sm_p % 2 : 0;\n";
  in << "  const int sm_lane = threadIdx.x & 31, sm_warp = threadIdx.x >> 5;\n";
  in << "  const int sm_g = sm_lane >> 2, sm_t = sm_lane & 3;\n";
  in << "  // the patch offsets of this thread's A rows: m tile i (the tile's output row\n";
  in << "  // 2 * warp + i), columns g and g + 8\n";
  in << "  int sm_base[2][2];\n";
  in << "#pragma unroll\n  for (int sm_i = 0; sm_i < 2; ++sm_i)\n";
  in << "#pragma unroll\n    for (int sm_h = 0; sm_h < 2; ++sm_h)\n";
  in << "      sm_base[sm_i][sm_h] = ((sm_warp * 2 + sm_i) * " << s.stride_h * cols
     << " + (sm_g + 8 * sm_h) * " << s.stride_w << ") * 2;\n";
  in << "  for (int64_t sm_tile = blockIdx.x; sm_tile < " << tiles
     << "; sm_tile += gridDim.x) {\n";
  in << "    const int64_t u0 = sm_tile / " << ty * tx << ", sm_oy0 = sm_tile / " << tx << " % "
     << ty << " * " << th << ", sm_ox0 = sm_tile % " << tx << " * " << tw << ";\n";
  in << "    const int64_t sm_iy0 = sm_oy0 * " << s.stride_h << " - " << g.pad_begin[0]
     << ", sm_ix0 = sm_ox0 * " << s.stride_w << " - " << g.pad_begin[1] << ";\n";
  in << "    __syncthreads();  // the weights are staged; the previous tile is done\n";
  in << "    for (int sm_i = threadIdx.x; sm_i < " << rows * cols << "; sm_i += blockDim.x) {\n";
  in << "      const int64_t sm_iy = sm_iy0 + sm_i / " << cols << ", sm_ix = sm_ix0 + sm_i % "
     << cols << ";\n";
  in << "      uint32_t sm_c4[4] = {0, 0, 0, 0};\n";
  in << "      if (sm_iy >= 0 && sm_iy < " << paren(x.sizes[2]) << " && sm_ix >= 0 && sm_ix < "
     << paren(x.sizes[3]) << ") {\n";
  in << "#pragma unroll\n        for (int sm_c = 0; sm_c < " << s.c << "; ++sm_c)\n";
  in << "          sm_c4[sm_c] = v0["
     << offset_of(x, {"u0", "static_cast<int64_t>(sm_c)", "sm_iy", "sm_ix"}) << "];\n";
  in << "      }\n";
  in << "      sm_x[sm_i * 2] = sm_c4[0] | sm_c4[1] << 16;\n";
  in << "      sm_x[sm_i * 2 + 1] = sm_c4[2] | sm_c4[3] << 16;\n";
  in << "    }\n    __syncthreads();\n";
  in << "    float sm_acc[2][" << ntiles << "][4];\n";
  in << "#pragma unroll\n    for (int sm_i = 0; sm_i < 2; ++sm_i)\n";
  in << "#pragma unroll\n      for (int sm_n = 0; sm_n < " << ntiles << "; ++sm_n)\n";
  in << "#pragma unroll\n        for (int sm_j = 0; sm_j < 4; ++sm_j) "
     << "sm_acc[sm_i][sm_n][sm_j] = 0.0f;\n";
  in << "#pragma unroll\n    for (int sm_ks = 0; sm_ks < " << kdim / 16 << "; ++sm_ks) {\n";
  in << "      const int sm_p0 = sm_ks * 8 + sm_t, sm_p1 = sm_p0 + 4;\n";
  in << "      const int sm_k0 = sm_koff[sm_p0], sm_k1 = sm_koff[sm_p1];\n";
  in << "      uint32_t sm_a[2][4];\n";
  in << "#pragma unroll\n      for (int sm_i = 0; sm_i < 2; ++sm_i) {\n";
  for (int r = 0; r < 4; ++r)
    in << "        sm_a[sm_i][" << r << "] = sm_p" << r / 2 << " < " << tap_pairs
       << " ? sm_x[sm_base[sm_i][" << r % 2 << "] + sm_k" << r / 2 << "] : 0u;\n";
  in << "      }\n";
  in << "#pragma unroll\n      for (int sm_n = 0; sm_n < " << ntiles << "; ++sm_n) {\n";
  in << "        const uint32_t* sm_b = sm_w + (sm_n * 8 + sm_g) * " << ws
     << " + sm_ks * 8 + sm_t;\n";
  in << "        const uint32_t sm_b0 = sm_b[0], sm_b1 = sm_b[4];\n";
  in << "#pragma unroll\n        for (int sm_i = 0; sm_i < 2; ++sm_i)\n";
  in << "          asm volatile(\"" << mma
     << " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\"\n";
  in << "                       : \"+f\"(sm_acc[sm_i][sm_n][0]), \"+f\"(sm_acc[sm_i][sm_n][1]),\n";
  in << "                         \"+f\"(sm_acc[sm_i][sm_n][2]), \"+f\"(sm_acc[sm_i][sm_n][3])\n";
  in << "                       : \"r\"(sm_a[sm_i][0]), \"r\"(sm_a[sm_i][1]), "
     << "\"r\"(sm_a[sm_i][2]),\n";
  in << "                         \"r\"(sm_a[sm_i][3]), \"r\"(sm_b0), \"r\"(sm_b1));\n";
  in << "      }\n    }\n";
  // the accumulators: c0, c1 at row g, c2, c3 at row g + 8; columns 2t, 2t + 1 of each n8 tile
  in << "#pragma unroll\n    for (int sm_i = 0; sm_i < 2; ++sm_i)\n";
  in << "#pragma unroll\n      for (int sm_h = 0; sm_h < 2; ++sm_h) {\n";
  in << "        const int64_t u2 = sm_oy0 + sm_warp * 2 + sm_i, u3 = sm_ox0 + sm_g + 8 * sm_h;\n";
  in << "        if (u2 >= " << oh << " || u3 >= " << ow << ") continue;\n";
  in << "#pragma unroll\n        for (int sm_n = 0; sm_n < " << ntiles << "; ++sm_n) {\n";
  in << "          float sm_v[2];\n";
  in << "#pragma unroll\n          for (int sm_j = 0; sm_j < 2; ++sm_j) {\n";
  in << "            const int64_t u1 = sm_n * 8 + 2 * sm_t + sm_j;\n";
  in << "            float a = sm_acc[sm_i][sm_n][2 * sm_h + sm_j];\n";
  in << output_epilogue(g, "u1", {"u0", "u1", "u2", "u3"});
  in << "            sm_v[sm_j] = a;\n          }\n";
  // (64-bit channel terms: K x OH x OW of one image may pass 2^31 in an NCHW output)
  const std::string at0 =
      offset_of(y, {"u0", "static_cast<int64_t>(sm_n * 8 + 2 * sm_t)", "u2", "u3"});
  const std::string at1 =
      offset_of(y, {"u0", "static_cast<int64_t>(sm_n * 8 + 2 * sm_t + 1)", "u2", "u3"});
  if (pair) {
    in << "          if (sm_pair) {\n";
    in << "            __align__(4) uint16_t sm_s[2];\n";
    in << "            " << store(y.dtype, "sm_s", "0", "sm_v[0]") << "\n";
    in << "            " << store(y.dtype, "sm_s", "1", "sm_v[1]") << "\n";
    in << "            *reinterpret_cast<uint32_t*>(y0 + (" << at0
       << ")) = *reinterpret_cast<const uint32_t*>(sm_s);\n";
    in << "            continue;\n          }\n";
  }
  in << "          " << store(y.dtype, "y0", at0, "sm_v[0]") << "\n";
  in << "          " << store(y.dtype, "y0", at1, "sm_v[1]") << "\n";
  in << "        }\n      }\n  }\n";
  KernelText kt;
  conv_params(kt, g);
  kt.body = in.str();
  kt.grid = std::to_string(blocks);
  kt.block = "128";
  return "// " + e.name + ": " + node_list(e) + " (" + e.target +
         "): a convolution of few input channels, anvil's tensor-core kernel (" +
         std::to_string(tiles) + " tiles of 8 x 16 positions, k " + std::to_string(kdim) +
         ")\n" + finish(p, e, kt);
}

}  // namespace

/// A convolution of few input channels: each thread computes every output channel of one
/// output position, 8 at a time; the weights are staged in shared memory as [K / 8][taps][8]
/// floats (two 16-byte reads per tap and 8 channels), the input patch is read through the
/// caches, fp32 accumulation, the bias, residual and activation applied in the store, and a
/// channels-last output written 8 channels per 16-byte store where its strides allow.
std::string stem_kernel(const Program& p, const ExternStep& e, const ConvGeom& g) {
  if (stem_mma_geom(g)) return stem_mma_kernel(p, e, g);
  const TensorView &x = *g.x, &w = *g.w, &y = *g.y;
  const int64_t k = w.sizes[0].constant(), c = w.sizes[1].constant();
  const int64_t kh = w.sizes[2].constant(), kw = w.sizes[3].constant();
  const int64_t taps = c * kh * kw, kp = (k + 7) / 8 * 8;
  const std::string ty = storage_type(y.dtype, Dialect::kCuda);
  const size_t bytes = dtype_size(y.dtype);
  // 8 channels in one or two 16-byte stores: channels dense, every position 8-channel aligned
  bool vec = k % 8 == 0 && (bytes == 2 || bytes == 4) && y.offset.is_constant() &&
             y.offset.constant() % 8 == 0;
  for (size_t d = 0; d < 4; ++d) {
    const SymInt& st = y.strides[d];
    vec = vec && st.is_constant() && (d == 1 ? st.constant() == 1 : st.constant() % 8 == 0);
  }
  std::ostringstream pro, in;
  pro << "  __shared__ __align__(16) float st_w[" << kp * taps << "];  // [K / 8][taps][8]\n";
  pro << "  for (int st_i = threadIdx.x; st_i < " << kp * taps << "; st_i += blockDim.x) {\n";
  pro << "    const int64_t st_o = st_i / " << 8 * taps << " * 8 + st_i % 8, st_j = st_i / 8 % "
      << taps << ";\n";
  pro << "    const int64_t st_c = st_j / " << kh * kw << ", st_r = st_j / " << kw << " % " << kh
      << ", st_q = st_j % " << kw << ";\n";
  pro << "    st_w[st_i] = st_o < " << k << " ? static_cast<float>("
      << load(w.dtype, "v1", offset_of(w, {"st_o", "st_c", "st_r", "st_q"})) << ") : 0.0f;\n";
  pro << "  }\n  __syncthreads();\n";
  if (vec) pro << "  const bool st_vec = (reinterpret_cast<uintptr_t>(y0) & 15) == 0;\n";
  // opt-in (ANVIL_CUDA_STEM_PATCH=1) for at most 64 taps: the position's input patch read once
  // into registers before the channel groups (else each group of 8 output channels reads it
  // again through the caches: 12 times for ConvNeXt-T's 96-channel 4x4 stem, 0.108 ms at bf16
  // batch 32 on an H200)
  const bool patch = env_switch("ANVIL_CUDA_STEM_PATCH", false) && taps <= 64;
  in << "    (void)u1;\n";
  in << "    const int64_t st_y0 = u2 * " << g.stride[0] << " - " << g.pad_begin[0]
     << ", st_x0 = u3 * " << g.stride[1] << " - " << g.pad_begin[1] << ";\n";
  // the loops over a position's taps inside the input (st_c, st_r, st_q at st_y, st_x),
  // `ind` spaces deep; the innermost body follows, 4 deeper, closed by "}\n}\n"
  const auto tap_loops = [&](int ind) {
    const std::string i0(static_cast<size_t>(ind), ' '), i2 = i0 + "  ", i4 = i2 + "  ";
    std::ostringstream t;
    t << "#pragma unroll\n" << i0 << "for (int64_t st_c = 0; st_c < " << c << "; ++st_c)\n";
    t << "#pragma unroll\n" << i0 << "for (int64_t st_r = 0; st_r < " << kh << "; ++st_r) {\n";
    t << i2 << "const int64_t st_y = st_y0 + st_r * " << g.dilation[0] << ";\n";
    t << i2 << "if (st_y < 0 || st_y >= " << paren(x.sizes[2]) << ") continue;\n";
    t << "#pragma unroll\n" << i2 << "for (int64_t st_q = 0; st_q < " << kw << "; ++st_q) {\n";
    t << i4 << "const int64_t st_x = st_x0 + st_q * " << g.dilation[1] << ";\n";
    t << i4 << "if (st_x < 0 || st_x >= " << paren(x.sizes[3]) << ") continue;\n";
    return t.str();
  };
  if (patch) {  // (entries in the padding stay unset: the taps below skip them as before)
    in << "    float st_in[" << taps << "];\n" << tap_loops(4);
    in << "        st_in[(st_c * " << kh << " + st_r) * " << kw << " + st_q] = static_cast<float>("
       << load(x.dtype, "v0", offset_of(x, {"u0", "st_c", "st_y", "st_x"})) << ");\n";
    in << "      }\n    }\n";
  }
  in << "#pragma unroll 1\n    for (int64_t st_k = 0; st_k < " << kp << "; st_k += 8) {\n";
  in << "      float a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;\n";
  in << "      const float* st_p = st_w + st_k * " << taps << ";\n";
  in << tap_loops(6);
  if (patch)
    in << "          const float st_v = st_in[(st_c * " << kh << " + st_r) * " << kw
       << " + st_q];\n";
  else
    in << "          const float st_v = static_cast<float>("
       << load(x.dtype, "v0", offset_of(x, {"u0", "st_c", "st_y", "st_x"})) << ");\n";
  in << "          const float4* st_t = reinterpret_cast<const float4*>(st_p + ((st_c * " << kh
     << " + st_r) * " << kw << " + st_q) * 8);\n";
  in << "          const float4 st_a = st_t[0], st_b = st_t[1];\n";
  in << "          a0 += st_v * st_a.x; a1 += st_v * st_a.y;"
     << " a2 += st_v * st_a.z; a3 += st_v * st_a.w;\n";
  in << "          a4 += st_v * st_b.x; a5 += st_v * st_b.y;"
     << " a6 += st_v * st_b.z; a7 += st_v * st_b.w;\n";
  in << "        }\n      }\n";
  for (int j = 0; j < 8; ++j) {
    const std::string o = "(st_k + " + std::to_string(j) + ")";
    in << "      if (" << o << " < " << k << ") {\n      float a = a" << j << ";\n";
    if (g.bias)
      in << "    a += " << load(g.bias->dtype, "v2", o + " * " + paren(g.bias->strides[0]))
         << ";\n";
    if (g.residual)
      in << "    a += "
         << load(g.residual->dtype, "v3", offset_of(*g.residual, {"u0", o, "u2", "u3"})) << ";\n";
    in << activation(g, "a");
    in << "      a" << j << " = a;\n      }\n";
  }
  const std::string at = offset_of(y, {"u0", "st_k", "u2", "u3"});
  if (vec) {
    in << "      if (st_vec) {\n";
    in << "        __align__(16) " << ty << " st_s[8];\n";
    for (int j = 0; j < 8; ++j)
      in << "        " << store(y.dtype, "st_s", std::to_string(j), "a" + std::to_string(j))
         << "\n";
    in << "        uint4* st_d = reinterpret_cast<uint4*>(y0 + (" << at << "));\n";
    for (size_t v = 0; v < bytes / 2; ++v)
      in << "        st_d[" << v << "] = reinterpret_cast<const uint4*>(st_s)[" << v << "];\n";
    in << "        continue;\n      }\n";
  }
  for (int j = 0; j < 8; ++j) {
    const std::string o = "(st_k + " + std::to_string(j) + ")";
    in << "      if (" << o << " < " << k << ") "
       << store(y.dtype, "y0", offset_of(y, {"u0", o, "u2", "u3"}), "a" + std::to_string(j))
       << "\n";
  }
  in << "    }\n";
  TensorView positions = y;  // the threads' index space: [N, 1, OH, OW]
  positions.sizes[1] = SymInt(1);
  KernelText kt;
  conv_params(kt, g);
  kt.body = pro.str() + elementwise_loop(positions, in.str(), &y);
  kt.grid = elementwise_grid(positions);
  return "// " + e.name + ": " + node_list(e) + " (" + e.target +
         "): a convolution of few input channels, anvil's direct kernel" +
         (patch ? " (the patch in registers)" : "") + "\n" + finish(p, e, kt);
}

}  // namespace anvil::codegen::cuda::ext
