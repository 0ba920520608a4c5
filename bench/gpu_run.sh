#!/usr/bin/env bash
# Runs the gpu-labelled tests from gpu_bundle/ (bench/gpu_bundle.sh) on the GPU machine, one
# process per test over the cores (ANVIL_GPU_JOBS, default nproc; ANVIL_GPU_TEST_TIMEOUT s
# each), with ANVIL_REQUIRE_GPU=1 (a skip is a failure; =2 on a machine with 2 GPUs, so the
# 2-GPU nccl tests cannot skip either). Prints the failures' lines and the totals; exit status
# non-zero when any test failed, hung, or printed no result.
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
jobs=${ANVIL_GPU_JOBS:-$(nproc)}
per_test_s=${ANVIL_GPU_TEST_TIMEOUT:-420}
# One process per test, taken from a queue by $jobs workers, the slowest first (they compile
# CUTLASS units or whole models: with gtest's fixed shards they bunched on one shard and the
# label outran the device tool's 10 minutes on a 16-core, 1-GPU machine). Each finished test's
# output is appended to one log (under $OUT when the device tool gives one, so a run cut short
# still brings back every finished test).
if [ -n "${OUT:-}" ]; then log="$OUT/gpu_tests.log"; else log=$(mktemp); fi
: > "$log"
work=$(mktemp -d)
if ! "$root/gpu_bundle/bin/test_gpu" --gtest_list_tests --gtest_filter="${1:-*}" > "$work/list"; then
  echo "gpu tests: test_gpu could not list its tests (a library missing?):" >&2
  head -20 "$work/list" >&2
  exit 1
fi
awk '
  /^[^ ]/ { suite = $1; next }
  /^  / { sub(/^  +/, ""); sub(/  +#.*$/, ""); print suite $0 }' "$work/list" > "$work/all"
if [ ! -s "$work/all" ]; then echo "gpu tests: no test matches '${1:-*}'" >&2; exit 1; fi
slow='^(CudaMixedGemm|CutlassSpec|Cases/CutlassGemm|Dtypes/CudaAutotune|CudaConvSteps|CudaSpecAot.C88|CudaModels|CudaCutlass|CudaSkinny|CudaGemm)'
{ grep -E "$slow" "$work/all"; grep -vE "$slow" "$work/all"; } > "$work/queue"
one() {  # $1: a test's full name; $2: its number
  local out="$work/t$2.log" rc
  GTEST_TOTAL_SHARDS=1 GTEST_SHARD_INDEX=0 ANVIL_TEST_OUTDIR="$work/out$2" \
    timeout "$per_test_s" "$root/gpu_bundle/bin/test_gpu" --gtest_filter="$1" > "$out" 2>&1
  rc=$?
  if [ "$rc" -eq 124 ]; then  # a hang: a failure, counted once whether it printed a result
    if grep -qE '^\[ +(OK|FAILED|SKIPPED) +\] [A-Za-z].*\([0-9]+ ms\)$' "$out"; then
      echo "[ killed   ] $1: hung after its result, killed after ${per_test_s} s" >> "$out"
    else
      echo "[  FAILED  ] $1: killed after ${per_test_s} s (${per_test_s}000 ms)" >> "$out"
    fi
  fi
  rm -rf "$work/out$2"
  # this test's own result (a test that starts test_gpu as a child prints the child's result
  # into the same output: counted by name, it is not taken for one more test)
  local res
  res=$(grep -F -- "] $1 (" "$out" | grep -oE '^\[ +(OK|FAILED|SKIPPED) +\]' | tail -1 | tr -d '[] ')
  if [ "$rc" -eq 124 ]; then res=KILLED; fi
  echo "${res:-NONE} $1" > "$work/r$2"
  flock "$log" cat "$out" >> "$log"
  rm -f "$out"
}
export -f one; export work log per_test_s root
n=0; while read -r t; do n=$((n + 1)); printf '%s\0%s\0' "$t" "$n"; done < "$work/queue" |
  xargs -0 -n 2 -P "$jobs" bash -c 'one "$0" "$1"'
grep -E '^\[  (FAILED|PASSED|SKIPPED) |refused|Failure|error|Expected|Which is|actual|relative' "$log" |
  grep -v '^\[  PASSED  \] [0-9]* test' | head -300
# each test counted once, by its own result line (r files written by one)
cat "$work"/r* > "$work/results" 2>/dev/null
run=$(grep -cvE '^NONE ' "$work/results")
ok=$(grep -c '^OK ' "$work/results")
skipped=$(grep -c '^SKIPPED ' "$work/results")
failed=$(grep -cE '^(FAILED|KILLED) ' "$work/results")
refused=$(grep -c '^\[ refused  \]' "$log")
grep '^NONE ' "$work/results" | sed 's/^NONE /printed no result: /' >&2
listed=$(wc -l < "$work/queue")
echo "gpu tests: $run run of $listed listed, $ok passed ($refused of them refused at compile with the reason), $skipped skipped, $failed failed"
rm -rf "$work"
[ "$run" -eq "$listed" ] || { echo "gpu tests: $((listed - run)) listed tests printed no result" >&2; exit 1; }
[ "$failed" -eq 0 ]
