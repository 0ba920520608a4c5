// CUDA graphs for the device backend (AnvilDeviceApi::graph_*): a run captured from its stream
// once per input-shape set and replayed with one launch (runtime/model_graph.cpp decides when);
// the device's memory figures (mem_info); whether a stream captures, and the timing of
// candidates on a stream (cuBLASLt's algorithms, cuDNN's plans).
#include <cuda_runtime_api.h>

#include <functional>

#include "anvil/anvil_device.h"
#include "runtime/cuda/cuda_backend_internal.h"

namespace anvil::cuda_backend {

int backend_graph_begin(int device, void* stream) {
  return guarded("graph_begin", [&]() -> int {
    if (enter("graph_begin", device) == nullptr) return -1;
    if (stream == nullptr) return fail("graph_begin(device=%d): the default stream cannot be captured", device);
    // Thread-local mode: other threads' unsafe calls (cudaMalloc of another runner) do not
    // invalidate this capture; this thread's do, and capture then fails cleanly.
    const cudaError_t e =
        cudaStreamBeginCapture(static_cast<cudaStream_t>(stream), cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess)
      return fail_cuda(e, "graph_begin(device=%d, stream=%p): cudaStreamBeginCapture failed",
                       device, stream);
    return 0;
  });
}

int backend_graph_end(int device, void* stream, void** exec) {
  return guarded("graph_end", [&]() -> int {
    if (exec) *exec = nullptr;
    if (enter("graph_end", device) == nullptr) return -1;
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(static_cast<cudaStream_t>(stream), &graph);
    if (e != cudaSuccess || graph == nullptr) {
      if (graph) cudaGraphDestroy(graph);
      return fail_cuda(e == cudaSuccess ? cudaErrorStreamCaptureInvalidated : e,
                       "graph_end(device=%d, stream=%p): the capture failed (a step of the run "
                       "is not capturable)",
                       device, stream);
    }
    if (exec == nullptr) {  // capture abandoned
      cudaGraphDestroy(graph);
      return 0;
    }
    cudaGraphExec_t instance = nullptr;
    e = cudaGraphInstantiate(&instance, graph, 0);
    cudaGraphDestroy(graph);
    if (e != cudaSuccess)
      return fail_cuda(e, "graph_end(device=%d): cudaGraphInstantiate failed", device);
    *exec = static_cast<void*>(instance);
    return 0;
  });
}

int backend_graph_launch(int device, void* exec, void* stream) {
  return guarded("graph_launch", [&]() -> int {
    if (enter("graph_launch", device) == nullptr) return -1;
    const cudaError_t e =
        cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), static_cast<cudaStream_t>(stream));
    if (e != cudaSuccess)
      return fail_cuda(e, "graph_launch(device=%d, stream=%p): cudaGraphLaunch failed", device,
                       stream);
    return 0;
  });
}

int backend_graph_destroy(int device, void* exec) {
  return guarded("graph_destroy", [&]() -> int {
    if (exec == nullptr) return 0;
    if (enter("graph_destroy", device) == nullptr) return -1;
    const cudaError_t e = cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
    if (e != cudaSuccess)
      return fail_cuda(e, "graph_destroy(device=%d): cudaGraphExecDestroy failed", device);
    return 0;
  });
}

int backend_mem_info(int device, size_t* free_bytes, size_t* total_bytes) {
  return guarded("mem_info", [&]() -> int {
    if (enter("mem_info", device) == nullptr) return -1;
    size_t f = 0, t = 0;
    const cudaError_t e = cudaMemGetInfo(&f, &t);
    if (e != cudaSuccess) return fail_cuda(e, "mem_info(device=%d): cudaMemGetInfo failed", device);
    if (free_bytes) *free_bytes = f;
    if (total_bytes) *total_bytes = t;
    return 0;
  });
}

bool stream_capturing(void* stream) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  const bool ok = cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &st) == cudaSuccess;
  cudaGetLastError();
  return !ok || st != cudaStreamCaptureStatusNone;
}

int fastest_candidate(void* stream, int n, const std::function<bool(int)>& run, cudaError_t& err) {
  const auto cs = static_cast<cudaStream_t>(stream);
  cudaEvent_t ev[2] = {nullptr, nullptr};
  err = cudaEventCreate(&ev[0]);
  if (err == cudaSuccess) err = cudaEventCreate(&ev[1]);
  int best = -1;
  float best_ms = 0;
  for (int i = 0; i < n && err == cudaSuccess; ++i) {
    if (!run(i)) {  // refused, or not built: skipped
      cudaGetLastError();
      continue;
    }
    err = cudaEventRecord(ev[0], cs);
    bool ok = true;
    for (int r = 0; r < 3 && ok && err == cudaSuccess; ++r) ok = run(i);
    if (err == cudaSuccess) err = cudaEventRecord(ev[1], cs);
    if (err == cudaSuccess) err = cudaEventSynchronize(ev[1]);
    float ms = 0;
    if (err == cudaSuccess) err = cudaEventElapsedTime(&ms, ev[0], ev[1]);
    if (!ok) cudaGetLastError();
    if (err == cudaSuccess && ok && (best < 0 || ms < best_ms)) {
      best_ms = ms;
      best = i;
    }
  }
  for (cudaEvent_t x : ev)
    if (x != nullptr) cudaEventDestroy(x);
  return err == cudaSuccess ? best : -1;
}

}  // namespace anvil::cuda_backend
