/* anvil_rt.h — the ABI between a generated model library (model.so) and the anvil runtime.
 *
 * A model.so exports exactly one symbol, `anvil_model_entry`, returning a table of entry points.
 * It has no link-time dependency on anvil: everything it needs from the runtime (thread pool,
 * GEMM, extern kernels, error reporting) arrives as the AnvilRtApi function table passed to
 * create(). Generated code includes only this header (plus the C/C++ standard headers).
 *
 * Calling sequence (runtime side, per run):
 *   1. bind symbol values from the user inputs (manifest input specs), check every input;
 *   2. for each output i: entry->output_sizes(symbols, i, sizes) and (ABI >= 2)
 *      entry->output_layout(symbols, i, &layout): an output with base_kind 0 gets fresh storage of
 *      layout.storage_numel elements (its buffer, passed in args.outputs[i]); the others are
 *      views of another output's storage or of an input and are not written by run(). Without
 *      output_layout (ABI 1) every output is a fresh contiguous tensor;
 *   3. allocate entry->arena_bytes(symbols) bytes (64-byte aligned) or reuse a runner's arena;
 *   4. entry->run(model, &args) — returns 0, or non-zero with a message in args.error.
 * Data pointers are to contiguous, 64-byte aligned (where the runtime allocated them) buffers in
 * the dtype the manifest gives. Constants come in manifest order; mutable buffers among them are
 * updated in place by run().
 */
#ifndef ANVIL_ANVIL_RT_H_
#define ANVIL_ANVIL_RT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Major version 3: devices (AnvilRtTensor's device, AnvilRtApi::device, AnvilRunArgs::stream).
 * A runtime loads packages of its own major version only; an older package is refused at load
 * with a message asking to recompile it. */
#define ANVIL_MODEL_ABI_VERSION 3u
/* Minor version: additions at the end of AnvilRtApi / AnvilRunArgs (1: collectives, 2: GEMM with
 * a packed constant B, 3: AnvilRunArgs::run_symbols, 4: memory sized during the run, 5:
 * AnvilRunArgs::step_ns, 6: devices — part of major 3, so every ABI 3 runtime has minors 1-6;
 * 7: collectives on a stream, 8: AnvilRtApi::gemm, the library GEMM of the autotuner, 9:
 * AnvilRunArgs::after_step, the NaN / Inf check, 10: AnvilRtApi::const_derived, copies of
 * constants kept with the constant set). */
#define ANVIL_MODEL_ABI_MINOR_VERSION 10u

/* Device types of AnvilRtTensor::device_type (as anvil::Device::Type). */
#define ANVIL_DEVICE_CPU 0
#define ANVIL_DEVICE_CUDA 1

struct AnvilDeviceApi; /* include/anvil/anvil_device.h */

/* A strided tensor descriptor (dtype codes are torch.export ScalarType codes, as anvil::DType). */
typedef struct AnvilRtTensor {
  void* data;
  int32_t dtype;
  int32_t ndim;
  int64_t sizes[8];
  int64_t strides[8]; /* in elements */
  int32_t device_type;  /* ANVIL_DEVICE_CPU or ANVIL_DEVICE_CUDA (where `data` points) */
  int32_t device_index; /* the device's ordinal (0 for the CPU) */
} AnvilRtTensor;

/* A scalar attribute of an extern call. kind: 0 = int, 1 = float, 2 = string. */
typedef struct AnvilRtScalar {
  const char* name;
  int32_t kind;
  int64_t i;
  double f;
  const char* s;
  const int64_t* ints; /* optional int list (kind 3) */
  int32_t n_ints;
} AnvilRtScalar;

/* One GEMM (ABI minor 8): row-major C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C
 * (+ bias) then the activation. trans_*: the stored matrix is the transpose (column-major
 * operand). Dtypes are ScalarType codes: fp32 x fp32 -> fp32, bf16 x bf16 -> bf16 or fp32
 * (fp32 accumulation), fp16 likewise, int8 x int8 -> int32 (exact), fp64. Generated GEMM
 * templates take the same struct (codegen/gemm/gemm_candidate.h). */
