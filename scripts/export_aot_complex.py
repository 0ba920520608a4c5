"""Export the complex-dtype cases of spec/aot.md section 4 (needs PyTorch 2.11):

    python3 scripts/export_aot_complex.py OUTDIR TOOLSDIR

44: fftn of a real (16,16,16) tensor -> complex64 plus its real view; 77: complex32 (2,), complex64
(8,) and complex128 0-d inputs pass the runtime checks. numpy has no complex32, so that input and
output are written as float16 arrays of the real view (NAME.in0.npy is (2, 2) float16).
"""
import os
import sys
import traceback

import numpy as np
import torch
import torch.nn as nn

OUT = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from export_fixture import save_case  # noqa: E402

os.makedirs(OUT, exist_ok=True)


def case(name, model, inputs, **kw):
    torch.manual_seed(0)
    try:
        return save_case(OUT, name, model, inputs, **kw)
    except Exception as e:  # noqa: BLE001
        print(f"FAILED {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        traceback.print_exc(limit=3)


class FftN(nn.Module):
    def forward(self, x):
        y = torch.fft.fftn(x)
        return y, torch.view_as_real(y)


class FftPlus(nn.Module):  # a complex result feeding more complex math, and back to real
    def forward(self, x):
        y = torch.fft.fft(x, dim=-1)
        z = y * y + y
        return z.abs(), torch.fft.ifft(z, dim=-1).real


class Checks(nn.Module):
    def forward(self, a, b, c):
        return a.clone(), b + b, c * 2


torch.manual_seed(0)
case("aot_44_fftn", FftN(), (torch.randn(16, 16, 16),))
case("aot_44_fft_more", FftPlus(), (torch.randn(6, 12),))

a = torch.randn(2, dtype=torch.complex64).to(torch.complex32)
b = torch.randn(8, dtype=torch.complex64)
c = torch.tensor(1.5 - 2.25j, dtype=torch.complex128)
m = Checks().eval()
try:
    ep = torch.export.export(m, (a, b, c))
    torch.export.save(ep, os.path.join(OUT, "aot_77_complex_checks.pt2"))
    outs = m(a, b, c)
    np.save(os.path.join(OUT, "aot_77_complex_checks.in0.npy"), torch.view_as_real(a).numpy())
    np.save(os.path.join(OUT, "aot_77_complex_checks.in1.npy"), b.numpy())
    np.save(os.path.join(OUT, "aot_77_complex_checks.in2.npy"), c.numpy())
    np.save(os.path.join(OUT, "aot_77_complex_checks.out0.npy"), torch.view_as_real(outs[0]).numpy())
    np.save(os.path.join(OUT, "aot_77_complex_checks.out1.npy"), outs[1].numpy())
    np.save(os.path.join(OUT, "aot_77_complex_checks.out2.npy"), outs[2].numpy())
    print("exported aot_77_complex_checks:",
          sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function"}))
except Exception as e:  # noqa: BLE001
    print(f"FAILED aot_77_complex_checks: {type(e).__name__}: {e}")
    traceback.print_exc(limit=3)
print("done")
