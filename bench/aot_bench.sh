#!/usr/bin/env bash
# anvil AOT (CPU) vs PyTorch eager (Debian python3-torch 1.13 on OpenBLAS) in one run; see bench/aot_bench.py.
#   bench/aot_bench.sh [--iters N] [--rounds R] [--threads 1,2] [--json OUT.json] [--models a,b]
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
for p in python3-torch python3-numpy libopenblas0-pthread; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
BUILD_TARGETS=anvil scripts/setup.sh >/dev/null
exec /usr/bin/python3 bench/aot_bench.py --anvil build/bin/anvil "$@"
