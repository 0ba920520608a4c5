#!/usr/bin/env bash
# Runs a bundle of bench/bundle.sh on this host.
#   bench/bundle_run.sh BUNDLE.tar.xz overlap [ITERS] [ROUNDS]
#     compiled collectives, 2 ranks (anvil launch, gloo): each variant ITERS timed runs (default
#     300) per round, ROUNDS rounds (default 3) alternating the variants, with 1 and 4 threads
#     per rank; prints the median over rounds of rank 0's median latency.
#   bench/bundle_run.sh BUNDLE.tar.xz dist [N] [ROUNDS]
#     bench/dist_bench.sh with the bundled binary: anvil gloo (and mpi where mpirun exists) vs
#     torch.distributed gloo from $PYTHON (default python3).
set -euo pipefail
tarball=$(realpath "$1")
mode=${2:-overlap}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xJf "$tarball"
cd "$work/bundle"
# mpirun / orted come from this host: let the ranks use this host's Open MPI libraries too.
if command -v mpirun > /dev/null; then
  rm -f lib/libmpi.so* lib/libopen-rte.so* lib/libopen-pal.so*
fi
export LD_LIBRARY_PATH=$PWD/lib ANVIL_BACKEND=gloo
echo "$(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
if [ "$mode" = dist ]; then
  BENCH_BIN=$PWD/dist_bench PYTHON=${PYTHON:-python3} bench/dist_bench.sh "" "${3:-2}" "${4:-3}"
  exit
fi
iters=${3:-300}
rounds=${4:-3}
variants="tp_overlap tp_overlap_x512 tp_overlap_x2048 coll_bucket"
for threads in 1 4; do
  export BENCH_THREADS=$threads
  rm -f ./*.txt
  for _ in $(seq "$rounds"); do
    for v in $variants; do
      for s in on off; do
        ./anvil launch -n 2 -- ./overlap_bench "pkg/${v}_$s.anvil" "$iters" >> "${v}_$s.txt"
      done
    done
  done
  echo "threads per rank: $threads (median latency ms; on = reordered / bucketed, off = graph order / 4 calls)"
  for v in $variants; do
    med() { grep -o 'median_ms=[0-9.]*' "$1" | cut -d= -f2 | sort -n | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
    on=$(med "${v}_on.txt")
    off=$(med "${v}_off.txt")
    awk -v v="$v" -v on="$on" -v off="$off" \
      'BEGIN{printf "  %-18s on %8.4f   off %8.4f   speedup %5.2fx\n", v, on, off, off / on}'
  done
done
