// Model::run: input checks, output allocation, runner pool and the call into model.so.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>

#include "core/env_switch.h"
#include "core/error.h"
#include "runtime/collectives.h"
#include "runtime/model_impl.h"
#include "runtime/nan_check.h"
#include "runtime/rt_api.h"

namespace anvil::runtime {

namespace {

/// A contiguous tensor in fresh memory of `device` (64-byte aligned on the host), not
/// zero-filled (the model writes it).
Tensor allocate_output(const Shape& sizes, DType dtype, Device device) {
  const size_t nbytes = static_cast<size_t>(shape_numel(sizes)) * dtype_size(dtype);
  if (!device.is_cpu())
    return Tensor(Storage::allocate(nbytes, device, /*zero=*/false), dtype, sizes,
                  Tensor::contiguous_strides(sizes), 0);
  // Large outputs reuse freed blocks (core/storage.cpp), so they are not page-faulted in anew
  // on every run.
  return Tensor(Storage::allocate_uninitialized(nbytes), dtype, sizes,
                Tensor::contiguous_strides(sizes), 0);
}

std::string input_where(const IOSpec& spec, size_t i) {
  return str("Model::run: input '", spec.name, "' (#", i, ")");
}

/// Checks a just-determined symbol value against its range.
void check_range(const SymbolSpec& s, int64_t v, const std::string& where, int64_t dim) {
  if (v < s.range.min)
    throw Error(str("dim ", dim, " (symbol ", s.name, ") value is too small"), where,
                str(">= ", s.range.min, " (range ", s.range.str(), ")"), std::to_string(v));
  if (v > s.range.max)
    throw Error(str("dim ", dim, " (symbol ", s.name, ") value is too large"), where,
                str("<= ", s.range.max, " (range ", s.range.str(), ")"), std::to_string(v));
}

/// AnvilRunArgs::after_step: the run's NaN / Inf check after step `step`
/// (RunContext::after_step); an Error becomes the run's error.
int run_after_step(void* run_ctx, int32_t step) {
  auto* ctx = static_cast<RunContext*>(run_ctx);
  if (!ctx || !ctx->after_step) return 0;
  try {
    ctx->after_step(step);
    return 0;
  } catch (const std::exception& e) {
    ctx->set_error(e.what());
    return 1;
  }
}

/// The bytes of `t`'s storage from its first element on (what a run may touch through it).
RunMemory::Region region_of(const void* p, const std::shared_ptr<Storage>& st) {
  if (!p || !st || !st->data()) return {};
  const auto* begin = static_cast<const char*>(st->data());
  const auto* at = static_cast<const char*>(p);
  if (at < begin || at > begin + st->nbytes()) return {};
  return {p, st->nbytes() - static_cast<size_t>(at - begin)};
}

/// RAII: a runner taken from the pool and returned on scope exit.
class RunnerLease {
 public:
  explicit RunnerLease(Model::Impl& impl) : impl_(impl), index_(impl.acquire_runner()) {}
  ~RunnerLease() { impl_.release_runner(index_); }
  Runner& runner() { return impl_.runners[static_cast<size_t>(index_)]; }

 private:
  Model::Impl& impl_;
  int index_;
};

}  // namespace

void Model::Impl::plan_input_checks() {
  const Manifest& m = package->manifest();
  SymRanges ranges;
  for (const SymbolSpec& s : m.symbols) ranges[s.name] = s.range;
  auto make_spec = [&](const TensorSpec& t) {
    IOSpec spec;
    spec.name = t.name;
    spec.dtype = t.dtype;
    spec.sizes = t.size_strings();
    for (const SymInt& s : t.sizes) spec.ranges.push_back(s.bounds(ranges));
    spec.mutated = t.mutated;
    return spec;
  };
  for (const TensorSpec& t : m.inputs) input_specs.push_back(make_spec(t));
  for (const TensorSpec& t : m.outputs) output_specs.push_back(make_spec(t));

  bind_site.assign(m.symbols.size(), {-1, -1});
  std::set<std::string> in_expressions;
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    std::vector<DimRule> rules;
    for (size_t d = 0; d < m.inputs[i].sizes.size(); ++d) {
      const SymInt& s = m.inputs[i].sizes[d];
      DimRule rule;
      if (auto v = s.maybe_constant()) {
        rule.kind = DimRule::Kind::kStatic;
        rule.value = *v;
      } else if (auto name = s.as_symbol()) {
        rule.symbol = m.symbol_index(*name);
        auto& site = bind_site[static_cast<size_t>(rule.symbol)];
        if (site.first < 0) {
          rule.kind = DimRule::Kind::kBind;
          site = {static_cast<int>(i), static_cast<int>(d)};
        } else {
          rule.kind = DimRule::Kind::kSame;
        }
      } else {
        rule.kind = DimRule::Kind::kExpr;
        rule.expr = s;
        std::set<std::string> used;
        s.collect_symbols(used);
        for (const std::string& name : used) rule.expr_symbols.push_back(m.symbol_index(name));
        in_expressions.insert(used.begin(), used.end());
        has_expr_dims = true;
      }
      rules.push_back(rule);
    }
    input_rules.push_back(std::move(rules));
  }
  for (size_t k = 0; k < m.symbols.size(); ++k)
    ANVIL_CHECK(bind_site[k].first >= 0 || in_expressions.count(m.symbols[k].name),
                "Model::load(" + path + ")",
                "a symbol appears in no input's sizes (data-dependent sizes are not supported yet)",
                "every symbol in some input dim", m.symbols[k].name);
}

