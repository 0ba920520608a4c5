#!/usr/bin/env bash
# anvil gloo and mpi vs torch.distributed gloo: all_reduce / all_gather / broadcast fp32, 8 B to
# 64 MiB, N ranks on this host (default 2). Runs the three engines in alternation ROUNDS times
# (default 3) and prints the median latency and bus bandwidth of each cell side by side.
#   bench/dist_bench.sh [BUILD_DIR] [N] [ROUNDS]
# BUILD_DIR (default build) must hold lib/libanvil_dist.so and lib/libanvil_core.so.
# DIST_BENCH_MODE=ucx runs the mpi backend over Open MPI's ob1 + shared memory and over UCX
# instead (no gloo, no torch).
# DIST_BENCH_MODE=bucket measures what the compiler's bucketing trades instead (4 all_reduces vs
# one coalesced call per tensor size, anvil's gloo and mpi backends; no torch).
# Environment: PYTHON (default /usr/bin/python3, needs torch), BENCH_BIN (a prebuilt dist_bench:
# skips compiling), TASKSET (a prefix such as "taskset -c 0,1" to pin every rank's CPUs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
n=${2:-2}
rounds=${3:-3}
python=${PYTHON:-/usr/bin/python3}
pin=${TASKSET:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

bench=${BENCH_BIN:-}
if [ -z "$bench" ]; then
  # Build the bench against the build's libraries (kept out of the main CMake build).
  build=$(cd "${1:-$root/build}" && pwd)
  mpi_inc=$(mpicxx --showme:incdirs 2>/dev/null | tr ' ' '\n' | sed 's/^/-isystem /' | tr '\n' ' ' || true)
    fftw_libs=$(pkg-config --libs fftw3f fftw3 2>/dev/null || true)
  mpi_lib=$(mpicxx --showme:libdirs 2>/dev/null | tr ' ' '\n' | sed 's/^/-L/' | tr '\n' ' ' || true)
  c++ -std=c++20 -O2 -DANVIL_HAVE_GLOO=1 -DANVIL_HAVE_MPI=1 -I"$root/src" $mpi_inc \
    "$root/bench/dist_bench.cpp" "$build/lib/libanvil_dist.so" "$build/lib/libanvil_core.so" -Wl,-rpath,"$build/lib" \
    -lgloo $mpi_lib -lmpi -lzip -lz $fftw_libs -lpthread -o "$work/dist_bench"
  bench="$work/dist_bench"
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
if [ "${DIST_BENCH_MODE:-}" = ucx ]; then
  # The mpi backend on Open MPI's two point-to-point layers, alternating: ob1 over the
  # shared-memory BTL (vader, the default here) and UCX (pml ucx; Open MPI 4.1 selects it only
  # for the transports in pml_ucx_tls / pml_ucx_devices, so `any` lets it run over shared memory
  # and TCP on a host without InfiniBand).
  for r in $(seq "$rounds"); do
    $pin mpirun -n "$n" --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader \
      "$bench" mpi > "$work/ob1.$r"
    $pin mpirun -n "$n" --oversubscribe --bind-to none --mca pml ucx --mca pml_ucx_tls any \
      --mca pml_ucx_devices any "$bench" mpi > "$work/ucx.$r"
  done
  /usr/bin/env python3 - "$work" "$rounds" "$n" <<'EOF'
import statistics, sys
work, rounds, n = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(engine):
    cells = {}
    for r in range(1, rounds + 1):
        for line in open(f"{work}/{engine}.{r}"):
            op, size, lat, bw = line.split()
            cells.setdefault((op, int(size)), []).append((float(lat), float(bw)))
    return {k: (statistics.median(l for l, _ in v), statistics.median(b for _, b in v))
            for k, v in cells.items()}
ob1, ucx = load("ob1"), load("ucx")
def fmt(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB" if b >= 1024 else f"{b} B"
print(f"anvil mpi backend, {n} ranks, median of {rounds} alternating runs; latency in us, bus "
      f"bandwidth in GB/s")
print("| op | size | ob1 + vader us | ucx us | ob1 + vader GB/s | ucx GB/s | ucx / ob1 time |")
print("|---|---|---|---|---|---|---|")
for (op, size) in sorted(ob1, key=lambda k: (k[0], k[1])):
    a, u = ob1[(op, size)], ucx.get((op, size), (float("nan"), float("nan")))
    print(f"| {op} | {fmt(size)} | {a[0]:.1f} | {u[0]:.1f} | {a[1]:.3f} | {u[1]:.3f} "
          f"| {u[0] / a[0]:.2f}x |")
EOF
  exit
fi
if [ "${DIST_BENCH_MODE:-}" = bucket ]; then
  # What the compiler's bucketing trades: 4 all_reduces vs one coalesced call, per tensor size.
  for r in $(seq "$rounds"); do
    $pin "$bench" launch "$n" "$bench" gloo bucket > "$work/bgloo.$r"
    if command -v mpirun > /dev/null; then
      $pin mpirun -n "$n" --oversubscribe --bind-to none "$bench" mpi bucket > "$work/bmpi.$r"
    else
      : > "$work/bmpi.$r"
    fi
  done
  /usr/bin/env python3 - "$work" "$rounds" "$n" <<'EOF'
import statistics, sys
work, rounds, n = sys.argv[1], int(sys.argv[2]), sys.argv[3]
print(f"{n} ranks, 4 fp32 tensors of SIZE each: 4 all_reduces posted back to back then waited vs "
      f"one all_reduce_coalesced; median of {rounds} runs, us")
print("| backend | size | 4 calls | 1 coalesced | speedup |")
print("|---|---|---|---|---|")
for b in ("gloo", "mpi"):
    cells = {}
    for r in range(1, rounds + 1):
        for line in open(f"{work}/b{b}.{r}"):
            _, size, sep, coal = line.split()
            cells.setdefault(int(size), []).append((float(sep), float(coal)))
    for size in sorted(cells):
        sep = statistics.median(s for s, _ in cells[size])
        coal = statistics.median(c for _, c in cells[size])
        label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
        print(f"| {b} | {label} | {sep:.1f} | {coal:.1f} | {sep / coal:.2f}x |")
EOF
  exit
fi
for r in $(seq "$rounds"); do
  $pin "$bench" launch "$n" "$bench" gloo > "$work/gloo.$r"
  if ! command -v mpirun > /dev/null; then
    : > "$work/mpi.$r"  # no Open MPI on this host: the mpi columns print n/a
  elif ! $pin mpirun -n "$n" --oversubscribe --bind-to none "$bench" mpi > "$work/mpi.$r"; then
    echo "dist_bench: the mpi run failed; its columns print n/a" >&2
    : > "$work/mpi.$r"
  fi
  $pin "$bench" launch "$n" "$python" "$root/bench/dist_bench_torch.py" \
    > "$work/torch.$r" 2> "$work/torch.err.$r" || { cat "$work/torch.err.$r"; exit 1; }
done

/usr/bin/env python3 - "$work" "$rounds" "$n" <<'EOF'
import statistics, sys
work, rounds, n = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(engine):
    cells = {}
    for r in range(1, rounds + 1):
        for line in open(f"{work}/{engine}.{r}"):
            op, size, lat, bw = line.split()
            cells.setdefault((op, int(size)), []).append((float(lat), float(bw)))
    return {k: (statistics.median(l for l, _ in v), statistics.median(b for _, b in v))
            for k, v in cells.items()}
res = {e: load(e) for e in ("torch", "gloo", "mpi")}
def fmt(b):
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB" if b >= 1024 else f"{b} B"
print(f"{n} ranks, median of {rounds} alternating runs; latency in us, bus bandwidth in GB/s")
print("| op | size | torch gloo us | anvil gloo us | anvil mpi us | torch GB/s | anvil gloo GB/s | anvil mpi GB/s | gloo/torch | mpi/torch |")
print("|---|---|---|---|---|---|---|---|---|---|")
for (op, size) in sorted(res["torch"], key=lambda k: (k[0], k[1])):
    t, g = res["torch"][(op, size)], res["gloo"][(op, size)]
    m = res["mpi"].get((op, size), (float("nan"), float("nan")))
    print(f"| {op} | {fmt(size)} | {t[0]:.1f} | {g[0]:.1f} | {m[0]:.1f} | {t[1]:.3f} | {g[1]:.3f} "
          f"| {m[1]:.3f} | {t[0] / g[0]:.2f}x | {t[0] / m[0]:.2f}x |")
EOF
