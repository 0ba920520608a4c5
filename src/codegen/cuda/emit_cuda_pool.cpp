// 2-D pooling on the CUDA target: max_pool2d, avg_pool2d and adaptive_avg_pool2d over 3-D or
// 4-D strided views, one thread per output element (grid-stride; a global average pool is a
// reduction instead: global_average_kernel), accumulating in float (double
// for float64) and following the reference kernels of src/ops/conv.cpp: max propagates NaN and
// skips padding; avg divides by the window clipped to the padded input (count_include_pad) or to
// the input, or by divisor_override; adaptive windows are [floor(i*H/O), ceil((i+1)*H/O)). Until
// these, each pooling step was a host step, which drained the stream around it and kept the run
// out of a CUDA graph (ResNet's stem max pool and its final average pool).
#include <algorithm>
#include <sstream>

#include "codegen/cuda/extern_kernel.h"
#include "core/env_switch.h"

namespace anvil::codegen::cuda::ext {

namespace {

bool floating(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16 ||
         t == DType::kFloat64;
}

/// A window's constant geometry (stride empty -> the kernel size, as PyTorch).
struct Window {
  std::vector<int64_t> kernel, stride, pad, dilation;
};

std::string window(const ExternStep& e, bool dilated, Window& w) {
  if (!spatial_ints(e, "kernel_size", 1, 2, w.kernel) || !has_attr(e, "kernel_size"))
    return "a symbolic or malformed kernel_size";
  const passes::ExternAttr* s = passes::find_attr(e, "stride");
  if (s == nullptr || (s->kind == 3 && s->ints.empty()))
    w.stride = w.kernel;
  else if (!spatial_ints(e, "stride", 1, 2, w.stride))
    return "a symbolic or malformed stride";
  if (!spatial_ints(e, "padding", 0, 2, w.pad)) return "a symbolic or malformed padding";
  w.dilation = {1, 1};
  if (dilated && !spatial_ints(e, "dilation", 1, 2, w.dilation))
    return "a symbolic or malformed dilation";
  for (size_t d = 0; d < 2; ++d)
    if (w.kernel[d] <= 0 || w.stride[d] <= 0 || w.dilation[d] <= 0 || w.pad[d] < 0)
      return "a non-positive kernel, stride or dilation, or a negative padding";
  return "";
}

std::string acc_type(DType t) { return t == DType::kFloat64 ? "double" : "float"; }

/// The body shared by the three ops: the output element's plane (leading indices u0..u{r-3})
/// and its position (oy, ox); `inner` computes `r` from the input plane `at(iy, ix)`.
std::string pool_body(const ExternStep& e, const std::string& inner) {
  const TensorView &x = e.inputs[0], &out = e.outputs[0];
  const size_t r = out.sizes.size();
  std::vector<std::string> uv = vars("u", r);
  std::vector<std::string> xv(uv.begin(), uv.end() - 2);
  xv.push_back("iy");
  xv.push_back("ix");
  std::ostringstream in;
  in << "    const int64_t oy = u" << r - 2 << ", ox = u" << r - 1 << ";\n";
  in << "    const int64_t H = " << paren(x.sizes[r - 2]) << ", W = " << paren(x.sizes[r - 1])
     << ";\n";
  in << "    const int64_t OH = " << paren(out.sizes[r - 2]) << ", OW = "
     << paren(out.sizes[r - 1]) << ";\n";
  in << "    (void)OH; (void)OW;\n";
  in << "    auto at = [&](int64_t iy, int64_t ix) { return " << load(x.dtype, "v0", offset_of(x, xv))
     << "; };\n";
  in << inner;
  in << "    " << store(out.dtype, "y0", offset_of(out, uv), "r") << "\n";
  return in.str();
}

std::string max_pool(const Window& w, const std::string& acc) {
  std::ostringstream in;
  in << "    const int64_t ly = oy * " << w.stride[0] << " - " << w.pad[0] << ", lx = ox * "
     << w.stride[1] << " - " << w.pad[1] << ";\n";
  in << "    " << acc << " r = -INFINITY;\n    bool nan = false;\n";
  in << "    for (int64_t ki = 0; ki < " << w.kernel[0] << "; ++ki) {\n"
     << "      const int64_t iy = ly + ki * " << w.dilation[0] << ";\n"
     << "      if (iy < 0 || iy >= H) continue;\n"
     << "      for (int64_t kj = 0; kj < " << w.kernel[1] << "; ++kj) {\n"
     << "        const int64_t ix = lx + kj * " << w.dilation[1] << ";\n"
     << "        if (ix < 0 || ix >= W) continue;\n"
     << "        const " << acc << " v = static_cast<" << acc << ">(at(iy, ix));\n"
     << "        if (isnan(v)) nan = true;\n"
     << "        else if (v > r) r = v;\n      }\n    }\n";
  in << "    if (nan) r = NAN;\n";
  return in.str();
}

std::string avg_pool(const Window& w, bool include_pad, int64_t divisor, const std::string& acc) {
  std::ostringstream in;
  in << "    int64_t ly = oy * " << w.stride[0] << " - " << w.pad[0] << ", lx = ox * "
     << w.stride[1] << " - " << w.pad[1] << ";\n";
  in << "    int64_t hy = ly + " << w.kernel[0] << ", hx = lx + " << w.kernel[1] << ";\n";
  in << "    if (hy > H + " << w.pad[0] << ") hy = H + " << w.pad[0] << ";\n";
  in << "    if (hx > W + " << w.pad[1] << ") hx = W + " << w.pad[1] << ";\n";
  in << "    const int64_t padded = (hy - ly) * (hx - lx);\n";
  in << "    if (ly < 0) ly = 0;\n    if (lx < 0) lx = 0;\n";
  in << "    if (hy > H) hy = H;\n    if (hx > W) hx = W;\n";
  in << "    " << acc << " r = 0;\n";
  in << "    if (ly < hy && lx < hx) {\n"
     << "      " << acc << " sum = 0;\n"
     << "      for (int64_t iy = ly; iy < hy; ++iy)\n"
     << "        for (int64_t ix = lx; ix < hx; ++ix) sum += static_cast<" << acc
     << ">(at(iy, ix));\n";
  const std::string div = divisor != 0 ? std::to_string(divisor)
                          : include_pad ? "padded"
                                        : "(hy - ly) * (hx - lx)";
  in << "      r = sum / static_cast<" << acc << ">(" << div << ");\n    }\n";
  return in.str();
}

std::string adaptive_avg_pool(const std::string& acc) {
  std::ostringstream in;
  in << "    const int64_t ly = (oy * H) / OH, hy = ((oy + 1) * H + OH - 1) / OH;\n";
  in << "    const int64_t lx = (ox * W) / OW, hx = ((ox + 1) * W + OW - 1) / OW;\n";
  in << "    " << acc << " sum = 0;\n";
  in << "    for (int64_t iy = ly; iy < hy; ++iy)\n"
     << "      for (int64_t ix = lx; ix < hx; ++ix) sum += static_cast<" << acc
     << ">(at(iy, ix));\n";
  in << "    const " << acc << " r = sum / static_cast<" << acc << ">((hy - ly) * (hx - lx));\n";
  return in.str();
}

/// True when `e` averages each whole plane (adaptive_avg_pool2d to 1x1 of a 4-D input with
/// constant sizes and strides): a reduction, not a window per thread.
bool global_average(const ExternStep& e) {
  if (e.target != "aten.adaptive_avg_pool2d.default" &&
      e.target != "aten._adaptive_avg_pool2d.default")
    return false;
  const TensorView &x = e.inputs[0], &out = e.outputs[0];
  if (x.sizes.size() != 4) return false;
  for (const auto* l : {&x.sizes, &x.strides, &out.sizes, &out.strides})
    for (const SymInt& v : *l)
      if (!v.is_constant()) return false;
  // positions and planes are counted in int
  const int64_t hw = x.sizes[2].constant() * x.sizes[3].constant();
  return out.sizes[2].constant() == 1 && out.sizes[3].constant() == 1 &&
         x.sizes[0].constant() * x.sizes[1].constant() > 0 && hw < (int64_t{1} << 30) &&
         x.sizes[0].constant() < (int64_t{1} << 30) && x.sizes[1].constant() < (int64_t{1} << 30);
}

/// The pieces of a global average pool's kernels: the input's element offset `at` (of int
/// variables ni, ci, pos: image, channel, position in the plane), the statement storing the
/// mean `put` (of ni, ci and the sum `sum`), and whether its channels come in 16-byte vectors
/// (`vec` of them) of a channels-last input.
struct GlobalAverage {
  int64_t n = 0, c = 0, w = 0, hw = 0, vec = 0;
  std::string at, put;
  bool vectors = false;
};

GlobalAverage global_average_parts(const ExternStep& e, const std::string& acc) {
  const TensorView &x = e.inputs[0], &out = e.outputs[0];
  GlobalAverage g;
  g.n = x.sizes[0].constant();
  g.c = x.sizes[1].constant();
  g.w = x.sizes[3].constant();
  g.hw = x.sizes[2].constant() * g.w;
  const auto st = [](const TensorView& v, int d) { return std::to_string(v.strides[d].constant()); };
  // element (ni, ci, pos / W, pos % W) of the input, int indices widened for the offset
  g.at = "static_cast<int64_t>(ni) * " + st(x, 0) + " + static_cast<int64_t>(ci) * " + st(x, 1) +
         " + static_cast<int64_t>(pos / " + std::to_string(g.w) + ") * " + st(x, 2) +
         " + static_cast<int64_t>(pos % " + std::to_string(g.w) + ") * " + st(x, 3);
  g.put = store(out.dtype, "y0",
                "static_cast<int64_t>(ni) * " + st(out, 0) + " + static_cast<int64_t>(ci) * " +
                    st(out, 1),
                "sum / static_cast<" + acc + ">(" + std::to_string(g.hw) + ")");
  // channels-last with 16-byte vectors of channels (vec of them)
  const int64_t es = static_cast<int64_t>(dtype_size(x.dtype));
  g.vec = 16 / es;
  // (ANVIL_CUDA_POOL_VEC=0 at compile time keeps the block of 32 channels)
  g.vectors = env_switch("ANVIL_CUDA_POOL_VEC", true) && (es == 2 || es == 4) &&
              x.strides[1].constant() == 1 && g.c % g.vec == 0 && x.offset.is_constant() &&
              x.offset.constant() % g.vec == 0;
  for (int d : {0, 2, 3}) g.vectors = g.vectors && x.strides[d].constant() % g.vec == 0;
  return g;
}

/// Statements summing the 16-byte vector of channels at `v0 + off` into float s[vec] (v0
/// aligned or not: `aligned`).
std::string add_vector(DType t, int64_t vec, const std::string& acc, const std::string& ind) {
  const std::string ty = storage_type(t, Dialect::kCuda);
  std::ostringstream in;
  in << ind << "alignas(16) " << ty << " e[" << vec << "];\n";
  in << ind << "if (aligned) {\n";
  in << ind
     << "  *reinterpret_cast<uint4*>(e) = __ldg(reinterpret_cast<const uint4*>(v0 + off));\n";
  in << ind << "} else {\n";
  in << "#pragma unroll\n"
     << ind << "  for (int j = 0; j < " << vec << "; ++j) e[j] = v0[off + j];\n";
  in << ind << "}\n";
  in << "#pragma unroll\n"
     << ind << "for (int j = 0; j < " << vec << "; ++j) s[j] += static_cast<"
     << acc << ">(" << load(t, "e", "j") << ");\n";
  return in.str();
}

/// Statements storing each thread's sums s[vec] as row `row` of shared part[][], then for
/// each of the block's `width` channels t: `before`, the rows' sum in a fixed order as `sum`
/// (of type acc), `after` (which stores it).
std::string sum_rows(int64_t vec, int64_t width, int64_t rows, const std::string& acc,
                     const std::string& before, const std::string& after) {
  std::ostringstream in;
  in << "#pragma unroll\n    for (int j = 0; j < " << vec << "; ++j) part[row][lane * " << vec
     << " + j] = s[j];\n";
  in << "    __syncthreads();\n";
  in << "    for (int t = threadIdx.x; t < " << width << "; t += blockDim.x) {\n";
  in << before;
  in << "      " << acc << " sum = 0;\n";
  in << "      for (int r = 0; r < " << rows << "; ++r) sum += part[r][t];\n";
  in << after << "    }\n";
  return in.str();
}

/// The global average pool: each output (n, c) is the mean of its H*W plane, fp32 (fp64)
/// accumulation. Channels-last input (the channel stride is 1) whose channels come in 16-byte
/// vectors: a block takes up to 32 neighbouring vectors of one image, 256 / vectors rows of
/// threads each every so many positions, the rows combined in shared memory. Other
/// channels-last input: a block takes 32 neighbouring channels of one image, its 8 rows of
/// threads every 8th position (each warp reads 32 neighbouring channels), the rows combined in
/// shared memory. Otherwise each warp takes one plane, its lanes every 32nd position
/// (neighbouring positions of an NCHW plane), combined by shuffles.
KernelText global_average_kernel(const ExternStep& e, const std::string& acc) {
  const TensorView &x = e.inputs[0], &out = e.outputs[0];
  const GlobalAverage ga = global_average_parts(e, acc);
  const int64_t n = ga.n, c = ga.c, hw = ga.hw, vec = ga.vec;
  const std::string &at = ga.at, &put = ga.put;
  std::ostringstream in;
  KernelText k;
  k.params = {{"v0", &x}, {"y0", &out}};
  const std::string add = "sum += static_cast<" + acc + ">(" + load(x.dtype, "v0", at) + ");\n";
  if (ga.vectors) {
    // A block per (image, tile of up to 32 channel vectors), its threads `lanes` vectors wide
    // and 256 (or 1024) / lanes positions deep (a warp reads 512 contiguous bytes when the
    // channels are few), every position of the plane split over the rows, the rows summed in
    // shared memory in a fixed order. The block of 32 channels x 8 rows below left
    // MobileNetV3-Small's first squeeze-excitation pool (16 channels of 56 x 56, bf16 batch
    // 32) at 32 blocks of 16 busy lanes, 392 loads deep: 0.054 ms at 59 GB/s on an H200.
    const int64_t cv = c / vec, lanes = std::min<int64_t>(cv, 32), tiles = (cv + lanes - 1) / lanes;
    // 1024 threads where the blocks are few (a block per image and tile: EfficientNet-B0's
    // first squeeze-excitation pool at batch 32 is 32 blocks, each reading 0.8 MB): a block's
    // loads in flight bound its speed
    const int64_t threads = n * tiles >= 512 ? 256 : 1024;
    const int64_t rows = threads / lanes, width = lanes * vec;
    in << "  __shared__ " << acc << " part[" << rows << "][" << width << "];\n";
    in << "  const int lane = threadIdx.x % " << lanes << ", row = threadIdx.x / " << lanes
       << ";\n";
    in << "  const bool aligned = (reinterpret_cast<uintptr_t>(v0) & 15) == 0;\n";
    in << "  for (int64_t blk = blockIdx.x; blk < " << n * tiles << "; blk += gridDim.x) {\n";
    in << "    const int ni = static_cast<int>(blk / " << tiles << ");\n";
    in << "    const int c0 = static_cast<int>(blk % " << tiles << ") * " << width
       << ", ci = c0 + lane * " << vec << ";\n";
    in << "    " << acc << " s[" << vec << "] = {};\n";
    in << "    if (ci < " << c << ") {\n";
    in << "#pragma unroll 8\n";
    in << "      for (int pos = row; pos < " << hw << "; pos += " << rows << ") {\n";
    in << "        const int64_t off = " << at << ";\n";
    in << add_vector(x.dtype, vec, acc, "        ");
    in << "      }\n    }\n";
    in << sum_rows(vec, width, rows, acc,
                   "      const int ci = c0 + t;\n      if (ci >= " + std::to_string(c) +
                       ") continue;\n",
                   "      " + put + "\n");
    in << "    __syncthreads();  // part[] is rewritten by the next tile\n  }\n";
    k.block = std::to_string(lanes * rows);
    k.bounds = k.block;  // 1024 threads must fit in 64 registers each
    k.grid = "anvil_blocks(" + std::to_string(n * tiles) + ", 1)";
  } else if (x.strides[1].constant() == 1) {
    const int64_t tiles = (c + 31) / 32;
    in << "  __shared__ " << acc << " part[8][33];\n";
    in << "  for (int64_t blk = blockIdx.x; blk < " << n * tiles << "; blk += gridDim.x) {\n";
    in << "    const int ni = static_cast<int>(blk / " << tiles << ");\n";
    in << "    const int ci = static_cast<int>(blk % " << tiles << ") * 32 + threadIdx.x;\n";
    in << "    " << acc << " sum = 0;\n";
    in << "    if (ci < " << c << ")\n";
    in << "      for (int pos = threadIdx.y; pos < " << hw << "; pos += 8) " << add;
    in << "    part[threadIdx.y][threadIdx.x] = sum;\n";
    in << "    __syncthreads();\n";
    in << "    if (threadIdx.y == 0 && ci < " << c << ") {\n";
    in << "      for (int r = 1; r < 8; ++r) sum += part[r][threadIdx.x];\n";
    in << "      " << put << "\n    }\n";
    in << "    __syncthreads();  // part[] is rewritten by the next tile\n  }\n";
    k.block = "dim3(32, 8)";
    k.grid = "anvil_blocks(" + std::to_string(n * tiles) + ", 1)";
  } else {
    in << "  const int lane = threadIdx.x % 32;\n";
    in << "  for (int64_t plane = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / "
          "32;\n       plane < "
       << n * c << "; plane += static_cast<int64_t>(gridDim.x) * blockDim.x / 32) {\n";
    in << "    const int ni = static_cast<int>(plane / " << c
       << "), ci = static_cast<int>(plane % " << c << ");\n";
    in << "    " << acc << " sum = 0;\n";
    in << "    for (int pos = lane; pos < " << hw << "; pos += 32) " << add;
    in << "    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);\n";
    in << "    if (lane == 0) " << put << "\n  }\n";
    k.grid = "anvil_blocks(" + std::to_string(n * c) + ", 8)";
  }
  k.body = in.str();
  return k;
}

/// The global average pool of channels-last 16-byte channel vectors split along the plane
/// (ANVIL_CUDA_POOL_SPLIT=1 at compile time; opt-in, not yet measured on a GPU) where a block
/// per (image, tile of channels) gives fewer than 528 blocks (4 per SM of an H100 / H200):
/// EfficientNet-B0's squeeze-excitation pools at batch 32 are 32-160 blocks, its first one
/// (32 channels of 112 x 112) took 0.0375 ms at 684 GB/s. Two kernels: the first, a block per
/// (image, tile, split), sums every split-th group of positions into the stream's workspace
/// (device ABI 4: float [image][tile][split][tile's channels]); the second, a thread per
/// (image, channel), adds the splits in a fixed order and stores the mean; where the
/// workspace cannot be had (out of device memory, a backend before ABI 4), the single kernel
/// of global_average_kernel. "" where it does not apply (then that kernel alone).
std::string split_global_average(const Program& p, const ExternStep& e, const std::string& acc) {
  if (!env_switch("ANVIL_CUDA_POOL_SPLIT", false)) return "";
  const TensorView &x = e.inputs[0], &out = e.outputs[0];
  const GlobalAverage ga = global_average_parts(e, acc);
  if (!ga.vectors || acc != "float") return "";
  const int64_t n = ga.n, c = ga.c, hw = ga.hw, vec = ga.vec;
  const int64_t cv = c / vec, lanes = std::min<int64_t>(cv, 32), tiles = (cv + lanes - 1) / lanes;
  const int64_t threads = 256, rows = threads / lanes, width = lanes * vec;
  const int64_t blocks = n * tiles, want = 528;
  // each thread at least 4 vectors of the plane; at most 64 splits
  const int64_t splits = std::min({(want + blocks - 1) / blocks, hw / (rows * 4), int64_t{64}});
  if (blocks >= want || splits < 2) return "";
  const int64_t ws_floats = blocks * splits * width;
  const std::string guard =
      "  const AnvilDeviceApi* wdev = s.api->device;\n"
      "  int wdevice = 0;\n  cudaGetDevice(&wdevice);\n"
      "  float* ws = wdev != nullptr && wdev->abi_version >= 4 && wdev->workspace != nullptr\n"
      "      ? static_cast<float*>(wdev->workspace(wdevice, s.stream, " +
      std::to_string(ws_floats * 4) +
      "))\n      : nullptr;\n"
      "  if (ws == nullptr) {\n    s.api->set_error(s.run_ctx, \"" +
      e.name +
      ": no workspace for the pool's partial sums\");\n"
      "    return 1;\n  }\n";
  // the partial sums: a block per (image, tile, split)
  std::ostringstream in;
  in << "  __shared__ float part[" << rows << "][" << width << "];\n";
  in << "  const int lane = threadIdx.x % " << lanes << ", row = threadIdx.x / " << lanes
     << ";\n";
  in << "  const bool aligned = (reinterpret_cast<uintptr_t>(v0) & 15) == 0;\n";
  in << "  for (int64_t blk = blockIdx.x; blk < " << blocks * splits << "; blk += gridDim.x) {\n";
  in << "    const int sp = static_cast<int>(blk % " << splits << ");\n";
  in << "    const int64_t nt = blk / " << splits << ";\n";
  in << "    const int ni = static_cast<int>(nt / " << tiles << ");\n";
  in << "    const int ci = static_cast<int>(nt % " << tiles << ") * " << width
     << " + lane * " << vec << ";\n";
  in << "    float s[" << vec << "] = {};\n";
  in << "    if (ci < " << c << ") {\n";
  in << "#pragma unroll 4\n";
  in << "      for (int pos = sp * " << rows << " + row; pos < " << hw
     << "; pos += " << splits * rows << ") {\n";
  in << "        const int64_t off = " << ga.at << ";\n";
  in << add_vector(x.dtype, vec, acc, "        ");
  in << "      }\n    }\n";
  in << sum_rows(vec, width, rows, acc, "",
                 "      ws[blk * " + std::to_string(width) + " + t] = sum;\n");
  in << "    __syncthreads();  // part[] is rewritten by the next block's sums\n  }\n";
  KernelText a;
  a.params = {{"v0", &x}};
  a.extra = {{"float* __restrict__ ws", "ws"}};
  a.body = in.str();
  a.block = std::to_string(lanes * rows);
  a.grid = "anvil_blocks(" + std::to_string(blocks * splits) + ", 1)";
  a.guard = guard;
  // the means: a thread per (image, channel), the splits added in order
  std::ostringstream fin;
  fin << "  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < "
      << n * c << ";\n       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {\n";
  fin << "    const int ni = static_cast<int>(i / " << c << "), ci = static_cast<int>(i % " << c
      << ");\n";
  fin << "    const float* w = ws + (static_cast<int64_t>(ni) * " << tiles << " + ci / " << width
      << ") * " << splits * width << " + ci % " << width << ";\n";
  fin << "    float sum = 0;\n";
  fin << "    for (int sp = 0; sp < " << splits << "; ++sp) sum += w[sp * " << width << "];\n";
  fin << "    " << ga.put << "\n  }\n";
  KernelText b;
  b.params = {{"y0", &out}};
  b.extra = {{"const float* __restrict__ ws", "ws"}};
  b.body = fin.str();
  b.grid = "anvil_blocks(" + std::to_string(n * c) + ", 256)";
  b.guard = guard;
  ExternStep ea = e, eb = e, ew = e;
  ea.name = e.name + "_part";
  eb.name = e.name + "_mean";
  ew.name = e.name + "_whole";
  std::ostringstream text;
  text << finish(p, ea, a) << "\n" << finish(p, eb, b) << "\n";
  text << finish(p, ew, global_average_kernel(e, acc)) << "\n";
  text << "// " << e.name << ": " << node_list(e) << " (" << e.target << "): " << splits
       << " splits of each plane's positions, then their sum; without a workspace (out of "
          "device memory, a device backend before ABI 4) the single kernel\n";
  text << "ANVIL_HIDDEN int " << e.name << "(const RunState& s) {\n";
  text << "  const AnvilDeviceApi* dev = s.api->device;\n";
  text << "  int device = 0;\n  cudaGetDevice(&device);\n";
  text << "  if (dev == nullptr || dev->abi_version < 4 || dev->workspace == nullptr ||\n"
       << "      dev->workspace(device, s.stream, " << ws_floats * 4 << ") == nullptr)\n";
  text << "    return " << ew.name << "(s);\n";
  text << "  const int rc = " << ea.name << "(s);\n";
  text << "  return rc != 0 ? rc : " << eb.name << "(s);\n}\n";
  return text.str();
}

}  // namespace

bool is_pool_target(const std::string& t) {
  return t == "aten.max_pool2d.default" || t == "aten.avg_pool2d.default" ||
         t == "aten.adaptive_avg_pool2d.default" || t == "aten._adaptive_avg_pool2d.default";
}

std::string pool_gap(const ExternStep& e) {
  if (e.inputs.empty() || e.outputs.size() != 1) return "pooling with other than one output";
  const TensorView &x = e.inputs[0], &out = e.outputs[0];
  if (x.sizes.size() != 3 && x.sizes.size() != 4) return "pooling of other than a 3-D or 4-D input";
  if (out.sizes.size() != x.sizes.size()) return "pooling output rank differs from its input's";
  if (!floating(x.dtype) || out.dtype != x.dtype) return "pooling of non-floating tensors";
  Window w;
  if (e.target == "aten.max_pool2d.default") return window(e, true, w);
  if (e.target == "aten.avg_pool2d.default") {
    if (has_attr(e, "divisor_override") && int_attr(e, "divisor_override", 0) == 0)
      return "a zero or symbolic divisor_override";
    return window(e, false, w);
  }
  return "";  // adaptive: the output's sizes are its windows
}

std::string pool(const Program& p, const ExternStep& e) {
  const TensorView &x = e.inputs[0], &out = e.outputs[0];
  const std::string acc = acc_type(x.dtype);
  std::string inner;
  Window w;
  if (e.target == "aten.max_pool2d.default") {
    (void)window(e, true, w);
    inner = max_pool(w, acc);
  } else if (e.target == "aten.avg_pool2d.default") {
    (void)window(e, false, w);
    inner = avg_pool(w, int_attr(e, "count_include_pad", 1) != 0,
                     int_attr(e, "divisor_override", 0), acc);
  } else if (global_average(e)) {
    if (std::string split = split_global_average(p, e, acc); !split.empty()) return split;
    return finish(p, e, global_average_kernel(e, acc));
  } else {
    inner = adaptive_avg_pool(acc);
  }
  KernelText k;
  k.params = {{"v0", &x}, {"y0", &out}};
  k.body = elementwise_loop(out, pool_body(e, inner));
  k.grid = elementwise_grid(out);
  return finish(p, e, k);
}

}  // namespace anvil::codegen::cuda::ext