void Model::Impl::check_inputs(const std::vector<Tensor>& inputs,
                               std::vector<int64_t>& symbols) const {
  const Manifest& m = package->manifest();
  ANVIL_CHECK(inputs.size() == input_specs.size(), "Model::run", "wrong number of inputs",
              std::to_string(input_specs.size()), std::to_string(inputs.size()));
  symbols.assign(m.symbols.size(), 0);
  std::vector<bool> bound(m.symbols.size(), false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const IOSpec& spec = input_specs[i];
    // Messages are built only when a check fails.
    auto where = [&] { return input_where(spec, i); };
    ANVIL_CHECK(t.defined(), where(), "input is undefined", "a tensor", "undefined");
    ANVIL_CHECK(t.device() == options.device || (t.device().is_cpu() && options.device.is_cpu()),
                where(), "input is on the wrong device", options.device.str(), t.device().str());
    ANVIL_CHECK(t.dtype() == spec.dtype, where(), "unmatched dtype", dtype_name(spec.dtype),
                dtype_name(t.dtype()));
    ANVIL_CHECK(t.dim() == static_cast<int64_t>(spec.sizes.size()), where(), "wrong number of dims",
                str(
                    spec.sizes.size(), " dims [",
                    [&] {
                      std::string s;
                      for (const std::string& d : spec.sizes) s += (s.empty() ? "" : ", ") + d;
                      return s;
                    }(),
                    "]"),
                str(t.dim(), " dims ", shape_str(t.sizes())));
    const std::vector<DimRule>& rules = input_rules[i];
    for (size_t d = 0; d < rules.size(); ++d) {
      const DimRule& r = rules[d];
      const int64_t v = t.sizes()[d];
      switch (r.kind) {
        case DimRule::Kind::kStatic:
          if (v != r.value)
            throw Error(str("unmatched dim value at dim ", d), where(), std::to_string(r.value),
                        std::to_string(v));
          break;
        case DimRule::Kind::kBind:
          if (!m.symbols[r.symbol].range.contains(v))
            check_range(m.symbols[r.symbol], v, where(), static_cast<int64_t>(d));
          symbols[r.symbol] = v;
          bound[r.symbol] = true;
          break;
        case DimRule::Kind::kSame:
          if (v != symbols[r.symbol]) {
            const auto [bi, bd] = bind_site[r.symbol];
            throw Error(
                str("dim ", d, " (symbol ", m.symbols[r.symbol].name, ") differs from dim ", bd,
                    " of input '", input_specs[bi].name, "', which must have the same size"),
                where(), std::to_string(symbols[r.symbol]), std::to_string(v));
          }
          break;
        case DimRule::Kind::kExpr:
          break;
      }
    }
  }
  if (!has_expr_dims) return;

  // Symbols that appear only inside expressions: solve dims that are linear in one unknown.
  auto env_of = [&] {
    SymEnv env;
    for (size_t k = 0; k < m.symbols.size(); ++k)
      if (bound[k]) env[m.symbols[k].name] = symbols[k];
    return env;
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (size_t i = 0; i < inputs.size(); ++i) {
      for (size_t d = 0; d < input_rules[i].size(); ++d) {
        const DimRule& r = input_rules[i][d];
        if (r.kind != DimRule::Kind::kExpr) continue;
        int k = -1, unknowns = 0;
        for (int s : r.expr_symbols)
          if (!bound[s]) {
            k = s;
            ++unknowns;
          }
        if (unknowns != 1) continue;
        const std::string& name = m.symbols[k].name;
        SymEnv env = env_of();
        env[name] = 0;
        const int64_t f0 = r.expr.evaluate(env);
        env[name] = 1;
        const int64_t slope = r.expr.evaluate(env) - f0;
        const int64_t v = inputs[i].sizes()[d];
        if (slope == 0 || (v - f0) % slope != 0)
          throw Error(
              str("dim ", d, " (", r.expr.str(), ") cannot be matched by any value of ", name),
              input_where(input_specs[i], i), r.expr.str(), std::to_string(v));
        const int64_t value = (v - f0) / slope;
        check_range(m.symbols[k], value, input_where(input_specs[i], i), static_cast<int64_t>(d));
        symbols[k] = value;
        bound[k] = true;
        progress = true;
      }
    }
  }
  const SymEnv env = env_of();
  for (size_t i = 0; i < inputs.size(); ++i) {
    for (size_t d = 0; d < input_rules[i].size(); ++d) {
      const DimRule& r = input_rules[i][d];
      if (r.kind != DimRule::Kind::kExpr) continue;
      for (int s : r.expr_symbols)
        ANVIL_CHECK(bound[s], input_where(input_specs[i], i),
                    str("dim ", d, " (", r.expr.str(), ") uses a symbol no input determines"),
                    "a bound symbol", m.symbols[s].name);
      const int64_t want = r.expr.evaluate(env);
      const int64_t v = inputs[i].sizes()[d];
      if (v != want) {
        std::string binding;
        for (int s : r.expr_symbols)
          binding += str(binding.empty() ? "" : ", ", m.symbols[s].name, "=", symbols[s]);
        throw Error(
            str("unmatched dim value at dim ", d, " (", r.expr.str(), " with ", binding, ")"),
            input_where(input_specs[i], i), std::to_string(want), std::to_string(v));
      }
    }
  }
}

