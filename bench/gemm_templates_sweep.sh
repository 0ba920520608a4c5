#!/usr/bin/env bash
# Full correctness sweep of anvil's CPU GEMM templates (codegen/gemm/cpu_templates): every fp32,
# bf16 and bf16 -> fp32 candidate this machine's native target has, compiled one translation unit
# each (the toolchain's object cache keeps them), against the double-precision reference on the
# edge shapes plus 10 random shapes (M, N, K in 1..1024, M*N*K <= 4e7) per candidate, every
# layout, with the bias / activation / alpha / beta variants and 1-3 threads. The CI test
# (GemmTemplates*) runs a seeded sample of 11 candidates on fewer shapes.
# Usage: bench/gemm_templates_sweep.sh [build-dir]   (takes minutes on a 2-core machine)
set -euo pipefail
BUILD=${1:-build}
cmake --build "$BUILD" -j1 --target test_codegen
ANVIL_GEMM_SWEEP=full "$BUILD/bin/test_codegen" --gtest_filter='GemmTemplates*'
