#!/usr/bin/env bash
# Packs what the GPU tests and benches need on the GPU machine into one folder (default
# gpu_bundle/, gitignored) small enough to carry: bin/anvil, the gpu test binary, the benches
# serving_bench, nccl_bench (bench/nccl_bench.sh) and gemm_bench (--suite), the CUDA device
# backend, the nccl process-group backend (libanvil_nccl.so), and the non-CUDA shared libraries they load (libzip, gloo, Open MPI, OpenBLAS, oneDNN with its libgomp and libOpenCL (about 7 MB of the tar.xz), FFTW,
# ...). The CUDA libraries are not packed: the GPU machine has its own on the default path.
#   bench/gpu_bundle.sh [BUILD_DIR] [OUT_DIR]
# On the GPU machine, from the repository root (paths compiled into the binaries point at
# /work/main, so the script links that to the copy):
#   bench/gpu_run.sh [gtest filter]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
out=$(realpath -m "${2:-$root/gpu_bundle}")
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for b in anvil anvil-gemm-time test_gpu serving_bench nccl_bench gemm_bench; do  # gemm_bench --suite: the host CPU's GEMM figures; anvil-gemm-time: the autotuner's timing child
  cp "$build/bin/$b" "$out/bin/"
  strip --strip-debug "$out/bin/$b"
done
for l in libanvil_cuda.so libanvil_nccl.so; do  # device backend; nccl process-group backend
  cp "$build/lib/$l" "$out/lib/"
  strip "$out/lib/$l"
done
# shared libraries of the binaries, except the C / C++ runtimes (the GPU machine's are newer, and
# libraries nvcc builds there need them) and CUDA's own (NCCL included)
for f in "$out"/bin/* "$out"/lib/libanvil_cuda.so "$out"/lib/libanvil_nccl.so; do
  ldd "$f" | awk '/=> \// {print $3}'
done | sort -u | grep -Ev '/(libc|libm|libdl|librt|libpthread|libstdc\+\+|libgcc_s|ld-linux[^/]*|libcuda|libcudart|libcublas|libcublasLt|libnvrtc|libcudnn[^/]*|libnccl)\.so' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done
strip --strip-debug "$out"/lib/libanvil_*.so  # a RelWithDebInfo build's debug info: tens of MB
# CUTLASS's headers (the CUTLASS GEMM candidates' GPU tests compile them with nvcc there):
# 28 MB of text, about 1 MB compressed. bench/gpu_run.sh points ANVIL_CUTLASS_DIR at them.
cutlass=${ANVIL_CUTLASS_DIR:-$root/.deps/cutlass-4.2.0.0}
[ -f "$cutlass/cutlass_library/source/include/cutlass/cutlass.h" ] && cutlass=$cutlass/cutlass_library/source
if [ -f "$cutlass/include/cutlass/cutlass.h" ]; then
  mkdir -p "$out/cutlass/tools/util"
  cp -r "$cutlass/include" "$out/cutlass/"
  cp -r "$cutlass/tools/util/include" "$out/cutlass/tools/util/"
else
  echo "gpu_bundle: no CUTLASS headers under $cutlass: the CutlassGemm GPU tests will skip" >&2
fi
du -sh "$out"
# one compressed file to carry (the folder itself is over a carry's 64 MiB with the tree)
tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
du -sh "$out.tar.xz"
