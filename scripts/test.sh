#!/usr/bin/env bash
# Runs everything CI runs: installs and builds, runs every CTest suite except `gpu`, then builds
# (clang, Debug, AddressSanitizer + UBSan) the unit tests, the archive reader and its fuzz test
# and the libFuzzer targets, runs those tests and a load / run / unload loop of compiled packages
# under LeakSanitizer, then runs each libFuzzer target (fuzz/) for FUZZ_SECONDS (default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}

echo "== build"
scripts/setup.sh
echo "== tests (all labels but gpu)"
ctest --test-dir build -LE gpu --output-on-failure -j "$JOBS" --timeout 600

echo "== Debug (-O0, clang) + ASan/UBSan: unit tests, archive reader + fuzz, libFuzzer targets"
# The unit tests run at -O0 too: a bug that optimisation hides (a pointer comparison of string
# literals that merge at -O2) shows here.
# (CPU code only: the CUDA backend and its tests build and run in the main build above.)
# One clang build for the sanitized unit tests and the libFuzzer targets (ANVIL_FUZZ: every
# source with ASan + UBSan and libFuzzer's coverage hooks), so CI compiles the library once more,
# not twice. -g1: line tables only (symbolised reports, less compile time than full debug info).
asan_args="-DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DANVIL_SANITIZE=ON"
asan_args+=" -DANVIL_FUZZ=ON -DANVIL_CUDA=OFF -DCMAKE_CXX_FLAGS_DEBUG=-g1"
asan_tests="test_core test_ir test_ops test_passes test_fuzz test_frontend test_aot_leak"
BUILD_DIR=build-asan BUILD_TYPE=Debug CMAKE_ARGS="$asan_args" \
  BUILD_TARGETS="$asan_tests anvil_fuzz" scripts/setup.sh
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
for t in test_core test_ir test_ops test_passes; do
  echo "-- Debug $t"
  build-asan/bin/$t --gtest_brief=1
done
build-asan/bin/test_frontend --gtest_brief=1
# a quarter of the archive mutants (the main stage ran them all, optimised): ~45 s instead of 3 min
ANVIL_FUZZ_SCALE=0.25 build-asan/bin/test_fuzz --gtest_brief=1
echo "== LeakSanitizer: compiled packages loaded, run and unloaded repeatedly"
build-asan/bin/test_aot_leak --gtest_brief=1 --gtest_filter='AotLeak.*'
echo "== libFuzzer: every fuzz target for a bounded time (built above in build-asan)"
# bench/fuzz_long.sh runs the same targets for long (-O1, build-fuzz); docs/reliability.md has
# their figures.
FUZZ_BUILD_DIR=build-asan FUZZ_NO_BUILD=1 scripts/fuzz.sh "${FUZZ_SECONDS:-10}"
echo "== all tests passed"
