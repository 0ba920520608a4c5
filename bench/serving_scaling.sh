#!/usr/bin/env bash
# Issue 14's serving figure from several sides, on the GPU machine with gpu_bundle/ unpacked
# (bench/gpu_bundle.sh): the MLP of ../shared/anchors/compile_bench_defs.py at batch 1 in bf16,
# exported with the machine's PyTorch, compiled once per package variant, then serving_bench at
# each thread count with device tensors (the output copied back after the run) and with host
# tensors (Model::run's copies on the runner's stream). One JSON line per cell.
#   bench/serving_scaling.sh [WORK] [THREADS...]        (default /tmp/serving, 1 2 4 8)
# SERVING_VARIANTS: ';'-separated compile environments, e.g. "ANVIL_CUDA_SKINNY=0" (default: the
# default package only). SERVING_CALLS: calls per thread (default 10000).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-/tmp/serving}; shift || true
threads=${*:-1 2 4 8}
export LD_LIBRARY_PATH="$root/gpu_bundle/lib:${LD_LIBRARY_PATH:-}"
export ANVIL_DEVICE_BACKEND_DIR="$root/gpu_bundle/lib" ANVIL_INCLUDE_DIR="$root/include"
mkdir -p "$work"
python3 - "$work/mlp_b1.pt2" <<'PY'
import sys, torch, torch.nn as nn, torch.nn.functional as F
class MLP(nn.Module):  # ../shared/anchors/compile_bench_defs.py
    def __init__(s, d=1024, h=4096):
        super().__init__(); s.l1 = nn.Linear(d, h); s.l2 = nn.Linear(h, h); s.l3 = nn.Linear(h, d)
    def forward(s, x):
        return s.l3(F.gelu(s.l2(F.gelu(s.l1(x)))))
m = MLP().to(torch.bfloat16).eval()
with torch.no_grad():
    ep = torch.export.export(m, (torch.randn(1, 1024, dtype=torch.bfloat16),))
torch.export.save(ep, sys.argv[1])
PY
variants=("")
if [ -n "${SERVING_VARIANTS:-}" ]; then
  IFS=';' read -r -a more <<< "$SERVING_VARIANTS"
  variants+=("${more[@]}")
fi
for v in "${variants[@]}"; do
  pkg="$work/mlp_b1_$(echo "${v:-default}" | tr -c 'A-Za-z0-9' _).anvil"
  env ${v//,/ } "$root/gpu_bundle/bin/anvil" compile "$work/mlp_b1.pt2" -o "$pkg" \
    --target cuda-sm90 -q
  # one call's device time: back-to-back calls of one thread (b2b_ms) and single calls
  echo "{\"variant\": \"${v:-default}\", \"bench\": $("$root/gpu_bundle/bin/anvil" bench "$pkg" \
    --device cuda:0 --iters 3000 | tail -1)}"
  # each step's device time (graphs off: one step at a time)
  "$root/gpu_bundle/bin/anvil" bench "$pkg" --device cuda:0 --iters 300 --profile | grep -v '^{' || true
  for t in $threads; do
    for h in 0 1; do
      r=$("$root/gpu_bundle/bin/serving_bench" "$pkg" --threads "$t" --host "$h" \
            --calls "${SERVING_CALLS:-10000}" || true)
      echo "{\"variant\": \"${v:-default}\", ${r#\{}"
    done
  done
done
