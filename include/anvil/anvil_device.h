/* anvil_device.h — the ABI between the anvil runtime and a device backend library.
 *
 * A device backend (libanvil_cuda.so for CUDA) is a shared library the runtime dlopens only when
 * a package or a tensor asks for its device, so that the CPU runtime never needs a device's
 * libraries. It exports one symbol, `anvil_device_backend`, returning the table below. The
 * runtime hands the same table to generated device code (AnvilRtApi::device), which calls its
 * GEMM; memory and streams are the runtime's business.
 *
 * Every function returning int returns 0 on success, or non-zero with a message that
 * last_error() returns on the same thread until the next call. Functions returning a pointer
 * return null on failure, with the message likewise.
 */
#ifndef ANVIL_ANVIL_DEVICE_H_
#define ANVIL_ANVIL_DEVICE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ANVIL_DEVICE_ABI_VERSION 9u

/* allow_tf32 of the float32 GEMMs (AnvilDeviceApi::gemm, AnvilGemmArgs): 0 fp32 math (TF32 off),
 * 1 TF32 tensor cores, and (ABI 9) ANVIL_FP32_3XTF32: fp32 accuracy through TF32 tensor cores,
 * each operand split into a TF32 big and small part, big*big + big*small + small*big summed in
 * fp32 (CUTLASS's OpMultiplyAddFastF32), where the backend has that kernel, the GPU is of compute
 * capability 9.x and the problem is one it wins on (one matrix, no bias or activation, large
 * enough, 16-byte aligned); else as 0. */
#define ANVIL_FP32_3XTF32 2

/* How many of cuBLASLt's heuristic algorithms AnvilGemmArgs::algo_index can name (ABI 8). */
#define ANVIL_GEMM_ALGOS 8

/* Directions of AnvilDeviceApi::copy. */
#define ANVIL_COPY_HOST_TO_DEVICE 0
#define ANVIL_COPY_DEVICE_TO_HOST 1
#define ANVIL_COPY_DEVICE_TO_DEVICE 2

/* Returned by an entry point that has no engine for the problem it was given (attention):
 * last_error() says why, and the caller runs its own kernel instead. Not a failure of the run. */
#define ANVIL_DEVICE_UNSUPPORTED 2

/* Epilogues of AnvilDeviceApi::gemm (NONE and BIAS) and gemm_ex (all). GELU is cuBLASLt's: the
 * tanh approximation (torch's gelu(approximate='tanh')), not the erf form. */
#define ANVIL_EPILOGUE_NONE 0
#define ANVIL_EPILOGUE_BIAS 1           /* C[i, j] += bias[j] */
#define ANVIL_EPILOGUE_RELU 2           /* C = max(C, 0) */
#define ANVIL_EPILOGUE_GELU_TANH 3      /* C = gelu_tanh(C) */
#define ANVIL_EPILOGUE_BIAS_RELU 4      /* C = max(C + bias[j], 0) */
#define ANVIL_EPILOGUE_BIAS_GELU_TANH 5 /* C = gelu_tanh(C + bias[j]) */

/* gemm_ex's return when cuBLASLt has no algorithm for the fused form of this problem (epilogue,
 * separate C): nothing was queued and the caller runs the unfused GEMM and epilogue itself.
 * last_error says why. */
#define ANVIL_GEMM_NOT_FUSED 1

/* The arguments of AnvilDeviceApi::gemm_ex: for b in [0, batch)
 *   D_b = epilogue(alpha * op(A_b) * op(B_b) + beta * C_b (+ bias))
 * with X_b = X + b * stride_x elements, row-major leading dimensions ld*, op() transposing when
 * trans_x is 1; A, B, C, D and bias share dtype (float32 with TF32 off unless allow_tf32,
 * bfloat16, float16 with fp32 accumulation, float64). C is optional (null: beta must be 0); it is
 * read as an m x n matrix and may be D itself (same ld and stride) but must not otherwise overlap
 * D. anvil's generated code passes C only with NONE and BIAS (where an activation would go with
 * respect to beta * C is cuBLASLt's choice, not relied upon). */
