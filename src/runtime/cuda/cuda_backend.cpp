// cuda_backend.cpp — the CUDA device backend (libanvil_cuda.so).
//
// Implements the AnvilDeviceApi table of include/anvil/anvil_device.h with the CUDA runtime API
// (memory, copies, streams) and cuBLASLt (GEMM). The library exports exactly one symbol,
// `anvil_device_backend`; everything else is hidden (the GEMM lives in cuda_gemm.cpp, the
// shared declarations in cuda_backend_internal.h). It depends on no other anvil
// source, so the CPU runtime can dlopen it only when a CUDA device is asked for.
//
// Conventions: every entry point catches every C++ exception (they are called through a C
// table), returns 0 / a pointer on success, and on failure stores a message naming the function,
// the arguments that matter and the CUDA / cuBLAS error in a thread_local string that
// last_error() returns. Without a driver or a device every call fails that way; none aborts.
//
// Global state (device count, per-device allocator caches, cuBLASLt handles, workspaces, GEMM
// plans) is created on first use and deliberately never destroyed: tearing it down from a static
// destructor would call into a CUDA runtime that may already be unloading at process exit.

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cinttypes>
#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "anvil/anvil_device.h"
#include "anvil/anvil_rt.h"

#include "runtime/cuda/cuda_backend_internal.h"

namespace anvil::cuda_backend {

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

thread_local std::string t_last_error;

namespace {

std::string vformat(const char* fmt, va_list args) {
  va_list copy;
  va_copy(copy, args);
  const int needed = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (needed <= 0) return std::string();
  std::string out(static_cast<size_t>(needed) + 1, '\0');
  std::vsnprintf(out.data(), out.size(), fmt, args);
  out.resize(static_cast<size_t>(needed));
  return out;
}

}  // namespace

std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string out = vformat(fmt, args);
  va_end(args);
  return out;
}

// Sets the message; returns -1 so that int entry points can `return fail(...)`.
int fail(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  t_last_error = vformat(fmt, args);
  va_end(args);
  return -1;
}

std::string cuda_text(cudaError_t e) {
  return format("%s: %s", cudaGetErrorName(e), cudaGetErrorString(e));
}

// As fail(), appending ": <cudaErrorName>: <description>". Also resets the runtime's per-thread
// "last error" slot, so that a failure reported here does not resurface in an unrelated
// cudaGetLastError() check of generated code later on.
int fail_cuda(cudaError_t e, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string msg = vformat(fmt, args);
  va_end(args);
  t_last_error = msg + ": " + cuda_text(e);
  (void)cudaGetLastError();
  return -1;
}

int fail_blas(cublasStatus_t s, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string msg = vformat(fmt, args);
  va_end(args);
  t_last_error = msg + format(": %s (%d): %s", cublasLtGetStatusName(s), static_cast<int>(s),
                              cublasLtGetStatusString(s));
  return -1;
}


// ---------------------------------------------------------------------------------------------
// Devices
// ---------------------------------------------------------------------------------------------

namespace {
struct Devices {
  int count = 0;
  std::string why_none;  // the reason count is 0
  std::vector<DeviceState*> state;
};

// The device count is queried once per process (it cannot change while the process runs).
Devices& devices() {
  static Devices* d = [] {
    auto* out = new Devices();
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
      out->why_none = "cudaGetDeviceCount failed (no CUDA driver or no device?): " + cuda_text(e);
      (void)cudaGetLastError();
      count = 0;
    } else if (count <= 0) {
      out->why_none = "cudaGetDeviceCount reports no CUDA device";
      count = 0;
    }
    out->count = count;
    for (int i = 0; i < count; ++i) out->state.push_back(new DeviceState());
    return out;
  }();
  return *d;
}

}  // namespace

DeviceState* device_state(const char* fn, int device) {
  Devices& d = devices();
  if (d.count == 0) {
    fail("%s(device=%d): no usable CUDA device: %s", fn, device, d.why_none.c_str());
    return nullptr;
  }
  if (device < 0 || device >= d.count) {
    fail("%s(device=%d): device index out of range (%d CUDA device%s: 0..%d)", fn, device, d.count,
         d.count == 1 ? "" : "s", d.count - 1);
    return nullptr;
  }
  return d.state[static_cast<size_t>(device)];
}

