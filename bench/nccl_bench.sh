#!/usr/bin/env bash
# anvil's nccl backend vs torch.distributed on NCCL vs the raw-NCCL floor, 2 GPUs, one command:
# all_reduce / all_gather / reduce_scatter / all_to_all / broadcast, fp32 and bf16, 8 B to 1 GiB
# (powers of 8), each call synchronized (sync) and N calls queued then one synchronize (b2b,
# nccl-tests style); plus the functional all_reduce + wait, 8 B. Prints one table (times in us,
# b2b bus bandwidth in GB/s, anvil's % of the floor = floor time / anvil time) and writes JSON.
#   bench/nccl_bench.sh [MAX_BYTES]            (default 1073741824)
# On the GPU machine, from the repository root, after bench/gpu_bundle.sh's gpu_bundle.tar.xz
# came along (unpacked here when gpu_bundle/ is missing); without a bundle it uses build/.
# Environment: BENCH_BIN (a nccl_bench binary), PYTHON (default python3, needs torch with CUDA),
# NCCL_BENCH_JSON (default $OUT/nccl_bench.json when OUT is set, else /tmp/nccl_bench.json), RANKS
# (default 2), NCCL_BENCH_OPS (a comma list of the ops to run, e.g. all_to_all; default all),
# NCCL_BENCH_RUNS (default 1): the engines run that many times, in turn (anvil, floor, torch,
# anvil, ...), and each cell is the median of its runs (issue 15's targets are medians of 3; the
# JSON keeps every run's figure), NCCL_BENCH_PIN (c0,c1: local rank i's main thread runs on CPU
# ci once its communicator is up; anvil and the floor, not torch).
# Each engine is bounded by a timeout (anvil 150 s, floor 120 s, torch 180 s): one
# that fails or times out prints n/a in its columns and the script exits non-zero at the end.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
max_bytes=${1:-1073741824}
ranks=${RANKS:-2}
python=${PYTHON:-python3}
json=${NCCL_BENCH_JSON:-${OUT:-/tmp}/nccl_bench.json}
# NVLink multicast (NVLS) off, for NCCL, torch's symmetric memory and NVSHMEM alike
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

if [ ! -d gpu_bundle ] && [ -e gpu_bundle.tar.xz ]; then tar -xJf gpu_bundle.tar.xz; fi
if [ -n "${BENCH_BIN:-}" ]; then
  bin=$BENCH_BIN
  lib=$(cd "$(dirname "$bin")/../lib" && pwd)
elif [ -x gpu_bundle/bin/nccl_bench ]; then
  bin=$root/gpu_bundle/bin/nccl_bench lib=$root/gpu_bundle/lib
elif [ -x build/bin/nccl_bench ]; then
  bin=$root/build/bin/nccl_bench lib=$root/build/lib
else
  echo "nccl_bench.sh: no nccl_bench binary (gpu_bundle/bin, build/bin, or BENCH_BIN); build it" \
       "with cmake --build build --target nccl_bench (needs ANVIL_CUDA=ON)" >&2
  exit 2
fi
# torch runs with the caller's library path: the bundle's copies of libstdc++ & co. are for anvil
if [ -n "${LD_LIBRARY_PATH:-}" ]; then torch_env=(env "LD_LIBRARY_PATH=$LD_LIBRARY_PATH");
else torch_env=(env -u LD_LIBRARY_PATH); fi
export LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}" ANVIL_DEVICE_BACKEND_DIR="$lib"
# libnccl.so.2 is not packed: when the loader does not know one, use PyTorch's (nvidia/nccl/lib),
# as bench/gpu_run.sh does
if ! ldconfig -p 2>/dev/null | grep -q 'libnccl.so.2 ' && [ ! -e /usr/local/cuda/lib/libnccl.so.2 ] &&
   [ ! -e /usr/local/cuda/lib64/libnccl.so.2 ]; then
  nccl_dir=$("$python" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
  if [ -n "$nccl_dir" ] && [ -e "$nccl_dir/libnccl.so.2" ]; then
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$nccl_dir"
  else
    echo "nccl_bench.sh: warning: no libnccl.so.2 found; nccl_bench will fail to start" >&2
  fi
fi
export ANVIL_DIST_TIMEOUT=${ANVIL_DIST_TIMEOUT:-120}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
run_engine() {  # name seconds command...
  local name=$1 secs=$2
  shift 2
  local t0=$SECONDS
  if ! timeout -k 10 "$secs" "$@" > "$work/$name.out" 2> "$work/$name.err"; then
    echo "nccl_bench.sh: the $name run failed or timed out (${secs} s); its columns print n/a:" >&2
    tail -20 "$work/$name.err" >&2
    status=1
  fi
  echo "nccl_bench.sh: $name took $((SECONDS - t0)) s" >&2
}
ops=()
if [ -n "${NCCL_BENCH_OPS:-}" ]; then ops=(--ops "$NCCL_BENCH_OPS"); fi
runs=${NCCL_BENCH_RUNS:-1}
if ! [[ "$runs" =~ ^[1-9][0-9]?$ ]]; then
  echo "nccl_bench.sh: NCCL_BENCH_RUNS must be a count from 1 to 99, not '$runs'" >&2
  exit 2
fi
for r in $(seq 1 "$runs"); do
  run_engine "anvil.$r" 150 "$bin" --ranks "$ranks" --max-bytes "$max_bytes" "${ops[@]}"
  run_engine "floor.$r" 120 "$bin" --raw --ranks "$ranks" --max-bytes "$max_bytes" "${ops[@]}"
  run_engine "torch.$r" 180 "$bin" launch "$ranks" "${torch_env[@]}" "$python" \
    "$root/bench/nccl_bench_torch.py" --max-bytes "$max_bytes" "${ops[@]}"
done

gpus=$(nvidia-smi -L 2>/dev/null | head -"$ranks" | sed 's/ (UUID.*//' | paste -sd ';' -)
"$python" - "$work" "$json" "$ranks" "${gpus:-unknown}" "$runs" <<'EOF'
import json, sys
work, out, ranks, gpus, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
per_run, records = {}, []
for engine in ("anvil", "floor", "torch"):
    for r in range(1, runs + 1):
        try:
            lines = open(f"{work}/{engine}.{r}.out").read().splitlines()
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) != 8 or f[0] != engine:
                continue  # not a cell line (e.g. a library's banner)
            _, op, dt, nbytes, mode, us, alg, bus = f
            rec = dict(engine=engine, run=r, op=op, dtype=dt, bytes=int(nbytes), mode=mode,
                       time_us=float(us), algbw_GBps=float(alg), busbw_GBps=float(bus))
            records.append(rec)
            per_run.setdefault((engine, op, dt, int(nbytes), mode), []).append(rec)
