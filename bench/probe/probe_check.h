// The probes' error check (bench/probe/*.cu, each built alone by the nvcc line in its header):
// CK(call) prints the call, its nonzero status (a cudaError_t, cublasStatus_t or CUresult) and
// the line, and exits.
#pragma once

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                        \
  do {                                                               \
    auto e_ = (x);                                                   \
    if (e_ != 0) {                                                   \
      std::printf("%s failed: %d line %d\n", #x, (int)e_, __LINE__); \
      std::exit(1);                                                  \
    }                                                                \
  } while (0)