// device_state() plus cudaSetDevice(device), which every call issuing CUDA work needs: the
// current device is per host thread and the caller's thread may have any device current.
DeviceState* enter(const char* fn, int device) {
  DeviceState* s = device_state(fn, device);
  if (s == nullptr) return nullptr;
  const cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) {
    fail_cuda(e, "%s(device=%d): cudaSetDevice failed", fn, device);
    return nullptr;
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Caching allocator
// ---------------------------------------------------------------------------------------------

// 0 when `bytes` is too large to round.
size_t round_size(size_t bytes) {
  if (bytes == 0) return kSmallRound;
  if (bytes <= kSmallLimit) return (bytes + kSmallRound - 1) / kSmallRound * kSmallRound;
  if (bytes > SIZE_MAX - kLargeRound) return 0;
  return (bytes + kLargeRound - 1) / kLargeRound * kLargeRound;
}

// cudaFree()s every cached block of `s` that has a cudaMalloc of its own (free slab pieces
// stay: their slabs live as long as the process). Caller holds s.alloc_mu and has set the
// device.
size_t release_cached(DeviceState& s) {
  size_t released = 0;
  for (auto& [size, ptr] : s.cached) {
    s.cached_bytes -= size;
    if (cudaFree(ptr) == cudaSuccess) {
      released += size;
    } else {
      (void)cudaGetLastError();
    }
  }
  s.cached.clear();
  return released;
}

// A block of round_size(bytes) bytes; the device must be current. Null with last_error.
void* alloc_block(DeviceState& s, const char* fn, int device, size_t bytes) {
  const size_t rounded = round_size(bytes);
  if (rounded == 0) {
    fail("%s(device=%d, bytes=%zu): size too large", fn, device, bytes);
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(s.alloc_mu);
  if (rounded <= kSlabLimit) {
    std::vector<void*>& free_pieces = s.pieces[rounded];
    if (free_pieces.empty()) {
      // A new slab, cut into pieces of this size (a failure here falls through to a block of
      // its own below, which may still fit)
      void* slab = nullptr;
      if (cudaMalloc(&slab, kSlabPieces * rounded) == cudaSuccess) {
        for (size_t i = kSlabPieces; i-- > 0;)
          free_pieces.push_back(static_cast<unsigned char*>(slab) + i * rounded);
        s.cached_bytes += kSlabPieces * rounded;
      } else {
        (void)cudaGetLastError();
      }
    }
    if (!free_pieces.empty()) {
      void* ptr = free_pieces.back();
      free_pieces.pop_back();
      s.cached_bytes -= rounded;
      s.live.emplace(ptr, LiveBlock{rounded, true});
      s.live_bytes += rounded;
      return ptr;
    }
  }
  auto it = s.cached.find(rounded);
  if (it != s.cached.end()) {
    void* ptr = it->second;
    s.cached.erase(it);
    s.cached_bytes -= rounded;
    s.live.emplace(ptr, LiveBlock{rounded, false});
    s.live_bytes += rounded;
    return ptr;
  }
  void* ptr = nullptr;
  cudaError_t e = cudaMalloc(&ptr, rounded);
  size_t released = 0;
  if (e == cudaErrorMemoryAllocation) {
    // Blocks cached for other sizes may be what stands in the way: give them back, retry once.
    (void)cudaGetLastError();
    released = release_cached(s);
    ptr = nullptr;
    e = cudaMalloc(&ptr, rounded);
  }
  if (e != cudaSuccess) {
    fail_cuda(e,
              "%s(device=%d, bytes=%zu): cudaMalloc of %zu bytes failed (%zu bytes live in this "
              "allocator, %zu cached bytes released before retrying)",
              fn, device, bytes, rounded, s.live_bytes, released);
    return nullptr;
  }
  s.live.emplace(ptr, LiveBlock{rounded, false});
  s.live_bytes += rounded;
  return ptr;
}

// Returns a live block to the cache. False (no message) when `ptr` is not live on `s`.
bool free_block(DeviceState& s, void* ptr) {
  std::lock_guard<std::mutex> lock(s.alloc_mu);
  auto it = s.live.find(ptr);
  if (it == s.live.end()) return false;
  const LiveBlock b = it->second;
  s.live.erase(it);
  s.live_bytes -= b.size;
  if (b.piece) {
    s.pieces[b.size].push_back(ptr);
  } else {
    s.cached.emplace(b.size, ptr);
  }
  s.cached_bytes += b.size;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Table entries: devices, memory, streams
// ---------------------------------------------------------------------------------------------

const char* backend_last_error(void) { return t_last_error.c_str(); }

int backend_device_count(void) {
  try {
    Devices& d = devices();
    if (d.count == 0) fail("device_count: no usable CUDA device: %s", d.why_none.c_str());
    return d.count;
  } catch (const std::exception& e) {
    fail("device_count: internal error: %s", e.what());
    return 0;
  } catch (...) {
    fail("device_count: internal error: unknown exception");
    return 0;
  }
}

int backend_describe(int device, char* buf, size_t len) {
  return guarded("describe", [&]() -> int {
    if (buf == nullptr || len == 0) {
      return fail("describe(device=%d, buf=%p, len=%zu): no output buffer", device,
                  static_cast<void*>(buf), len);
    }
    buf[0] = '\0';
    if (device_state("describe", device) == nullptr) return -1;
    cudaDeviceProp prop{};
    const cudaError_t e = cudaGetDeviceProperties(&prop, device);
    if (e != cudaSuccess) {
      return fail_cuda(e, "describe(device=%d): cudaGetDeviceProperties failed", device);
    }
    const int needed = std::snprintf(buf, len, "%s, sm_%d%d, %zu MiB", prop.name, prop.major,
                                     prop.minor, static_cast<size_t>(prop.totalGlobalMem / kMiB));
    if (needed < 0) return fail("describe(device=%d): snprintf failed", device);
    if (static_cast<size_t>(needed) >= len) {
      // buf holds the truncated text; the caller asked for all of it.
      return fail("describe(device=%d, len=%zu): buffer too small (%d characters needed)", device,
                  len, needed + 1);
    }
    return 0;
  });
}

int backend_capability(int device) {
  return guarded("capability", [&]() -> int {
    if (device_state("capability", device) == nullptr) return -1;
    int major = 0, minor = 0;
    cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (e == cudaSuccess) {
      e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    }
    if (e != cudaSuccess) {
      return fail_cuda(e, "capability(device=%d): cudaDeviceGetAttribute failed", device);
    }
    return major * 10 + minor;
  });
}

void* backend_alloc(int device, size_t bytes) {
  void* out = nullptr;
  guarded("alloc", [&]() -> int {
    DeviceState* s = enter("alloc", device);
    if (s == nullptr) return -1;
    out = alloc_block(*s, "alloc", device, bytes);
    return out == nullptr ? -1 : 0;
  });
  return out;
}

int backend_free(int device, void* ptr) {
  return guarded("free", [&]() -> int {
    if (ptr == nullptr) return 0;
    DeviceState* s = device_state("free", device);
    if (s == nullptr) return -1;
    if (free_block(*s, ptr)) return 0;
    // Say where the pointer does belong, when it is another device's block.
    Devices& d = devices();
    for (int other = 0; other < d.count; ++other) {
      if (other == device) continue;
      DeviceState& o = *d.state[static_cast<size_t>(other)];
      std::lock_guard<std::mutex> lock(o.alloc_mu);
      if (o.live.count(ptr) != 0) {
        return fail("free(device=%d, ptr=%p): the block was allocated on device %d", device, ptr,
                    other);
      }
    }
    return fail(
        "free(device=%d, ptr=%p): not a live block of this backend's allocator (freed "
        "twice, or not allocated by alloc())",
        device, ptr);
  });
}

const char* direction_name(int direction) {
  switch (direction) {
    case ANVIL_COPY_HOST_TO_DEVICE:
      return "host-to-device";
    case ANVIL_COPY_DEVICE_TO_HOST:
      return "device-to-host";
    case ANVIL_COPY_DEVICE_TO_DEVICE:
      return "device-to-device";
    default:
      return "invalid";
  }
}

int backend_copy(int device, void* dst, const void* src, size_t bytes, int direction,
                 void* stream) {
  return guarded("copy", [&]() -> int {
    cudaMemcpyKind kind;
    switch (direction) {
      case ANVIL_COPY_HOST_TO_DEVICE:
        kind = cudaMemcpyHostToDevice;
        break;
      case ANVIL_COPY_DEVICE_TO_HOST:
        kind = cudaMemcpyDeviceToHost;
        break;
      case ANVIL_COPY_DEVICE_TO_DEVICE:
        kind = cudaMemcpyDeviceToDevice;
        break;
      default:
        return fail(
            "copy(device=%d, bytes=%zu, direction=%d): unknown direction (expected %d "
            "host-to-device, %d device-to-host or %d device-to-device)",
            device, bytes, direction, ANVIL_COPY_HOST_TO_DEVICE, ANVIL_COPY_DEVICE_TO_HOST,
            ANVIL_COPY_DEVICE_TO_DEVICE);
    }
    if (device_state("copy", device) == nullptr) return -1;
    if (bytes == 0) return 0;
    if (dst == nullptr || src == nullptr) {
      return fail("copy(device=%d, dst=%p, src=%p, bytes=%zu, %s): null pointer", device, dst, src,
                  bytes, direction_name(direction));
    }
    if (enter("copy", device) == nullptr) return -1;
    if (stream == nullptr) {
      // The ABI promises the copy is complete on return. On the calling thread's default
      // stream, not the legacy one: the legacy stream is one queue for the whole process, so
      // threads copying their outputs back (Tensor::to) waited for each other's copies and
      // synchronizes (serving from 4 threads: 1.6x one thread's calls/s; 2.3x with the copies on
      // the runners' streams). The per-thread stream still orders after legacy-stream work.
      cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, cudaStreamPerThread);
      if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamPerThread);
      if (e != cudaSuccess) {
        return fail_cuda(e, "copy(device=%d, dst=%p, src=%p, bytes=%zu, %s, stream=null) failed",
                         device, dst, src, bytes, direction_name(direction));
      }
      return 0;
    }
    const cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, static_cast<cudaStream_t>(stream));
    if (e != cudaSuccess) {
      return fail_cuda(e, "copy(device=%d, dst=%p, src=%p, bytes=%zu, %s, stream=%p) failed",
                       device, dst, src, bytes, direction_name(direction), stream);
    }
    return 0;
  });
}

