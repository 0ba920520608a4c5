#!/usr/bin/env bash
# The demo: installs and builds anvil, then runs the bundled model (tests/fixtures/mlp_small.pt2,
# a 3-layer GELU MLP exported with torch.export from PyTorch 2.11) on its bundled input and checks
# the result against PyTorch's own output.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ANVIL=build/bin/anvil
MODEL=tests/fixtures/mlp_small.pt2
OUT=${OUT:-out/demo}

echo; echo "== anvil inspect $MODEL (signature and ops)"
$ANVIL inspect "$MODEL" --no-ir
echo; echo "== anvil run $MODEL --interpret -i tests/fixtures/mlp_small.in0.npy -o $OUT"
$ANVIL run "$MODEL" --interpret -i tests/fixtures/mlp_small.in0.npy -o "$OUT"
echo; echo "== compare with PyTorch's output (tests/fixtures/mlp_small.out0.npy)"
$ANVIL compare "$OUT/out0.npy" tests/fixtures/mlp_small.out0.npy
