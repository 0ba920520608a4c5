#!/usr/bin/env python3
"""anvil's CUDA packages beside PyTorch eager and torch.compile, same GPU, same run.

Models: the anchors' MLP 1024->4096->4096->1024 with GELU at batch 64 (../shared/anchors/
compile_bench_defs.py), fp32 and bf16. Each is exported with torch.export on the CPU, compiled by
`anvil compile --target cuda-sm90`, checked against eager on the GPU, and timed with `anvil bench`
(per call: inputs already on the GPU, the run's stream synchronized). PyTorch is timed the same
way: per call, torch.cuda.synchronize() after each, median of the calls.

    python3 bench/cuda_bench.py [--anvil gpu_bundle/bin/anvil] [--iters 300] [--json out.json]
"""
import argparse, json, os, re, statistics, subprocess, sys, tempfile, time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):  # as in compile_bench_defs.py
    def __init__(s, d=1024, h=4096):
        super().__init__(); s.l1 = nn.Linear(d, h); s.l2 = nn.Linear(h, h); s.l3 = nn.Linear(h, d)

    def forward(s, x):
        return s.l3(F.gelu(s.l2(F.gelu(s.l1(x)))))


def time_torch(fn, x, iters, warmup=20):
    for _ in range(warmup):
        fn(x)
    torch.cuda.synchronize()
    ms = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn(x)
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ms)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--anvil", default="gpu_bundle/bin/anvil")
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda")
    results = []
    work = tempfile.mkdtemp()
    for dt in (torch.float32, torch.bfloat16):
        name = f"mlp_1024x4096_{str(dt).split('.')[-1]}"
        m = MLP().to(dt).eval()
        x = torch.randn(64, 1024, dtype=dt)
        with torch.no_grad():
            ep = torch.export.export(m, (x,))
        pt2 = os.path.join(work, name + ".pt2")
        torch.export.save(ep, pt2)
        pkg = os.path.join(work, name + ".anvil")
        t0 = time.perf_counter()
        subprocess.run([a.anvil, "compile", pt2, "-o", pkg, "--target", "cuda-sm90", "-q"], check=True)
        compile_s = time.perf_counter() - t0
        # correctness against eager on the GPU (inputs as float32 .npy: anvil converts to bf16)
        xin = os.path.join(work, name + ".in0.npy")
        np.save(xin, x.float().numpy())
        out = os.path.join(work, name + "_out")
        subprocess.run([a.anvil, "run", pkg, "-i", xin, "-o", out, "-q"], check=True)
        got = torch.from_numpy(np.load(os.path.join(out, "out0.npy")))
        mg, xg = m.to(dev), x.to(dev)
        with torch.no_grad():
            want = mg(xg).float().cpu()
        rel = ((got - want).abs().max() / want.abs().max().clamp(min=1)).item()
        bench = subprocess.run([a.anvil, "bench", pkg, "--iters", str(a.iters), "--warmup", "30"],
                               check=True, capture_output=True, text=True).stdout
        p50 = float(re.search(r"p50 ([0-9.]+) ms", bench).group(1))
        with torch.no_grad():
            eager = time_torch(mg, xg, a.iters)
            cm = torch.compile(mg)
            compiled = time_torch(cm, xg, a.iters)
        r = {"model": name, "gpu": torch.cuda.get_device_name(), "anvil_ms": p50,
             "eager_ms": eager, "torch_compile_ms": compiled, "anvil_compile_s": compile_s,
             "max_rel_err_vs_eager": rel}
        results.append(r)
        print(f"{name:24s} anvil {p50:.4f} ms  eager {eager:.4f} ms  torch.compile {compiled:.4f} ms"
              f"  (anvil/eager {p50 / eager:.2f}x, anvil compile {compile_s:.1f} s, rel err {rel:.1e})")
        sys.stdout.flush()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"torch": torch.__version__, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