int backend_memset_zero(int device, void* ptr, size_t bytes, void* stream) {
  return guarded("memset_zero", [&]() -> int {
    if (device_state("memset_zero", device) == nullptr) return -1;
    if (bytes == 0) return 0;
    if (ptr == nullptr) {
      return fail("memset_zero(device=%d, ptr=null, bytes=%zu): null pointer", device, bytes);
    }
    if (enter("memset_zero", device) == nullptr) return -1;
    cudaError_t e;
    if (stream == nullptr) {
      // cudaMemset is asynchronous with respect to the host; with a null stream we complete the
      // operation before returning, as copy() does.
      e = cudaMemset(ptr, 0, bytes);
      if (e == cudaSuccess) e = cudaStreamSynchronize(nullptr);
    } else {
      e = cudaMemsetAsync(ptr, 0, bytes, static_cast<cudaStream_t>(stream));
    }
    if (e != cudaSuccess) {
      return fail_cuda(e, "memset_zero(device=%d, ptr=%p, bytes=%zu, stream=%p) failed", device,
                       ptr, bytes, stream);
    }
    return 0;
  });
}

void* backend_stream_create(int device) {
  void* out = nullptr;
  guarded("stream_create", [&]() -> int {
    if (enter("stream_create", device) == nullptr) return -1;
    cudaStream_t stream = nullptr;
    const cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (e != cudaSuccess) {
      return fail_cuda(e, "stream_create(device=%d): cudaStreamCreateWithFlags failed", device);
    }
    out = static_cast<void*>(stream);
    return 0;
  });
  return out;
}