int Model::Impl::acquire_runner() {
  std::unique_lock<std::mutex> lock(runners_mutex);
  runners_cv.wait(lock, [this] { return !free_runners.empty(); });
  const int r = free_runners.back();
  free_runners.pop_back();
  return r;
}

void Model::Impl::release_runner(int r) {
  {
    std::lock_guard<std::mutex> lock(runners_mutex);
    free_runners.push_back(r);
  }
  runners_cv.notify_one();
}

namespace {

/// [first, last) bytes a tensor's elements occupy (empty for no elements).
std::pair<uintptr_t, uintptr_t> byte_extent(const Tensor& t) {
  if (t.numel() == 0) return {0, 0};
  int64_t lo = 0, hi = 0;
  for (size_t d = 0; d < t.sizes().size(); ++d) {
    const int64_t span = t.strides()[d] * (t.sizes()[d] - 1);
    (span < 0 ? lo : hi) += span;
  }
  const auto base = reinterpret_cast<uintptr_t>(t.data_ptr());
  const auto es = static_cast<int64_t>(t.element_size());
  return {base + static_cast<uintptr_t>(lo * es), base + static_cast<uintptr_t>((hi + 1) * es)};
}

}  // namespace

void Model::Impl::check_written_inputs(const std::vector<Tensor>& inputs) const {
  // An input the model writes must not share memory with itself (a stride-0 broadcast) or with
  // another input: eager refuses such writes too, and run()'s pointers are declared unaliased.
  for (size_t i = 0; i < inputs.size() && i < input_specs.size(); ++i) {
    if (!input_specs[i].mutated) continue;
    const Tensor& t = inputs[i];
    for (size_t d = 0; d < t.sizes().size(); ++d)
      ANVIL_CHECK(t.strides()[d] != 0 || t.sizes()[d] <= 1, input_where(input_specs[i], i),
                  "the model writes this input, but several of its elements share memory",
                  "an input without stride-0 dims", str("stride 0 at dim ", d));
    const auto a = byte_extent(t);
    for (size_t j = 0; j < inputs.size(); ++j) {
      if (j == i || a.first == a.second) continue;
      const auto b = byte_extent(inputs[j]);
      ANVIL_CHECK(b.first == b.second || b.second <= a.first || a.second <= b.first,
                  input_where(input_specs[i], i),
                  str("the model writes this input, which shares memory with input '",
                      input_specs[j].name, "' (#", j, ")"),
                  "inputs in separate memory", "overlapping memory");
    }
  }
}

