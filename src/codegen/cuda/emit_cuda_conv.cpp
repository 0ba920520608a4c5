// 2-D (and 1-D) forward convolutions on the CUDA target: the step fills AnvilConvArgs from its
// strided views and attributes and calls the device backend's cuDNN convolution
// (api->device->conv, device ABI 5) through anvil_conv (the preamble), with its bias, a fused
// residual add (attribute fused_add, device ABI 7) and a folded relu (attribute fused_relu)
// fused where a cuDNN engine takes them (other activations, fused_act, always in the step's
// epilogue kernel), else the plain
// convolution followed by the step's own bias / relu kernel (NAME_epilogue); where cuDNN takes
// no engine at all, the step's host path (NAME_host: the CPU kernel on host copies, as before
// device ABI 5) runs instead. Depthwise convolutions run on anvil's direct kernel instead
// (depthwise_kernel; ANVIL_CUDA_DEPTHWISE=0 keeps cuDNN), and so do convolutions of at most 4
// input channels, a network's stem (stem_kernel; ANVIL_CUDA_STEM=0 keeps cuDNN).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "codegen/c_expr.h"
#include "codegen/cuda/conv_internal.h"
#include "codegen/cuda/extern_kernel.h"
#include "core/error.h"
#include "core/env_switch.h"

