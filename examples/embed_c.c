/* embed_c.c — load a compiled .anvil package through anvil's C ABI and run it.
 *
 *   example_embed_c MODEL.anvil [N]
 *
 * Prints the model's inputs, outputs and constants, then runs it twice on synthetic inputs:
 * every dim takes its smallest allowed value, except that a symbolic dim takes N when given
 * and allowed. Floating inputs hold 0.01 * i, integer inputs i % 7, bool inputs i % 2.
 * Inputs are DLPack tensors over memory this program owns; outputs come back as DLPack tensors
 * that this program releases with their deleters. */
#include <anvil/anvil_c.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One input: its buffer and the DLPack descriptor borrowed by anvil_model_run. */
typedef struct Input {
  void* data;
  int64_t shape[8];
  DLManagedTensor managed;
} Input;

static void print_spec(const char* kind, size_t i, const anvil_tensor_spec_t* s) {
  printf("  %s %zu: %s dtype(code=%d bits=%d) [", kind, i, s->name, s->dtype.code, s->dtype.bits);
  for (int32_t d = 0; d < s->ndim; ++d) printf("%s%s", d ? ", " : "", s->sizes[d]);
  printf("]\n");
}

static int is_symbolic(const char* size) { return size[0] < '0' || size[0] > '9'; }

/* Fills element k of a buffer with a value of the spec's dtype. */
static void fill(void* data, DLDataType t, int64_t k) {
  if (t.code == kDLFloat && t.bits == 32)
    ((float*)data)[k] = 0.01f * (float)k;
  else if (t.code == kDLFloat && t.bits == 64)
    ((double*)data)[k] = 0.01 * (double)k;
  else if (t.code == kDLInt && t.bits == 64)
    ((int64_t*)data)[k] = k % 7;
  else if (t.code == kDLInt && t.bits == 32)
    ((int32_t*)data)[k] = (int32_t)(k % 7);
  else if (t.bits == 8)
    ((uint8_t*)data)[k] = (uint8_t)(t.code == kDLInt || t.code == kDLUInt ? k % 7 : k % 2);
  /* other dtypes keep the zeros calloc gave them */
}

static void print_output(size_t i, const DLTensor* t) {
  int64_t numel = 1;
  printf("  output %zu: [", i);
  for (int32_t d = 0; d < t->ndim; ++d) {
    printf("%s%lld", d ? ", " : "", (long long)t->shape[d]);
    numel *= t->shape[d];
  }
  printf("]");
  for (int64_t k = 0; k < numel && k < 6; ++k) {
    if (t->dtype.code == kDLFloat && t->dtype.bits == 32)
      printf(" %g", ((const float*)t->data)[k]);
    else if (t->dtype.code == kDLFloat && t->dtype.bits == 64)
      printf(" %g", ((const double*)t->data)[k]);
    else if (t->dtype.code == kDLInt && t->dtype.bits == 64)
      printf(" %lld", (long long)((const int64_t*)t->data)[k]);
  }
  printf(numel > 6 ? " ...\n" : "\n");
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.anvil [N]\n", argv[0]);
    return 2;
  }
  const int64_t wanted = argc > 2 ? atoll(argv[2]) : 0;
  anvil_load_options_t options;
  memset(&options, 0, sizeof options);
  options.device = "cpu";
  options.num_runners = 1;
  anvil_model_t* model = NULL;
  char* err = NULL;
  if (anvil_model_load(argv[1], &options, &model, &err) != 0) {
    fprintf(stderr, "load failed: %s\n", err);
    anvil_free(err);
    return 1;
  }

  const size_t n_in = anvil_model_num_inputs(model), n_out = anvil_model_num_outputs(model);
  printf("model %s\n", argv[1]);
  anvil_tensor_spec_t spec;
  for (size_t i = 0; i < n_out; ++i)
    if (anvil_model_output_spec(model, i, &spec, NULL) == 0) print_spec("output", i, &spec);
  for (size_t i = 0; i < anvil_model_num_constants(model); ++i)
    printf("  constant %s (%s)\n", anvil_model_constant_name(model, i),
           anvil_model_constant_original_name(model, i));

  Input* inputs = calloc(n_in ? n_in : 1, sizeof(Input));
  DLManagedTensor** in_ptrs = calloc(n_in ? n_in : 1, sizeof(DLManagedTensor*));
  for (size_t i = 0; i < n_in; ++i) {
    anvil_model_input_spec(model, i, &spec, NULL);
    print_spec("input", i, &spec);
    int64_t numel = 1;
    for (int32_t d = 0; d < spec.ndim; ++d) {
      int64_t v = spec.min_sizes[d];
      if (wanted > 0 && is_symbolic(spec.sizes[d]) && wanted >= spec.min_sizes[d] &&
          wanted <= spec.max_sizes[d])
        v = wanted;
      inputs[i].shape[d] = v;
      numel *= v;
    }
    const size_t elem = (spec.dtype.bits + 7) / 8;
    inputs[i].data = calloc(numel ? (size_t)numel : 1, elem);
    for (int64_t k = 0; k < numel; ++k) fill(inputs[i].data, spec.dtype, k);
    DLTensor* t = &inputs[i].managed.dl_tensor;
    t->data = inputs[i].data;
    t->device.device_type = kDLCPU;
    t->device.device_id = 0;
    t->ndim = spec.ndim;
    t->dtype = spec.dtype;
    t->shape = inputs[i].shape;
    t->strides = NULL; /* compact row-major */
    t->byte_offset = 0;
    in_ptrs[i] = &inputs[i].managed;
  }

  int status = 0;
  for (int run = 0; run < 2 && status == 0; ++run) {
    DLManagedTensor** outputs = NULL;
    size_t count = 0;
    if (anvil_model_run(model, in_ptrs, n_in, &outputs, &count, &err) != 0) {
      fprintf(stderr, "run failed: %s\n", err);
      anvil_free(err);
      status = 1;
      break;
    }
    printf("run %d:\n", run + 1);
    for (size_t i = 0; i < count; ++i) print_output(i, &outputs[i]->dl_tensor);
    anvil_tensors_free(outputs, count);
  }

  for (size_t i = 0; i < n_in; ++i) free(inputs[i].data);
  free(inputs);
  free(in_ptrs);
  anvil_model_free(model);
  return status;
}