namespace {

/// One copy of run()'s host tensors on the runner's stream (device_copy's call without its
/// throw: a failure here becomes the run's error, so the stream is still drained and any
/// collective finished before the buffers are freed). "" or what failed.
std::string copy_on_stream(const Model::Impl& impl, void* dst, const void* src, size_t bytes,
                           int direction, void* stream, const std::string& what) {
  if (bytes == 0 ||
      impl.device_api->copy(impl.options.device.index, dst, src, bytes, direction, stream) == 0)
    return "";
  return str("cannot copy ", what, ": ", impl.device_api->last_error());
}

/// run() with host inputs: each into its device buffer. "" or what failed.
std::string copy_host_inputs(const Model::Impl& impl, const Model::HostIo& io,
                             const std::vector<Tensor>& device_inputs, void* stream) {
  for (size_t i = 0; i < device_inputs.size() && i < io.host_inputs->size(); ++i) {
    const Tensor& h = (*io.host_inputs)[i];
    std::string e = copy_on_stream(impl, device_inputs[i].data_ptr(), h.data_ptr(), h.nbytes(),
                                   ANVIL_COPY_HOST_TO_DEVICE, stream,
                                   str("input #", i, " to ", impl.options.device.str()));
    if (!e.empty()) return e;
  }
  return "";
}

/// run() with host inputs: the contiguous outputs into fresh host tensors; the others are left
/// for the caller (undefined entries). "" or what failed.
std::string copy_host_outputs(const Model::Impl& impl, const Model::HostIo& io,
                              const std::vector<Tensor>& outputs, void* stream) {
  io.host_outputs->assign(outputs.size(), Tensor());
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Tensor& d = outputs[o];
    if (!d.defined() || !d.is_contiguous()) continue;
    Tensor h = Tensor::empty(d.sizes(), d.dtype());
    std::string e = copy_on_stream(impl, h.data_ptr(), d.data_ptr(), d.nbytes(),
                                   ANVIL_COPY_DEVICE_TO_HOST, stream,
                                   str("output #", o, " from ", impl.options.device.str()));
    if (!e.empty()) {
      io.host_outputs->assign(outputs.size(), Tensor());  // none half-copied: the run fails
      return e;
    }
    (*io.host_outputs)[o] = std::move(h);
  }
  return "";
}

}  // namespace

std::vector<Tensor> Model::run(const std::vector<Tensor>& inputs) const {
  ANVIL_CHECK(impl_ != nullptr, "Model::run", "model was moved from", "a loaded model", "none");
  const Device device = impl_->options.device;
  const bool host_in = !device.is_cpu() && !inputs.empty() &&
                       std::all_of(inputs.begin(), inputs.end(), [](const Tensor& t) {
                         return t.defined() && t.device().is_cpu();
                       });
  if (!host_in) return run_impl(inputs, /*wait=*/true);
  // Host tensors in for a device package: copied to the device and the outputs back on the
  // runner's stream, around the run, with one synchronize (not a copy and a synchronize of the
  // legacy default stream each, which every thread's copies share); inputs the model writes are
  // updated in the caller's memory (the caller keeps host memory). ANVIL_RUNNER_STREAM_COPIES=0:
  // the copies of session 23 and before, through the legacy default stream (for comparisons).
  static const bool runner_copies = env_switch("ANVIL_RUNNER_STREAM_COPIES", true);
  std::vector<Tensor> host_inputs, on_device, host_outputs;
  for (const Tensor& t : inputs) {
    if (!runner_copies) {
      on_device.push_back(t.to(device));
      continue;
    }
    // (a wrong dtype or shape is refused by run_impl's checks, naming the input)
    host_inputs.push_back(t.is_contiguous() ? t : t.contiguous());
    on_device.push_back(Tensor(Storage::allocate(t.nbytes(), device, /*zero=*/false), t.dtype(),
                               t.sizes(), Tensor::contiguous_strides(t.sizes()), 0));
  }
  const HostIo io{&host_inputs, &host_outputs};
  std::vector<Tensor> outs = run_impl(on_device, /*wait=*/true, runner_copies ? &io : nullptr);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (impl_->input_specs[i].mutated) {
      Tensor caller = inputs[i];
      caller.copy_from(on_device[i].to(Device::cpu()));
    }
  for (size_t o = 0; o < outs.size(); ++o)
    outs[o] = o < host_outputs.size() && host_outputs[o].defined() ? host_outputs[o]
                                                                   : outs[o].to(Device::cpu());
  return outs;
}

std::vector<Tensor> Model::enqueue(const std::vector<Tensor>& inputs) const {
  return run_impl(inputs, /*wait=*/false);
}

void Model::synchronize() const {
  ANVIL_CHECK(impl_ != nullptr, "Model::synchronize", "model was moved from", "a loaded model",
              "none");
  Impl& impl = *impl_;
  if (!impl.device_api) return;
  for (const Runner& r : impl.runners)  // fixed at load: no lock needed to read the streams
    if (impl.device_api->stream_synchronize(impl.options.device.index, r.stream) != 0)
      throw Error(str("a queued run failed on ", impl.options.device.str(), ": ",
                      impl.device_api->last_error()),
                  "Model::synchronize(" + impl.path + ")");
}

bool Model::uses_cuda_graphs() const { return impl_ && impl_->graphs; }

