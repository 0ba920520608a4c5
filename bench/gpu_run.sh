#!/usr/bin/env bash
# Runs the gpu-labelled tests from gpu_bundle/ (bench/gpu_bundle.sh) on the GPU machine, sharded
# over the cores, with ANVIL_REQUIRE_GPU=1 (a skip is a failure; =2 on a machine with 2 GPUs, so
# the 2-GPU nccl tests cannot skip either). Prints per-shard summaries and
# the totals; exit status non-zero when any test failed.
#   bench/gpu_run.sh [GTEST_FILTER]
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "$root" != /work/main ]; then mkdir -p /work && ln -sfn "$root" /work/main; fi
if [ ! -d "$root/gpu_bundle" ]; then tar -C "$root" -xJf "$root/gpu_bundle.tar.xz"; fi
export LD_LIBRARY_PATH="$root/gpu_bundle/lib:${LD_LIBRARY_PATH:-}"
# libanvil_nccl.so needs libnccl.so.2 (not packed: 200+ MB). When the loader does not know one,
# use the copy PyTorch's wheels bring (nvidia/nccl/lib).
if ! ldconfig -p 2>/dev/null | grep -q 'libnccl.so.2 ' && [ ! -e /usr/local/cuda/lib/libnccl.so.2 ] &&
   [ ! -e /usr/local/cuda/lib64/libnccl.so.2 ]; then
  nccl_dir=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
  if [ -n "$nccl_dir" ] && [ -e "$nccl_dir/libnccl.so.2" ]; then
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl_dir"
  else
    echo "warning: no libnccl.so.2 found: the nccl tests (Nccl2Gpu.*) will fail to load the backend" >&2
  fi
fi
export ANVIL_INCLUDE_DIR="$root/include" ANVIL_DEVICE_BACKEND_DIR="$root/gpu_bundle/lib"
export ANVIL_REQUIRE_GPU=1 NCCL_NVLS_ENABLE=0
# With 2 GPUs the 2-GPU tests (Nccl2Gpu.*: the nccl backend) must run, not skip.
if [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')" -ge 2 ]; then export ANVIL_REQUIRE_GPU=2; fi
export ANVIL_CACHE_DIR=/tmp/anvil_gpu_cache
if [ -d "$root/gpu_bundle/cutlass/include" ]; then export ANVIL_CUTLASS_DIR="$root/gpu_bundle/cutlass"; fi
export ANVIL_NVCC="${ANVIL_NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
shards=${ANVIL_GPU_SHARDS:-$(nproc)}
# the shards' logs under $OUT when the device tool gives one (a run cut short by a timeout still
# brings back what each shard printed so far), else a temp folder
if [ -n "${OUT:-}" ]; then logs="$OUT/gpu_shards"; mkdir -p "$logs"; else logs=$(mktemp -d); fi
for i in $(seq 0 $((shards - 1))); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i ANVIL_TEST_OUTDIR=/tmp/anvil_gpu_out_$i \
    "$root/gpu_bundle/bin/test_gpu" --gtest_filter="${1:-*}" > "$logs/shard$i.log" 2>&1 &
done
wait
cat "$logs"/shard*.log | grep -E '^\[  (FAILED|PASSED|SKIPPED) |refused|Failure|error|Expected|Which is|actual|relative' | grep -v '^\[  PASSED  \] [0-9]* test' | head -300
# a test's own result line ends with its time ("(123 ms)"); summaries repeat names without it
run=$(cat "$logs"/shard*.log | grep -cE '^\[ +(OK|FAILED|SKIPPED) +\] [A-Za-z].*\([0-9]+ ms\)$')
ok=$(cat "$logs"/shard*.log | grep -cE '^\[       OK \] .*\([0-9]+ ms\)$')
failed=$(cat "$logs"/shard*.log | grep -cE '^\[  FAILED  \] [A-Za-z].*\([0-9]+ ms\)$')
refused=$(cat "$logs"/shard*.log | grep -c '^\[ refused  \]')
echo "gpu tests: $run run, $ok passed ($refused of them refused at compile with the reason), $failed failed"
# one log back under $OUT (the shards' own are removed only after they are counted)
if [ -n "${OUT:-}" ]; then cat "$logs"/shard*.log > "$OUT/gpu_tests.log" && rm -rf "$logs"; fi
[ "$failed" -eq 0 ]
