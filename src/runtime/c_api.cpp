// The C ABI (include/anvil/anvil_c.h) over runtime::Model, with DLPack tensors.
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "anvil/anvil_c.h"
#include "core/error.h"
#include "runtime/dlpack.h"
#include "runtime/model.h"

/// The C handle: the Model plus the spec strings handed out by pointer.
struct anvil_model {
  anvil::runtime::Model model;
  struct Spec {
    std::vector<std::string> size_strings;
    std::vector<const char*> size_ptrs;
    std::vector<int64_t> mins, maxs;
    anvil_tensor_spec_t c{};
  };
  std::vector<Spec> inputs, outputs;
  std::vector<std::string> constant_names, constant_originals;
};

namespace {

using anvil::DType;
using anvil::Error;
using anvil::str;
using anvil::Tensor;
using anvil::runtime::borrow_dlpack;
using anvil::runtime::dlpack_dtype;
using anvil::runtime::export_dlpack;

thread_local std::string t_last_error;

/// Records `message` as the thread's last error and in *err; returns 1.
int fail(const std::string& message, char** err) {
  t_last_error = message;
  if (err) {
    *err = static_cast<char*>(std::malloc(message.size() + 1));
    if (*err) std::memcpy(*err, message.c_str(), message.size() + 1);
  }
  return 1;
}

/// Runs `body`; turns every exception into an error code (nothing crosses the C ABI).
template <typename F>
int guarded(char** err, F&& body) {
  if (err) *err = nullptr;
  try {
    body();
    return 0;
  } catch (const std::bad_alloc&) {
    return fail("out of memory", err);
  } catch (const std::exception& e) {
    return fail(e.what(), err);
  } catch (...) {
    return fail("unknown error", err);
  }
}

void fill_specs(const std::vector<anvil::runtime::IOSpec>& specs,
                std::vector<anvil_model::Spec>& out) {
  out.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    anvil_model::Spec& s = out[i];
    s.size_strings = specs[i].sizes;
    for (const std::string& x : s.size_strings) s.size_ptrs.push_back(x.c_str());
    for (const anvil::SymRange& r : specs[i].ranges) {
      s.mins.push_back(r.min);
      s.maxs.push_back(r.max);
    }
    s.c.name = specs[i].name.c_str();
    s.c.dtype = dlpack_dtype(specs[i].dtype);
    s.c.ndim = static_cast<int32_t>(specs[i].sizes.size());
    s.c.sizes = s.size_ptrs.data();
    s.c.min_sizes = s.mins.data();
    s.c.max_sizes = s.maxs.data();
  }
}

void need_model(const anvil_model_t* model) {
  if (!model) throw Error("model is NULL", "anvil C API", "a loaded model", "NULL");
}

}  // namespace