int backend_stream_destroy(int device, void* stream) {
  return guarded("stream_destroy", [&]() -> int {
    DeviceState* s = enter("stream_destroy", device);
    if (s == nullptr) return -1;
    if (stream == nullptr) return 0;  // the default stream: nothing to destroy
    void* workspace = nullptr;
    {
      std::lock_guard<std::mutex> lock(s->blas_mu);
      auto it = s->workspaces.find(stream);
      if (it != s->workspaces.end()) {
        workspace = it->second.block;
        s->workspaces.erase(it);
      }
    }
    const auto cu_stream = static_cast<cudaStream_t>(stream);
    // GEMMs queued on the stream may still use its workspace: let them finish before the
    // workspace goes back to the allocator for reuse.
    const cudaError_t sync_e = workspace ? cudaStreamSynchronize(cu_stream) : cudaSuccess;
    if (sync_e != cudaSuccess) (void)cudaGetLastError();
    const cudaError_t e = cudaStreamDestroy(cu_stream);
    if (workspace != nullptr) free_block(*s, workspace);
    if (sync_e != cudaSuccess) {
      return fail_cuda(sync_e,
                       "stream_destroy(device=%d, stream=%p): work queued on the stream failed "
                       "(the stream was destroyed anyway)",
                       device, stream);
    }
    if (e != cudaSuccess) {
      return fail_cuda(e, "stream_destroy(device=%d, stream=%p): cudaStreamDestroy failed", device,
                       stream);
    }
    return 0;
  });
}

