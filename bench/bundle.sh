#!/usr/bin/env bash
# Packs the collective benches into one self-contained tarball that runs on another x86-64
# Linux host (glibc >= this one's) without building there:
# - the overlap bench (bench/overlap_bench.cpp) with packages of tp_overlap (as exported and with
#   the batch scaled to 512 and 2048 rows) and coll_bucket, the collective passes on and off,
#   compiled for x86_64-avx2 so they load on any AVX2 machine;
# - the collectives bench (bench/dist_bench.{cpp,sh}, bench/dist_bench_torch.py);
# - bin/anvil (for `anvil launch`) and the shared libraries all of it needs.
#   bench/bundle.sh [BUILD_DIR] [OUT.tar.xz]               (default build, anvil_bench.tar.xz)
# On the other host: bench/bundle_run.sh OUT.tar.xz overlap|dist [ARGS] (see there).
# Why: on a 2-core machine the two ranks' compute fills both cores and gloo's TCP copies need the
# same cores, so reordering cannot hide a collective there; a host with spare cores shows what
# the schedule buys, and how the backends compare when they are not starved.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
tarball=$(realpath -m "${2:-anvil_bench.tar.xz}")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
out="$work/bundle"
mkdir -p "$out/lib" "$out/pkg"
mpi_lib=$(mpicxx --showme:libdirs 2>/dev/null | tr ' ' '\n' | sed 's/^/-L/' | tr '\n' ' ' || true)
fftw_libs=$(pkg-config --libs fftw3f fftw3 2>/dev/null || true)
c++ -std=c++20 -O2 -I"$root/src" -I"$root/include" "$root/bench/overlap_bench.cpp" \
  "$build/lib/libanvil_rt.so" "$build/lib/libanvil_dist.so" "$build/lib/libanvil_core.so" -Wl,-rpath,"$build/lib" \
  -lgloo $mpi_lib -lmpi -lopenblas -lzip -lz $fftw_libs -ldl -lpthread -o "$out/overlap_bench"
c++ -std=c++20 -O2 -DANVIL_HAVE_GLOO=1 -DANVIL_HAVE_MPI=1 -I"$root/src" "$root/bench/dist_bench.cpp" \
  "$build/lib/libanvil_dist.so" "$build/lib/libanvil_core.so" -lgloo $mpi_lib -lmpi -lzip -lz \
  $fftw_libs -lpthread -o "$out/dist_bench"
cp "$build/bin/anvil" "$out/anvil"
strip "$out/overlap_bench" "$out/dist_bench" "$out/anvil"
mkdir -p "$out/bench"
cp "$root/bench/dist_bench.sh" "$root/bench/dist_bench_torch.py" "$root/bench/bundle_run.sh" \
  "$out/bench/"
for rows in 512 2048; do
  python3 "$root/bench/scale_batch_pt2.py" "$root/tests/fixtures/tp_overlap.pt2" \
    "$work/tp_overlap_x$rows.pt2" "$rows" 2> /dev/null
done
compile() {  # NAME FIXTURE REORDER BUCKET
  ANVIL_COLLECTIVE_REORDER=$3 ANVIL_COLLECTIVE_BUCKET=$4 "$build/bin/anvil" compile "$2" \
    --target x86_64-avx2 -o "$out/pkg/$1.anvil" -q > /dev/null
}
compile tp_overlap_on "$root/tests/fixtures/tp_overlap.pt2" 1 1
compile tp_overlap_off "$root/tests/fixtures/tp_overlap.pt2" 0 1
for rows in 512 2048; do
  compile "tp_overlap_x${rows}_on" "$work/tp_overlap_x$rows.pt2" 1 1
  compile "tp_overlap_x${rows}_off" "$work/tp_overlap_x$rows.pt2" 0 1
done
compile coll_bucket_on "$root/tests/fixtures/coll/coll_bucket.pt2" 1 1
compile coll_bucket_off "$root/tests/fixtures/coll/coll_bucket.pt2" 1 0
# Every shared library but the C library itself (the other host brings its own).
for f in "$out/overlap_bench" "$out/dist_bench" "$out/anvil"; do
  ldd "$f" | awk '$3 ~ /^\// {print $3}' | grep -vE '/(libc|libm|ld-linux[^/]*)\.so' |
    xargs -I{} cp -L {} "$out/lib/"
done
tar -C "$work" -cJf "$tarball" bundle
echo "wrote $tarball ($(du -h "$tarball" | cut -f1))"