std::vector<Tensor> Model::run_impl(const std::vector<Tensor>& inputs, bool wait,
                                    const HostIo* host_io) const {
  ANVIL_CHECK(impl_ != nullptr, "Model::run", "model was moved from", "a loaded model", "none");
  Impl& impl = *impl_;
  std::vector<int64_t> symbols;
  impl.check_inputs(inputs, symbols);
  wait_pending_inputs(inputs);  // collectives issued on them before the call (a no-op without)

  impl.check_written_inputs(inputs);

  // Inputs the generated code can read: contiguous and element-aligned (else a copy).
  std::vector<Tensor> used(inputs.size());  // what run() reads: the input or a contiguous copy
  std::vector<void*> in_ptrs(inputs.size());
  const Device device = impl.options.device;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const bool aligned = reinterpret_cast<uintptr_t>(t.data_ptr()) % t.element_size() == 0;
    if (!device.is_cpu())  // no device-side gather yet: the caller makes it contiguous
      ANVIL_CHECK(t.is_contiguous() && aligned, input_where(impl.input_specs[i], i),
                  str("a non-contiguous input on ", device.str(), " is not supported yet"),
                  "a contiguous tensor", str("strides ", shape_str(t.strides())));
    used[i] = t.is_contiguous() && aligned ? t : t.clone();
    in_ptrs[i] = used[i].data_ptr();
  }

  auto where = [&] { return "Model::run(" + impl.path + ")"; };
  std::vector<Tensor> outputs;
  std::vector<void*> out_ptrs;
  // Outputs that are the same tensor or views of one another share one storage; outputs that
  // are views of an input view the memory run() reads (the caller's tensor, or its copy).
  const bool layouts = impl.entry->abi_version >= 2 && impl.entry->output_layout != nullptr;
  std::vector<bool> late(impl.output_specs.size(), false);  // allocated by run() (base_kind 3)
  for (size_t o = 0; o < impl.output_specs.size(); ++o) {
    const size_t rank = impl.output_specs[o].sizes.size();
    const DType dtype = impl.output_specs[o].dtype;
    int64_t sizes[8] = {0};
    impl.entry->output_sizes(symbols.data(), static_cast<int32_t>(o), sizes);
    Shape shape(sizes, sizes + rank);
    for (int64_t s : shape)
      ANVIL_CHECK(s >= 0, where(), str("model.so gave output ", o, " a negative size"), ">= 0",
                  shape_str(shape));
    if (!layouts) {
      outputs.push_back(allocate_output(shape, dtype, device));
      out_ptrs.push_back(outputs.back().data_ptr());
      continue;
    }
    AnvilRtOutputLayout layout{};
    impl.entry->output_layout(symbols.data(), static_cast<int32_t>(o), &layout);
    const Shape strides(layout.strides, layout.strides + rank);
    if (layout.base_kind == 3) {  // sized by run-time values: run() allocates it
      late[o] = true;
      out_ptrs.push_back(nullptr);
      outputs.emplace_back();
      continue;
    }
    Tensor base;  // contiguous 1-d storage the output views
    switch (layout.base_kind) {
      case 0:
        ANVIL_CHECK(layout.storage_numel >= 0, where(),
                    str("model.so gave output ", o, " a negative storage size"), ">= 0",
                    std::to_string(layout.storage_numel));
        base = allocate_output({layout.storage_numel}, dtype, device);
        break;
      case 1:
        ANVIL_CHECK(layout.base_index >= 0 && static_cast<size_t>(layout.base_index) < o, where(),
                    str("output ", o, " aliases an output that is not before it"),
                    str("an index < ", o), std::to_string(layout.base_index));
        ANVIL_CHECK(!late[static_cast<size_t>(layout.base_index)], where(),
                    str("output ", o, " aliases an output allocated during the run"),
                    "an output allocated before the run",
                    str("output ", layout.base_index));
        base = outputs[static_cast<size_t>(layout.base_index)];
        base = Tensor(base.storage(), dtype, {static_cast<int64_t>(base.storage()->nbytes() /
                                                                   dtype_size(dtype))},
                      {1}, 0);
        break;
      case 2: {
        ANVIL_CHECK(layout.base_index >= 0 && static_cast<size_t>(layout.base_index) < inputs.size(),
                    where(), str("output ", o, " aliases an unknown input"),
                    str("an index < ", inputs.size()), std::to_string(layout.base_index));
        const Tensor& src = used[static_cast<size_t>(layout.base_index)];
        ANVIL_CHECK(src.dtype() == dtype, where(), str("output ", o, " views an input of another dtype"),
                    dtype_name(dtype), dtype_name(src.dtype()));
        base = Tensor(src.storage(), dtype, {src.numel()}, {1}, src.storage_offset());
        break;
      }
      default:
        throw Error(str("model.so gave output ", o, " an unknown layout kind"), where(),
                    "0, 1, 2 or 3", std::to_string(layout.base_kind));
    }
    // The view must lie inside its storage.
    int64_t lo = layout.offset, hi = layout.offset;
    bool empty = false;
    for (size_t d = 0; d < rank; ++d) {
      if (shape[d] == 0) empty = true;
      const int64_t span = (shape[d] > 0 ? shape[d] - 1 : 0) * strides[d];
      (span < 0 ? lo : hi) += span;
    }
    ANVIL_CHECK(empty || (lo >= 0 && hi < base.numel()), where(),
                str("model.so gave output ", o, " a view outside its storage"),
                str("elements in [0, ", base.numel(), ")"), str("[", lo, ", ", hi, "]"));
    out_ptrs.push_back(base.data_ptr());
    outputs.push_back(base.as_strided(shape, strides, base.storage_offset() + layout.offset));
  }

  std::shared_ptr<const ConstantSet> constants;
  {
    std::lock_guard<std::mutex> lock(impl.constants_mutex);
    constants = impl.active;
  }

  RunnerLease lease(impl);
  Runner& runner = lease.runner();
  const int64_t arena_bytes = impl.entry->arena_bytes(symbols.data());
  ANVIL_CHECK(arena_bytes >= 0, where(), "model.so asked for a negative arena", ">= 0",
              std::to_string(arena_bytes));
  if (!device.is_cpu()) {
    if (static_cast<size_t>(arena_bytes) > runner.arena_bytes || runner.arena == nullptr) {
      runner.arena_storage.reset();  // freed before the larger one is taken
      runner.arena_storage =
          Storage::allocate(std::max<size_t>(static_cast<size_t>(arena_bytes), 256), device,
                            /*zero=*/false);
      runner.arena = runner.arena_storage->data();
      runner.arena_bytes = runner.arena_storage->nbytes();
    }
  } else if (static_cast<size_t>(arena_bytes) > runner.arena_bytes || runner.arena == nullptr) {
    const size_t rounded = std::max<size_t>(
        kStorageAlignment, (static_cast<size_t>(arena_bytes) + kStorageAlignment - 1) /
                               kStorageAlignment * kStorageAlignment);
    void* p = std::aligned_alloc(kStorageAlignment, rounded);
    if (!p)
      throw Error("out of memory allocating the arena", where(), "", str(arena_bytes, " bytes"));
    std::free(runner.arena);
    runner.arena = p;
    runner.arena_bytes = rounded;
  }

  RunContext ctx;
  AnvilRunArgs args{};
  args.symbols = symbols.data();
  args.inputs = in_ptrs.data();
  args.outputs = out_ptrs.data();
  args.constants = constants->ptrs.data();
  args.arena = runner.arena;
  args.run_ctx = &ctx;
  args.stream = runner.stream;
  args.device_index = device.is_cpu() ? 0 : device.index;
  std::vector<int64_t> run_symbols(impl.package->manifest().run_time_symbols.size(), 0);
  args.run_symbols = run_symbols.empty() ? nullptr : run_symbols.data();
  const bool any_late = std::find(late.begin(), late.end(), true) != late.end();
  if (any_late) ctx.expect_late_outputs(out_ptrs.data(), late);
  const bool profiling = impl.profiling.load(std::memory_order_relaxed);
  std::vector<int64_t> step_ns(profiling ? impl.package->manifest().kernels.size() : 0, 0);
  args.step_ns = step_ns.empty() ? nullptr : step_ns.data();
  ctx.packed_weights = constants->packed.get();
  ctx.generator = impl.generator.get();
  ctx.stream = runner.stream;
  ctx.device_api = device.is_cpu() ? nullptr : impl.device_api;
  ctx.device_index = device.is_cpu() ? 0 : device.index;
  // The NaN / Inf check: where this run's memory is, for the scans after the steps.
  const bool check = impl.check_nan_inf.load(std::memory_order_relaxed);
  RunMemory memory;
  if (check) {
    const Manifest& mf = impl.package->manifest();
    for (size_t k = 0; k < mf.symbols.size(); ++k) memory.env[mf.symbols[k].name] = symbols[k];
    for (const Tensor& t : used) memory.inputs.push_back(region_of(t.data_ptr(), t.storage()));
    for (size_t o = 0; o < outputs.size(); ++o)
      memory.outputs.push_back(outputs[o].defined() ? region_of(out_ptrs[o], outputs[o].storage())
                                                    : RunMemory::Region{});
    for (size_t c = 0; c < constants->ptrs.size() && c < mf.constants.size(); ++c)
      memory.constants.push_back({constants->ptrs[c], static_cast<size_t>(mf.constants[c].nbytes)});
    memory.arena = {runner.arena, static_cast<size_t>(arena_bytes)};
    memory.device_api = impl.device_api;
    memory.device_index = ctx.device_index;
    memory.stream = runner.stream;
    ctx.after_step = [kernels = &mf.kernels, &memory](int32_t step) {
      ANVIL_CHECK(step >= 0 && static_cast<size_t>(step) < kernels->size(), "",
                  "NaN/Inf check: model.so named an unknown step",
                  str("a step < ", kernels->size()), std::to_string(step));
      check_step_finite((*kernels)[static_cast<size_t>(step)], static_cast<size_t>(step),
                        memory, "");
    };
    args.after_step = &run_after_step;
  }
  int rc = 0;
  {
    ScopedThreadPool scope(impl.pool);
    std::unique_lock<std::mutex> buffers_lock(impl.buffer_mutex, std::defer_lock);
    if (impl.has_mutable) buffers_lock.lock();
    if (impl.device_api && impl.device_api->set_device(device.index) != 0)
      throw Error(str("cannot make ", device.str(), " current"), where(), "success",
                  impl.device_api->last_error());
    // (a failed copy becomes the run's error: the stream is drained below before the buffers
    // go back to the allocator)
    std::string copy_error;
    if (host_io && impl.device_api)
      copy_error = copy_host_inputs(impl, *host_io, used, runner.stream);
    bool graphed = false;
    if (!copy_error.empty()) {
      ctx.set_error(copy_error);
    } else if (impl.graphs && !profiling && !check && !any_late &&
               std::none_of(impl.input_specs.begin(), impl.input_specs.end(),
                            [](const IOSpec& s) { return s.mutated; })) {
      std::vector<size_t> in_bytes, out_bytes;
      for (const Tensor& t : used) in_bytes.push_back(static_cast<size_t>(t.numel()) * t.element_size());
      for (size_t o = 0; o < outputs.size(); ++o) {  // the rest of the storage the pointer is in
        const auto& st = outputs[o].storage();
        out_bytes.push_back(st->nbytes() - static_cast<size_t>(static_cast<char*>(out_ptrs[o]) -
                                                               static_cast<char*>(st->data())));
      }
      graphed = impl.graph_run(runner, args, ctx, symbols, in_bytes, out_bytes, rc);
    }
    if (!graphed && copy_error.empty()) rc = impl.entry->run(runner.instance, &args);
    // Outputs the caller wants on the host, queued behind the run (a copy into pageable memory
    // returns once done: the synchronize below then finds the stream idle). Not for outputs
    // sized or allocated during the run: those are final only after it.
    if (host_io && impl.device_api && rc == 0 && !ctx.failed() && run_symbols.empty() &&
        !any_late) {
      copy_error = copy_host_outputs(impl, *host_io, outputs, runner.stream);
      if (!copy_error.empty()) ctx.set_error(copy_error);
    }
    // A device package queued its work on the runner's stream: the outputs are ready (and the
    // arena free for the next run) once the stream is done. Errors of queued kernels surface
    // here.
    // (enqueue(): the outputs are ready when synchronize() returns; a run needing values of the
    // device on the host waited inside run().)
    const bool must_wait =
        wait || profiling || rc != 0 || ctx.failed() || any_late || !run_symbols.empty();
    if (impl.device_api && must_wait &&
        impl.device_api->stream_synchronize(device.index, runner.stream) != 0)
      ctx.set_error(str("the run failed on ", device.str(), ": ",
                        impl.device_api->last_error()));
  }
  // A run that failed between a collective's issue and its wait: finish the transfer before
  // the runner's arena and the outputs are reused or freed.
  const size_t drained = finish_in_flight(ctx);
  if (rc != 0 || ctx.failed()) {
    std::string msg = ctx.failed() ? ctx.error() : str("model.so run() returned ", rc);
    if (drained > 0)
      msg += str(" (", drained, drained == 1 ? " collective" : " collectives",
                 " it had issued completed before returning)");
    throw Error(msg, where());
  }
  if (!run_symbols.empty()) impl.shape_data_dependent_outputs(symbols, run_symbols, ctx, outputs);
  if (profiling) {
    std::lock_guard<std::mutex> lock(impl.profile_mutex);
    impl.profile_ns.resize(step_ns.size(), 0);
    for (size_t i = 0; i < step_ns.size(); ++i) impl.profile_ns[i] += step_ns[i];
    ++impl.profile_runs;
    impl.profile_symbols = symbols;
  }
  for (size_t o = 0; o < outputs.size(); ++o)
    ANVIL_CHECK(outputs[o].defined(), where(),
                str("model.so did not allocate output ", o, " during the run"),
                "a call to api->output_alloc", "none");
  // Inputs the model writes reach the caller's tensor: run() wrote the tensor itself unless
  // it ran on a contiguous copy.
  for (size_t i = 0; i < inputs.size(); ++i)
    if (impl.input_specs[i].mutated && used[i].data_ptr() != inputs[i].data_ptr()) {
      Tensor dst = inputs[i];
      dst.copy_from(used[i]);
    }
  return outputs;
}

