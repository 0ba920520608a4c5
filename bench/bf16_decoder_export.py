#!/usr/bin/env python3
# The bf16 model of docs/performance.md "CPU library GEMMs": exports llama_bf16.pt2 in the current
# folder and prints the eager time. Then: anvil bench llama_bf16.pt2 --threads T (ANVIL_ONEDNN=0: before).
# A small Llama-like decoder (hidden 256, 2 layers, 4 heads, intermediate 1024, vocab 1000) in
# bf16, batch 4 x 128 tokens, exported with torch.export.
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
class RMS(nn.Module):
    def __init__(s, d): super().__init__(); s.w = nn.Parameter(torch.ones(d))
    def forward(s, x): return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * s.w
class Layer(nn.Module):
    def __init__(s, d=256, h=4, ff=1024):
        super().__init__(); s.h = h
        s.q, s.k, s.v, s.o = (nn.Linear(d, d, bias=False) for _ in range(4))
        s.g, s.u, s.dn = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False), nn.Linear(ff, d, bias=False)
        s.n1, s.n2 = RMS(d), RMS(d)
    def forward(s, x):
        B, T, D = x.shape
        y = s.n1(x)
        q, k, v = (t(y).view(B, T, s.h, D // s.h).transpose(1, 2) for t in (s.q, s.k, s.v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + s.o(a.transpose(1, 2).reshape(B, T, D))
        y = s.n2(x)
        return x + s.dn(F.silu(s.g(y)) * s.u(y))
class M(nn.Module):
    def __init__(s):
        super().__init__(); s.emb = nn.Embedding(1000, 256); s.layers = nn.ModuleList([Layer(), Layer()])
        s.norm = RMS(256); s.head = nn.Linear(256, 1000, bias=False)
    def forward(s, ids):
        x = s.emb(ids)
        for l in s.layers: x = l(x)
        return s.head(s.norm(x))
m = M().eval().to(torch.bfloat16)
ids = torch.randint(0, 1000, (4, 128))
ep = torch.export.export(m, (ids,))
torch.export.save(ep, "llama_bf16.pt2")
import time
with torch.no_grad():
    for _ in range(3): m(ids)
    torch.set_num_threads(2); t = time.perf_counter(); [m(ids) for _ in range(10)]
    print("eager bf16 2 threads ms", (time.perf_counter() - t) / 10 * 1e3)