namespace anvil::codegen::cuda::ext {

namespace {

bool is_conv_target(const std::string& t) {
  return t == "aten.convolution.default" || t == "aten.conv2d.default" ||
         t == "aten.conv1d.default";
}

bool cudnn_dtype(DType t) {
  return t == DType::kFloat32 || t == DType::kBFloat16 || t == DType::kFloat16;
}



/// Whether weight view `w` ([K, C, (R,) S], constant sizes and strides) is dense in KCRS order
/// or in KRSC (channels-last) order; dims of size 1 may have any stride. A weight that is a
/// permuted view (convolution_backward's grad_weight convolution has one) is neither: cuDNN's
/// engines read filters in those two layouts, and gave wrong values for other strides.
bool dense_filter(const TensorView& w) {
  const size_t r = w.sizes.size();
  std::vector<int64_t> size(r), stride(r);
  for (size_t i = 0; i < r; ++i) {
    if (!w.sizes[i].is_constant() || !w.strides[i].is_constant()) return false;
    size[i] = w.sizes[i].constant();
    stride[i] = w.strides[i].constant();
  }
  auto dense_in = [&](const std::vector<size_t>& order) {  // innermost last
    int64_t expect = 1;
    for (size_t j = order.size(); j-- > 0;) {
      const size_t d = order[j];
      if (size[d] != 1 && stride[d] != expect) return false;
      expect *= size[d];
    }
    return true;
  };
  std::vector<size_t> kcrs(r), krsc;
  for (size_t i = 0; i < r; ++i) kcrs[i] = i;
  krsc.push_back(0);
  for (size_t i = 2; i < r; ++i) krsc.push_back(i);
  krsc.push_back(1);
  return dense_in(kcrs) || dense_in(krsc);
}

/// Why `e` does not go to cuDNN (it stays a host step), or "" with `g` filled.
std::string read_geometry(const ExternStep& e, ConvGeom& g) {
  if (std::getenv("ANVIL_CUDA_NO_CUDNN_CONV") != nullptr)
    return "ANVIL_CUDA_NO_CUDNN_CONV was set when the package was compiled";
  if (e.inputs.size() < 2 || e.outputs.size() != 1 || e.inputs[0].buffer < 0 ||
      e.inputs[1].buffer < 0)
    return "a convolution without input and weight tensors";
  if (int_attr(e, "transposed", 0) != 0) return "transposed convolutions have no CUDA kernel yet";
  g.x = &e.inputs[0];
  g.w = &e.inputs[1];
  g.bias = e.inputs.size() > 2 && e.inputs[2].buffer >= 0 ? &e.inputs[2] : nullptr;
  g.y = &e.outputs[0];
  if (int_attr(e, "fused_add", 0) != 0) {
    if (e.inputs.size() < 4 || e.inputs[3].buffer < 0)
      return "fused_add without the residual as input 3";
    g.residual = &e.inputs[3];
  }
  const size_t wr = g.w->sizes.size();
  if (wr != 3 && wr != 4)
    return "only 1-D and 2-D convolutions run on cuDNN (a " + std::to_string(wr) + "-D weight)";
  g.spatial = wr - 2;
  const size_t xr = g.x->sizes.size();
  if (xr != wr && xr + 1 != wr) return "the input's rank does not fit the weight's";
  g.unbatched = xr + 1 == wr;
  if (g.y->sizes.size() != xr) return "the output's rank differs from the input's";
  const DType t = g.x->dtype;
  if (!cudnn_dtype(t))
    return std::string(dtype_name(t)) +
           " convolutions run on the host (cuDNN is used for float32, bfloat16 and float16)";
  if (g.w->dtype != t || g.y->dtype != t || (g.bias && g.bias->dtype != t) ||
      (g.residual && g.residual->dtype != t))
    return "input, weight, bias, residual and output dtypes differ";
  if (g.residual && !(g.residual->sizes == g.y->sizes))
    return "a fused residual whose sizes differ from the output's";
  if (!dense_filter(*g.w))
    return "a weight laid out neither as KCRS nor as KRSC (the filter layouts cuDNN reads)";
  if (g.bias && g.bias->sizes.size() != 1) return "a bias that is not 1-D";
  if (g.bias && !(g.bias->strides[0].is_constant() && g.bias->strides[0].constant() == 1) &&
      !(g.bias->sizes[0].is_constant() && g.bias->sizes[0].constant() == 1))
    return "a strided bias (cuDNN reads it contiguous)";
  const ExternAttr* ga = passes::find_attr(e, "groups");
  if (ga && (ga->kind != 0 || !ga->i.is_constant())) return "a symbolic group count";
  g.groups = int_attr(e, "groups", 1);
  g.relu = int_attr(e, "fused_relu", 0) != 0;
  g.act = static_cast<int>(int_attr(e, "fused_act", 0));
  if (g.act == 1) {  // relu as a code: the relu path
    g.relu = true;
    g.act = 0;
  }
  if (g.act < 0 || g.act > 8) return "fused_act code " + std::to_string(g.act);
  if (const ExternAttr* lo = passes::find_attr(e, "fused_act_min")) g.act_lo = lo->f;
  if (const ExternAttr* hi = passes::find_attr(e, "fused_act_max")) g.act_hi = hi->f;
  const size_t n = g.spatial;
  std::vector<int64_t> stride, dilation;
  if (!spatial_ints(e, "stride", 1, n, stride) || !spatial_ints(e, "dilation", 1, n, dilation))
    return "a symbolic or malformed stride or dilation";
  const size_t o = 2 - n;  // a 1-D convolution's only spatial dim is w
  for (size_t d = 0; d < n; ++d) {
    g.stride[o + d] = stride[d];
    g.dilation[o + d] = dilation[d];
  }
  const ExternAttr* pa = passes::find_attr(e, "padding");
  if (pa && pa->kind == 2) {
    if (pa->s == "same") {
      if (g.stride[0] != 1 || g.stride[1] != 1) return "padding='same' with a stride";
      for (size_t d = 0; d < n; ++d) {
        const SymInt& k = g.w->sizes[2 + d];
        if (!k.is_constant()) return "padding='same' with a symbolic kernel size";
        const int64_t total = g.dilation[o + d] * (k.constant() - 1);
        g.pad_begin[o + d] = total / 2;
        g.pad_end[o + d] = total - total / 2;
      }
    } else if (pa->s != "valid") {
      return "padding '" + pa->s + "'";
    }
  } else {
    std::vector<int64_t> pad;
    if (!spatial_ints(e, "padding", 0, n, pad)) return "a symbolic or malformed padding";
    for (size_t d = 0; d < n; ++d) g.pad_begin[o + d] = g.pad_end[o + d] = pad[d];
  }
  return "";
}

/// The (size, stride) expressions of view `v` as logical 4-D NCHW (a missing batch or height
/// dim: size 1, whose stride the backend normalizes).
struct Dims4 {
  std::string size[4], stride[4];
};
Dims4 nchw(const TensorView& v, bool has_batch, bool has_h) {
  Dims4 d;
  size_t k = 0;
  for (size_t i = 0; i < 4; ++i) {
    const bool present = (i == 0 && has_batch) || i == 1 || (i == 2 && has_h) || i == 3;
    if (present) {
      d.size[i] = paren(v.sizes[k]);
      d.stride[i] = paren(v.strides[k]);
      ++k;
    } else {
      d.size[i] = "1";
      d.stride[i] = "1";
    }
  }
  return d;
}

std::string pointer(const Program& p, const TensorView& t) {
  return "reinterpret_cast<" + storage_type(t.dtype) + "*>(" + buffer_base(p, t.buffer) +
         ") + (" + t.offset.str() + ")";
}


/// The epilogue kernel's vector form, for a dense channels-last output (and residual) whose
/// channels come in 16-byte vectors: each thread updates V neighbouring channels of one
/// position with one 16-byte load and store of y (and one load of the residual), where the
/// pointers are 16-byte aligned (checked at run time; otherwise the scalar loop after it). The
/// scalar loop (a thread per element, 4-D index arithmetic, 2-byte accesses) ran ResNet-50's
/// 1x1 convolutions' residual + relu at about 1.4 TB/s on an H200. "" where it does not apply.
std::string vector_epilogue(const ConvGeom& g, const std::string& ct) {
  const TensorView& y = *g.y;
  const int64_t es = static_cast<int64_t>(dtype_size(y.dtype));
  if (es != 2 && es != 4) return "";
  if (g.unbatched || y.sizes.size() != 4) return "";
  const int64_t vw = 16 / es;
  for (const TensorView* t : {g.y, g.residual, g.bias})
    if (t != nullptr) {
      for (const auto* l : {&t->sizes, &t->strides})
        for (const SymInt& d : *l)
          if (!d.is_constant()) return "";
      if (!t->offset.is_constant()) return "";
    }
  const auto c = [](const SymInt& d) { return d.constant(); };
  const int64_t n = c(y.sizes[0]), ch = c(y.sizes[1]), h = c(y.sizes[2]), w = c(y.sizes[3]);
  const auto dense_nhwc = [&](const TensorView& t) {
    return c(t.strides[1]) == 1 && (w == 1 || c(t.strides[3]) == ch) &&
           (h == 1 || c(t.strides[2]) == w * ch) && (n == 1 || c(t.strides[0]) == h * w * ch) &&
           c(t.offset) % vw == 0;
  };
  if (ch % vw != 0 || !dense_nhwc(y)) return "";
  // (the residual read through __ldg beside y's stores: never y's own buffer)
  if (g.residual && (g.residual->dtype != y.dtype || g.residual->sizes != y.sizes ||
                     !dense_nhwc(*g.residual) || g.residual->buffer == y.buffer))
    return "";
  if (g.bias && ch > 1 && c(g.bias->strides[0]) != 1) return "";
  const std::string st = storage_type(y.dtype, Dialect::kCuda);
  std::ostringstream in;
  in << "  if ((reinterpret_cast<uintptr_t>(y0) & 15) == 0"
     << (g.residual ? " && (reinterpret_cast<uintptr_t>(v3) & 15) == 0" : "") << ") {\n";
  in << "    for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < "
     << n * h * w * ch / vw
     << ";\n         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {\n";
  in << "      const int64_t o = i * " << vw << ";\n";
  in << "      const int c0 = static_cast<int>(o % " << ch << ");\n";  // (a constant divisor)
  in << "      alignas(16) " << st << " e[" << vw << "];\n";
  in << "      *reinterpret_cast<uint4*>(e) = *reinterpret_cast<const uint4*>(y0 + o);\n";
  if (g.residual) {
    in << "      alignas(16) " << st << " r[" << vw << "];\n";
    in << "      *reinterpret_cast<uint4*>(r) = __ldg(reinterpret_cast<const uint4*>(v3 + o));\n";
  }
  if (!g.bias) in << "      (void)c0;\n";
  in << "#pragma unroll\n      for (int j = 0; j < " << vw << "; ++j) {\n";
  in << "    " << ct << " v = " << load(y.dtype, "e", "j") << ";\n";
  if (g.bias) in << "    v += " << load(g.bias->dtype, "v2", "c0 + j") << ";\n";
  if (g.residual) in << "    v += " << load(y.dtype, "r", "j") << ";\n";
  in << activation(g, "v");
  in << "    " << store(y.dtype, "e", "j", "v") << "\n";
  in << "      }\n";
  in << "      *reinterpret_cast<uint4*>(y0 + o) = *reinterpret_cast<const uint4*>(e);\n";
  in << "    }\n    return;\n  }\n";
  return in.str();
}

/// The bias / residual / activation kernel the step runs after a plain cuDNN convolution when no
/// engine fuses them: y = act(y + bias[c] + residual) in place, one thread per output element.
std::string epilogue_kernel(const Program& p, const ExternStep& e, const ConvGeom& g) {
  ExternStep named = e;
  named.name = e.name + "_epilogue";
  const TensorView& y = *g.y;
  const std::vector<std::string> uv = vars("u", y.sizes.size());
  const std::string ct = compute_type(y.dtype, Dialect::kCuda);
  std::ostringstream in;
  in << "    " << ct << " v = " << load(y.dtype, "y0", offset_of(y, uv)) << ";\n";
  if (g.bias)
    in << "    v += " << load(g.bias->dtype, "v2", "u" + std::string(g.unbatched ? "0" : "1") +
                                                    " * " + paren(g.bias->strides[0]))
       << ";\n";
  if (g.residual) in << "    v += " << load(g.residual->dtype, "v3", offset_of(*g.residual, uv)) << ";\n";
  in << activation(g, "v");
  in << "    " << store(y.dtype, "y0", offset_of(y, uv), "v") << "\n";
  KernelText k;
  if (g.bias) k.params.push_back({"v2", g.bias});
  if (g.residual) k.params.push_back({"v3", g.residual});
  k.params.push_back({"y0", &y});
  const std::string vec = vector_epilogue(g, ct);
  k.body = vec + elementwise_loop(y, in.str());
  // the vector form's threads (16 bytes each; the scalar loop behind it strides over the grid)
  k.grid = vec.empty() ? elementwise_grid(y)
                       : "anvil_blocks(" + numel(y.sizes) + " / " +
                             std::to_string(16 / dtype_size(y.dtype)) + ", 256)";
  return finish(p, named, k);
}

/// Whether `g` is a 16-bit 1x1 convolution a GEMM computes: 2-D, batched, one group, stride 1,
/// no dilation or padding, x, w and y of one dtype, every size and stride of x, w, y, the
/// bias and the residual constant.
bool gemm_1x1(const ConvGeom& g) {
  if (g.spatial != 2 || g.unbatched || g.groups != 1) return false;
  if (g.x->dtype != DType::kBFloat16 && g.x->dtype != DType::kFloat16) return false;
  if (g.w->dtype != g.x->dtype || g.y->dtype != g.x->dtype) return false;
  for (int d = 0; d < 2; ++d)
    if (g.stride[d] != 1 || g.dilation[d] != 1 || g.pad_begin[d] != 0 || g.pad_end[d] != 0)
      return false;
  for (const TensorView* t : {g.x, g.w, g.y, g.bias, g.residual})
    if (t != nullptr)
      for (const auto* l : {&t->sizes, &t->strides})
        for (const SymInt& d : *l)
          if (!d.is_constant()) return false;
  return g.w->sizes[2].constant() == 1 && g.w->sizes[3].constant() == 1;
}

/// A 1x1 convolution (stride 1, no padding, one group, bf16 / fp16) of NCHW-like views as one
/// batched cuBLASLt GEMM per run: for each image, Y[n] (K x HW) = W (K x C) X[n] (C x HW), the
/// bias / residual / activation in the step's epilogue kernel. The default
/// (ANVIL_CUDA_CONV1X1_GEMM=0 at compile time keeps cuDNN): cuDNN's NCHW bf16 1x1 engines ran
/// at ~350 GB/s in EfficientNet-B0 at batch 32 on an H200; the GEMMs took MobileNetV3-Small there from 0.782 to
/// 0.744 ms and left EfficientNet-B0 as it was (2.42 / 2.41 ms). Returns the statements
/// (trying the GEMM, falling through to cuDNN when cuBLASLt refuses), or "" where it does not
/// apply.
std::string conv1x1_gemm(const ExternStep& e, const ConvGeom& g, bool fused) {
  const char* v = std::getenv("ANVIL_CUDA_CONV1X1_GEMM");
  if (v != nullptr && std::string(v) == "0") return "";
  if (!gemm_1x1(g)) return "";
  const auto c = [](const SymInt& d) { return d.constant(); };
  const TensorView &x = *g.x, &w = *g.w, &y = *g.y;
  const int64_t n = c(x.sizes[0]), ch = c(x.sizes[1]), k = c(w.sizes[0]);
  const int64_t hw = c(x.sizes[2]) * c(x.sizes[3]);
  // each image's channels x positions a row-major matrix: positions dense, channels at ld >= HW
  const auto plane = [&](const TensorView& t) {
    return (c(t.strides[3]) == 1 || c(t.sizes[3]) == 1) &&
           (c(t.strides[2]) == c(t.sizes[3]) || c(t.sizes[2]) == 1) && c(t.strides[1]) >= hw;
  };
  if (!plane(x) || !plane(y) || hw < 2) return "";
  // the weight [K, C] row-major (cuDNN's filters are dense KCRS or KRSC: the same for 1x1)
  if (c(w.strides[1]) != 1 && ch != 1) return "";
  const int64_t lda = c(w.strides[0]);
  // rows and matrices 16-byte aligned (8 elements), as cuBLASLt's fast kernels want: on
  // EfficientNet-B0's 7x7 planes (rows of 49) the GEMMs ran at 94 GB/s (0.056 ms each at batch
  // 32 on an H200), no faster than cuDNN
  for (const int64_t v :
       {lda, c(x.strides[1]), c(x.strides[0]), c(y.strides[1]), c(y.strides[0])})
    if (v % 8 != 0) return "";
  for (const TensorView* t : {&x, &y, &w})
    if (!t->offset.is_constant() || t->offset.constant() % 8 != 0) return "";
  std::ostringstream b;
  b << "  if (anvil_conv_mode() == 0) {"
    << "  // one batched cuBLASLt GEMM (ANVIL_CUDA_CONV1X1_GEMM=0: cuDNN)\n";
  b << "    const AnvilDeviceApi* dev = s.api->device;\n";
  b << "    int device = 0;\n    cudaGetDevice(&device);\n";
  b << "    const int grc = dev == nullptr ? 1 : dev->gemm(device, s.stream, "
    << static_cast<int>(x.dtype) << ", 0, 0, " << k << ", " << hw << ", " << ch
    << ", 1.0f, a.w, " << lda << ", 0, a.x, " << c(x.strides[1]) << ", " << c(x.strides[0])
    << ", a.y, " << c(y.strides[1]) << ", " << c(y.strides[0]) << ", " << n
    << ", ANVIL_EPILOGUE_NONE, nullptr, 0);\n";
  b << "    if (grc == 0) return " << (fused ? e.name + "_epilogue(s)" : std::string("0")) << ";\n";
  b << "  }  // cuBLASLt refused it: cuDNN below\n";
  return b.str();
}

/// A 1x1 convolution (stride 1, no padding, one group, bf16 / fp16) of channels-last views as
/// one cuBLASLt GEMM: the N*H*W positions are the rows, Y (P x K) = X (P x C) W^T, with the
/// bias, the relu and the residual (as C, beta 1) fused into cuBLASLt's epilogue where it has
/// them (no other activation, no residual with a relu); otherwise the plain GEMM and the step's
/// epilogue kernel. By default only those with an activation cuDNN does not fuse (below);
/// ANVIL_CUDA_CONV1X1_NHWC=all at compile time takes every one, =0 none. cuDNN's
/// channels-last engines ran EfficientNet-B0's 16 -> 96 expansion at 112² (bf16, batch 32, an
/// H200) at 370 GB/s with its SiLU kernel. Returns the statements (falling through to cuDNN
/// when cuBLASLt refuses), or "" where it does not apply.
std::string conv1x1_nhwc_gemm(const Program& p, const ExternStep& e, const ConvGeom& g,
                              bool fused) {
  if (!env_switch("ANVIL_CUDA_CONV1X1_GEMM", true)) return "";
  // which: "act" (the default) those with an activation cuDNN does not fuse (SiLU, hardswish,
  // sigmoid, GELU, clamps: cuDNN would run its plain convolution and the same epilogue
  // kernel); "all" every one; "0" none. On an H200 at bf16 batch 32, "all" made ResNet-50
  // 1.24 -> 1.80 ms (cuDNN fuses its bias + residual + relu into the convolution; cuBLASLt
  // does not fuse a residual with a relu) and RegNetY-400MF 1.01 -> 1.10, while
  // MobileNetV3-Small went 0.502 -> 0.442 and EfficientNet-B0 1.706 -> 1.664.
  const char* which_env = std::getenv("ANVIL_CUDA_CONV1X1_NHWC");
  const std::string which = which_env && *which_env ? which_env : "act";
  // "norelu": every one without a relu (cuDNN fuses a relu, cuBLASLt's bias + relu was the
  // slower on ResNet-50; the bias-only and bias + residual projections of MobileNetV3 and
  // EfficientNet are where "all" gained): not yet measured
  // "auto": every one, each step timing the GEMM against cuDNN on its first plain run
  // (anvil_pick_time; while a CUDA graph is captured undecided, the "act" rule): not yet run
  // on a GPU
  if (which != "act" && which != "all" && which != "1" && which != "0" && which != "norelu" &&
      which != "auto")
    throw Error(
        "environment variable ANVIL_CUDA_CONV1X1_NHWC is not act, norelu, all, auto, 1 or 0",
        "anvil settings", "act (the default), norelu, all (or 1), auto or 0", "'" + which + "'");
  if (which == "0" || (which == "act" && g.act == 0) || (which == "norelu" && g.relu))
    return "";
  if (!gemm_1x1(g)) return "";
  const auto c = [](const SymInt& d) { return d.constant(); };
  const TensorView &x = *g.x, &w = *g.w, &y = *g.y;
  const int64_t n = c(x.sizes[0]), ch = c(x.sizes[1]), k = c(w.sizes[0]);
  const int64_t h = c(x.sizes[2]), wd = c(x.sizes[3]), rows = n * h * wd;
  // every position a row of channels: channels dense, positions at one stride (ld) in
  // (n, h, w) order; returns that ld, or 0 when the view is not so
  const auto ld = [&](const TensorView& t) -> int64_t {
    const int64_t r = c(t.strides[3]);
    if (c(t.strides[1]) != 1 || r < c(t.sizes[1])) return 0;
    if (h > 1 && c(t.strides[2]) != wd * r) return 0;
    if (n > 1 && c(t.strides[0]) != h * wd * r) return 0;
    return r;
  };
  const int64_t lda = ld(x), ldc = ld(y), ldr = g.residual ? ld(*g.residual) : 0;
  if (lda == 0 || ldc == 0 || (g.residual && ldr != ldc) || rows < 2) return "";
  // the GEMM writes y before the epilogue kernel reads the residual: never in one buffer (the
  // memory plan keeps a step's inputs and outputs apart; checked, not assumed)
  if (g.residual && g.residual->buffer == y.buffer) return "";
  if (c(w.strides[1]) != 1 && ch != 1) return "";  // the weight [K, C] row-major
  if (g.bias && c(g.bias->strides[0]) != 1 && k != 1) return "";
  const int64_t ldb = c(w.strides[0]);
  // rows and matrices 16-byte aligned (8 elements), as cuBLASLt's fast kernels want
  for (const int64_t v : {lda, ldb, ldc})
    if (v % 8 != 0) return "";
  for (const TensorView* t : {g.x, g.w, g.y, g.bias, g.residual})
    if (t != nullptr && (!t->offset.is_constant() || t->offset.constant() % 8 != 0)) return "";
  // cuBLASLt's epilogue takes the bias and the relu, and the residual as C without a relu,
  // each of the GEMM's dtype (AnvilGemmArgs: A, B, C, D and the bias share it; read_geometry
  // already refuses others: defensive). Its relu may not keep a NaN as the epilogue kernel
  // does (as with the GEMM steps' cuBLASLt relu epilogues).
  const bool lt_fuses = g.act == 0 && !(g.relu && g.residual) &&
                        (!g.bias || g.bias->dtype == x.dtype) &&
                        (!g.residual || g.residual->dtype == x.dtype);
  const char* epi = g.bias ? (g.relu ? "ANVIL_EPILOGUE_BIAS_RELU" : "ANVIL_EPILOGUE_BIAS")
                           : (g.relu ? "ANVIL_EPILOGUE_RELU" : "ANVIL_EPILOGUE_NONE");
  const std::string rest = fused ? e.name + "_epilogue(s)" : std::string("0");
  std::ostringstream b;
  b << "  if (anvil_conv_mode() == 0) {"
    << "  // channels-last 1x1: one cuBLASLt GEMM over the positions (ANVIL_CUDA_CONV1X1_NHWC=0: "
       "cuDNN)\n";
  if (which == "auto") {  // the faster of the GEMM (way 1) and cuDNN (way 0), timed
    b << "    static AnvilPick pick;  // this step's, per device\n";
    b << "    const int way = anvil_pick_now(s, &pick, " << (g.act != 0 ? 1 : 0) << ");\n";
    b << "    if (way < 0) return anvil_pick_time(s, &pick, " << e.name << ");\n";
    b << "    if (way == 1) {\n";
  }
  b << "    const AnvilDeviceApi* dev = s.api->device;\n";
  b << "    int device = 0;\n    cudaGetDevice(&device);\n";
  b << "    int grc = 1;\n";
  if (lt_fuses && fused) {
    b << "    if (dev != nullptr && dev->abi_version >= 3) {\n";
    b << "      AnvilGemmArgs ga{};\n      ga.struct_size = sizeof ga;\n";
    b << "      ga.dtype = " << static_cast<int>(x.dtype) << ";\n";
    b << "      ga.trans_a = 0;\n      ga.trans_b = 1;\n";
    b << "      ga.m = " << rows << ";\n      ga.n = " << k << ";\n      ga.k = " << ch << ";\n";
    b << "      ga.alpha = 1.0f;\n      ga.beta = " << (g.residual ? "1.0f" : "0.0f") << ";\n";
    b << "      ga.a = a.x;\n      ga.lda = " << lda << ";\n";
    b << "      ga.b = a.w;\n      ga.ldb = " << ldb << ";\n";
    if (g.residual)
      b << "      ga.c = " << pointer(p, *g.residual) << ";\n      ga.ldc = " << ldc << ";\n";
    b << "      ga.d = a.y;\n      ga.ldd = " << ldc << ";\n      ga.batch = 1;\n";
    b << "      ga.epilogue = " << epi << ";\n";
    if (g.bias) b << "      ga.bias = " << pointer(p, *g.bias) << ";\n";
    b << "      grc = dev->gemm_ex(device, s.stream, &ga);\n";
    b << "      if (grc == 0) return 0;\n    }\n";
  }
  b << "    if (grc != 0 && dev != nullptr) grc = dev->gemm(device, s.stream, "
    << static_cast<int>(x.dtype) << ", 0, 1, " << rows << ", " << k << ", " << ch
    << ", 1.0f, a.x, " << lda << ", 0, a.w, " << ldb << ", 0, a.y, " << ldc
    << ", 0, 1, ANVIL_EPILOGUE_NONE, nullptr, 0);\n";
  b << "    if (grc == 0) return " << rest << ";\n";
  if (which == "auto") b << "    }\n";
  b << "  }  // cuBLASLt refused it: cuDNN below\n";
  return b.str();
}

}  // namespace

/// CUDA statements applying `g`'s relu or fused_act to float variable `v` (PyTorch's formulas;
/// NaN stays NaN through relu and the clamps).
std::string activation(const ConvGeom& g, const std::string& v) {
  std::ostringstream os;
  const auto num = [](double d) {  // the bound as PyTorch's float math sees it
    return float_literal(static_cast<float>(d), DType::kFloat32);
  };
  // relu6(v + 3) / 6 with NaN kept (fminf / fmaxf would turn it into 0)
  const std::string r6 = "(" + v + " + 3.0f < 0.0f ? 0.0f : (" + v + " + 3.0f > 6.0f ? 6.0f : " +
                         v + " + 3.0f))";
  if (g.relu) os << "    if (" << v << " < 0) " << v << " = 0;  // relu\n";
  switch (g.act) {
    case 2:  // clamp: relu6, hardtanh, clamp
      if (std::isfinite(g.act_lo))
        os << "    if (" << v << " < " << num(g.act_lo) << ") " << v << " = " << num(g.act_lo) << ";\n";
      if (std::isfinite(g.act_hi))
        os << "    if (" << v << " > " << num(g.act_hi) << ") " << v << " = " << num(g.act_hi) << ";\n";
      break;
    case 3:  // hardswish
      os << "    " << v << " = " << v << " * " << r6 << " / 6.0f;\n";
      break;
    case 4:  // hardsigmoid
      os << "    " << v << " = " << r6 << " / 6.0f;\n";
      break;
    case 5:  // silu
      os << "    " << v << " = " << v << " / (1.0f + expf(-" << v << "));\n";
      break;
    case 6:  // sigmoid
      os << "    " << v << " = 1.0f / (1.0f + expf(-" << v << "));\n";
      break;
    case 7:  // gelu (erf)
      os << "    " << v << " = 0.5f * " << v << " * (1.0f + erff(" << v << " * 0.70710678118654752f));\n";
      break;
    case 8:  // gelu (tanh)
      os << "    " << v << " = 0.5f * " << v << " * (1.0f + tanhf(0.79788456080286536f * (" << v
         << " + 0.044715f * " << v << " * " << v << " * " << v << ")));\n";
      break;
    default:
      break;
  }
  return os.str();
}

bool conv_is_direct(const ExternStep& e) {
  ConvGeom g;
  return is_conv_target(e.target) && read_geometry(e, g).empty() &&
         (direct_depthwise(g) || direct_stem(g));
}

std::string conv_gap(const ExternStep& e) {
  if (!is_conv_target(e.target)) return "not a convolution";
  ConvGeom g;
  return read_geometry(e, g);
}

std::string conv(const Program& p, const ExternStep& e) {
  ConvGeom g;
  if (const std::string why = read_geometry(e, g); !why.empty())
    throw Error("internal error: a convolution cuDNN cannot take reached its emitter",
                "codegen/cuda", "a cuDNN convolution", e.name + ": " + why);
  if (direct_depthwise(g)) return depthwise_kernel(p, e, g);
  if (direct_stem(g)) return stem_kernel(p, e, g);
  const bool fused = g.bias != nullptr || g.relu || g.residual != nullptr || g.act != 0;
  ExternStep host = e;
  host.name = e.name + "_host";
  if (g.act != 0) {  // cuDNN's and the host path's plain convolution, then the epilogue
    std::vector<ExternAttr> attrs;
    for (const ExternAttr& a : e.attrs)
      if (a.name != "fused_act" && a.name != "fused_act_min" && a.name != "fused_act_max" &&
          a.name != "fused_add" && a.name != "fused_relu")
        attrs.push_back(a);
    host.attrs = attrs;
    host.inputs.resize(2);
    TensorView none;
    none.dtype = e.inputs[0].dtype;
    host.inputs.push_back(none);  // no bias
  }
  std::string text = "// " + host.name +
                     ": the host path of " + e.name +
                     " (the CPU kernel on host copies) where cuDNN has no engine\n" +
                     cpu::emit_extern(p, host) + "\n";
  if (fused) text += epilogue_kernel(p, e, g) + "\n";
  const bool h = g.spatial == 2;
  const Dims4 x = nchw(*g.x, !g.unbatched, h), w = nchw(*g.w, true, h),
              y = nchw(*g.y, !g.unbatched, h);
  const Dims4 r = g.residual ? nchw(*g.residual, !g.unbatched, h) : Dims4{};
  std::ostringstream b;
  b << "  AnvilConvArgs a{};\n";
  b << "  a.struct_size = sizeof(AnvilConvArgs);\n";
  b << "  a.dtype = " << static_cast<int>(g.x->dtype) << ";\n";
  b << "  a.batch = " << x.size[0] << ";\n  a.in_channels = " << x.size[1] << ";\n";
  b << "  a.in_h = " << x.size[2] << ";\n  a.in_w = " << x.size[3] << ";\n";
  b << "  a.out_channels = " << w.size[0] << ";\n";
  b << "  a.kernel_h = " << w.size[2] << ";\n  a.kernel_w = " << w.size[3] << ";\n";
  b << "  a.out_h = " << y.size[2] << ";\n  a.out_w = " << y.size[3] << ";\n";
  b << "  a.groups = " << g.groups << ";\n";
  b << "  a.stride_h = " << g.stride[0] << ";\n  a.stride_w = " << g.stride[1] << ";\n";
  b << "  a.pad_top = " << g.pad_begin[0] << ";\n  a.pad_left = " << g.pad_begin[1] << ";\n";
  b << "  a.pad_bottom = " << g.pad_end[0] << ";\n  a.pad_right = " << g.pad_end[1] << ";\n";
  b << "  a.dilation_h = " << g.dilation[0] << ";\n  a.dilation_w = " << g.dilation[1] << ";\n";
  const struct {
    const char *ptr, *strides;
    const TensorView* v;
    const Dims4* d;
  } ts[3] = {{"x", "x_stride", g.x, &x}, {"w", "w_stride", g.w, &w}, {"y", "y_stride", g.y, &y}};
  for (const auto& t : ts) {
    b << "  a." << t.ptr << " = " << pointer(p, *t.v) << ";\n";
    for (int d = 0; d < 4; ++d) b << "  a." << t.strides << "[" << d << "] = " << t.d->stride[d] << ";\n";
  }
  b << "  if (a.batch * a.out_channels * a.out_h * a.out_w == 0) return 0;\n";
  b << conv1x1_gemm(e, g, fused);
  b << conv1x1_nhwc_gemm(p, e, g, fused);
  if (g.act != 0) {  // the plain convolution here, the rest in the epilogue
    b << "  const int rc = anvil_conv(s, \"" << e.name << "\", &a, nullptr, " << host.name
      << ");\n";
    b << "  return rc != 0 ? rc : " << e.name << "_epilogue(s);\n";
  } else {
    if (g.bias) b << "  a.bias = " << pointer(p, *g.bias) << ";\n";
    if (g.relu) b << "  a.activation = ANVIL_CONV_ACT_RELU;\n";
    if (g.residual) {
      b << "  a.residual = " << pointer(p, *g.residual) << ";\n";
      for (int d = 0; d < 4; ++d)
        b << "  a.residual_stride[" << d << "] = " << r.stride[d] << ";\n";
    }
    b << "  return anvil_conv(s, \"" << e.name << "\", &a, "
      << (fused ? e.name + "_epilogue" : std::string("nullptr")) << ", " << host.name << ");\n";
  }
  const std::string nodes = node_list(e);
  text += "// " + e.name + ": " + nodes + " (" + e.target +
          "): cuDNN's convolution (api->device->conv), else " + host.name + "\n";
  text += "ANVIL_HIDDEN int " + e.name + "(const RunState& s) {\n";
  text += symbol_decls(p, b.str(), "s.sym", "  ") + b.str() + "}\n";
  return text;
}

}  // namespace anvil::codegen::cuda::ext