typedef struct AnvilGemmArgs {
  uint32_t struct_size; /* sizeof(AnvilGemmArgs) */
  int32_t dtype;        /* anvil::DType code */
  int32_t trans_a, trans_b;
  int64_t m, n, k;
  float alpha, beta;
  const void* a;
  int64_t lda, stride_a;
  const void* b;
  int64_t ldb, stride_b;
  const void* c; /* null: none */
  int64_t ldc, stride_c;
  void* d;
  int64_t ldd, stride_d;
  int64_t batch;
  int32_t epilogue;   /* ANVIL_EPILOGUE_* */
  int32_t allow_tf32; /* float32: 0 fp32, 1 TF32, ANVIL_FP32_3XTF32 (ABI 9) */
  const void* bias;   /* n elements, contiguous, one vector for every batch */
  /* ---- ABI 6: float8 operands (aten._scaled_mm; cuBLASLt's FP8 GEMM, sm_89 and newer) ----
   * a_dtype / b_dtype: 0 (A and B are of `dtype`), or both the anvil::DType codes of float8
   * formats: 29 e4m3fn or 30 e5m2, not both e5m2. Then `dtype` is D's (float16, bfloat16 or
   * float32), the bias is of D's dtype (bfloat16 for a float32 D), A is row-major (trans_a 0)
   * and B column-major (trans_b 1) with leading dimensions multiple of 16, batch is 1, no C, and
   *   D = scale_a * scale_b * A B (+ bias)
   * where scale_a / scale_b point to one float32 each in device memory (null: 1), or, with
   * scale_rowwise 1, to m and n float32s (scale_a[i] * scale_b[j]); fast_accum 1 lets cuBLASLt
   * accumulate with fewer fp32 promotions (PyTorch's use_fast_accum). struct_size must cover
   * these fields for them to be read. */
  int32_t a_dtype, b_dtype;
  const void* scale_a;
  const void* scale_b;
  int32_t scale_rowwise;
  int32_t fast_accum;
  /* ---- ABI 8: which of cuBLASLt's heuristic algorithms to run (the GEMM autotuner's
   * cublaslt_heuristic_N candidates): 0 the heuristic's first, N its (N+1)-th for this problem,
   * 0 .. ANVIL_GEMM_ALGOS - 1; where the heuristic offers fewer, its first. A shorter struct
   * (struct_size) runs the first. */
  int32_t algo_index;
} AnvilGemmArgs;

/* One scaled-dot-product attention (AnvilDeviceApi::attention), PyTorch's semantics:
 *   o[b, h, i, :] = softmax_j(scale * q[b, h, i, :] . k[b, hk, j, :] + bias[b, h, i, j]) v[b, hk, j, :]
 * with hk = h / (heads / kv_heads) (grouped-query attention), keys j > i masked out when causal
 * (top-left aligned, as is_causal), fp32 accumulation. Strides are in elements, per dim
 * (b, h, l, d); bias is optional (null), additive, of the same dtype, with sizes (b, h, l, s)
 * where a size-1 dim broadcasts. */
typedef struct AnvilAttentionArgs {
  int32_t dtype;  /* anvil::DType code: bfloat16 or float16 */
  int32_t causal;
  int64_t batch, heads, kv_heads, len_q, len_kv, head_dim, head_dim_v;
  float scale;
  const void* q;
  const void* k;
  const void* v;
  void* o;
  int64_t q_stride[4], k_stride[4], v_stride[4], o_stride[4];
  const void* bias;
  int64_t bias_size[4], bias_stride[4];
} AnvilAttentionArgs;

/* Activations AnvilDeviceApi::conv applies after the bias (AnvilConvArgs::activation). */
#define ANVIL_CONV_ACT_NONE 0
#define ANVIL_CONV_ACT_RELU 1 /* y = max(y, 0) */

/* conv's return when cuDNN has no engine that fuses the bias or activation into this
 * convolution: nothing was queued; the caller asks again without them (bias null, activation
 * NONE) and applies them itself. last_error says why. */
