#!/usr/bin/env bash
# The whole GEMM correctness sweep of AnvilRtApi::gemm (tests/runtime/test_gemm_call.cpp): every
# library x dtype x layout x bias x activation, three random size draws each in 1..1024 (1 and
# primes included) with M*N*K up to 2^27, against a naive double reference. CI runs a one-draw
# sample with M*N*K <= 2^15 (1528 cases, ~1.5 s). Full: 4584 cases, 358 s on the shared 2-core box.
#   bench/gemm_sweep.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${1:-build}
cmake --build "$BUILD_DIR" -j1 --target test_runtime
ANVIL_GEMM_SWEEP=full "$BUILD_DIR/bin/test_runtime" --gtest_filter='GemmCall.*'