# each cell: the run with the median time (an even count: the faster of the middle two)
cells = {}
for k, recs in per_run.items():
    recs = sorted(recs, key=lambda rec: rec["time_us"])
    cells[k] = recs[(len(recs) - 1) // 2]

def size(b):
    return f"{b >> 30} GiB" if b >= 1 << 30 else f"{b >> 20} MiB" if b >= 1 << 20 else \
        f"{b >> 10} KiB" if b >= 1 << 10 else f"{b} B"

def get(engine, op, dt, b, mode, key):
    # the functional all_reduce's floor is the raw 8 B all_reduce
    if engine == "floor" and op == "functional_all_reduce":
        op = "all_reduce"
    r = cells.get((engine, op, dt, b, mode))
    return r[key] if r else None

def fmt(v, spec):
    return "n/a" if v is None else format(v, spec)

def pct(anvil, floor):
    return "n/a" if anvil is None or floor is None else f"{100.0 * floor / anvil:.0f}%"

order = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast",
         "functional_all_reduce"]
keys = sorted({(op, dt, b) for (_, op, dt, b, _) in cells},
              key=lambda k: (order.index(k[0]) if k[0] in order else 99, k[1] != "fp32", k[2]))
print(f"GPUs: {gpus}")
print(f"{ranks} ranks (one GPU each), NCCL_NVLS_ENABLE=0; times in us per call; busbw (b2b) in "
      "GB/s as nccl-tests; anvil % = floor time / anvil time")
print("| op | dtype | size | anvil sync | torch sync | floor sync | anvil b2b | torch b2b | "
      "floor b2b | anvil busbw | torch busbw | floor busbw | anvil % floor sync | "
      "anvil % floor b2b |")
print("|---|---|---|" + "---|" * 11)
rows = []
for op, dt, b in keys:
    t = {(e, m): get(e, op, dt, b, m, "time_us") for e in ("anvil", "torch", "floor")
         for m in ("sync", "b2b")}
    bw = {e: get(e, op, dt, b, "b2b", "busbw_GBps") for e in ("anvil", "torch", "floor")}
    row = dict(op=op, dtype=dt, bytes=b,
               **{f"{e}_{m}_us": t[(e, m)] for (e, m) in t},
               **{f"{e}_b2b_busbw_GBps": bw[e] for e in bw},
               anvil_pct_of_floor_sync=None if None in (t[("anvil", "sync")], t[("floor", "sync")])
               else 100.0 * t[("floor", "sync")] / t[("anvil", "sync")],
               anvil_pct_of_floor_b2b=None if None in (t[("anvil", "b2b")], t[("floor", "b2b")])
               else 100.0 * t[("floor", "b2b")] / t[("anvil", "b2b")])
    rows.append(row)
    print(f"| {op} | {dt} | {size(b)} | " +
          " | ".join(fmt(t[(e, m)], ".1f") for m in ("sync", "b2b")
                     for e in ("anvil", "torch", "floor")) + " | " +
          " | ".join(fmt(bw[e], ".3g") for e in ("anvil", "torch", "floor")) + " | " +
          f"{pct(t[('anvil', 'sync')], t[('floor', 'sync')])} | "
          f"{pct(t[('anvil', 'b2b')], t[('floor', 'b2b')])} |")
if runs > 1:  # the runs behind the medians of the 8 B cells (issue 15's small-op targets)
    print(f"anvil's 8 B cells, each of the {runs} runs (us; the table shows the median):")
    for (engine, op, dt, b, mode), recs in sorted(per_run.items()):
        if engine == "anvil" and b == 8:
            print(f"  {op} {dt} {mode}: " + ", ".join(f"{rec['time_us']:.1f}" for rec in recs))
with open(out, "w") as f:
    json.dump({"ranks": int(ranks), "gpus": gpus, "runs": runs, "env": {"NCCL_NVLS_ENABLE": "0"}, "table": rows,
               "cells": records}, f, indent=1)
print(f"JSON: {out}")
EOF
[ $? -eq 0 ] || status=1
# each engine's stderr (ANVIL_DIST_HOST_PROFILE's breakdown, NCCL's warnings) beside the JSON
# (one run: nccl_bench_anvil.err; several: nccl_bench_anvil.1.err, ...)
for e in anvil floor torch; do
  for r in $(seq 1 "$runs"); do
    suffix=$([ "$runs" -gt 1 ] && echo ".$r")
    [ -s "$work/$e.$r.err" ] && cp "$work/$e.$r.err" "$(dirname "$json")/nccl_bench_$e$suffix.err"
  done
done
exit $status