#define ANVIL_CONV_NOT_FUSED 1

/* One 2-D forward convolution (AnvilDeviceApi::conv), PyTorch's conv2d (cross-correlation):
 *   y[n, k, p, q] = act(bias[k] + sum_{c, r, s} x[n, g * C/G + c, p * stride_h - pad_top +
 *                   r * dilation_h, q * stride_w - pad_left + s * dilation_w] * w[k, c, r, s])
 * with g = k / (out_channels / groups) and zero padding. Sizes are logical NCHW (x [n,
 * in_channels, in_h, in_w], w [out_channels, in_channels / groups, kernel_h, kernel_w], y [n,
 * out_channels, out_h, out_w]); the strides are in elements, per logical dim, so NCHW and
 * channels-last (NHWC) memory are both described (cuDNN takes a fully packed layout in some dim
 * order). x, w, y and bias share dtype: float32 (TF32 tensor cores unless allow_tf32 is 0, as
 * PyTorch's default torch.backends.cudnn.allow_tf32), bfloat16 or float16 with fp32
 * accumulation. bias is optional (null), out_channels contiguous elements.
 * Device ABI 7 adds a fused residual: y = act(conv + bias + residual), residual (null: none)
 * of y's sizes and dtype, with its own strides; it must not overlap y. A caller built against
 * ABI 5-6 passes the shorter struct (struct_size), read as having no residual. */
typedef struct AnvilConvArgs {
  uint32_t struct_size; /* sizeof(AnvilConvArgs) */
  int32_t dtype;        /* anvil::DType code */
  int64_t batch, in_channels, in_h, in_w;
  int64_t out_channels, kernel_h, kernel_w;
  int64_t out_h, out_w;
  int64_t groups;
  int64_t stride_h, stride_w;
  int64_t pad_top, pad_left, pad_bottom, pad_right;
  int64_t dilation_h, dilation_w;
  const void* x;
  int64_t x_stride[4];
  const void* w;
  int64_t w_stride[4];
  void* y;
  int64_t y_stride[4];
  const void* bias;   /* null: none */
  int32_t activation; /* ANVIL_CONV_ACT_* */
  int32_t allow_tf32; /* float32: TF32 tensor cores allowed */
  const void* residual; /* device ABI 7; null: none */
  int64_t residual_stride[4];
} AnvilConvArgs;

