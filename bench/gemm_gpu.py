#!/usr/bin/env python3
"""GPU GEMMs: anvil's autotuner candidates (cuBLASLt, CUTLASS) beside PyTorch's torch.mm (cuBLAS),
same GPU, same run (issue 16's GPU bench).

One exported model holds every shape (x_i @ W_i, bf16, W_i a parameter), so one `anvil compile
--target cuda-sm90 --autotune MODE --verbose` tunes them all: the CUTLASS candidates of every
shape compile in one parallel pool, and `--verbose` prints each candidate's time as the tuner
measured it (a CUDA graph of 20 calls over operand copies that pass the L2). torch.mm is timed
the same way: a CUDA graph of 20 calls over the same number of operand copies, CUDA events.

  python3 bench/gemm_gpu.py [--anvil gpu_bundle/bin/anvil] [--mode fast] [--shapes MxNxK,...]

Prints one JSON line per shape and a table: torch.mm, anvil's cuBLASLt candidate, the best
CUTLASS candidate, anvil's choice, in microseconds and TFLOP/s.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import torch

DEFAULT_SHAPES = "1024x1024x1024,2048x2048x2048,4096x4096x4096,8192x8192x8192,64x4096x1024,64x1024x4096,1024x3072x1024"


class Mms(torch.nn.Module):
    def __init__(self, shapes, dt, linear=False):
        super().__init__()
        self.linear = linear  # weights stored [N, K] as nn.Linear's: x @ w.t()
        self.w = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.randn(*((n, k) if linear else (k, n)), dtype=dt) / k ** 0.5)
             for (_, n, k) in shapes])

    def forward(self, *xs):
        return tuple(x @ (w.t() if self.linear else w) for x, w in zip(xs, self.w))


def time_torch_mm(m, n, k, dt, per_graph=20, reps=50, linear=False):
    """Per-call microseconds of torch.mm in a CUDA graph of `per_graph` calls over copies."""
    set_bytes = (m * k + k * n + m * n) * torch.finfo(dt).bits // 8
    copies = min(per_graph, (128 << 20) // max(set_bytes, 1) + 1)
    def weight():
        return torch.randn(n, k, dtype=dt, device="cuda").t() if linear else torch.randn(k, n, dtype=dt, device="cuda")
    sets = [(torch.randn(m, k, dtype=dt, device="cuda"), weight(),
             torch.empty(m, n, dtype=dt, device="cuda")) for _ in range(copies)]
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for a, b, c in sets:  # warm up cuBLAS's handles and workspaces outside the capture
            torch.mm(a, b, out=c)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        for r in range(per_graph):
            a, b, c = sets[r % copies]
            torch.mm(a, b, out=c)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1000.0 / per_graph)
    times.sort()
    return times[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--anvil", default="gpu_bundle/bin/anvil")
    ap.add_argument("--mode", default="fast", help="--autotune level (fast: the first 4 CUTLASS configurations)")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES, help="MxNxK,... (bf16)")
    ap.add_argument("--work", default="")
    ap.add_argument("--linear", action="store_true",
                    help="weights stored [N, K] (nn.Linear's layout: x @ w.t()), as in the MLP")
    ap.add_argument("--backends", default="cublaslt,cutlass", help="--gemm-backends (own: anvil's kernels)")
    ap.add_argument("--max-candidates", default="", help="--gemm-max-candidates")
    a = ap.parse_args()
    torch.manual_seed(0)
    dt = torch.bfloat16
    shapes = [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
    work = a.work or tempfile.mkdtemp()
    os.makedirs(work, exist_ok=True)
    model = Mms(shapes, dt, a.linear).eval()
    xs = tuple(torch.randn(m, k, dtype=dt) for (m, _, k) in shapes)
    with torch.no_grad():
        ep = torch.export.export(model, xs)
    pt2 = os.path.join(work, "mms.pt2")
    torch.export.save(ep, pt2)
    cmd = [a.anvil, "compile", pt2, "-o", os.path.join(work, "mms.anvil"), "--target", "cuda-sm90",
           "--autotune", a.mode, "--gemm-backends", a.backends, "--verbose"]
    if a.max_candidates:
        cmd += ["--gemm-max-candidates", a.max_candidates]
    out = subprocess.run(cmd, capture_output=True, text=True)
    with open(os.path.join(work, "compile.log"), "w") as f:  # every candidate's time
        f.write(out.stderr)
    if os.environ.get("OUT"):  # the device tool's folder: the log comes back
        with open(os.path.join(os.environ["OUT"], "gemm_compile.log"), "w") as f:
            f.write(out.stderr)
    sys.stderr.write(out.stderr[-4000:])
    if out.returncode != 0:
        sys.exit("anvil compile failed")
    # "  gemm3 64x4096x1024 bf16 <candidate>: 5.508 us"  /  "  gemm3: chose <candidate> (5.5 us)"
    cand = {}
    chosen = {}
    for line in out.stderr.splitlines():
        mt = re.match(r"\s+(gemm\d+) (\d+)x(\d+)x(\d+) \S+ (\S+): (\S+) us$", line)
        if mt:
            shape = (int(mt.group(2)), int(mt.group(3)), int(mt.group(4)))
            cand.setdefault(shape, {})[mt.group(5)] = float(mt.group(6))
            chosen.setdefault(mt.group(1), shape)
            continue
        mc = re.match(r"\s+(gemm\d+): chose (\S+) \(", line)
        if mc and mc.group(1) in chosen:
            chosen[mc.group(1)] = (chosen[mc.group(1)], mc.group(2))
    choice_by_shape = {v[0]: v[1] for v in chosen.values() if isinstance(v, tuple) and len(v) == 2
                       and isinstance(v[0], tuple)}
    rows = []
    for (m, n, k) in shapes:
        flop = 2.0 * m * n * k
        t_torch = time_torch_mm(m, n, k, dt, linear=a.linear)
        c = cand.get((m, n, k), {})
        lt = c.get("cublaslt_heuristic")
        cut = {name: t for name, t in c.items() if name.startswith("cutlass")}
        best_cut = min(cut.items(), key=lambda kv: kv[1]) if cut else (None, None)
        own = {name: t for name, t in c.items() if name.startswith("anvil_")}
        best_own = min(own.items(), key=lambda kv: kv[1]) if own else (None, None)
        best_lib = min(v for v in (t_torch, lt) if v is not None)
        r = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "m": m, "n": n, "k": k,
             "dtype": "bf16", "torch_mm_us": round(t_torch, 3), "anvil_cublaslt_us": lt,
             "anvil_best_cutlass": best_cut[0], "anvil_best_cutlass_us": best_cut[1],
             "anvil_best_own": best_own[0], "anvil_best_own_us": best_own[1],
             "anvil_choice": choice_by_shape.get((m, n, k)),
             "cutlass_vs_best_library": round(best_lib / best_cut[1], 3) if best_cut[1] else None,
             "torch_tflops": round(flop / t_torch / 1e6, 1)}
        rows.append(r)
        print(json.dumps(r))
    print("\n| M×N×K | torch.mm µs (TFLOP/s) | anvil cuBLASLt µs | best CUTLASS µs | best own µs | CUTLASS vs best library | anvil's choice |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['m']}×{r['n']}×{r['k']} | {r['torch_mm_us']} ({r['torch_tflops']}) | {r['anvil_cublaslt_us']} | "
              f"{r['anvil_best_cutlass_us']} | {r['anvil_best_own_us']} | {r['cutlass_vs_best_library']}× | {r['anvil_choice']} |")


if __name__ == "__main__":
    main()
