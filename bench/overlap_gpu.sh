#!/usr/bin/env bash
# The TP MLP block on 2 GPUs over NCCL, compiled with the collective schedule's overlap on and
# off (issue 15): tp_overlap = all_reduce(a2(relu(a1 x))) + b2(gelu(b1 x)), whose all_reduce can
# run while branch b's GEMMs do (issue early / wait late, the collective on the group's stream)
# or be waited for at once (ANVIL_COLLECTIVE_REORDER=0: the graph's order). The fixture is
# rescaled by bench/scale_tp_pt2.py to each SIZE (tokens:model:hidden, bf16, seeded weights),
# compiled for cuda-sm90 on this machine, and timed by `anvil bench --backend nccl` on both
# ranks under `anvil launch -n 2` (ROUNDS alternating rounds; rank 0's single-call p50 with a
# synchronize and its back-to-back time per call; the median over rounds is printed).
#   bench/overlap_gpu.sh [SIZES] [ITERS] [ROUNDS]     (default "512:1024:4096 4096:4096:8192" 200 3)
# On the GPU machine, from the repository root, after bench/gpu_bundle.sh's bundle came along.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
sizes=${1:-"512:1024:4096 4096:4096:8192"}
iters=${2:-200}
rounds=${3:-3}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ "$root" != /work/main ]; then mkdir -p /work && ln -sfn "$root" /work/main; fi
if [ ! -d gpu_bundle ] && [ -e gpu_bundle.tar.xz ]; then tar -xJf gpu_bundle.tar.xz; fi
bin=$root/gpu_bundle/bin
[ -x "$bin/anvil" ] || bin=$root/build/bin
export LD_LIBRARY_PATH="$root/gpu_bundle/lib:${LD_LIBRARY_PATH:-}"
export ANVIL_DEVICE_BACKEND_DIR="$root/gpu_bundle/lib" ANVIL_INCLUDE_DIR="$root/include"
work=${OVERLAP_WORK:-$(mktemp -d)}
mkdir -p "$work"
for s in $sizes; do
  IFS=: read -r t d h <<< "$s"
  python3 bench/scale_tp_pt2.py tests/fixtures/tp_overlap.pt2 "$work/tp_$s.pt2" \
    16="$t" 64="$d" 256="$h" --dtype bf16 2> /dev/null
  for r in 1 0; do
    ANVIL_COLLECTIVE_REORDER=$r "$bin/anvil" compile "$work/tp_$s.pt2" --target cuda-sm90 \
      -o "$work/tp_${s}_$r.anvil" -q --cache-dir "$work/cache" &
  done
done
wait
for round in $(seq "$rounds"); do
  for s in $sizes; do
    for r in 1 0; do
      if "$bin/anvil" launch -n 2 -- "$bin/anvil" bench "$work/tp_${s}_$r.anvil" --backend nccl \
           -n "$iters" --warmup 20 -q > "$work/out.txt" 2> "$work/err.txt"; then
        head -1 "$work/out.txt" >> "$work/res_${s}_$r.txt"  # one JSON line per rank: the first
      else
        echo "overlap_gpu.sh: the run of $s (reorder $r) failed:"; cat "$work/err.txt"
      fi
    done
  done
done
python3 - "$work" "$sizes" <<'PY'
import json, statistics, sys
work, sizes = sys.argv[1], sys.argv[2].split()
print("| tokens x model x hidden (bf16, per rank) | overlap on: single / b2b ms | overlap off: single / b2b ms | speedup single / b2b |")
print("|---|---|---|---|")
for s in sizes:
    cells = {}
    for r in ("1", "0"):
        rows = [json.loads(l) for l in open(f"{work}/res_{s}_{r}.txt") if l.startswith("{")]
        cells[r] = (statistics.median(x.get("single_ms", x["p50_ms"]) for x in rows),
                    statistics.median(x.get("b2b_ms", x["p50_ms"]) for x in rows), len(rows))
    on, off = cells["1"], cells["0"]
    print(f"| {s.replace(':', ' x ')} | {on[0]:.3f} / {on[1]:.3f} | {off[0]:.3f} / {off[1]:.3f} | "
          f"{off[0] / on[0]:.2f}x / {off[1] / on[1]:.2f}x (rounds {on[2]}, {off[2]}) |")
PY
