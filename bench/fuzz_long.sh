#!/usr/bin/env bash
# Long libFuzzer runs of every target (fuzz/), one after another: scripts/fuzz.sh with an hour
# per target by default. The corpora grow in build-fuzz/corpus/ and are kept, so a later run
# starts where this one stopped. docs/reliability.md records the counts and coverage reached.
#
#   bench/fuzz_long.sh [SECONDS_PER_TARGET]      (default 3600)
#   FUZZ_TARGETS="pt2 package" bench/fuzz_long.sh 7200
#   FUZZ_ARGS=-runs=1000000 bench/fuzz_long.sh 86400   (stop each at a million executions)
set -euo pipefail
cd "$(dirname "$0")/.."
exec scripts/fuzz.sh "${1:-3600}"