#define ANVIL_GEMM_LIB_DEFAULT 0  /* the runtime's own choice (as before autotuning) */
#define ANVIL_GEMM_LIB_OPENBLAS 1
#define ANVIL_GEMM_LIB_PACKED 2   /* anvil's packed-B kernel; variant: 0 auto, 1 generic, 2 avx2, 3 avx512 */
#define ANVIL_GEMM_LIB_ONEDNN 3
#define ANVIL_GEMM_ACT_NONE 0
#define ANVIL_GEMM_ACT_RELU 1
#define ANVIL_GEMM_ACT_RELU6 2
#define ANVIL_GEMM_ACT_GELU_ERF 3
#define ANVIL_GEMM_ACT_GELU_TANH 4
#define ANVIL_GEMM_ACT_SILU 5
#define ANVIL_GEMM_BIAS_NONE 0
#define ANVIL_GEMM_BIAS_COL 1 /* bias[n], added to every row */
#define ANVIL_GEMM_BIAS_ROW 2 /* bias[m], added to every column */
typedef struct AnvilGemmCall {
  int32_t library; /* ANVIL_GEMM_LIB_* (ignored by generated templates) */
  int32_t variant; /* library-specific */
  int32_t a_dtype, b_dtype, c_dtype;
  int32_t trans_a, trans_b;
  int32_t b_constant; /* B is an immutable model constant: a packed copy may be kept by address */
  int64_t m, n, k;
  const void* a;
  int64_t lda;
  const void* b;
  int64_t ldb;
  void* c;
  int64_t ldc;
  float alpha, beta;
  const void* bias; /* c_dtype elements, or null */
  int32_t bias_kind; /* ANVIL_GEMM_BIAS_* */
  int32_t activation; /* ANVIL_GEMM_ACT_* */
  /* The matrix beta scales when it is not C itself (a residual laid out as C, `ld_source` apart),
   * or null. Read only by the generated kernels that fuse a residual (CUDA's 3xTF32 kernels):
   * the runtime's own GEMMs never read these two fields, so a package built before them runs. */
  const void* source;
  int64_t ld_source;
} AnvilGemmCall;

