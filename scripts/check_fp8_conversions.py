"""Checks include/anvil/anvil_fp8.h against PyTorch over far more values than the tests keep:
every 997th float32 bit pattern plus dense runs around each power of two from 2^-30 to 2^19
(both signs, about 17 million values) converted to the four float8 formats, and all 256 codes
of each format converted back to float32, bit for bit (NaN payloads included).
    /work/venv215/bin/python scripts/check_fp8_conversions.py
Needs a C compiler (cc) and torch; prints the mismatches per format and exits 1 on any."""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FORMATS = [torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]

PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include "anvil/anvil_fp8.h"
int main(int argc, char** argv) {
  if (argc != 4) return 2;
  FILE* f = fopen(argv[1], "rb");
  fseek(f, 0, SEEK_END);
  size_t n = (size_t)ftell(f) / 4;
  fseek(f, 0, SEEK_SET);
  float* x = malloc(n * 4);
  if (fread(x, 4, n, f) != n) return 3;
  fclose(f);
  unsigned char* o = malloc(n * 4);
  for (size_t i = 0; i < n; ++i)
    for (int k = 0; k < 4; ++k) o[i * 4 + k] = anvil_f32_to_fp8(29 + k, x[i]);
  FILE* g = fopen(argv[2], "wb");
  fwrite(o, 1, n * 4, g);
  fclose(g);
  unsigned int d[1024];
  for (int k = 0; k < 4; ++k)
    for (int c = 0; c < 256; ++c) d[k * 256 + c] = anvil_fp8_f32_bits(anvil_fp8_to_f32(29 + k, (uint8_t)c));
  g = fopen(argv[3], "wb");
  fwrite(d, 4, 1024, g);
  fclose(g);
  return 0;
}
"""


def main():
    parts = [np.arange(0, 2**32, 997, dtype=np.uint64).astype(np.uint32)]
    for e in range(-30, 20):
        b = int(np.float32(2.0**e).view(np.uint32))
        parts.append(np.arange(b - 300000, b + 300000, 7, dtype=np.int64).astype(np.uint32))
    u = np.concatenate(parts)
    u = np.concatenate([u, u | np.uint32(0x80000000)])
    x = u.view(np.float32)
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "chk.c"), os.path.join(tmp, "chk")
        with open(src, "w") as f:
            f.write(PROGRAM)
        subprocess.check_call(["cc", "-std=c99", "-O2", "-I" + os.path.join(ROOT, "include"), src,
                               "-o", exe])
        x.tofile(os.path.join(tmp, "x.bin"))
        subprocess.check_call([exe] + [os.path.join(tmp, n) for n in ("x.bin", "o.bin", "d.bin")])
        got8 = np.fromfile(os.path.join(tmp, "o.bin"), dtype=np.uint8).reshape(-1, 4)
        got32 = np.fromfile(os.path.join(tmp, "d.bin"), dtype=np.uint32).reshape(4, 256)
    t = torch.from_numpy(x)
    for k, fmt in enumerate(FORMATS):
        want8 = t.to(fmt).view(torch.uint8).numpy()
        enc = np.nonzero(want8 != got8[:, k])[0]
        codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(fmt)
        want32 = codes.float().view(torch.int32).numpy().view(np.uint32)
        dec = np.nonzero(want32 != got32[k])[0]
        print(f"{fmt}: {len(enc)} of {len(x)} encodings and {len(dec)} of 256 decodings differ",
              [(hex(u[i]), int(want8[i]), int(got8[i, k])) for i in enc[:5]],
              [(int(i), hex(want32[i]), hex(got32[k][i])) for i in dec[:5]])
        bad += len(enc) + len(dec)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