void Model::set_check_nan_inf(bool on) const {
  ANVIL_CHECK(impl_ != nullptr, "Model::set_check_nan_inf", "model was moved from",
              "a loaded model", "none");
  impl_->check_nan_inf.store(on);
}

bool Model::check_nan_inf() const { return impl_ && impl_->check_nan_inf.load(); }

void Model::set_profiling(bool on) const {
  ANVIL_CHECK(impl_ != nullptr, "Model::set_profiling", "model was moved from", "a loaded model",
              "none");
  impl_->profiling.store(on);
}

std::vector<StepProfile> Model::profile() const {
  ANVIL_CHECK(impl_ != nullptr, "Model::profile", "model was moved from", "a loaded model", "none");
  const Manifest& m = impl_->package->manifest();
  std::lock_guard<std::mutex> lock(impl_->profile_mutex);
  SymEnv env;
  for (size_t k = 0; k < m.symbols.size() && k < impl_->profile_symbols.size(); ++k)
    env[m.symbols[k].name] = impl_->profile_symbols[k];
  std::vector<StepProfile> out;
  for (size_t i = 0; i < m.kernels.size(); ++i) {
    const KernelSpec& k = m.kernels[i];
    StepProfile s{k.name, k.kind, k.nodes, impl_->profile_runs, 0.0, 0};
    if (i < impl_->profile_ns.size()) s.total_ms = static_cast<double>(impl_->profile_ns[i]) * 1e-6;
    try {
      s.bytes = k.bytes.evaluate(env);
    } catch (const Error&) {
      s.bytes = 0;  // no profiled run yet
    }
    out.push_back(std::move(s));
  }
  return out;
}

