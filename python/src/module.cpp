// anvil._anvil: the C++ API bound for Python (nanobind). runtime::Model as anvil.Model (runs with
// the GIL released; inputs and outputs through DLPack / the buffer protocol without copies) and
// the compile path of `anvil compile` (driver::compile_pt2 / cached_package_for). The Python
// package python/anvil wraps these in anvil.compile and anvil.load.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "codegen/gemm/gemm_filter.h"
#include "codegen/target.h"
#include "codegen/toolchain.h"
#include "core/error.h"
#include "dist/world.h"
#include "driver/compile.h"
#include "runtime/model.h"
#include "tensor_convert.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace anvil::python {

namespace {

using runtime::IOSpec;
using runtime::Model;

/// The data pointers of the last run on this thread, as anvil saw them: inputs as handed to
/// Model::run, outputs as it returned them (tests check that the arrays use these, i.e. that
/// nothing was copied on the way in or out).
struct RunPointers {
  std::vector<uintptr_t> inputs, outputs;
};
thread_local RunPointers t_last_run;

/// A loaded model shared by the Python object and any run in flight.
struct PyModel {
  std::shared_ptr<const Model> model;
};

std::string input_where(const std::vector<IOSpec>& specs, size_t i) {
  return i < specs.size() ? str("input ", i, " '", specs[i].name, "'") : str("input ", i);
}

/// Runs torch's current stream to completion on the inputs' device, so that work the caller
/// queued there (producing the inputs) is done before anvil's stream reads them. The run itself
/// returns complete, so its outputs are ready on any stream.
void wait_torch_current_stream(int device_index) {
  nb::module_ cuda = nb::module_::import_("torch.cuda");
  cuda.attr("current_stream")(device_index).attr("synchronize")();
}

/// Model.run / Model.__call__ (wait) and Model.enqueue: borrows the arrays, runs without the
/// GIL, wraps the outputs.
std::vector<nb::object> run_arrays(const PyModel& self, const nb::args& args, bool wait) {
  const Model& m = *self.model;
  const std::vector<IOSpec>& specs = m.input_specs();
  std::vector<nb::ndarray<nb::ro>> arrays(args.size());
  std::vector<Tensor> inputs;
  inputs.reserve(args.size());
  Framework framework = Framework::kNumpy;
  int cuda_device = -1;
  for (size_t i = 0; i < args.size(); ++i) {
    nb::handle a = args[i];
    if (!nb::try_cast(a, arrays[i], false))
      throw Error("input is not an array", input_where(specs, i),
                  "a NumPy array or torch tensor (the buffer protocol or __dlpack__)",
                  nb::type_name(a.type()).c_str());
    const Framework f = framework_of(a);
    if (i == 0) framework = f;
    const DType* want = i < specs.size() ? &specs[i].dtype : nullptr;
    inputs.push_back(borrow_array(arrays[i], input_where(specs, i), want));
    if (!inputs.back().device().is_cpu()) {
      cuda_device = inputs.back().device().index;
      if (f == Framework::kTorch) framework = f;
    }
    if (i < specs.size() && specs[i].mutated && nb::hasattr(a, "flags") &&
        !nb::cast<bool>(a.attr("flags").attr("writeable")))
      throw Error("the model writes this input but the array is read-only", input_where(specs, i),
                  "a writeable array", "a read-only array");
  }
  if (cuda_device >= 0 && framework == Framework::kTorch) wait_torch_current_stream(cuda_device);
  std::vector<Tensor> outputs;
  {
    nb::gil_scoped_release release;
    outputs = wait ? m.run(inputs) : m.enqueue(inputs);
  }
  t_last_run.inputs.clear();
  t_last_run.outputs.clear();
  for (const Tensor& t : inputs)
    t_last_run.inputs.push_back(reinterpret_cast<uintptr_t>(t.numel() ? t.data_ptr() : nullptr));
  std::vector<nb::object> result;
  result.reserve(outputs.size());
  for (const Tensor& t : outputs) {
    t_last_run.outputs.push_back(reinterpret_cast<uintptr_t>(t.numel() ? t.data_ptr() : nullptr));
    result.push_back(export_tensor(t, framework));
  }
  return result;
}

nb::dict spec_dict(const IOSpec& s) {
  nb::dict d;
  d["name"] = s.name;
  d["dtype"] = dtype_name(s.dtype);
  d["sizes"] = s.sizes;
  nb::list ranges;
  for (const SymRange& r : s.ranges) ranges.append(nb::make_tuple(r.min, r.max));
  d["ranges"] = ranges;
  d["mutated"] = s.mutated;
  return d;
}

nb::list spec_list(const std::vector<IOSpec>& specs) {
  nb::list l;
  for (const IOSpec& s : specs) l.append(spec_dict(s));
  return l;
}

/// A host copy of `t` as a NumPy array (constants are handed out as copies).
nb::object host_array(const Tensor& t) {
  return export_tensor(t.device().is_cpu() ? t : t.to(Device::cpu()), Framework::kNumpy);
}

codegen::ProgressMode progress_mode(const std::string& s) {
  if (s == "auto") return codegen::ProgressMode::kAuto;
  if (s == "bar") return codegen::ProgressMode::kBar;
  if (s == "lines") return codegen::ProgressMode::kLines;
  if (s == "quiet") return codegen::ProgressMode::kQuiet;
  throw Error("unknown progress mode", "anvil.compile", "auto, bar, lines or quiet", s);
}

nb::dict report_dict(const driver::CompileReport& r) {
  nb::dict d;
  d["package_path"] = r.package_path;
  d["target"] = r.target;
  d["cpu_features"] = r.cpu_features;
  d["cache_hit"] = r.cache_hit;
  d["num_kernels"] = r.num_kernels;
  d["num_loop_kernels"] = r.num_loop_kernels;
  d["num_gemms"] = r.num_gemms;
  d["num_externs"] = r.num_externs;
  d["graph_nodes"] = r.graph_nodes;
  d["planned_peak_bytes"] = r.planned_peak_bytes;
  d["package_bytes"] = r.package_bytes;
  d["weights_bytes"] = r.weights_bytes;
  d["num_constants"] = r.num_constants;
  d["units_compiled"] = r.units_compiled;
  d["units_cached"] = r.units_cached;
  nb::dict t;
  t["import"] = r.import_s;
  t["passes"] = r.passes_s;
  t["codegen"] = r.codegen_s;
  t["build"] = r.build_s;
  t["package"] = r.package_s;
  t["tune"] = r.tune_s;
  t["total"] = r.total_s;
  d["seconds"] = t;
  d["tune_warnings"] = r.tune_warnings;
  return d;
}

/// driver::compile_pt2 (out_path given) or cached_package_for (out_path empty), GIL released.
nb::dict compile_pt2(const std::string& pt2, const std::string& out_path, const std::string& target,
                     const std::string& cache_dir, int jobs, const std::string& emit_source,
                     const std::string& include_dir, const std::string& progress,
                     const std::string& autotune) {
  driver::CompileOptions o;
  o.target = target;
  o.cache_dir = cache_dir;
  o.jobs = jobs;
  o.emit_source_dir = emit_source;
  o.include_dir = include_dir;
  o.progress = progress_mode(progress);
  if (!autotune.empty()) o.gemm.mode = codegen::gemm::parse_autotune_mode(autotune);
  o.gemm.jobs = jobs;
  driver::CompileReport r;
  {
    nb::gil_scoped_release release;
    if (out_path.empty()) {
      r.package_path = driver::cached_package_for(pt2, o, &r);
    } else {
      r = driver::compile_pt2(pt2, out_path, o);
    }
  }
  return report_dict(r);
}

}  // namespace

}  // namespace anvil::python

