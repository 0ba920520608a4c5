#!/usr/bin/env bash
# The demo: installs and builds anvil, then compiles the bundled model (tests/fixtures/mlp_small.pt2,
# a 3-layer GELU MLP exported with torch.export from PyTorch 2.11) into a .anvil package of native
# code, runs the package on the bundled input, checks the result against PyTorch's own output and
# times it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ANVIL=build/bin/anvil
MODEL=tests/fixtures/mlp_small.pt2
OUT=${OUT:-out/demo}
mkdir -p "$OUT"

echo; echo "== anvil compile $MODEL -o $OUT/mlp_small.anvil (import, fuse, generate C++, build)"
$ANVIL compile "$MODEL" -o "$OUT/mlp_small.anvil" --emit-source "$OUT/src"
echo; echo "== anvil run $OUT/mlp_small.anvil -i tests/fixtures/mlp_small.in0.npy -o $OUT"
$ANVIL run "$OUT/mlp_small.anvil" -i tests/fixtures/mlp_small.in0.npy -o "$OUT"
echo; echo "== anvil compare with PyTorch's output (tests/fixtures/mlp_small.out0.npy)"
$ANVIL compare "$OUT/out0.npy" tests/fixtures/mlp_small.out0.npy
echo; echo "== anvil bench $OUT/mlp_small.anvil (latency of runtime::Model::run)"
$ANVIL bench "$OUT/mlp_small.anvil" -i tests/fixtures/mlp_small.in0.npy --iters 200 --warmup 20
echo; echo "demo: generated sources are in $OUT/src; 'anvil inspect $OUT/mlp_small.anvil' shows the package"
