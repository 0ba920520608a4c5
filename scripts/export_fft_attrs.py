#!/usr/bin/env python3
"""PyTorch's values for the FFT attribute case of tests/aot/test_aot_complex.cpp
(FftAttributesMatchPyTorch): rfft(n=8, dim=0, norm="ortho") then irfft, fftn with s=[4, 6] and
norm="forward", ifft along dim 0 of a transposed complex input. The inputs come from the same
generator as the test's make_input (an LCG), so the test can check them too.

    python3 scripts/export_fft_attrs.py  # writes tests/fixtures/aot/fft_attrs.*.npy
"""
import os

import numpy as np
import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "aot")


def make_input(sizes, complex_, seed):
    n = int(np.prod(sizes)) * (2 if complex_ else 1)
    vals = np.empty(n, dtype=np.float64)
    for i in range(n):
        seed = (seed * 1664525 + 1013904223) & 0xFFFFFFFF
        vals[i] = (seed >> 8) / float(1 << 24) * 4.0 - 2.0
    if complex_:
        return torch.from_numpy(vals.view(np.complex128).reshape(sizes).astype(np.complex64))
    return torch.from_numpy(vals.reshape(sizes).astype(np.float32))


def main():
    x = make_input([8, 6], False, 6)
    z = make_input([6, 8], True, 7)
    r = torch.fft.rfft(x, n=8, dim=0, norm="ortho")
    i = torch.fft.irfft(r, n=8, dim=0, norm="ortho")
    f = torch.fft.fftn(x, s=[4, 6], dim=[0, 1], norm="forward")
    g = torch.fft.ifft(z.permute(1, 0), dim=0)
    for name, t in [("in0", x), ("in1", z), ("out0", i), ("out1", f), ("out2", g)]:
        np.save(os.path.join(OUT, f"fft_attrs.{name}.npy"), t.contiguous().numpy())
    print("torch", torch.__version__, "wrote fft_attrs.{in0,in1,out0,out1,out2}.npy")


if __name__ == "__main__":
    main()
