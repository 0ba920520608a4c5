#!/usr/bin/env bash
# Installs the Debian packages anvil needs and builds it into build/ (CLI at build/bin/anvil).
#   scripts/setup.sh            # optimised build (Release: -O2, no debug info)
#   BUILD_DIR=build-asan CMAKE_ARGS=-DANVIL_SANITIZE=ON scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake ninja-build pkg-config git
          libzip-dev nlohmann-json3-dev libgtest-dev googletest
          libopenblas-dev libdlpack-dev libfftw3-dev zlib1g-dev
          libgloo-dev libopenmpi-dev openmpi-bin
          libdnnl-dev
          clang libclang-rt-14-dev  # the libFuzzer build (scripts/fuzz.sh): clang, libFuzzer
          python3-pip)  # pip downloads header-only wheels (cuDNN frontend, CUTLASS); installs none

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

BUILD_DIR=${BUILD_DIR:-build}
# CUTLASS's headers (GEMM autotuning's CUDA candidates) from the nvidia-cutlass wheel, unzipped into
# .deps (no pip install: works with Debian's externally-managed Python). Optional: without them
# CUTLASS candidates are skipped with a warning. CMake does the same at configure time.
scripts/fetch_cutlass_headers.sh 4.2.0.0 .deps/cutlass-4.2.0.0 ||
  echo "setup: CUTLASS headers not fetched: CUTLASS GEMM candidates will be skipped"
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
echo "setup: built $BUILD_DIR (CLI: $BUILD_DIR/bin/anvil)"
