#!/usr/bin/env bash
# Issue 19 (CPU): ViT-B/16 and ConvNeXt-T on the GPU machine's host CPU in ONE device call
# (under 9 minutes), most important first (a step that would pass BUDGET_S is skipped):
#   1-2. anvil vs PyTorch eager vs torch.compile at 8, then 2 pinned cores (bench/vision.py
#        under taskset, 1 round);
#   3.   anvil's per-step profile at 8 and 2 threads (bench/profile_summary.py);
#   4.   ViT at 8 threads with the packed kernel's largest K block 512 / 192 / 128
#        (ANVIL_GEMM_KC), alternated;
#   5.   the Linears' GEMM micro-bench (gemm_bench --linear, with the FMA peak) for the same
#        K blocks on pools of 1, (2,) 8 threads;
#   6.   ViT compiled with --autotune fast at 8 threads, beside the default package.
#
#   bench/vit_host.sh [ANVIL] [GEMM_BENCH]    # defaults: gpu_bundle/bin/anvil, gpu_bundle/bin/gemm_bench
#
# Environment: PY (a python with torch and torchvision; default python3), OUT (logs; default
# $OUT of the device tool, else ./vit_host_out), WORK (exports, packages; default
# /tmp/vit_host), BUDGET_S (default 520: no step starts after it, each is cut at it),
# BASE_ANVIL (optional: a second anvil, e.g. main's, whose packages are timed alternately with
# ANVIL's at both core counts), SKIP_2=1 (the 8-core rows only), MODELS (default
# vit_b_16,convnext_tiny), GEMM_THREADS (default 1,2,8), GEMM_SHAPES ("M K N ...").
# The summaries go to stdout (the device tool keeps its last 12,000 characters); the full logs,
# the vision JSON and the profiles to $OUT.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# the bundle's libraries and the headers generated code includes (as bench/gpu_run.sh sets them)
if [ ! -d "$root/gpu_bundle" ] && [ -f "$root/gpu_bundle.tar.xz" ]; then
  tar -C "$root" -xJf "$root/gpu_bundle.tar.xz"
fi
[ -d "$root/gpu_bundle/lib" ] && export LD_LIBRARY_PATH="$root/gpu_bundle/lib:${LD_LIBRARY_PATH:-}"
export ANVIL_INCLUDE_DIR="${ANVIL_INCLUDE_DIR:-$root/include}"
anvil=$(realpath -m "${1:-$root/gpu_bundle/bin/anvil}")
gemm_bench=$(realpath -m "${2:-$root/gpu_bundle/bin/gemm_bench}")
py=${PY:-python3}
out=${OUT:-$PWD/vit_host_out}
work=${WORK:-/tmp/vit_host}
budget=${BUDGET_S:-520}
mkdir -p "$out" "$work"
deadline=$((SECONDS + budget))
models=${MODELS:-vit_b_16,convnext_tiny}

left() { echo $((deadline - SECONDS)); }
# run NAME CMD...: runs CMD with what is left of the budget, its output into $out/NAME.txt
run() {
  local name=$1
  shift
  local t
  t=$(left)
  if [ "$t" -le 15 ]; then
    echo "## $name: skipped (budget)"
    return
  fi
  echo "## $name ($(date +%T), ${t}s left)"
  timeout "$t" "$@" >"$out/$name.txt" 2>&1
  local rc=$?
  [ $rc -ne 0 ] && echo "   (exit $rc; log $out/$name.txt)"
}

lscpu | sed -n 's/^Model name: *//p;s/^CPU(s): *//p;s/^Thread(s) per core: *//p' | paste -sd' ' |
  sed 's/^/# host: /'
echo "# anvil $anvil; torch $($py -c 'import torch; print(torch.__version__)' 2>/dev/null)"

# 1-2. the headline: anvil / eager / torch.compile at 8, then 2 pinned cores (the first run
# exports the models and compiles the packages)
run vision_8 taskset -c 0-7 "$py" "$root/bench/vision.py" --anvil "$anvil" --models $models \
  --threads 8 --rounds 1 --iters 20 --work "$work" --json "$out/vision_8.json"
sed -n '/^$/,$p' "$out/vision_8.txt"
if [ "${SKIP_2:-0}" != 1 ]; then
  run vision_2 taskset -c 0-1 "$py" "$root/bench/vision.py" --anvil "$anvil" --models $models \
    --threads 2 --rounds 1 --iters 20 --work "$work" --json "$out/vision_2.json"
  sed -n '/^$/,$p' "$out/vision_2.txt"
