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
          iproute2 nftables iptables  # netfault tests: netns, veth, netem; loss, delay without it
          libdnnl-dev
          clang libclang-rt-14-dev  # the libFuzzer build (scripts/fuzz.sh): clang, libFuzzer
          python3-dev python3-pip)  # pip: header-only wheels (cuDNN frontend, CUTLASS), and
                                    # the Python package's build and test needs (below)

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
# The Python package (python/, `import anvil`): nanobind builds its module, NumPy and pytest run
# its tests (label `python`), scikit-build-core is `pip install .`'s backend. ANVIL_PYTHON=OFF
# skips it.
ANVIL_PYTHON=${ANVIL_PYTHON:-ON}
PY_ARGS=""
if [ "$ANVIL_PYTHON" = ON ]; then
  PY=$(python3 -c 'import sys; print(sys.executable)')
  if ! "$PY" -c 'import nanobind, numpy, pytest, scikit_build_core' 2>/dev/null; then
    echo "setup: installing nanobind, numpy, pytest, scikit-build-core for $PY"
    "$PY" -m pip install -q 'nanobind>=2.4' numpy pytest 'scikit-build-core>=0.10' 2>/dev/null ||
      "$PY" -m pip install -q --break-system-packages 'nanobind>=2.4' numpy pytest \
        'scikit-build-core>=0.10'
  fi
  PY_ARGS="-DANVIL_PYTHON=ON -DPython_EXECUTABLE=$PY"
fi
# CUTLASS's headers (GEMM autotuning's CUDA candidates) from the nvidia-cutlass wheel, unzipped into
# .deps (no pip install: works with Debian's externally-managed Python). Optional: without them
# CUTLASS candidates are skipped with a warning. CMake does the same at configure time.
scripts/fetch_cutlass_headers.sh 4.2.0.0 .deps/cutlass-4.2.0.0 ||
  echo "setup: CUTLASS headers not fetched: CUTLASS GEMM candidates will be skipped"
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=${BUILD_TYPE:-Release} $PY_ARGS \
  ${CMAKE_ARGS:-} >/dev/null
cmake --build "$BUILD_DIR" -j "$JOBS" ${BUILD_TARGETS:+--target $BUILD_TARGETS}
echo "setup: built $BUILD_DIR (CLI: $BUILD_DIR/bin/anvil)"
