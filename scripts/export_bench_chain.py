"""Export the fused pointwise + reduction benchmark graph (needs PyTorch 2.x):
    python3 scripts/export_bench_chain.py OUTDIR
chain16m.pt2: RMSNorm-style chain add -> pow -> mean -> rsqrt -> mul -> mul over x of 4096 x 4096 fp32 (16 M
elements, 64 MiB in, 64 MiB out). No inputs or outputs are saved (64 MiB each): the bench makes its own."""
import os
import sys

import torch
import torch.nn as nn


class Chain(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt((x + 1.0).pow(2).mean(-1, keepdim=True) + 1e-6) * self.w


out = sys.argv[1]
os.makedirs(out, exist_ok=True)
with torch.no_grad():
    ep = torch.export.export(Chain(4096).eval(), (torch.randn(4096, 4096),))
    torch.export.save(ep, os.path.join(out, "full.pt2"))
import zipfile  # noqa: E402
with zipfile.ZipFile(os.path.join(out, "full.pt2")) as zin, zipfile.ZipFile(os.path.join(out, "chain16m.pt2"), "w") as zout:
    for info in zin.infolist():  # drop the 64 MiB sample input torch.export.save stores
        zout.writestr(info, b"" if "sample_inputs" in info.filename else zin.read(info.filename))
os.remove(os.path.join(out, "full.pt2"))
print(sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function"}))
