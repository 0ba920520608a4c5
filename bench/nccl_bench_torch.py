"""torch.distributed on NCCL: the cells of bench/nccl_bench.cpp, one process per GPU.

    nccl_bench launch 2 python3 bench/nccl_bench_torch.py [--max-bytes B] [--ops a,b]
    torchrun --nproc-per-node 2 bench/nccl_bench_torch.py ...
    python3 bench/nccl_bench_torch.py ...      (no RANK set: spawns --ranks processes itself)

Same ops, dtypes, sizes, modes, iteration counts and bandwidth formulas as nccl_bench (see its
header): `sync` is each call followed by a synchronize of the current stream, `b2b` is N calls
then one synchronize; plus functional_all_reduce 8 B fp32 (_functional_collectives.all_reduce +
wait_tensor, a device synchronize per call or N calls, N waits, one synchronize). Rank 0 prints
one line per cell: "torch OP DTYPE BYTES MODE TIME_US ALGBW_GBPS BUSBW_GBPS". Exit status 2 when
the machine has fewer GPUs than ranks.
"""
import argparse
import os
import socket
import sys
import time

OPS = ["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast"]


def sizes(max_bytes):
    b = 8
    while b <= max_bytes and b <= 1 << 30:
        yield b
        b *= 8


def iters_for(nbytes):
    if nbytes <= 1 << 20:
        return 200
    if nbytes <= 16 << 20:
        return 50
    if nbytes <= 128 << 20:
        return 20
    return 8


def warmup_for(nbytes):
    return 2 if nbytes >= 128 << 20 else 5


def bus_factor(op, w):
    if op == "all_reduce":
        return 2.0 * (w - 1) / w
    if op == "broadcast":
        return 1.0
    return (w - 1) / w


def print_cell(op, dtype, nbytes, mode, seconds, w):
    algbw = nbytes / seconds / 1e9
    print(f"torch {op} {dtype} {nbytes} {mode} {seconds * 1e6:.3f} {algbw:.4f} "
          f"{algbw * bus_factor(op, w):.4f}", flush=True)


def time_calls(warmup, iters, b2b, call, sync, align):
    for _ in range(warmup):
        call()
        sync()
    align()
    t0 = time.perf_counter()
    for _ in range(iters):
        call()
        if not b2b:
            sync()
    if b2b:
        sync()
    return (time.perf_counter() - t0) / iters


def worker(args):
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol

    rank = int(os.environ["RANK"])
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev)
    w = dist.get_world_size()
    stream = torch.cuda.current_stream()
    sync = stream.synchronize
    one = torch.ones(1, device=dev)

    def align():
        dist.all_reduce(one)
        sync()

    for op in args.ops:
        for dtype, dname in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
            esize = 4 if dtype == torch.float32 else 2
            for nbytes in sizes(args.max_bytes):
                n = nbytes // esize
                if n % w:
                    continue
                if op == "all_reduce":
                    a = torch.ones(n, dtype=dtype, device=dev)
                    call = lambda: dist.all_reduce(a)
                elif op == "all_gather":
                    a = torch.ones(n // w, dtype=dtype, device=dev)
                    b = torch.empty(n, dtype=dtype, device=dev)
                    call = lambda: dist.all_gather_into_tensor(b, a)
                elif op == "reduce_scatter":
                    a = torch.ones(n, dtype=dtype, device=dev)
                    b = torch.empty(n // w, dtype=dtype, device=dev)
                    call = lambda: dist.reduce_scatter_tensor(b, a)
                elif op == "all_to_all":
                    a = torch.ones(n, dtype=dtype, device=dev)
                    b = torch.empty(n, dtype=dtype, device=dev)
                    call = lambda: dist.all_to_all_single(b, a)
                else:
                    a = torch.ones(n, dtype=dtype, device=dev)
                    call = lambda: dist.broadcast(a, 0)
                for b2b in (False, True):
                    t = time_calls(warmup_for(nbytes), iters_for(nbytes), b2b, call, sync, align)
                    if rank == 0:
                        print_cell(op, dname, nbytes, "b2b" if b2b else "sync", t, w)
                a = b = call = None

    # functional all_reduce + wait_tensor, 8 B fp32
    x = torch.ones(2, device=dev)
    group = dist.group.WORLD
    iters = iters_for(8)
    for b2b in (False, True):
        for _ in range(warmup_for(8)):
            funcol.wait_tensor(funcol.all_reduce(x, "sum", group))
        torch.cuda.synchronize()
        align()
        t0 = time.perf_counter()
        if b2b:
            outs = [funcol.all_reduce(x, "sum", group) for _ in range(iters)]
            for o in outs:
                funcol.wait_tensor(o)
            torch.cuda.synchronize()
        else:
            for _ in range(iters):
                funcol.wait_tensor(funcol.all_reduce(x, "sum", group))
                torch.cuda.synchronize()
        t = (time.perf_counter() - t0) / iters
        if rank == 0:
            print_cell("functional_all_reduce", "fp32", 8, "b2b" if b2b else "sync", t, w)
    align()
    dist.destroy_process_group()


def spawned(local, args, port):
    os.environ.update(RANK=str(local), LOCAL_RANK=str(local), WORLD_SIZE=str(args.ranks),
                      LOCAL_WORLD_SIZE=str(args.ranks), MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    worker(args)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-bytes", type=int, default=1 << 30)
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--ranks", type=int, default=2, help="processes to spawn when RANK is not set")
    args = p.parse_args()
    args.ops = args.ops.split(",")
    bad = [o for o in args.ops if o not in OPS]
    if bad:
        p.error(f"unknown op(s) {bad}: expected some of {OPS}")
    import torch
    ranks = int(os.environ.get("LOCAL_WORLD_SIZE", args.ranks))
    have = torch.cuda.device_count()
    if have < ranks:
        print(f"nccl_bench_torch: needs {ranks} CUDA GPUs (one per rank), this machine has "
              f"{have}", file=sys.stderr)
        return 2
    if "RANK" in os.environ:
        worker(args)
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    import torch.multiprocessing as mp
    mp.spawn(spawned, args=(args, port), nprocs=args.ranks, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
