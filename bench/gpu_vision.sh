#!/usr/bin/env bash
# Issue 19's GPU bench in one device call: torchvision's models at bf16 batch 32, anvil (and the
# opt-in variants in VARIANTS, alternated with the default by cuda_bench.py --variant-env)
# against PyTorch eager and torch.compile with CUDA graphs (reduce-overhead), each model under
# its own time limit so that one slow export or compile cannot take the others' figures. Run it
# from the repository root on the GPU machine with the bundle unpacked (bench/gpu_bundle.sh):
#   bench/gpu_vision.sh [MODELS]      # default: the issue's eight, most wanted first
# Environment: PER_MODEL_S (default 150), MODES (torch.compile modes; default reduce-overhead,
# empty: none), VARIANTS (cuda_bench.py --variant-env; default none),
# ITERS (100), PROFILE (slowest steps per package, 0 = off; default 12), OUT (JSON and logs;
# default $OUT of the device tool, else ./gpu_vision_out), GPUS (how many GPUs to spread the
# models over, each model wholly on one, the models of one GPU in turn; default: the GPUs
# nvidia-smi lists, 1 when CUDA_VISIBLE_DEVICES is set). Prints one summary line per model, in
# the list's order: ms back to back for the default and each variant, reduce-overhead, and
# default / reduce-overhead.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ -d gpu_bundle ] || tar xJf gpu_bundle.tar.xz
export LD_LIBRARY_PATH="$root/gpu_bundle/lib:${LD_LIBRARY_PATH:-}"
export ANVIL_DEVICE_BACKEND_DIR="$root/gpu_bundle/lib" ANVIL_INCLUDE_DIR="$root/include"
export ANVIL_CACHE_DIR="${ANVIL_CACHE_DIR:-/tmp/anvil_gpu_vision_cache}"
export ANVIL_NVCC="${ANVIL_NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
models=${1:-resnet50,efficientnet_b0,convnext_tiny,mobilenet_v3_small,densenet121,regnet_y_400mf,resnet18,vit_b_16}
out=${OUT:-$PWD/gpu_vision_out}
mkdir -p "$out"
variant_args=()
[ -n "${VARIANTS:-}" ] && variant_args=(--variant-env "$VARIANTS")
IFS=, read -ra list <<< "$models"
# one model: its bench under its time limit, then its summary line on stdout
run_model() {
  local m=$1
  timeout "${PER_MODEL_S:-150}" python3 bench/cuda_bench.py --anvil gpu_bundle/bin/anvil \
    --models "tv_${m}_b32" --dtypes bfloat16 --modes "${MODES-reduce-overhead}" --iters "${ITERS:-100}" \
    --profile "${PROFILE:-12}" "${variant_args[@]}" --json "$out/$m.json" > "$out/$m.log" 2>&1
  rc=$?
  python3 - "$out/$m.json" "$m" "$rc" <<'EOF'
import json, sys
path, model, rc = sys.argv[1], sys.argv[2], sys.argv[3]
try:
    r = json.load(open(path))["results"][0]
except Exception:
    print(f"{model}: no summary (exit {rc}: {'timed out' if rc == '124' else 'see its log'}); "
          "what it measured:")
    sys.exit(0)
ro = r.get("compile_reduce-overhead_b2b_ms")
parts = [f"anvil {r['anvil_b2b_ms']:.3f}"]
for k in sorted((k for k in r if k.endswith("_env") and k.startswith("tuned")),
               key=lambda k: int(k[5:-4] or 0)):  # tuned, tuned1, ...: the variants' order
    tag = k[:-4]
    runs = [r[x] for x in r if x.startswith(tag + "_b2b_ms_r")]
    if runs:
        parts.append(f"[{r[k]}] {min(runs):.3f}")
parts.append(f"reduce-overhead {ro:.3f}" if ro else "reduce-overhead -")
if ro:
    parts.append(f"anvil / ro {r['anvil_b2b_ms'] / ro:.2f}")
parts.append(f"err {r.get('max_rel_err_vs_eager', float('nan')):.1e}")
print(f"{model} (ms b2b): " + ", ".join(parts))
EOF
  # a run cut short: its progress lines (cuda_bench.py prints each figure as it is measured)
  [ -s "$out/$m.json" ] || grep -E "^# tv_" "$out/$m.log" | sed 's/^/  /'
}
gpus=${GPUS:-}
if [ -z "$gpus" ]; then
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
    gpus=1
  else
    gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  fi
fi
[ "$gpus" -ge 1 ] 2>/dev/null || gpus=1
if [ "$gpus" -le 1 ]; then
  for m in "${list[@]}"; do run_model "$m"; done
  exit 0
fi
# several GPUs: model i on GPU i % GPUS, each GPU's models in turn, the summaries printed in
# the list's order once all have ended
for ((g = 0; g < gpus; ++g)); do
  (
    for ((i = g; i < ${#list[@]}; i += gpus)); do
      CUDA_VISIBLE_DEVICES=$g run_model "${list[$i]}" > "$out/${list[$i]}.summary" 2>&1
    done
  ) &
done
wait
for m in "${list[@]}"; do cat "$out/$m.summary"; rm -f "$out/$m.summary"; done
