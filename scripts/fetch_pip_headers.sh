#!/usr/bin/env bash
# Fetches the C++ headers a package on the Python package index ships in its wheel (the wheel's
# include/ folder) into DEST/include, once: header-only dependencies the build needs (cuDNN's
# frontend from nvidia-cudnn-frontend). The wheel is downloaded by name and version with pip; no
# Python package is installed. CMake runs this at configure time when DEST/include is missing.
#   scripts/fetch_pip_headers.sh PACKAGE VERSION DEST
set -euo pipefail
pkg=$1 version=$2 dest=$3
if [ -d "$dest/include" ]; then exit 0; fi
py=$(command -v python3 || true)
if [ -z "$py" ]; then echo "fetch_pip_headers: python3 is needed to download $pkg" >&2; exit 1; fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Any CPython wheel of the package carries the same headers: ask for one platform and version.
"$py" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.11 \
  --platform manylinux_2_28_x86_64 "$pkg==$version" -d "$tmp" >&2 ||
  { echo "fetch_pip_headers: pip could not download $pkg==$version" >&2; exit 1; }
wheel=$(ls "$tmp"/*.whl | head -1)
mkdir -p "$tmp/x"
"$py" - "$wheel" "$tmp/x" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    names = [n for n in z.namelist() if n.startswith("include/") and not n.endswith("/")]
    if not names:
        sys.exit(f"fetch_pip_headers: {sys.argv[1]} has no include/ folder")
    for n in names:
        z.extract(n, sys.argv[2])
PY
mkdir -p "$dest"
mv "$tmp/x/include" "$dest/include"
echo "fetch_pip_headers: $pkg $version headers in $dest/include" >&2
