#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang + ASan + UBSan, in build-fuzz/) and runs each one
# for a bounded time, one after another, each on its own corpus (kept between runs) seeded from
# the fixtures. CI runs it briefly (scripts/test.sh); bench/fuzz_long.sh runs it for long.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]        (default 15)
#
# Environment: FUZZ_TARGETS (default: all six), FUZZ_BUILD_DIR (build-fuzz), JOBS (build jobs),
# FUZZ_NO_BUILD=1 (run what is built),
# ANVIL_CLI (the main build's anvil, for IR seeds from `anvil inspect`; default build/bin/anvil
# when present), FUZZ_ARGS (more libFuzzer flags, e.g. -runs=1000000).
# Each run prints one summary line: executions, edge coverage (libFuzzer's cov:), features,
# corpus size. A crash, hang (-timeout), leak or sanitizer report stops the script with the
# reproducer saved under $FUZZ_BUILD_DIR/artifacts/ (replay: build-fuzz/bin/fuzz_X FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-15}
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
JOBS=${JOBS:-$(nproc)}
TARGETS=${FUZZ_TARGETS:-"npy tcp_store dlpack ir_parser package pt2"}
if [[ -z "${ANVIL_CLI:-}" && -x build/bin/anvil ]]; then ANVIL_CLI=build/bin/anvil; fi

command -v clang++ >/dev/null || { echo "scripts/fuzz.sh: clang++ not found (apt-get install clang)" >&2; exit 1; }
LAUNCHER=()
if command -v ccache >/dev/null; then
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
if [[ -z "${FUZZ_NO_BUILD:-}" ]]; then  # FUZZ_NO_BUILD=1: run the targets already built
  # -O1 without debug info: half the compile time of -O2 -g, and libFuzzer's speed stays.
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_C_COMPILER=clang -DANVIL_FUZZ=ON "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" \
    "${LAUNCHER[@]}" >/dev/null
  cmake --build "$BUILD" -j "$JOBS" --target anvil_fuzz
fi

rm -rf "$BUILD/seeds"
python3 fuzz/make_seeds.py "$BUILD/seeds" ${ANVIL_CLI:+--anvil-cli "$ANVIL_CLI"}
mkdir -p "$BUILD/artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
for t in $TARGETS; do
  mkdir -p "$BUILD/corpus/$t"
  log="$BUILD/fuzz_$t.log"
  # -timeout: an input running over 10 s is a hang; -rss_limit_mb: over 2 GiB is a finding.
  # One process (no -jobs / -workers: the targets run one after another).
  if ! "$BUILD/bin/fuzz_$t" "$BUILD/corpus/$t" "$BUILD/seeds/$t" -dict="fuzz/dict/$t.dict" \
      -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$BUILD/artifacts/$t-" -print_final_stats=1 ${FUZZ_ARGS:-} >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz_$t: FINDING (log $log, reproducer under $BUILD/artifacts/)" >&2
    exit 1
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  secs=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log")
  last=$(grep -E '^#[0-9]+' "$log" | tail -n 1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
  printf 'fuzz_%-10s %10s runs in %ss  cov %s  ft %s  corpus %s\n' "$t" "$runs" \
    "${secs:-$SECONDS_PER_TARGET}" "$cov" "$ft" "$corp"
done