int backend_stream_synchronize(int device, void* stream) {
  return guarded("stream_synchronize", [&]() -> int {
    if (enter("stream_synchronize", device) == nullptr) return -1;
    const cudaError_t e = cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
    if (e != cudaSuccess) {
      // Errors of kernels and copies queued earlier surface here; a "sticky" one (illegal
      // address, launch failure, ...) leaves the device's context unusable for this process.
      return fail_cuda(e,
                       "stream_synchronize(device=%d, stream=%p): cudaStreamSynchronize failed "
                       "(work queued on the stream, e.g. a kernel, failed asynchronously)",
                       device, stream);
    }
    return 0;
  });
}

int backend_set_device(int device) {
  return guarded("set_device", [&]() -> int { return enter("set_device", device) ? 0 : -1; });
}

void* backend_workspace(int device, void* stream, size_t bytes) {
  void* out = nullptr;
  guarded("workspace", [&]() -> int {
    DeviceState* s = enter("workspace", device);
    if (s == nullptr) return -1;
    std::lock_guard<std::mutex> lock(s->blas_mu);
    out = stream_workspace(*s, device, stream, bytes, "generated GEMM");
    return out != nullptr || bytes == 0 ? 0 : -1;
  });
  return out;
}

const AnvilDeviceApi kCudaBackend = {
    ANVIL_DEVICE_ABI_VERSION,
    "cuda",
    ANVIL_DEVICE_CUDA,
    &backend_last_error,
    &backend_device_count,
    &backend_describe,
    &backend_capability,
    &backend_alloc,
    &backend_free,
    &backend_copy,
    &backend_memset_zero,
    &backend_stream_create,
    &backend_stream_destroy,
    &backend_stream_synchronize,
    &backend_gemm,
    &backend_set_device,
    &backend_graph_begin,
    &backend_graph_end,
    &backend_graph_launch,
    &backend_graph_destroy,
    &backend_mem_info,
    &backend_attention,
    &backend_gemm_ex,
    &backend_workspace,
    &backend_conv,
};

}  // namespace anvil::cuda_backend

extern "C" __attribute__((visibility("default"))) const AnvilDeviceApi* anvil_device_backend(void) {
  return &anvil::cuda_backend::kCudaBackend;
}
