/* anvil_c.h — the C ABI of the anvil runtime: load a compiled .anvil package and run it on
 * DLPack tensors (so NumPy, PyTorch and CuPy buffers pass without copies).
 *
 * Errors: every function returning int returns 0 on success and non-zero on failure. The
 * message of the last failure on the calling thread is kept for anvil_last_error(); when the
 * function takes `char** err` and it is non-NULL, *err also receives a copy of the message that
 * the caller releases with anvil_free (and is set to NULL on success). No C++ exception ever
 * crosses this interface.
 *
 * Tensors: inputs are borrowed for the duration of the call (their deleters are not called;
 * the data is read in place when it is contiguous and aligned to its element size, otherwise
 * copied). Outputs are new DLManagedTensors owned by the caller: call each one's deleter (or
 * anvil_tensors_free for the whole array). Bool outputs use DLPack type code 6 (kDLBool of
 * DLPack >= 0.8); for bool inputs both code 6 and kDLUInt with 8 bits are accepted.
 *
 * Thread safety: anvil_model_run may be called from several threads on one model (up to
 * num_runners run at once; the others wait). Loading and freeing are not concurrent with runs.
 */
#ifndef ANVIL_ANVIL_C_H_
#define ANVIL_ANVIL_C_H_

#include <dlpack/dlpack.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ANVIL_C_API_VERSION 1

/* A loaded model (opaque). */
typedef struct anvil_model anvil_model_t;

/* Options of anvil_model_load; zero-initialise, then set what you need. */
typedef struct anvil_load_options {
  const char* device;  /* "cpu", "cuda" or "cuda:N" (NULL means "cpu"); a CUDA package needs a
                          CUDA device, a CPU package the CPU */
  int32_t num_runners; /* concurrent runs served; 0 means 1 */
  int32_t num_threads; /* threads per run, the caller included; 0 means ANVIL_NUM_THREADS or all */
} anvil_load_options_t;

/* One input or output of a model. Pointers stay valid until anvil_model_free. */
typedef struct anvil_tensor_spec {
  const char* name;
  DLDataType dtype;
  int32_t ndim;
  const char* const* sizes; /* ndim strings: "256", "s77", "s77 + 1" */
  const int64_t* min_sizes; /* ndim smallest values each dim may take */
  const int64_t* max_sizes; /* ndim largest values; INT64_MAX when unbounded */
} anvil_tensor_spec_t;

/* The last error message on this thread ("" when none). Valid until the next failing call on
 * this thread. */
const char* anvil_last_error(void);
/* Frees memory anvil returned (error strings, output arrays). NULL is fine. */
void anvil_free(void* p);
/* The C API version this library implements (ANVIL_C_API_VERSION). */
int anvil_c_api_version(void);

/* Loads the package at `path`. options may be NULL (defaults). */
int anvil_model_load(const char* path, const anvil_load_options_t* options, anvil_model_t** model,
                     char** err);
/* Frees a model (NULL is fine). No run may be in progress. */
void anvil_model_free(anvil_model_t* model);

/* Runs the model. inputs: n_inputs borrowed tensors in input-spec order, on the model's device
 * (kDLCPU for a CPU package, kDLCUDA on its GPU for a CUDA package: read in place). On success
 * *outputs is a new array (free with anvil_free or anvil_tensors_free) of *n_outputs new tensors
 * on the same device, complete when the call returns. */
int anvil_model_run(anvil_model_t* model, DLManagedTensor* const* inputs, size_t n_inputs,
                    DLManagedTensor*** outputs, size_t* n_outputs, char** err);
/* The NaN / Inf check of later runs, on (on != 0) or off; off by default (ANVIL_CHECK_NAN_INF=1
 * in the environment at load turns it on). On, each run scans what every step wrote and fails
 * at the first NaN or infinity with a message naming the step, its graph nodes, the buffer, the
 * element and its value; the model stays usable. */
int anvil_model_set_check_nan_inf(anvil_model_t* model, int on, char** err);
/* Calls the deleter of each of the n tensors, then frees the array itself. */
void anvil_tensors_free(DLManagedTensor** tensors, size_t n);

/* Specs. The index must be < the count; else the call fails. */
size_t anvil_model_num_inputs(const anvil_model_t* model);
size_t anvil_model_num_outputs(const anvil_model_t* model);
int anvil_model_input_spec(const anvil_model_t* model, size_t index, anvil_tensor_spec_t* spec,
                           char** err);
int anvil_model_output_spec(const anvil_model_t* model, size_t index, anvil_tensor_spec_t* spec,
                            char** err);

/* Constants: internal names in manifest order and their original (module path) names. NULL
 * when the index is out of range. */
size_t anvil_model_num_constants(const anvil_model_t* model);
const char* anvil_model_constant_name(const anvil_model_t* model, size_t index);
const char* anvil_model_constant_original_name(const anvil_model_t* model, size_t index);

/* Replaces n constants by name (values are copied; dtype and shape must match). With
 * inactive != 0 they go to the inactive set and take effect at anvil_model_swap_constants;
 * otherwise at once. require_full != 0 demands a value for every immutable constant. On any
 * error nothing changes. */
int anvil_model_update_constants(anvil_model_t* model, const char* const* names,
                                 DLManagedTensor* const* values, size_t n, int inactive,
                                 int require_full, char** err);
/* Makes the inactive constant set active, atomically with respect to runs. */
int anvil_model_swap_constants(anvil_model_t* model, char** err);

#ifdef __cplusplus
}
#endif

#endif /* ANVIL_ANVIL_C_H_ */