NB_MODULE(_anvil, m) {
  using namespace anvil;
  using namespace anvil::python;
  m.doc() = "anvil's C++ API: runtime::Model and the compile driver (use the anvil package)";
  nb::exception<Error>(m, "Error", PyExc_RuntimeError);

  m.def("version", [] { return std::string(driver::anvil_version()); });
  m.def("target_names", [] {
    std::vector<std::string> names;
    for (const std::string& n : codegen::target_names())
      if (n != "generic") names.push_back(n);
    return names;
  });
  m.def("default_cache_dir", [] { return codegen::default_cache_dir(); });
  m.def("compile_pt2", &compile_pt2, "pt2"_a, "out_path"_a, "target"_a = "native",
        "cache_dir"_a = "", "jobs"_a = 0, "emit_source"_a = "", "include_dir"_a = "",
        "progress"_a = "quiet", "autotune"_a = "",
        "Compiles a .pt2 into a package at out_path (or into the package cache when out_path is "
        "empty); returns the compile report as a dict.");
  m.def("package_device",
        [](const std::string& path) { return runtime::package_device(path).str(); });
  m.def("world_initialized", [] { return dist::world_initialized(); });
  m.def(
      "_last_run_pointers", [] { return std::make_pair(t_last_run.inputs, t_last_run.outputs); },
      "Data pointers of this thread's last run: (inputs as anvil read them, outputs as anvil "
      "wrote them).");

  nb::class_<PyModel>(m, "Model", "A loaded .anvil package (runtime::Model).")
      .def_static(
          "load",
          [](const std::string& path, const std::string& device, int num_runners, int num_threads,
             bool cuda_graphs) {
            runtime::ModelOptions o;
            o.device = Device::parse(device);
            o.num_runners = num_runners;
            o.num_threads = num_threads;
            o.cuda_graphs = cuda_graphs;
            std::shared_ptr<const runtime::Model> model;
            {
              nb::gil_scoped_release release;
              model = std::make_shared<const runtime::Model>(runtime::Model::load(path, o));
            }
            return PyModel{std::move(model)};
          },
          "path"_a, "device"_a = "cpu", "num_runners"_a = 1, "num_threads"_a = 0,
          "cuda_graphs"_a = true)
      .def(
          "run",
          [](const PyModel& self, const nb::args& args) { return run_arrays(self, args, true); },
          "Runs the model; returns the list of outputs.")
      .def(
          "enqueue",
          [](const PyModel& self, const nb::args& args) { return run_arrays(self, args, false); },
          "Device packages: queues the run on the runner's stream and returns its outputs at once; "
          "they hold the results after synchronize(), and the inputs must stay alive and "
          "unchanged until then. CPU packages: run().")
      .def(
          "synchronize",
          [](const PyModel& s) {
            nb::gil_scoped_release release;
            s.model->synchronize();
          },
          "Waits for every enqueued run; raises anvil.Error when one failed.")
      .def(
          "__call__",
          [](const PyModel& self, const nb::args& args) -> nb::object {
            std::vector<nb::object> out = run_arrays(self, args, true);
            if (out.size() == 1) return out[0];
            nb::tuple t = nb::steal<nb::tuple>(PyTuple_New(static_cast<Py_ssize_t>(out.size())));
            for (size_t i = 0; i < out.size(); ++i)
              PyTuple_SET_ITEM(t.ptr(), static_cast<Py_ssize_t>(i), out[i].release().ptr());
            return t;
          },
          "Runs the model; returns its output, or a tuple when it has several.")
      .def_prop_ro("input_specs",
                   [](const PyModel& s) { return spec_list(s.model->input_specs()); })
      .def_prop_ro("output_specs",
                   [](const PyModel& s) { return spec_list(s.model->output_specs()); })
      .def_prop_ro("device", [](const PyModel& s) { return s.model->device().str(); })
      .def_prop_ro("num_runners", [](const PyModel& s) { return s.model->num_runners(); })
      .def_prop_ro("target", [](const PyModel& s) { return s.model->manifest().target; })
      .def_prop_ro("manifest_json", [](const PyModel& s) { return s.model->manifest().json; })
      .def_prop_ro("metadata_json", [](const PyModel& s) { return s.model->metadata_json(); })
      .def_prop_ro("uses_cuda_graphs", [](const PyModel& s) { return s.model->uses_cuda_graphs(); })
      .def("constant_names", [](const PyModel& s) { return s.model->constant_names(); })
      .def("constant_original_names",
           [](const PyModel& s) { return s.model->constant_original_names(); })
      .def(
          "constant",
          [](const PyModel& s, const std::string& name) {
            return host_array(s.model->constant(name));
          },
          "name"_a, "A copy of the constant's current value (a NumPy array).")
      .def(
          "update_constants",
          [](const PyModel& s, const nb::dict& values, bool inactive, bool require_full) {
            std::map<std::string, Tensor> tensors;
            std::vector<nb::ndarray<nb::ro>> arrays;
            arrays.reserve(values.size());
            for (auto [k, v] : values) {
              const std::string name = nb::cast<std::string>(k);
              const std::string where = "constant '" + name + "'";
              arrays.emplace_back();
              if (!nb::try_cast(v, arrays.back(), false))
                throw Error("value is not an array", where, "a NumPy array or torch tensor",
                            nb::type_name(v.type()).c_str());
              tensors[name] = borrow_array(arrays.back(), where, nullptr);
            }
            nb::gil_scoped_release release;
            // Const: the Model's constant sets are guarded by its own locks (model.h).
            const_cast<runtime::Model&>(*s.model).update_constants(tensors, inactive, require_full);
          },
          "values"_a, "inactive"_a = false, "require_full"_a = false)
      .def("swap_constants",
           [](const PyModel& s) { const_cast<runtime::Model&>(*s.model).swap_constants(); })
      .def(
          "set_profiling", [](const PyModel& s, bool on) { s.model->set_profiling(on); }, "on"_a)
      .def(
          "set_check_nan_inf", [](const PyModel& s, bool on) { s.model->set_check_nan_inf(on); },
          "on"_a)
      .def("reset_profile", [](const PyModel& s) { s.model->reset_profile(); })
      .def("profile",
           [](const PyModel& s) {
             nb::list l;
             for (const runtime::StepProfile& p : s.model->profile()) {
               nb::dict d;
               d["name"] = p.name;
               d["kind"] = p.kind;
               d["nodes"] = p.nodes;
               d["calls"] = p.calls;
               d["total_ms"] = p.total_ms;
               d["bytes"] = p.bytes;
               d["gb_per_s"] = p.gb_per_s();
               l.append(d);
             }
             return l;
           })
      .def(
          "_time_cpp_run",
          [](const PyModel& s, const nb::list& args, int iters) {
            // Model::run timed in a C++ loop on the same borrowed inputs: the floor the Python
            // call overhead is measured against (bench/python_overhead.py).
            std::vector<nb::ndarray<nb::ro>> arrays(args.size());
            std::vector<Tensor> inputs;
            for (size_t i = 0; i < args.size(); ++i) {
              if (!nb::try_cast(args[i], arrays[i], false))
                throw Error("input is not an array", str("input ", i), "an array", "other");
              inputs.push_back(borrow_array(arrays[i], str("input ", i), nullptr));
            }
            std::vector<double> ns(static_cast<size_t>(iters));
            nb::gil_scoped_release release;
            for (int k = 0; k < iters; ++k) {
              const auto t0 = std::chrono::steady_clock::now();
              std::vector<Tensor> out = s.model->run(inputs);
              const auto t1 = std::chrono::steady_clock::now();
              ns[static_cast<size_t>(k)] =
                  std::chrono::duration<double, std::nano>(t1 - t0).count();
            }
            return ns;
          },
          "inputs"_a, "iters"_a,
          "Nanoseconds of each of `iters` C++ Model::run calls on these inputs.");
}