typedef struct AnvilDeviceApi {
  uint32_t abi_version; /* ANVIL_DEVICE_ABI_VERSION */
  const char* name;     /* "cuda" */
  int32_t device_type;  /* ANVIL_DEVICE_CUDA */
  /* The message of the calling thread's last failure. */
  const char* (*last_error)(void);
  /* Number of usable devices (0 when there is none or the driver is missing; last_error says
   * why). */
  int (*device_count)(void);
  /* A readable name of device `device` ("NVIDIA H100 80GB HBM3, sm_90") into buf. */
  int (*describe)(int device, char* buf, size_t len);
  /* The compute capability of `device` (major * 10 + minor, e.g. 90), or -1 with last_error. */
  int (*capability)(int device);
  /* Device memory: at least 256-byte aligned; free(null) is a no-op. */
  void* (*alloc)(int device, size_t bytes);
  int (*free)(int device, void* ptr);
  /* Copies `bytes`; with a null stream the copy is complete on return, otherwise it is queued on
   * `stream` (host memory must then stay valid until the stream reaches it). */
  int (*copy)(int device, void* dst, const void* src, size_t bytes, int direction, void* stream);
  int (*memset_zero)(int device, void* ptr, size_t bytes, void* stream);
  /* Streams of `device` (non-blocking with respect to the legacy default stream). */
  void* (*stream_create)(int device);
  int (*stream_destroy)(int device, void* stream);
  int (*stream_synchronize)(int device, void* stream);
  /* Row-major batched GEMM queued on `stream`: for b in [0, batch):
   *   C_b[m, n] = alpha * op(A_b)[m, k] * op(B_b)[k, n] (+ bias[n] with ANVIL_EPILOGUE_BIAS)
   * where X_b = X + b * stride_x elements; op() transposes when trans_x is 1; ld* are row-major
   * leading dimensions. dtype (anvil::DType codes): float32 (fp32 math, TF32 off unless
   * allow_tf32), float64 (fp64 math), bfloat16 and float16 (fp32 accumulation); A, B, C and
   * bias share it. */
  int (*gemm)(int device, void* stream, int32_t dtype, int trans_a, int trans_b, int64_t m,
              int64_t n, int64_t k, float alpha, const void* a, int64_t lda, int64_t stride_a,
              const void* b, int64_t ldb, int64_t stride_b, void* c, int64_t ldc,
              int64_t stride_c, int64_t batch, int epilogue, const void* bias, int allow_tf32);
  /* Makes `device` the calling thread's current device (generated code launches its kernels
   * there); the runtime calls it before each run of a device package. */
  int (*set_device)(int device);
  /* ---- ABI 2: graphs (CUDA graphs). ---- */
  /* Starts recording the work queued on `stream` (not the default stream) from the calling
   * thread instead of running it. */
  int (*graph_begin)(int device, void* stream);
  /* Ends the recording on `stream` and instantiates it into *exec (a replayable graph); with
   * exec null the recording is discarded. Fails when something recorded cannot be captured. */
  int (*graph_end)(int device, void* stream, void** exec);
  /* Queues a replay of `exec` on `stream`. */
  int (*graph_launch)(int device, void* exec, void* stream);
  int (*graph_destroy)(int device, void* exec);
  /* Free and total bytes of `device`'s memory (cudaMemGetInfo). */
  int (*mem_info)(int device, size_t* free_bytes, size_t* total_bytes);
  /* ---- ABI 3: fused attention (cuDNN's, through its graph API). ---- */
  /* Queues the attention `args` describes on `stream`. Returns ANVIL_DEVICE_UNSUPPORTED (with
   * last_error saying why, nothing queued) when no cuDNN engine takes the problem. */
  int (*attention)(int device, void* stream, const AnvilAttentionArgs* args);
  /* ---- ABI 3: fused GEMM epilogues ---- */
  /* The GEMM of AnvilGemmArgs queued on `stream`, with its epilogue and C fused into cuBLASLt's
   * kernel: 0 on success, ANVIL_GEMM_NOT_FUSED when cuBLASLt cannot fuse them for this problem
   * (nothing queued), another non-zero value on failure. */
  int (*gemm_ex)(int device, void* stream, const AnvilGemmArgs* args);
  /* ---- ABI 4: scratch for generated GEMM kernels (the autotuner's CUTLASS choices) ---- */
  /* The stream's workspace block, grown to at least `bytes` (the block cuBLASLt and cuDNN use
   * on that stream; work on one stream is ordered, so they never overlap). Valid for work
   * queued on `stream` until a later call asks for more. Null with last_error on failure; not
   * while the stream is being captured into a CUDA graph unless the block is already large
   * enough. */
  void* (*workspace)(int device, void* stream, size_t bytes);
  /* ---- ABI 5: convolutions (cuDNN's, through its graph API) ---- */
  /* Queues the convolution `args` describes (with its bias and activation fused) on `stream`:
   * 0 on success; ANVIL_CONV_NOT_FUSED when no engine fuses the bias / activation (nothing
   * queued; ask again without them); ANVIL_DEVICE_UNSUPPORTED (nothing queued, last_error says
   * why) when no cuDNN engine takes the convolution at all: the caller runs its own path; any
   * other non-zero value on failure. */
  int (*conv)(int device, void* stream, const AnvilConvArgs* args);
} AnvilDeviceApi;

typedef const AnvilDeviceApi* (*AnvilDeviceBackendFn)(void);
#define ANVIL_DEVICE_BACKEND_SYMBOL "anvil_device_backend"

#ifdef __cplusplus
}
#endif

#endif /* ANVIL_ANVIL_DEVICE_H_ */