extern "C" {

const char* anvil_last_error(void) { return t_last_error.c_str(); }
void anvil_free(void* p) { std::free(p); }
int anvil_c_api_version(void) { return ANVIL_C_API_VERSION; }

int anvil_model_load(const char* path, const anvil_load_options_t* options, anvil_model_t** model,
                     char** err) {
  if (model) *model = nullptr;
  return guarded(err, [&] {
    if (!path) throw Error("path is NULL", "anvil_model_load", "a package path", "NULL");
    if (!model) throw Error("model out-pointer is NULL", "anvil_model_load", "a pointer", "NULL");
    anvil::runtime::ModelOptions opts;
    if (options) {
      if (options->device) opts.device = anvil::Device::parse(options->device);
      opts.num_runners = options->num_runners == 0 ? 1 : options->num_runners;
      opts.num_threads = options->num_threads;
    }
    auto* m = new anvil_model{anvil::runtime::Model::load(path, opts), {}, {}, {}, {}};
    fill_specs(m->model.input_specs(), m->inputs);
    fill_specs(m->model.output_specs(), m->outputs);
    m->constant_names = m->model.constant_names();
    for (const auto& c : m->model.constant_specs())
      m->constant_originals.push_back(c.original_name);
    *model = m;
  });
}

void anvil_model_free(anvil_model_t* model) {
  try {
    delete model;
  } catch (...) {
  }
}

int anvil_model_run(anvil_model_t* model, DLManagedTensor* const* inputs, size_t n_inputs,
                    DLManagedTensor*** outputs, size_t* n_outputs, char** err) {
  if (outputs) *outputs = nullptr;
  if (n_outputs) *n_outputs = 0;
  return guarded(err, [&] {
    need_model(model);
    if (!outputs || !n_outputs)
      throw Error("output pointers are NULL", "anvil_model_run", "outputs and n_outputs", "NULL");
    if (n_inputs && !inputs) throw Error("inputs is NULL", "anvil_model_run", "an array", "NULL");
    const auto& specs = model->model.input_specs();
    std::vector<Tensor> in;
    for (size_t i = 0; i < n_inputs; ++i) {
      const DType* want = i < specs.size() ? &specs[i].dtype : nullptr;
      in.push_back(borrow_dlpack(inputs[i], str("anvil_model_run: input #", i), want));
    }
    std::vector<Tensor> out = model->model.run(in);
    // An output that views an input (PyTorch's aliasing) would point into memory the caller
    // only lends for this call: it gets its own copy.
    for (Tensor& o : out)
      for (const Tensor& i : in)
        if (o.storage() == i.storage()) {
          o = o.clone();
          break;
        }
    DLManagedTensor** arr = nullptr;
    if (!out.empty()) {
      arr = static_cast<DLManagedTensor**>(std::calloc(out.size(), sizeof(DLManagedTensor*)));
      if (!arr) throw std::bad_alloc();
      try {
        for (size_t i = 0; i < out.size(); ++i) arr[i] = export_dlpack(out[i]);
      } catch (...) {
        anvil_tensors_free(arr, out.size());
        throw;
      }
    }
    *outputs = arr;
    *n_outputs = out.size();
  });
}

void anvil_tensors_free(DLManagedTensor** tensors, size_t n) {
  if (!tensors) return;
  for (size_t i = 0; i < n; ++i)
    if (tensors[i] && tensors[i]->deleter) tensors[i]->deleter(tensors[i]);
  std::free(tensors);
}

size_t anvil_model_num_inputs(const anvil_model_t* model) {
  return model ? model->inputs.size() : 0;
}
size_t anvil_model_num_outputs(const anvil_model_t* model) {
  return model ? model->outputs.size() : 0;
}

int anvil_model_input_spec(const anvil_model_t* model, size_t index, anvil_tensor_spec_t* spec,
                           char** err) {
  return guarded(err, [&] {
    need_model(model);
    if (index >= model->inputs.size() || !spec)
      throw Error("bad input spec request", "anvil_model_input_spec",
                  str("index < ", model->inputs.size(), " and a spec pointer"),
                  std::to_string(index));
    *spec = model->inputs[index].c;
  });
}

int anvil_model_output_spec(const anvil_model_t* model, size_t index, anvil_tensor_spec_t* spec,
                            char** err) {
  return guarded(err, [&] {
    need_model(model);
    if (index >= model->outputs.size() || !spec)
      throw Error("bad output spec request", "anvil_model_output_spec",
                  str("index < ", model->outputs.size(), " and a spec pointer"),
                  std::to_string(index));
    *spec = model->outputs[index].c;
  });
}

size_t anvil_model_num_constants(const anvil_model_t* model) {
  return model ? model->constant_names.size() : 0;
}

const char* anvil_model_constant_name(const anvil_model_t* model, size_t index) {
  return model && index < model->constant_names.size() ? model->constant_names[index].c_str()
                                                       : nullptr;
}

const char* anvil_model_constant_original_name(const anvil_model_t* model, size_t index) {
  return model && index < model->constant_originals.size()
             ? model->constant_originals[index].c_str()
             : nullptr;
}

int anvil_model_update_constants(anvil_model_t* model, const char* const* names,
                                 DLManagedTensor* const* values, size_t n, int inactive,
                                 int require_full, char** err) {
  return guarded(err, [&] {
    need_model(model);
    if (n && (!names || !values))
      throw Error("names or values is NULL", "anvil_model_update_constants", "arrays", "NULL");
    std::map<std::string, Tensor> map;
    for (size_t i = 0; i < n; ++i) {
      if (!names[i])
        throw Error("constant name is NULL", "anvil_model_update_constants", "a name", "NULL");
      const DType* want = nullptr;
      for (const auto& c : model->model.constant_specs())
        if (c.name == names[i]) want = &c.dtype;
      map[names[i]] =
          borrow_dlpack(values[i], str("anvil_model_update_constants: '", names[i], "'"), want);
    }
    model->model.update_constants(map, inactive != 0, require_full != 0);
  });
}

int anvil_model_set_check_nan_inf(anvil_model_t* model, int on, char** err) {
  return guarded(err, [&] {
    need_model(model);
    model->model.set_check_nan_inf(on != 0);
  });
}

int anvil_model_swap_constants(anvil_model_t* model, char** err) {
  return guarded(err, [&] {
    need_model(model);
    model->model.swap_constants();
  });
}

}  // extern "C"