/* Services the runtime provides to generated code. */
typedef struct AnvilRtApi {
  uint32_t abi_version;
  /* Runs fn(ctx, b, e) over [begin, end) split into chunks of at least `grain`, on the runtime's
   * thread pool; returns when all chunks are done. Serial when the range is small. */
  void (*parallel_for)(int64_t begin, int64_t end, int64_t grain,
                       void (*fn)(void* ctx, int64_t b, int64_t e), void* ctx);
  /* Row-major C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] + beta * C. trans_*: 0 = as is, 1 = transposed. */
  void (*sgemm)(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
                int64_t ldc);
  void (*dgemm)(int trans_a, int trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                const double* a, int64_t lda, const double* b, int64_t ldb, double beta,
                double* c, int64_t ldc);
  /* Calls the runtime's implementation of an extern op by its export target name
   * ("aten.convolution.default"); inputs/outputs are descriptors, outputs preallocated.
   * Returns 0 or non-zero with a message written through set_error. */
  int (*extern_call)(void* run_ctx, const char* target, const AnvilRtTensor* inputs, int32_t n_inputs,
                     const AnvilRtScalar* attrs, int32_t n_attrs, AnvilRtTensor* outputs,
                     int32_t n_outputs);
  /* Records an error message for the current run (first one wins). */
  void (*set_error)(void* run_ctx, const char* message);
  /* ---- ABI minor 1: collectives. Read only when abi_minor_version >= 1. ---- */
  uint32_t abi_minor_version; /* ANVIL_MODEL_ABI_MINOR_VERSION of the runtime */
  /* Issues collective `op` ("all_reduce", "broadcast", "all_gather_into_tensor",
   * "reduce_scatter_tensor", "all_to_all_single") on the group named `group` (resolved in the
   * process-wide group registry; the world is "0"). all_reduce / broadcast run in place on
   * `outputs` (inputs list the same views; several tensors = one coalesced all_reduce); the
   * others read inputs[i] and write outputs[i] (several pairs: the coalesced all_gather /
   * reduce_scatter; all_to_all_single takes one). attrs: "reduce_op" (string), "src",
   * "group_size" (int), "output_split_sizes" / "input_split_sizes" (int lists). Returns a
   * handle > 0, or 0 with a message written through set_error. The buffers must stay untouched
   * until coll_wait on the handle returns. The collective is ordered after the run's stream
   * (AnvilRunArgs::stream; see coll_issue_stream, minor 7). */
  int64_t (*coll_issue)(void* run_ctx, const char* op, const char* group,
                        const AnvilRtTensor* inputs, int32_t n_inputs, AnvilRtTensor* outputs,
                        int32_t n_outputs, const AnvilRtScalar* attrs, int32_t n_attrs);
  /* Waits for the collective behind `handle` (bounded by the group's timeout) and releases the
   * handle: the same as coll_wait_stream (minor 7) on the run's stream (AnvilRunArgs::stream).
   * Returns 0, or non-zero with a message written through set_error. */
  int (*coll_wait)(void* run_ctx, int64_t handle);
  /* ---- ABI minor 2: GEMM with a constant B. Read only when abi_minor_version >= 2. ---- */
  /* Row-major C[m,n] = alpha * op(A)[m,k] * op(B)[k,n] (beta = 0) where B is an immutable
   * constant of the model (its address and value stay the same for the whole run): the runtime
   * may keep a packed copy of it, keyed by address, for as long as the constant set is active. */
  void (*sgemm_const_b)(void* run_ctx, int trans_a, int trans_b, int64_t m, int64_t n, int64_t k,
                        float alpha, const float* a, int64_t lda, const float* b, int64_t ldb,
                        float* c, int64_t ldc);
  /* ---- ABI minor 4: memory sized during the run. Read only when abi_minor_version >= 4. ---- */
  /* Buffers whose size uses a run-time value without a bound (e.g. the result of an all_to_all
   * whose split sizes come from tensor data) cannot be planned before the run. run_alloc returns
   * `bytes` of 64-byte aligned scratch that stays valid until the run ends (after every
   * collective the run issued has completed); null, with the run's error set, on failure. */
  void* (*run_alloc)(void* run_ctx, int64_t bytes);
  /* Allocates the storage of user output `index`, whose layout has base_kind 3 (its size is
   * known only during the run): returns it and stores it in AnvilRunArgs::outputs[index], which
   * the runtime passed as null; null, with the run's error set, on failure or a second call. */
  void* (*output_alloc)(void* run_ctx, int32_t index, int64_t bytes);
  /* ---- ABI 3 (minor 6): devices. ---- */
  /* The device backend of the package's device (include/anvil/anvil_device.h: memory, streams,
   * GEMM), or null for CPU packages. Every data pointer of a run of a device package (inputs,
   * outputs, constants, arena, run_alloc memory) is memory of that device. */
  const struct AnvilDeviceApi* device;
  /* ---- ABI minor 7: collectives on a stream. Read only when abi_minor_version >= 7. ---- */
  /* coll_issue with the stream the calling code has queued the inputs' producers on (a
   * cudaStream_t of the run's device; null for CPU packages): a device group starts the
   * collective after the work queued on `stream` so far. Host groups (gloo, mpi) take host
   * memory only, which is ready when the call is made. */
  int64_t (*coll_issue_stream)(void* run_ctx, void* stream, const char* op, const char* group,
                               const AnvilRtTensor* inputs, int32_t n_inputs,
                               AnvilRtTensor* outputs, int32_t n_outputs,
                               const AnvilRtScalar* attrs, int32_t n_attrs);
  /* coll_wait that makes `stream` wait for the collective: a collective that completes on a
   * device event (a GPU group) has the wait queued on `stream` and the call returns without
   * blocking the host; a host group's collective, or a null stream, blocks the calling thread
   * until it is done (bounded by the group's timeout). Releases the handle either way. Returns
   * 0, or non-zero with a message written through set_error. */
  int (*coll_wait_stream)(void* run_ctx, int64_t handle, void* stream);
  /* ---- ABI minor 8: a GEMM through the library `call->library` names (the autotuner's choice).
   * Runs on the calling thread's pool. Returns 0, or non-zero with a message written through
   * set_error (a library this runtime lacks, a dtype it does not take). ---- */
  int (*gemm)(void* run_ctx, const AnvilGemmCall* call);
  /* ---- ABI minor 10: a copy of a constant in another layout (anvil's GEMM templates pack a
   * constant B once). Returns the copy of the immutable model constant at `address` in the
   * layout `layout` names (a string naming the layout and the shape completely): `bytes` bytes,
   * 64-byte aligned, filled by fill(fill_ctx, dst) on first use and kept for as long as the
   * model's constant set (an update of the constants drops the copies of those it replaced).
   * Null when the run keeps no copies (then the caller builds its own, per call) or on failure
   * (then with the run's error set). fill may run on two threads at once for one key (either
   * copy is kept); it runs on the calling thread and may use parallel_for. ---- */
  const void* (*const_derived)(void* run_ctx, const void* address, const char* layout,
                               int64_t bytes, void (*fill)(void* fill_ctx, void* dst),
                               void* fill_ctx);
} AnvilRtApi;