fi

# 3. where anvil's time goes, 8 and 2 threads
for m in ${models//,/ }; do
  [ -f "$work/$m.anvil" ] || continue
  for t in 8 2; do
    [ $t = 2 ] && [ "${SKIP_2:-0}" = 1 ] && continue
    run "prof_${m}_t$t" taskset -c 0-$((t - 1)) "$anvil" bench "$work/$m.anvil" \
      -i "$work/$m.in0.npy" --threads $t -n 20 --warmup 3 --profile
    echo "# $m, $t threads:"
    python3 "$root/bench/profile_summary.py" "$out/prof_${m}_t$t.txt" --top 5
  done
done

# bench_ms NAME PKG MODEL CORES THREADS [ENV...]: p50 of `anvil bench` (20 runs), printed
bench_ms() {
  local name=$1 pkg=$2 m=$3 cores=$4 t=$5
  shift 5
  run "$name" taskset -c "$cores" env "$@" "$anvil" bench "$pkg" \
    -i "$work/$m.in0.npy" --threads "$t" -n 20 --warmup 3 -q
  echo "# $name: $(tail -1 "$out/$name.txt" | \
    python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["p50_ms"])' 2>/dev/null) ms"
}

# 4. ViT at 8 threads with the packed kernel's largest K block 512 (default) / 192 / 128
#    (ANVIL_GEMM_KC, read at run time), alternated
m=vit_b_16
if [ -f "$work/$m.anvil" ]; then
  for kc in 512 192 128 512 192 128; do
    bench_ms "vit_t8_kc$kc" "$work/$m.anvil" $m 0-7 8 ANVIL_GEMM_KC=$kc
  done
fi

# 5. the Linears' GEMMs: K block 512 on pools of 1, 2, 8 threads, then 192 and 128 on 1 and 8
for kc in 512 192 128; do
  thr=${GEMM_THREADS:-1,2,8}
  [ $kc != 512 ] && thr=${GEMM_THREADS:-1,8}
  run "gemm_kc$kc" taskset -c 0-7 env ANVIL_GEMM_KC=$kc "$gemm_bench" --linear --threads "$thr" \
    ${GEMM_SHAPES:-197 768 2304 197 768 768 197 768 3072 197 3072 768 3136 96 384}
  cat "$out/gemm_kc$kc.txt"
done

# 6. ViT tuned on this host at 8 threads (--autotune fast: oneDNN, OpenBLAS, the packed kernel
#    and templates timed per GEMM): which kernel wins here, and what it gives
if [ -f "$work/$m.pt2" ] && [[ ",$models," == *",$m,"* ]]; then
  run tune_vit_t8 taskset -c 0-7 env ANVIL_NUM_THREADS=8 ANVIL_CACHE_DIR="$work/cache" \
    "$anvil" compile "$work/$m.pt2" -o "$work/${m}_tuned8.anvil" --autotune fast \
    --autotune-cache "$work/tune8" -v
  grep -iE "chose|autotune:" "$out/tune_vit_t8.txt" | tail -8
  if [ -f "$work/${m}_tuned8.anvil" ]; then
    bench_ms vit_t8_tuned "$work/${m}_tuned8.anvil" $m 0-7 8
    bench_ms vit_t8_default "$work/$m.anvil" $m 0-7 8
  fi
fi

# 7. optional A/B against a base anvil (its own packages), alternated, 8 and 2 cores
if [ -n "${BASE_ANVIL:-}" ]; then
  for m in ${models//,/ }; do
    [ -f "$work/$m.pt2" ] || continue
    run "base_compile_$m" "$BASE_ANVIL" compile "$work/$m.pt2" -o "$work/${m}_base.anvil" -q
    for cores in 0-7 0-1; do
      t=$((${cores#0-} + 1))
      for who in base new base new; do
        a=$anvil pkg=$work/$m.anvil
        [ $who = base ] && a=$BASE_ANVIL pkg=$work/${m}_base.anvil
        run "ab_${m}_t${t}_$who" taskset -c "$cores" "$a" bench "$pkg" -i "$work/$m.in0.npy" \
          --threads "$t" -n 20 --warmup 3 -q
        echo "# A/B $m $t threads $who: $(tail -1 "$out/ab_${m}_t${t}_$who.txt" | \
          python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["p50_ms"])' 2>/dev/null)"
      done
    done
  done
fi
echo "# done in ${SECONDS}s; logs in $out"
