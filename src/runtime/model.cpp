// Model loading, constants and accessors (runs and input checks: model_run.cpp).
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "core/error.h"
#include "runtime/collectives.h"
#include "runtime/cpu_features.h"
#include "runtime/device_backend.h"
#include "runtime/externs.h"
#include "runtime/model_impl.h"
#include "runtime/rt_api.h"

namespace anvil::runtime {

namespace {

/// The model ABI this runtime loads: ABI 3 (devices) changed AnvilRtTensor's layout, so older
/// packages are refused with a request to recompile them.
constexpr uint32_t kOldestModelAbi = ANVIL_MODEL_ABI_VERSION;

/// Writes all of `data` to `fd`; false on an I/O error.
bool write_all(int fd, std::string_view data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

/// dlopens the bytes of a shared library from a private in-memory file (memfd), or from an
/// unlinked temporary file where memfd is unavailable, into `lib`. Nothing else is run.
///
/// The memfd stays open for as long as the library is loaded (Library closes it after
/// dlclose): dlopen returns an already loaded object whose path matches, so a second model
/// opened from a reused descriptor number ("/proc/self/fd/5" again) would get the first
/// model's code.
void open_library(std::string_view bytes, const std::string& where, Library& lib) {
  std::string path;
  bool temp_file = false;
  int fd = ::memfd_create("anvil-model.so", MFD_CLOEXEC);
  if (fd >= 0) {
    path = "/proc/self/fd/" + std::to_string(fd);
  } else {
    const char* tmp = std::getenv("TMPDIR");
    path = std::string(tmp && *tmp ? tmp : "/tmp") + "/anvil-model-XXXXXX.so";
    fd = ::mkstemps(path.data(), 3);
    if (fd < 0)
      throw Error("cannot create a file for model.so", where, "a writable TMPDIR",
                  std::strerror(errno));
    temp_file = true;
  }
  if (!write_all(fd, bytes)) {
    const std::string err = std::strerror(errno);
    ::close(fd);
    if (temp_file) ::unlink(path.c_str());
    throw Error("cannot write model.so for loading", where, "a writable file", err);
  }
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  const char* err = handle ? nullptr : ::dlerror();
  const std::string message = err ? err : "unknown dlopen error";
  if (temp_file) {  // a unique path: the file can go now
    ::close(fd);
    ::unlink(path.c_str());
    fd = -1;
  }
  if (!handle) {
    if (fd >= 0) ::close(fd);
    throw Error("cannot load model.so", where, "a loadable shared library", message);
  }
  lib.handle = handle;
  lib.fd = fd;
}

/// A contiguous, 64-byte aligned copy of `t` in new memory.

}  // namespace

Library::~Library() {
  if (handle) ::dlclose(handle);
  if (fd >= 0) {
    // dlclose may leave the library loaded (glibc never unloads one with STB_GNU_UNIQUE
    // symbols, e.g. C++17 inline statics of a default-visibility template library). Its path,
    // "/proc/self/fd/N", must then never name another model: dlopen would return this one's
    // code for it. So the descriptor stays open (one fd per such model) while it is loaded.
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    if (void* still = ::dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD)) {
      ::dlclose(still);
      return;
    }
    ::close(fd);
  }
}

Model::Impl::~Impl() {
  for (Runner& r : runners) {
    if (device_api && r.stream) device_api->stream_synchronize(options.device.index, r.stream);
    drop_graphs(r);
    if (r.instance && entry && entry->destroy) entry->destroy(r.instance);
    if (device_api && r.stream) {
      device_api->stream_synchronize(options.device.index, r.stream);
      device_api->stream_destroy(options.device.index, r.stream);
    }
    if (r.arena_storage)
      r.arena_storage.reset();  // device memory, freed through its allocator
    else
      std::free(r.arena);
  }
  runners.clear();
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Model Model::load(const std::string& path, const ModelOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->options = options;
  const std::string where = "Model::load(" + path + ")";
  ANVIL_CHECK(options.num_runners >= 1, where, "num_runners must be at least 1", ">= 1",
              std::to_string(options.num_runners));
  ANVIL_CHECK(options.num_threads >= 0, where, "num_threads must not be negative",
              ">= 0 (0 = default)", std::to_string(options.num_threads));

  impl->package = Package::open(path);
  const Manifest& m = impl->package->manifest();
  if (const char* p = std::getenv("ANVIL_PROFILE"); p && std::string(p) == "1")
    impl->profiling.store(true);
  if (const char* p = std::getenv("ANVIL_CHECK_NAN_INF"); p && std::string(p) == "1")
    impl->check_nan_inf.store(true);
  ANVIL_CHECK(m.abi_version >= kOldestModelAbi && m.abi_version <= ANVIL_MODEL_ABI_VERSION,
              where,
              m.abi_version < kOldestModelAbi
                  ? "package was built by an older anvil for runtime ABI " +
                        std::to_string(m.abi_version) +
                        ", which this runtime no longer loads; recompile the model with this "
                        "anvil (anvil compile)"
                  : std::string("package was built for a newer runtime ABI; update anvil or "
                                "recompile the model"),
              str("ABI ", kOldestModelAbi, "..", ANVIL_MODEL_ABI_VERSION),
              std::to_string(m.abi_version));
  const bool cpu_target = m.target == "cpu" || m.target.rfind("cpu-", 0) == 0;
  if (m.device_type == Device::Type::kCPU) {
    ANVIL_CHECK(options.device.is_cpu(), where,
                str("cannot load a CPU package (target ", m.target, ") on ", options.device.str()),
                "device cpu", options.device.str());
    ANVIL_CHECK(cpu_target, where, "package was compiled for another device", "a cpu-* target",
                m.target);
    check_cpu_features(m.target, m.cpu_features, where);
  } else {
    const Device want{m.device_type, -1};
    ANVIL_CHECK(options.device.type == m.device_type, where,
                str("package was compiled for ", want.str(), " (target ", m.target,
                    "); load it with that device"),
                str("device ", want.str()), options.device.str());
    impl->options.device = require_device(options.device, where);
    impl->device_api = &device_backend(m.device_type);
    if (m.device_type == Device::Type::kCUDA && m.cuda_min_capability > 0) {
      const int cap = impl->device_api->capability(impl->options.device.index);
      ANVIL_CHECK(cap >= m.cuda_min_capability, where,
                  str("the package's code needs a newer GPU than ", impl->options.device.str()),
                  str("compute capability >= ", m.cuda_min_capability / 10, ".",
                      m.cuda_min_capability % 10),
                  str(cap / 10, ".", cap % 10));
    }
  }
  const Device device = impl->options.device;
  impl->api = *rt_api();
  impl->api.device = impl->device_api;

  register_builtin_externs();
  // A device package's externs are its host steps: a kernel registered for the device runs
  // on its memory, else the CPU kernel runs on host copies (runtime/host_staging.h).
  for (const std::string& target : m.externs)
    ANVIL_CHECK(find_extern(target, device.type) != nullptr ||
                    find_extern(target, Device::Type::kCPU) != nullptr,
                where, "package calls an extern op this runtime does not implement",
                str("a runtime kernel registered for ", device.str(),
                    device.is_cpu() ? "" : " or the CPU"),
                target);

  impl->plan_input_checks();
  join_world_for_package(m.json, where);  // packages with collectives join the world group

  // model.so: a private copy, dlopened; its entry table must match this runtime's ABI.
  open_library(impl->package->model_so(), where, impl->library);
  auto entry_fn =
      reinterpret_cast<AnvilModelEntryFn>(::dlsym(impl->library.handle, ANVIL_MODEL_ENTRY_SYMBOL));
  ANVIL_CHECK(entry_fn != nullptr, where, "model.so does not export the entry point",
              ANVIL_MODEL_ENTRY_SYMBOL, "no such symbol");
  const AnvilModelEntry* entry = entry_fn();
  ANVIL_CHECK(entry != nullptr, where, "model.so returned no entry table", "a table", "null");
  ANVIL_CHECK(entry->abi_version >= kOldestModelAbi && entry->abi_version <= ANVIL_MODEL_ABI_VERSION,
              where, "model.so was built for another runtime ABI version",
              str(kOldestModelAbi, "..", ANVIL_MODEL_ABI_VERSION),
              std::to_string(entry->abi_version));
  ANVIL_CHECK(
      entry->create && entry->destroy && entry->arena_bytes && entry->output_sizes && entry->run,
      where, "model.so's entry table is incomplete", "every entry point set",
      "a null function pointer");
  impl->entry = entry;

  // Constants: views into the mapping; mutable buffers copied out (they are written by runs).
  // A device package's constants are uploaded once; every runner and run reads the device copy.
  auto set = std::make_shared<ConstantSet>(device);
  impl->buffers.resize(m.constants.size());
  for (size_t i = 0; i < m.constants.size(); ++i) {
    const bool mut = m.constants[i].is_mutable;
    Tensor t = ConstantSet::place(impl->package->constant(i), device, /*copy=*/mut);
    if (mut) {
      impl->buffers[i] = t;
      impl->has_mutable = true;
    }
    set->set(i, t);
  }
  impl->active = std::move(set);

  if (options.num_threads > 0) {
    impl->own_pool = std::make_unique<ThreadPool>(options.num_threads);
    impl->pool = impl->own_pool.get();
  } else {
    impl->pool = &ThreadPool::global();
  }

  impl->runners.resize(static_cast<size_t>(options.num_runners));
  for (int r = 0; r < options.num_runners; ++r) {
    if (!device.is_cpu()) {
      impl->runners[r].stream = impl->device_api->stream_create(device.index);
      ANVIL_CHECK(impl->runners[r].stream != nullptr, where,
                  str("cannot create a stream on ", device.str()), "a stream",
                  impl->device_api->last_error());
    }
    impl->runners[r].instance = entry->create(&impl->api);
    ANVIL_CHECK(impl->runners[r].instance != nullptr, where,
                "model.so refused this runtime: it needs runtime services (a newer ABI minor "
                "version) this runtime lacks, or it is damaged",
                str("a runtime the package's code accepts (this one: ABI ",
                    ANVIL_MODEL_ABI_VERSION, ".", ANVIL_MODEL_ABI_MINOR_VERSION, ")"),
                "null from create()");
    impl->free_runners.push_back(r);
  }
  if (!device.is_cpu()) {
    const char* env = std::getenv("ANVIL_CUDA_GRAPHS");
    impl->graphs = options.cuda_graphs && !(env && std::string(env) == "0") &&
                   m.graph_capturable && m.host_steps == 0 && impl->device_api->graph_begin;
    // (collectives too: the nccl backend records its ops into the graph being captured)
  }
  return Model(std::move(impl));
}

const std::vector<IOSpec>& Model::input_specs() const { return impl_->input_specs; }
const std::vector<IOSpec>& Model::output_specs() const { return impl_->output_specs; }
const Manifest& Model::manifest() const { return impl_->package->manifest(); }
const Package& Model::package() const { return *impl_->package; }
int Model::num_runners() const { return static_cast<int>(impl_->runners.size()); }
Device Model::device() const { return impl_->options.device; }

Device package_device(const std::string& path) {
  const auto p = Package::open(path);
  return p->manifest().device_type == Device::Type::kCPU ? Device::cpu() : Device::cuda(0);
}
ThreadPool& Model::thread_pool() const { return *impl_->pool; }

std::string Model::metadata_json() const {
  const char* text = impl_->entry->metadata_json ? impl_->entry->metadata_json() : nullptr;
  return text ? text : "{}";
}

const std::vector<ConstantSpec>& Model::constant_specs() const { return manifest().constants; }

std::vector<std::string> Model::constant_names() const {
  std::vector<std::string> out;
  for (const ConstantSpec& c : manifest().constants) out.push_back(c.name);
  return out;
}

std::map<std::string, std::string> Model::constant_original_names() const {
  std::map<std::string, std::string> out;
  for (const ConstantSpec& c : manifest().constants) out[c.name] = c.original_name;
  return out;
}

namespace {
size_t constant_index(const Manifest& m, const std::string& name, const std::string& where) {
  for (size_t i = 0; i < m.constants.size(); ++i)
    if (m.constants[i].name == name) return i;
  throw Error("unknown constant", where, "a name from constant_names()", name);
}
}  // namespace

Tensor Model::constant(const std::string& name) const {
  const size_t i = constant_index(manifest(), name, "Model::constant");
  if (manifest().constants[i].is_mutable) {
    std::lock_guard<std::mutex> lock(impl_->buffer_mutex);
    const Tensor& b = impl_->buffers[i];
    return b.device().is_cpu() ? b.clone() : b.to(Device::cpu());
  }
  std::shared_ptr<const ConstantSet> set;
  {
    std::lock_guard<std::mutex> lock(impl_->constants_mutex);
    set = impl_->active;
  }
  const Tensor& t = set->tensors[i];
  return t.device().is_cpu() ? t.clone() : t.to(Device::cpu());
}

void Model::update_constants(const std::map<std::string, Tensor>& values, bool inactive,
                             bool require_full) {
  const Manifest& m = manifest();
  const std::string where = "Model::update_constants";
  // Validate everything before changing anything.
  std::vector<std::pair<size_t, Tensor>> updates;
  for (const auto& [name, value] : values) {
    const size_t i = constant_index(m, name, where);
    const ConstantSpec& c = m.constants[i];
    const std::string cw = where + ": constant '" + name + "'";
    ANVIL_CHECK(value.defined(), cw, "new value is undefined", "a tensor", "undefined");
    ANVIL_CHECK(value.device().is_cpu(), cw, "new value is on the wrong device", "cpu",
                value.device().str());
    ANVIL_CHECK(value.dtype() == c.dtype, cw, "new value has the wrong dtype", dtype_name(c.dtype),
                dtype_name(value.dtype()));
    ANVIL_CHECK(value.sizes() == c.sizes, cw, "new value has the wrong sizes", shape_str(c.sizes),
                shape_str(value.sizes()));
    updates.emplace_back(i, value);
  }
  if (require_full) {
    for (const ConstantSpec& c : m.constants)
      ANVIL_CHECK(c.is_mutable || values.count(c.name), where,
                  "full update requested but a constant has no new value",
                  "a value for every constant", "none for '" + c.name + "'");
  }
  // Copy the new values (callers may reuse their tensors) before taking any lock.
  std::vector<std::pair<size_t, Tensor>> owned;
  const Device device = impl_->options.device;
  for (auto& [i, value] : updates)
    owned.emplace_back(i, ConstantSet::place(value, device, /*copy=*/true));

  bool any_immutable = false;
  for (auto& [i, value] : owned) {
    if (m.constants[i].is_mutable) {
      std::lock_guard<std::mutex> lock(impl_->buffer_mutex);
      if (device.is_cpu()) {
        impl_->buffers[i].copy_from(value);
      } else {  // the live buffer keeps its address (runs read it through ConstantSet::ptrs)
        Tensor& live = impl_->buffers[i];
        device_copy(*impl_->device_api, device.index, live.data_ptr(), value.data_ptr(),
                    live.nbytes(), ANVIL_COPY_DEVICE_TO_DEVICE, nullptr, where);
      }
    } else {
      any_immutable = true;
    }
  }
  if (!any_immutable) return;
  std::lock_guard<std::mutex> lock(impl_->constants_mutex);
  const std::shared_ptr<const ConstantSet>& base =
      inactive && impl_->inactive ? impl_->inactive : impl_->active;
  auto next = std::make_shared<ConstantSet>(*base);
  for (auto& [i, value] : owned)
    if (!m.constants[i].is_mutable) next->set(i, value);
  next->carry_packed_from(*base);
  if (inactive)
    impl_->inactive = std::move(next);
  else
    impl_->active = std::move(next);
}

void Model::swap_constants() {
  std::lock_guard<std::mutex> lock(impl_->constants_mutex);
  ANVIL_CHECK(impl_->inactive != nullptr, "Model::swap_constants",
              "no inactive constants to swap in",
              "update_constants(values, /*inactive=*/true) first", "no inactive set");
  impl_->active = std::move(impl_->inactive);
  impl_->inactive = nullptr;
}

Tensor ConstantSet::place(const Tensor& value, Device device, bool copy) {
  if (!device.is_cpu()) return value.to(device);  // to() from the host makes the copy
  return copy ? value.clone() : value;
}

void ConstantSet::set(size_t i, Tensor t) {
  ANVIL_INTERNAL_ASSERT(i <= tensors.size(), "ConstantSet::set out of order");
  if (i == tensors.size()) {
    ptrs.push_back(t.data_ptr());
    tensors.push_back(std::move(t));
    return;
  }
  ptrs[i] = t.data_ptr();
  tensors[i] = std::move(t);
}

void ConstantSet::carry_packed_from(const ConstantSet& base) {
  packed = base.packed ? base.packed->carried_over(ptrs) : nullptr;
}

}  // namespace anvil::runtime
