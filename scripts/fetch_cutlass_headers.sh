#!/usr/bin/env bash
# Fetches CUTLASS's C++ headers (include/cutlass, include/cute, tools/util/include) from the
# nvidia-cutlass wheel on the Python package index into DEST, once. The wheel is downloaded by
# name and version with pip and unzipped: no Python package is installed, so Debian's
# externally-managed Python (PEP 668) is no obstacle, as root or as a user. CMake runs this at
# configure time when DEST/include/cutlass/cutlass.h is missing (a failure only warns: CUTLASS
# GEMM candidates are then skipped); scripts/setup.sh runs it too.
#   scripts/fetch_cutlass_headers.sh VERSION DEST
set -euo pipefail
version=$1 dest=$2
if [ -f "$dest/include/cutlass/cutlass.h" ]; then exit 0; fi
py=$(command -v python3 || true)
if [ -z "$py" ]; then echo "fetch_cutlass_headers: python3 is needed to download nvidia-cutlass" >&2; exit 1; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip download --quiet --no-deps --only-binary=:all: "nvidia-cutlass==$version" -d "$tmp" >&2 ||
  { echo "fetch_cutlass_headers: pip could not download nvidia-cutlass==$version" >&2; exit 1; }
wheel=$(ls "$tmp"/*.whl | head -1)
"$py" - "$wheel" "$tmp/x" <<'PY'
import sys, zipfile
# The wheel keeps CUTLASS's tree under cutlass_library/source/.
prefixes = ("cutlass_library/source/include/", "cutlass_library/source/tools/util/include/")
with zipfile.ZipFile(sys.argv[1]) as z:
    names = [n for n in z.namelist() if n.startswith(prefixes) and not n.endswith("/")]
    if not any(n.endswith("include/cutlass/cutlass.h") for n in names):
        sys.exit(f"fetch_cutlass_headers: {sys.argv[1]} has no cutlass_library/source/include")
    for n in names:
        z.extract(n, sys.argv[2])
PY
mkdir -p "$dest/tools/util"
rm -rf "$dest/include" "$dest/tools/util/include"
mv "$tmp/x/cutlass_library/source/include" "$dest/include"
mv "$tmp/x/cutlass_library/source/tools/util/include" "$dest/tools/util/include"
echo "fetch_cutlass_headers: nvidia-cutlass $version headers in $dest" >&2