void Model::reset_profile() const {
  ANVIL_CHECK(impl_ != nullptr, "Model::reset_profile", "model was moved from", "a loaded model",
              "none");
  std::lock_guard<std::mutex> lock(impl_->profile_mutex);
  impl_->profile_ns.clear();
  impl_->profile_runs = 0;
}

void Model::Impl::shape_data_dependent_outputs(const std::vector<int64_t>& symbols,
                                               const std::vector<int64_t>& run_symbols,
                                               const RunContext& ctx,
                                               std::vector<Tensor>& outputs) const {
  const Manifest& m = package->manifest();
  SymEnv env;
  for (size_t k = 0; k < m.symbols.size(); ++k) env[m.symbols[k].name] = symbols[k];
  std::set<std::string> run_time;
  for (size_t k = 0; k < m.run_time_symbols.size(); ++k) {
    env[m.run_time_symbols[k]] = run_symbols[k];
    run_time.insert(m.run_time_symbols[k]);
  }
  for (size_t o = 0; o < m.outputs.size() && o < outputs.size(); ++o) {
    std::set<std::string> used;
    for (const SymInt& s : m.outputs[o].sizes) s.collect_symbols(used);
    if (std::none_of(used.begin(), used.end(), [&](const auto& u) { return run_time.count(u); }))
      continue;
    Shape shape;
    for (const SymInt& s : m.outputs[o].sizes) shape.push_back(s.evaluate(env));
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    if (!outputs[o].defined()) {  // allocated by run() once its size was known
      const auto& st = ctx.late_output(o);
      if (!st) continue;  // reported by the caller
      const DType dt = output_specs[o].dtype;
      ANVIL_CHECK(static_cast<size_t>(numel) * dtype_size(dt) <= st->nbytes(),
                  "Model::run(" + path + ")",
                  str("output ", o, " is larger than the storage run() allocated for it"),
                  str("<= ", st->nbytes(), " bytes"), str(numel, " elements (", shape_str(shape), ")"));
      outputs[o] = Tensor(st, dt, shape, Tensor::contiguous_strides(shape), 0);
      continue;
    }
    const Tensor& cap = outputs[o];  // allocated at the capacity, contiguous
    ANVIL_CHECK(numel <= cap.numel(), "Model::run(" + path + ")",
                str("output ", o, " has more elements than its capacity"),
                str("<= ", cap.numel()), str(numel, " (", shape_str(shape), ")"));
    outputs[o] = cap.as_strided(shape, Tensor::contiguous_strides(shape), cap.storage_offset());
  }
}

}  // namespace anvil::runtime
