#!/usr/bin/env bash
# Compiled collectives: the collective passes on vs off, 2 ranks on this host (anvil launch, gloo).
#   bench/overlap_bench.sh [BUILD_DIR] [ITERS] [ROUNDS]
# - tp_overlap: issue-early / wait-late reordering (branch b runs while the all_reduce is in
#   flight) vs the graph order (wait right after the issue), as exported (x f32[16, 64]) and
#   with the batch scaled to BATCH rows (default 2048: bench/scale_batch_pt2.py; static shapes,
#   so the .pt2's JSON is rewritten, the weights stay);
# - coll_bucket: 4 small all_reduces bucketed into one coalesced call vs 4 calls.
# Each package runs ITERS timed iterations (default 300) per round; ROUNDS (default 3) rounds
# alternate the variants; the median over rounds of rank 0's median latency is printed.
# BUILD_DIR (default build) must hold bin/anvil and lib/libanvil_{rt,dist,core}.so.
# Environment: ANVIL_BACKEND (gloo, mpi: default gloo), BENCH_THREADS (threads per rank, default
# 1), BATCH (rows of the scaled tp_overlap, default 2048).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
iters=${2:-300}
rounds=${3:-3}
export BENCH_THREADS=${BENCH_THREADS:-1}
export ANVIL_BACKEND=${ANVIL_BACKEND:-gloo}
batch=${BATCH:-2048}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
anvil="$build/bin/anvil"

fftw_libs=$(pkg-config --libs fftw3f fftw3 2>/dev/null || true)
mpi_lib=$(mpicxx --showme:libdirs 2>/dev/null | tr ' ' '\n' | sed 's/^/-L/' | tr '\n' ' ' || true)
c++ -std=c++20 -O2 -I"$root/src" -I"$root/include" "$root/bench/overlap_bench.cpp" \
  "$build/lib/libanvil_rt.so" "$build/lib/libanvil_dist.so" "$build/lib/libanvil_core.so" -Wl,-rpath,"$build/lib" \
  -lgloo $mpi_lib -lmpi -lopenblas -lzip -lz $fftw_libs -ldl -lpthread -o "$work/overlap_bench"

compile() {  # NAME FIXTURE REORDER BUCKET
  ANVIL_COLLECTIVE_REORDER=$3 ANVIL_COLLECTIVE_BUCKET=$4 \
    "$anvil" compile "$2" -o "$work/$1.anvil" -q > /dev/null
}
python3 "$root/bench/scale_batch_pt2.py" "$root/tests/fixtures/tp_overlap.pt2" \
  "$work/tp_overlap_big.pt2" "$batch" 2> /dev/null
compile overlap_on "$root/tests/fixtures/tp_overlap.pt2" 1 1
compile overlap_off "$root/tests/fixtures/tp_overlap.pt2" 0 1
compile big_on "$work/tp_overlap_big.pt2" 1 1
compile big_off "$work/tp_overlap_big.pt2" 0 1
compile bucket_on "$root/tests/fixtures/coll/coll_bucket.pt2" 1 1
compile bucket_off "$root/tests/fixtures/coll/coll_bucket.pt2" 1 0

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for r in $(seq "$rounds"); do
  for v in overlap_on overlap_off big_on big_off bucket_on bucket_off; do
    if [ "$ANVIL_BACKEND" = mpi ]; then
      mpirun -n 2 --oversubscribe --bind-to none "$work/overlap_bench" "$work/$v.anvil" "$iters" \
        >> "$work/$v.txt"
    else
      "$anvil" launch -n 2 -- "$work/overlap_bench" "$work/$v.anvil" "$iters" >> "$work/$v.txt"
    fi
  done
done

python3 - "$work" "$ANVIL_BACKEND" "$batch" <<'PY'
import statistics, sys, re
work, backend, batch = sys.argv[1], sys.argv[2], sys.argv[3]
def med(v):
    vals = [float(re.search(r"median_ms=([0-9.]+)", l).group(1))
            for l in open(f"{work}/{v}.txt") if "median_ms" in l]
    return statistics.median(vals)
rows = [("tp_overlap", "reordered (issue early, wait late)", med("overlap_on"),
         "graph order (wait after issue)", med("overlap_off")),
        (f"tp_overlap x{batch}", "reordered (issue early, wait late)", med("big_on"),
         "graph order (wait after issue)", med("big_off")),
        ("coll_bucket", "bucketed (1 coalesced all_reduce)", med("bucket_on"),
         "unbucketed (4 all_reduces)", med("bucket_off"))]
print(f"compiled collectives, 2 ranks, backend {backend}, median latency per run (ms)")
for name, a, ta, b, tb in rows:
    print(f"  {name:16s} {a:38s} {ta:8.4f}   {b:32s} {tb:8.4f}   speedup {tb / ta:5.2f}x")
PY
