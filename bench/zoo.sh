#!/usr/bin/env bash
# The whole model zoo (label `zoo` with ANVIL_ZOO_ALL=1): every model of tests/fixtures/zoo is
# refilled, compiled, run at each checked shape and compared with PyTorch and the interpreter;
# models listed in EXPECTED_FAILURES.txt must fail to compile with exactly their listed reason.
#   bench/zoo.sh [BUILD_DIR]          (default build; builds test_zoo and anvil first)
# The timing table of docs/models.md comes from bench/zoo_bench.py (needs PyTorch 2.11).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
ninja -C "$BUILD" test_zoo anvil
ANVIL_ZOO_ALL=1 ctest --test-dir "$BUILD" -L zoo --output-on-failure
