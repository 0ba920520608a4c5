// Host cost of the calls a small collective is made of, on the machine at hand: an empty
// kernel's launch (a small and a 192-byte argument), an event record and a stream wait, on the
// legacy default stream, a non-blocking stream and the per-thread default stream; then one
// launch + synchronize round trip. Microseconds per call (mean of N after a warm-up), host
// clock; the launches are queued back to back (one synchronize per block of 64).
//   nvcc -O2 -arch=sm_90a -o /tmp/launch_probe bench/probe/launch_probe.cu && /tmp/launch_probe
// Run on the GPU machine: why does a one-block kernel's post cost 8-9 us there
// (ANVIL_DIST_HOST_PROFILE, "nccl post: NCCL enqueue")?
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {

struct Big {
  void* p[16];
  long long n[8];
};

__global__ void empty_small(int) {}
__global__ void empty_big(Big) {}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

using Clock = std::chrono::steady_clock;

template <typename F>
double per_call_us(F&& f, cudaStream_t s, int n = 4096) {
  for (int i = 0; i < 256; ++i) f();
  check(cudaDeviceSynchronize(), "sync");
  double total = 0;
  for (int b = 0; b < n / 64; ++b) {
    const auto t0 = Clock::now();
    for (int i = 0; i < 64; ++i) f();
    total += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    check(cudaStreamSynchronize(s), "stream sync");
  }
  return total / n;
}

}  // namespace

int main() {
  check(cudaSetDevice(0), "cudaSetDevice");
  check(cudaFree(nullptr), "context");
  cudaStream_t nb = nullptr, blocking = nullptr;
  check(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking), "stream");
  check(cudaStreamCreate(&blocking), "blocking stream");
  cudaEvent_t ev = nullptr;
  check(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), "event");
  Big big{};
  struct Named {
    const char* name;
    cudaStream_t s;
  };
  const Named streams[] = {{"legacy", cudaStreamLegacy},
                           {"non-blocking", nb},
                           {"per-thread", cudaStreamPerThread},
                           {"blocking (created)", blocking}};
  std::printf("%-20s %10s %10s %10s %10s %12s\n", "stream", "launch", "launch192", "record",
              "wait", "launch+sync");
  for (const Named& n : streams) {
    const double l = per_call_us([&] { empty_small<<<1, 32, 0, n.s>>>(0); }, n.s);
    const double lb = per_call_us([&] { empty_big<<<1, 32, 0, n.s>>>(big); }, n.s);
    const double r = per_call_us([&] { check(cudaEventRecord(ev, n.s), "record"); }, n.s);
    const double w = per_call_us([&] { check(cudaStreamWaitEvent(n.s, ev, 0), "wait"); }, n.s);
    double rt = 0;
    const int rounds = 2000;
    for (int i = 0; i < rounds + 100; ++i) {
      const auto t0 = Clock::now();
      empty_small<<<1, 32, 0, n.s>>>(0);
      check(cudaStreamSynchronize(n.s), "sync");
      if (i >= 100) rt += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    }
    std::printf("%-20s %10.2f %10.2f %10.2f %10.2f %12.2f\n", n.name, l, lb, r, w, rt / rounds);
  }
  int peers = 0;
  check(cudaGetDeviceCount(&peers), "count");
  if (peers > 1) {
    int can = 0;
    check(cudaDeviceCanAccessPeer(&can, 0, 1), "can access peer");
    if (can) {
      check(cudaDeviceEnablePeerAccess(1, 0), "enable peer");
      const double l = per_call_us([&] { empty_small<<<1, 32, 0, cudaStreamLegacy>>>(0); },
                                   cudaStreamLegacy);
      std::printf("legacy, peer access on: launch %.2f us\n", l);
    }
  }
  return 0;
}
