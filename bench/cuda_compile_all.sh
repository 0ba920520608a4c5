#!/usr/bin/env bash
# The compile-only CUDA tests with nvcc on every one of their compiles. CI compiles a seeded
# third of them (tests/common/nvcc_sample.h) and checks the others' emitted sources only; this
# compiles all (minutes on two cores; no GPU needed).
#   bench/cuda_compile_all.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
ANVIL_NVCC_ALL=1 ctest --test-dir "$build" --output-on-failure -j "$(nproc)" \
  -R '^(CudaConvEmit|CudaRowsEmit|CudaFp8Emit|CudaPoolEmit)\.'