/* Arguments of one run. */
typedef struct AnvilRunArgs {
  const int64_t* symbols;   /* values of the manifest's symbols, in manifest order */
  void* const* inputs;      /* user inputs, manifest order, contiguous */
  void* const* outputs;     /* user outputs' storage, manifest order (see output_layout) */
  void* const* constants;   /* constants, manifest order (mutable buffers are written in place) */
  void* arena;              /* scratch of arena_bytes(symbols) bytes */
  void* run_ctx;            /* opaque: pass back to AnvilRtApi calls */
  /* Minor 3: receives the run-time symbols (manifest "run_time_symbols": nonzero / mask counts)
   * at the end of the run, to shape outputs whose sizes use them; null when not wanted. Only a
   * model.so that checked abi_minor_version >= 3 in create() reads it. */
  int64_t* run_symbols;
  /* Minor 5: when non-null, run() adds the wall time of step i (nanoseconds, steps in the
   * manifest's "kernels" order) to step_ns[i] (profiling; null: no clock is read). A model.so
   * reads it only when api->abi_minor_version >= 5 (older runtimes pass a shorter struct). */
  int64_t* step_ns;
  /* ABI 3 (minor 6): the device the run's memory is on (0 for the CPU) and the stream its work
   * is queued on (a cudaStream_t for CUDA packages; null for CPU packages). run() of a device
   * package queues its work on `stream` and may return before that work is done: the runtime
   * synchronizes the stream (or makes the caller's stream wait on it). While step_ns is set, a
   * device package synchronizes its stream around each step, so step_ns counts device time. */
  void* stream;
  int32_t device_index;
  /* Minor 9: when non-null, run() calls after_step(run_ctx, i) after each step i (manifest
   * "kernels" order) that has "checks" in the manifest, and returns its result when it is
   * non-zero (the message set through set_error): the runtime's NaN / Inf check of what the step
   * wrote (runtime::Model::set_check_nan_inf). A model.so reads it only when
   * api->abi_minor_version >= 9. */
  int (*after_step)(void* run_ctx, int32_t step);
} AnvilRunArgs;

/* How a user output is returned (ABI >= 2): a strided view of some storage. base_kind 0: the
 * output's own storage of storage_numel elements (allocated by the runtime, written by run());
 * 1: the storage of output base_index (outputs that are the same tensor or views of one
 * another share it); 2: the memory of user input base_index as passed to run() (contiguous);
 * 3 (ABI minor 4): contiguous storage that run() allocates with api->output_alloc once its size
 * is known (the sizes use run-time symbols: the runtime shapes it from run_symbols).
 * offset and strides are in elements, relative to the start of that storage. */
typedef struct AnvilRtOutputLayout {
  int32_t base_kind;
  int32_t base_index;
  int64_t storage_numel;
  int64_t offset;
  int64_t strides[8];
} AnvilRtOutputLayout;

/* The entry-point table a model.so exports. */
typedef struct AnvilModelEntry {
  uint32_t abi_version;                 /* ANVIL_MODEL_ABI_VERSION */
  const char* (*metadata_json)(void);   /* compile-time facts (target, kernels, arena formula) */
  void* (*create)(const AnvilRtApi* api);
  void (*destroy)(void* model);
  int64_t (*arena_bytes)(const int64_t* symbols);
  void (*output_sizes)(const int64_t* symbols, int32_t output_index, int64_t* sizes);
  int (*run)(void* model, const AnvilRunArgs* args);
  /* ABI >= 2: how output `output_index` is returned (see AnvilRtOutputLayout). */
  void (*output_layout)(const int64_t* symbols, int32_t output_index,
                        AnvilRtOutputLayout* layout);
} AnvilModelEntry;

typedef const AnvilModelEntry* (*AnvilModelEntryFn)(void);
#define ANVIL_MODEL_ENTRY_SYMBOL "anvil_model_entry"

#ifdef __cplusplus
}
#endif

#endif /* ANVIL_ANVIL_RT_H_ */
