"""torch.distributed (gloo) counterpart of bench/dist_bench.cpp: same ops, sizes, iteration
counts and output format. Run under a torchrun-style launcher, e.g.
    anvil launch -n 2 -- python3 bench/dist_bench_torch.py
"""
import sys
import time

import torch
import torch.distributed as dist

SIZES = [8, 64, 512, 4096, 32768, 262144, 1 << 20, 4 << 20, 16 << 20, 64 << 20]


def iters_for(nbytes):
    if nbytes <= 65536:
        return 400
    if nbytes <= (1 << 20):
        return 100
    if nbytes <= (4 << 20):
        return 40
    if nbytes <= (16 << 20):
        return 20
    return 10


def time_op(warmup, iters, op):
    for _ in range(warmup):
        op()
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(iters):
        op()
    return (time.perf_counter() - t0) / iters


def main():
    only = sys.argv[1] if len(sys.argv) > 1 else ""
    dist.init_process_group("gloo")
    w, rank = dist.get_world_size(), dist.get_rank()
    for op in ("all_reduce", "all_gather", "broadcast"):
        if only and only != op:
            continue
        for nbytes in SIZES:
            n = max(1, nbytes // 4)
            buf = torch.ones(n, dtype=torch.float32)
            inp = torch.ones(max(1, n // w), dtype=torch.float32)
            out = torch.empty(inp.numel() * w, dtype=torch.float32)
            outs = list(out.chunk(w))  # torch 1.13's gloo has no all_gather_into_tensor
            iters = iters_for(nbytes)
            if op == "all_reduce":
                t = time_op(2, iters, lambda: dist.all_reduce(buf))
                factor = 2.0 * (w - 1) / w
            elif op == "all_gather":
                t = time_op(2, iters, lambda: dist.all_gather(outs, inp))
                factor = (w - 1) / w
            else:
                t = time_op(2, iters, lambda: dist.broadcast(buf, 0))
                factor = 1.0
            if rank == 0:
                print(f"{op} {nbytes} {t * 1e6:.2f} {factor * nbytes / t / 1e9:.4f}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
