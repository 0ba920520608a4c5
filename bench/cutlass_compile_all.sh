#!/usr/bin/env bash
# Compiles every CUTLASS candidate of a few problems (bench/cutlass_dump.cpp) with nvcc, in
# parallel, and reports each compile's time and every failure (not in CI: minutes per TU).
#   bench/cutlass_compile_all.sh [BUILD_DIR] [JOBS]
# Needs CUTLASS's headers (ANVIL_CUTLASS_DIR, else .deps/cutlass-4.2.0.0) and nvcc ($ANVIL_NVCC,
# else /usr/local/cuda/bin/nvcc). Output under $OUT (default /tmp/anvil_cutlass_all).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build} jobs=${2:-$(nproc)}
cutlass=${ANVIL_CUTLASS_DIR:-.deps/cutlass-4.2.0.0}
[ -f "$cutlass/cutlass_library/source/include/cutlass/cutlass.h" ] && cutlass=$cutlass/cutlass_library/source
if [ ! -f "$cutlass/include/cutlass/cutlass.h" ]; then
  echo "CUTLASS headers not found under $cutlass (scripts/fetch_cutlass_headers.sh)" >&2; exit 1
fi
nvcc=${ANVIL_NVCC:-/usr/local/cuda/bin/nvcc}
out=${OUT:-/tmp/anvil_cutlass_all}
rm -rf "$out" && mkdir -p "$out"
cmake --build "$build" --target cutlass_dump >/dev/null || exit 1
"$build/bin/cutlass_dump" "$out" || exit 1
export nvcc cutlass out
compile() {
  local f=$1 t0 rc
  t0=$(date +%s%N)
  "$nvcc" -std=c++17 -arch=sm_90a -O3 -DNDEBUG --expt-relaxed-constexpr -Xcompiler -fPIC \
    -cudart shared -w -shared -isystem "$cutlass/include" -isystem "$cutlass/tools/util/include" \
    -I include "$out/$f.cu" -o "$out/$f.so" >"$out/$f.log" 2>&1
  rc=$?
  printf '%s %s %s\n' "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$f" \
    "$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN {printf "%.1f", (b - a) / 1e9}')"
}
export -f compile
awk '{print $2}' "$out/candidates.txt" | xargs -P "$jobs" -I{} bash -c 'compile {}' | tee "$out/results.txt"
fails=$(grep -c '^FAIL' "$out/results.txt")
total=$(wc -l <"$out/results.txt")
awk '{s+=$3; if ($3>m) m=$3} END {printf "compile seconds: mean %.1f, max %.1f\n", s/NR, m}' "$out/results.txt"
echo "$((total - fails)) of $total compiled; $fails failed (logs: $out/<name>.log)"
[ "$fails" -eq 0 ]
