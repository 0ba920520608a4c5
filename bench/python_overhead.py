#!/usr/bin/env python3
"""The cost of calling a compiled model from Python.

    PYTHONPATH=build/python python3 bench/python_overhead.py [--iters N] [--model mlp_small]

Times, on one thread and the same package and input (tests/fixtures/<model>.pt2 and its in0.npy):
  - anvil, Python:  model(x) with a NumPy array (and with a torch tensor where torch imports);
  - anvil, C++:     runtime::Model::run on the same borrowed input, timed in a C++ loop inside
                    this process (Model._time_cpp_run): the floor the Python call adds to;
  - AOTInductor:    torch._inductor.aoti_compile_and_package of the same export, loaded with
                    aoti_load_package and called from Python, where torch imports.
Blocks of calls of each kind alternate, so machine noise hits all alike; per-call median and
minimum over all blocks are printed side by side. The target: the Python call within 10 us of
the C++ run.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import anvil

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def per_call_ns(fn, x, n):
    out = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn(x)
        out.append(time.perf_counter_ns() - t0)
    return out


def summary(ns):
    return statistics.median(ns) / 1e3, min(ns) / 1e3


def aoti_runner(pt2, x_np, workdir):
    """AOTInductor's package of the same export, or (None, reason)."""
    try:
        import torch
        import torch._inductor
    except ImportError as e:
        return None, f"torch not importable ({e})"
    try:
        ep = torch.export.load(pt2)
        path = torch._inductor.aoti_compile_and_package(
            ep, package_path=os.path.join(workdir, "model.pt2"))
        runner = torch._inductor.aoti_load_package(path)
        xt = torch.from_numpy(x_np)
        runner(xt)
        return (lambda t: runner(t)), xt
    except Exception as e:  # report why, keep the anvil figures
        return None, f"AOTInductor failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="mlp_small")
    ap.add_argument("--iters", type=int, default=20000, help="calls of each kind")
    ap.add_argument("--blocks", type=int, default=10, help="alternating blocks")
    ap.add_argument("--threads", type=int, default=1, help="threads per run (both engines)")
    ap.add_argument("--no-aoti", action="store_true")
    args = ap.parse_args()

    fixtures = os.environ.get("ANVIL_FIXTURES_DIR", os.path.join(REPO, "tests", "fixtures"))
    pt2 = os.path.join(fixtures, args.model + ".pt2")
    x = np.load(os.path.join(fixtures, args.model + ".in0.npy"))
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    try:
        import torch
        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None

    model = anvil.load(anvil.compile(pt2), num_threads=args.threads)
    per_block = max(1, args.iters // args.blocks)
    kinds = {
        "anvil  Python model(x), NumPy": lambda: per_call_ns(model, x, per_block),
        "anvil  C++ Model::run": lambda: list(model._time_cpp_run([x], per_block)),
    }
    if torch is not None:
        xt = torch.from_numpy(x)
        kinds["anvil  Python model(x), torch"] = lambda: per_call_ns(model, xt, per_block)
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_aoti:
            runner, arg = aoti_runner(pt2, x, tmp)
            if runner is None:
                print(f"AOTInductor: skipped: {arg}")
            else:
                kinds["AOTInductor aoti_load_package(x), torch"] = (
                    lambda: per_call_ns(runner, arg, per_block))
        times = {k: [] for k in kinds}
        for k, f in kinds.items():  # warm-up
            f()
        for _ in range(args.blocks):
            for k, f in kinds.items():
                times[k] += f()

    print(f"{args.model}: {x.shape} {x.dtype}, {args.threads} thread(s), "
          f"{per_block * args.blocks} calls of each kind\n")
    print(f"{'':42s} {'median us':>10s} {'min us':>10s}")
    for k, ns in times.items():
        med, mn = summary(ns)
        print(f"{k:42s} {med:10.2f} {mn:10.2f}")
    py_med, py_min = summary(times["anvil  Python model(x), NumPy"])
    cpp_med, cpp_min = summary(times["anvil  C++ Model::run"])
    over = py_med - cpp_med
    print(f"\nPython call overhead (median, NumPy): {over:.2f} us "
          f"({'within' if over <= 10 else 'OVER'} the 10 us target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
