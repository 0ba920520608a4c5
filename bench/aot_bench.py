"""anvil AOT (CPU) vs PyTorch eager, in one run on one machine (issue 4's benchmark).

    /usr/bin/python3 bench/aot_bench.py [--anvil build/bin/anvil] [--iters N] [--rounds R] [--threads 1,2]
                                        [--json OUT.json] [--models mlp_small,small_cnn,block256,mlp1024]

Run it through bench/aot_bench.sh, which installs Debian's python3-torch with OpenBLAS
(libopenblas0-pthread: on the reference BLAS PyTorch is 10-35x slower and the comparison is void) and builds.
For each model and thread count it alternates anvil and PyTorch `--rounds` times and reports the median of
the per-round p50 latencies and their ratio. Both sides use the same weights (PyTorch loads them from the
.pt2 anvil compiles; bench/torch_models.py) and the same input; the PyTorch output is checked against
anvil's before timing. Also: the fused pointwise + reduction chain over 16 M fp32 (GB/s beside memcpy),
compile time of mlp_small on a cold object cache, package size minus weights, and load time.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import torch_models  # noqa: E402

FIX = os.path.join(ROOT, "tests", "fixtures")
MODELS = os.path.join(HERE, "models")
# name -> (pt2, input .npy, target ratio anvil/eager)
CASES = {
    "mlp_small": (os.path.join(FIX, "mlp_small.pt2"), os.path.join(FIX, "mlp_small.in0.npy"), 0.6),
    "small_cnn": (os.path.join(FIX, "small_cnn.pt2"), os.path.join(FIX, "small_cnn.in0.npy"), 0.6),
    "block256": (os.path.join(MODELS, "block256.pt2"), os.path.join(MODELS, "block256.in0.npy"), 0.6),
    "mlp1024": (None, os.path.join(MODELS, "mlp1024.in0.npy"), 1.0),
}


def sh(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"aot_bench: command failed ({r.returncode}): {' '.join(cmd)}\n{r.stdout}\n{r.stderr}")
    return r.stdout


def make_mlp1024(work):
    """Refills bench/models/mlp1024.skel.pt2 (weights stripped to keep the repo small) with seeded weights
    of nn.Linear's default scale; returns the .pt2 path."""
    out = os.path.join(work, "mlp1024.pt2")
    sizes = json.load(open(os.path.join(MODELS, "mlp1024.skel.json")))
    rng = np.random.default_rng(0)
    with zipfile.ZipFile(os.path.join(MODELS, "mlp1024.skel.pt2")) as zin, zipfile.ZipFile(out, "w") as zout:
        cfg = json.loads(zin.read(next(n for n in zin.namelist() if n.endswith("model_weights_config.json"))))
        fan_in = {e["path_name"]: [s["as_int"] for s in e["tensor_meta"]["sizes"]] for e in cfg["config"].values()}
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename in sizes and "/data/weights/" in info.filename:
                shape = fan_in[os.path.basename(info.filename)]
                bound = 1.0 / np.sqrt(shape[-1])
                data = rng.uniform(-bound, bound, sizes[info.filename] // 4).astype(np.float32).tobytes()
            zout.writestr(info, data, compress_type=zipfile.ZIP_STORED)
    return out


def anvil_bench(anvil, pkg, inp, iters, threads):
    cmd = [anvil, "bench", pkg, "--iters", str(iters), "--threads", str(threads)]
    if inp:
        cmd += ["-i", inp]
    return json.loads(sh(cmd).strip().splitlines()[-1])


def torch_bench_inproc(model, x, iters):
    """p50/min latency of model(x) in this process (threads fixed by the caller's environment)."""
    with torch.no_grad():
        for _ in range(max(3, iters // 10)):
            model(x)
        ms = []
        for _ in range(iters):
            t0 = time.perf_counter()
            model(x)
            ms.append((time.perf_counter() - t0) * 1e3)
    ms.sort()
    return {"p50_ms": ms[len(ms) // 2], "min_ms": ms[0]}


def torch_bench(name, pt2, inp, iters, threads):
    """Times PyTorch eager in a child process whose every pool has `threads` threads: OpenBLAS's
    own pthreads (Debian's libblas.so.3 is OpenBLAS; torch.set_num_threads does not reach it),
    OpenMP and intra-op. Returns {"p50_ms", "min_ms"}."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    out = sh([sys.executable, os.path.abspath(__file__), "--torch-worker", name, pt2, inp, str(iters),
              str(threads)], env=env)
    return json.loads(out.strip().splitlines()[-1])


def torch_worker(name, pt2, inp, iters, threads):
    torch.set_num_threads(threads)
    model = torch_models.build(name, pt2)
    print(json.dumps(torch_bench_inproc(model, torch.from_numpy(np.load(inp)), iters)))


def package_sizes(pkg):
    with zipfile.ZipFile(pkg) as z:
        weights = sum(i.file_size for i in z.infolist() if i.filename == "weights.bin")
    total = os.path.getsize(pkg)
    return total, weights


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--anvil", default=os.path.join(ROOT, "build", "bin", "anvil"))
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--models", default=",".join(CASES))
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    work = tempfile.mkdtemp(prefix="anvil_aot_bench_")
    cache = os.path.join(work, "cache")
    res = {"machine": {"cores": os.cpu_count(), "torch": torch.__version__,
                       "blas": os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")}, "models": [], "extra": {}}
    print(f"# anvil vs PyTorch {torch.__version__} eager (BLAS: {res['machine']['blas']}), {os.cpu_count()} cores")

    # compile time on a cold cache: mlp_small
    pkgs = {}
    for name in a.models.split(","):
        pt2, inp, _ = CASES[name]
        if pt2 is None:
            pt2 = make_mlp1024(work)
        pkg = os.path.join(work, f"{name}.anvil")
        t0 = time.perf_counter()
        sh([a.anvil, "compile", pt2, "-o", pkg, "--cache-dir", cache, "-q"])
        compile_s = time.perf_counter() - t0
        total, weights = package_sizes(pkg)
        pkgs[name] = (pt2, inp, pkg)
        res["extra"][f"{name}_compile_s"] = compile_s
        res["extra"][f"{name}_package_minus_weights_bytes"] = total - weights
        print(f"compile {name:10s} {compile_s:6.2f} s (cold cache)   package {total / 1e6:7.2f} MB,"
              f" minus weights {(total - weights) / 1e6:5.2f} MB")

    print(f"\n{'model':10s} {'thr':>3s} {'anvil p50 ms':>12s} {'eager p50 ms':>12s} {'ratio':>6s} {'target':>7s}")
    for name, (pt2, inp, pkg) in pkgs.items():
        model = torch_models.build(name, pt2)
        x = torch.from_numpy(np.load(inp))
        # same function: compare eager with anvil on the bench input
        out_dir = os.path.join(work, f"out_{name}")
        sh([a.anvil, "run", pkg, "-i", inp, "-o", out_dir, "-q"])
        with torch.no_grad():
            want = model(x).numpy()
        got = np.load(os.path.join(out_dir, "out0.npy"))
        err = float(np.abs(got - want).max() / max(1.0, np.abs(want).max()))
        for t in threads:
            av, tv = [], []
            for _ in range(a.rounds):  # alternate the two sides
                av.append(anvil_bench(a.anvil, pkg, inp, a.iters, t))
                tv.append(torch_bench(name, pt2, inp, a.iters, t))
            ap50 = statistics.median(r["p50_ms"] for r in av)
            tp50 = statistics.median(r["p50_ms"] for r in tv)
            target = CASES[name][2]
            ok = "ok" if ap50 / tp50 <= target else "MISSED"
            print(f"{name:10s} {t:3d} {ap50:12.4f} {tp50:12.4f} {ap50 / tp50:6.2f} {'<=' + str(target):>7s} {ok}"
                  f"   (rel err vs eager {err:.1e}, load {statistics.median(r.get('load_ms', 0) for r in av):.1f} ms)")
            res["models"].append({"model": name, "threads": t, "anvil_p50_ms": ap50, "eager_p50_ms": tp50,
                                  "ratio": ap50 / tp50, "target": target, "rel_err": err,
                                  "anvil_min_ms": min(r["min_ms"] for r in av),
                                  "load_ms": statistics.median(r.get("load_ms", 0) for r in av)})

    # fused pointwise + reduction chain over 16M fp32 vs memcpy of the same bytes
    chain_pt2 = os.path.join(MODELS, "chain16m.pt2")
    chain_pkg = os.path.join(work, "chain16m.anvil")
    sh([a.anvil, "compile", chain_pt2, "-o", chain_pkg, "--cache-dir", cache, "-q"])
    xin = os.path.join(work, "chain_x.npy")
    np.save(xin, np.random.default_rng(1).standard_normal((4096, 4096), dtype=np.float32))
    memcpy = os.path.join(work, "memcpy_bench")
    sh(["c++", "-O2", "-o", memcpy, os.path.join(HERE, "memcpy_bench.cpp")])
    nbytes = 2 * 4096 * 4096 * 4  # 64 MiB read + 64 MiB written
    print(f"\nfused chain (add->pow->mean->rsqrt->mul->mul, 4096x4096 fp32), GB/s counting read + written bytes")
    for t in threads:
        cv, mv = [], []
        for _ in range(a.rounds):
            cv.append(anvil_bench(a.anvil, chain_pkg, xin, 20, t)["p50_ms"])
            mv.append(json.loads(sh([memcpy, str(nbytes // 2), "20"]))["p50_ms"])
        tch = torch_bench("chain16m", chain_pt2, xin, 10, t)["p50_ms"]
        c, m = statistics.median(cv), statistics.median(mv)
        frac = m / c
        print(f"  threads {t}: anvil {nbytes / c / 1e6:6.2f} GB/s ({c:.2f} ms), memcpy {nbytes / m / 1e6:6.2f} GB/s"
              f" ({m:.2f} ms) -> {100 * frac:5.1f}% of memcpy (target >= 60%) {'ok' if frac >= 0.6 else 'MISSED'};"
              f" eager {nbytes / tch / 1e6:6.2f} GB/s")
        res["extra"][f"chain_t{t}"] = {"anvil_gbps": nbytes / c / 1e6, "memcpy_gbps": nbytes / m / 1e6,
                                       "eager_gbps": nbytes / tch / 1e6, "fraction_of_memcpy": frac}

    if "mlp_small" in pkgs:
        cs = res["extra"]["mlp_small_compile_s"]
        pw = res["extra"]["mlp_small_package_minus_weights_bytes"]
        loads = [anvil_bench(a.anvil, pkgs["mlp_small"][2], pkgs["mlp_small"][1], 1, 1).get("load_ms", float("nan"))
                 for _ in range(5)]
        lm = statistics.median(loads)
        res["extra"]["mlp_small_load_ms"] = lm
        print(f"\nmlp_small: compile {cs:.2f} s (target <= 5 s) {'ok' if cs <= 5 else 'MISSED'};"
              f" package minus weights {pw / 1e6:.2f} MB (target <= 2 MB) {'ok' if pw <= 2e6 else 'MISSED'};"
              f" load {lm:.2f} ms (target <= 50 ms) {'ok' if lm <= 50 else 'MISSED'}")
    if a.json:
        json.dump(res, open(a.json, "w"), indent=1)
    print(json.dumps({"models": res["models"], "extra": res["extra"]}))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--torch-worker":
        torch_worker(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
    else:
        main()
