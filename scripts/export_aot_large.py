"""Export spec/aot.md case 83 (needs PyTorch 2.11): large weights.

    python3 scripts/export_aot_large.py OUTDIR

aot_83_linear_512x250112 (512 MB of fp32 weights: compiles, loads with mmap and matches) and
aot_83_linear_2048x262144 (2 GiB: compiles). Weights and inputs are index formulas
(scripts/formula_weights.py), so the archives hold zeroed, deflated entries and the tests rebuild
the real ones; they compute the expected outputs themselves (a float64 dot product per output).
"""
import math
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from formula_weights import fill, formula, save_zeroed  # noqa: E402

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)

for name, (k, n, rows) in {"aot_83_linear_512x250112": (512, 250112, 4),
                           "aot_83_linear_2048x262144": (2048, 262144, 2)}.items():
    model = nn.Linear(k, n).eval()
    params = fill(model, lambda fqn, t: (math.sqrt(6.0 / k), 0.0))
    x = formula(rows * k, 100000, 2.0, 0.0, torch.float32).view(rows, k)
    with torch.no_grad():
        ep = torch.export.export(model, (x,))
        y = model(x)
    print(name, "out", tuple(y.shape), float(y.abs().max()), float(y[0, :4].sum()))
    save_zeroed(ep, model, params, OUT, name,
                [dict(shape=[rows, k], seed=100000, scale=2.0, offset=0.0, dtype="float32")])
print("done")
