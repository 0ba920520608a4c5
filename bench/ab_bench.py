"""Two anvil builds side by side on aot_bench's models: is a change slower anywhere?

    /usr/bin/python3 bench/ab_bench.py --a OLD/build/bin/anvil --b NEW/build/bin/anvil
                                       [--rounds 5] [--iters 50] [--threads 1,2] [--models a,b]

Each build compiles every model of bench/aot_bench.py (and the fused 16 M chain) with its own cold
object cache; then, per model and thread count, the two packages are timed in alternation
`--rounds` times (`anvil bench`, `--iters` runs each) and the median of the per-round p50 latencies
is printed for each build with the ratio B / A. The compile of mlp_small (cold cache) is timed the
same way. Run it on an idle machine: both builds share it, so drift hits both alike.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import aot_bench  # noqa: E402  (its models, fixtures and the `anvil bench` wrapper)


def compile_pkg(anvil, pt2, out, cache):
    t0 = time.perf_counter()
    aot_bench.sh([anvil, "compile", pt2, "-o", out, "--cache-dir", cache, "-q"])
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="the baseline anvil binary")
    ap.add_argument("--b", required=True, help="the anvil binary under test")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--models", default=",".join(list(aot_bench.CASES) + ["chain16m"]))
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    work = tempfile.mkdtemp(prefix="anvil_ab_")
    builds = {"A": a.a, "B": a.b}
    cases = {}
    for name in a.models.split(","):
        if name == "chain16m":
            inp = os.path.join(work, "chain_x.npy")
            np.save(inp, np.random.default_rng(1).standard_normal((4096, 4096), dtype=np.float32))
            cases[name] = (os.path.join(aot_bench.MODELS, "chain16m.pt2"), inp)
        else:
            pt2, inp, _ = aot_bench.CASES[name]
            cases[name] = (pt2 or aot_bench.make_mlp1024(work), inp)

    # compile: every model once per build; mlp_small's cold-cache compile alternated
    pkgs = {}
    for tag, anvil in builds.items():
        for name, (pt2, _) in cases.items():
            pkgs[(tag, name)] = os.path.join(work, f"{name}.{tag}.anvil")
            compile_pkg(anvil, pt2, pkgs[(tag, name)], os.path.join(work, f"cache_{tag}"))
    print(f"A = {a.a}\nB = {a.b}\nmedian of {a.rounds} alternating rounds (p50 of {a.iters} runs each)\n")
    print("| case | threads | A ms | B ms | B / A |")
    print("|---|---|---|---|---|")
    if "mlp_small" in cases:
        ct = {"A": [], "B": []}
        for r in range(a.rounds):
            for tag, anvil in builds.items():
                ct[tag].append(compile_pkg(anvil, cases["mlp_small"][0], os.path.join(work, "c.anvil"),
                                           os.path.join(work, f"cold_{tag}_{r}")))
        ca, cb = statistics.median(ct["A"]) * 1e3, statistics.median(ct["B"]) * 1e3
        print(f"| compile mlp_small (cold cache) | - | {ca:.0f} | {cb:.0f} | {cb / ca:.2f} |")
    worst = 0.0
    for name, (_, inp) in cases.items():
        for t in threads:
            v = {"A": [], "B": []}
            for _ in range(a.rounds):
                for tag, anvil in builds.items():
                    v[tag].append(aot_bench.anvil_bench(anvil, pkgs[(tag, name)], inp, a.iters, t)["p50_ms"])
            ma, mb = statistics.median(v["A"]), statistics.median(v["B"])
            worst = max(worst, mb / ma)
            print(f"| {name} | {t} | {ma:.4f} | {mb:.4f} | {mb / ma:.2f} |", flush=True)
    print(f"\nworst B / A latency ratio: {worst:.2f}")


if __name__ == "__main__":
    main()
