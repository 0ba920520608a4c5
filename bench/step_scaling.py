#!/usr/bin/env python3
"""Which kernel families of a package split their work over the pool: per-step times at each
thread count (`anvil bench --profile`), summed per family, with the speed-up over the first
thread count (issue 19, thread scaling).

    python3 bench/step_scaling.py PKG.anvil [PKG2.anvil ...] [--anvil build/bin/anvil] \
        [--threads 1,2] [--rounds 3] [--iters 20] [--pin] [--steps] [--json OUT]

Each package is run with the input beside it (NAME.in0.npy, as bench/vision.py writes them; else
random inputs). Per round the thread counts are run in turn (the order alternating between
rounds, fresh processes; with --pin under `taskset -c 0-(T-1)`), and each step keeps the minimum
over the rounds of its ms per call (the figure least disturbed by neighbours on a shared box).
A step's family comes from the package's generated source (src/ in the package): externs by op
and, for convolutions, by shape (depthwise, grouped, 1x1, KxK; `x1` when the image is 1x1, as
in squeeze-excitation), loop kernels by the graph nodes they came from, GEMMs as `gemm`.
A family whose time does not drop with more threads is one that does not split its work. On a
shared machine, --wait-idle 85 waits before each run until the CPUs were 85 % idle for a second.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEP_LINE = re.compile(r"^\s+(\S+)\s+(extern|loop|gemm|\S+)\s+([0-9.]+)\s+[0-9.]+%\s+\d+\s+"
                       r"[0-9.]+\s*(.*)$")


def node_family(nodes):
    """A loop kernel's family: its graph nodes' ops, numbering and suffixes removed."""
    ops = []
    for n in nodes.split(","):
        op = re.sub(r"(_\d+)?(_value)?$", "", n.strip())
        op = re.sub(r"_$", "", op)
        if op and op not in ops:
            ops.append(op)
    return "loop " + "+".join(ops[:3])


def extern_families(pkg):
    """{step name: family} for the extern steps in a package's generated source."""
    fams = {}
    with zipfile.ZipFile(pkg) as z:
        srcs = [z.read(n).decode() for n in z.namelist() if n.startswith("src/")
                and n.endswith(".cpp")]
    head = re.compile(r"^// (ext\d+): .* -> extern (\S+)$", re.M)
    for src in srcs:
        for m in head.finditer(src):
            step, op = m.group(1), m.group(2).replace("aten.", "").replace(".default", "")
            body = src[m.end():src.find("extern_call", m.end())]
            sizes = {}
            for i, d, v in re.findall(r"in\[(\d)\]\.sizes\[(\d)\] = (-?\d+);", body):
                sizes.setdefault(int(i), {})[int(d)] = int(v)
            attrs = dict(re.findall(r'name = "(\w+)";\s*at\[\d+\]\.kind = \d+;\s*'
                                    r'at\[\d+\]\.i = (-?\d+);', body))
            fam = op
            if op.startswith("conv") and 0 in sizes and 1 in sizes:
                x, w = sizes[0], sizes[1]
                groups = int(attrs.get("groups", 1))
                k = "x".join(str(w[d]) for d in sorted(w) if d >= 2) or "1"
                if groups > 1 and w.get(1) == 1:
                    fam = f"conv depthwise {k}"
                elif groups > 1:
                    fam = f"conv grouped {k}"
                else:
                    fam = f"conv {k}"
                if all(x.get(d, 1) == 1 for d in range(2, len(x))):
                    fam += " x1"
            fams[step] = fam
    return fams


def cpu_idle(seconds):
    """Percent of all CPUs' time idle over the next `seconds` (/proc/stat)."""
    def sample():
        with open("/proc/stat") as fh:
            v = [int(x) for x in fh.readline().split()[1:]]
        return sum(v), v[3] + v[4]
    t0, i0 = sample()
    time.sleep(seconds)
    t1, i1 = sample()
    return 100.0 * (i1 - i0) / max(t1 - t0, 1)


def wait_idle(a):
    """With --wait-idle P: waits (up to --wait-max s) until P % of the CPUs were idle for 1 s."""
    if not a.wait_idle:
        return
    end = time.monotonic() + a.wait_max
    while cpu_idle(1.0) < a.wait_idle and time.monotonic() < end:
        pass


def profile(a, pkg, inp, t):
    """{step: (kind, ms, nodes)} of one `anvil bench --profile` run at t threads."""
    wait_idle(a)
    cmd = [a.anvil, "bench", pkg, "--threads", str(t), "--iters", str(a.iters), "--warmup",
           "3", "--profile"] + (["-i", inp] if inp else [])
    if a.pin:
        cmd = ["taskset", "-c", f"0-{t - 1}"] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, env=a.env)
    if p.returncode:
        sys.exit(f"step_scaling.py: {' '.join(cmd)} failed: {(p.stderr or p.stdout)[-400:]}")
    steps, p50 = {}, json.loads(p.stdout.strip().splitlines()[-1])["p50_ms"]
    for line in p.stdout.splitlines():
        m = STEP_LINE.match(line)
        if m and m.group(1) != "step":
            steps[m.group(1)] = (m.group(2), float(m.group(3)), m.group(4).strip())
    return steps, p50


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("packages", nargs="+")
    ap.add_argument("--anvil", default=os.path.join(ROOT, "build", "bin", "anvil"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--pin", action="store_true", help="taskset -c 0-(T-1) per run")
    ap.add_argument("--steps", action="store_true", help="also print every step")
    ap.add_argument("--wait-idle", type=float, default=0,
                    help="before each run wait until this percent of the CPUs was idle for 1 s")
    ap.add_argument("--wait-max", type=float, default=120, help="but no longer than this")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    threads = [int(t) for t in a.threads.split(",")]
    a.env = dict(os.environ)  # anvil's bundle (bench/gpu_bundle.sh): its libraries beside bin/
    lib = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(a.anvil))), "lib")
    if os.path.isdir(lib):
        a.env["LD_LIBRARY_PATH"] = lib + ":" + a.env.get("LD_LIBRARY_PATH", "")
    if a.pin and shutil.which("taskset") is None:
        sys.exit("step_scaling.py: --pin needs taskset (util-linux)")
    out = {}
    for pkg in a.packages:
        base = pkg[:-len(".anvil")] if pkg.endswith(".anvil") else pkg
        inp = base + ".in0.npy" if os.path.exists(base + ".in0.npy") else None
        fams = extern_families(pkg)
        best, totals = {}, {t: [] for t in threads}
        for rnd in range(a.rounds):
            for t in (threads if rnd % 2 == 0 else threads[::-1]):
                steps, p50 = profile(a, pkg, inp, t)
                totals[t].append(p50)
                for s, (kind, ms, nodes) in steps.items():
                    fam = fams.get(s) or (node_family(nodes) if kind == "loop" else kind)
                    cur = best.setdefault(s, {"family": fam, "nodes": nodes})
                    cur[t] = min(cur.get(t, ms), ms)
        by_fam = {}
        for s, v in best.items():
            f = by_fam.setdefault(v["family"], {"steps": 0})
            f["steps"] += 1
            for t in threads:
                f[t] = f.get(t, 0.0) + v.get(t, 0.0)
        name = os.path.basename(base)
        out[name] = {"p50_min_ms": {t: min(v) for t, v in totals.items()},
                     "families": {k: {str(t): round(v[t], 4) for t in threads} | {
                         "steps": v["steps"]} for k, v in by_fam.items()}}
        t0 = threads[0]
        print(f"\n{name}: p50 (min of {a.rounds} rounds) " +
              ", ".join(f"{t} thr {min(v):.2f} ms" for t, v in totals.items()))
        print("| family | steps | " + " | ".join(f"{t} thr ms" for t in threads) +
              f" | speed-up {threads[-1]} vs {t0} |")
        print("|---|---|" + "---|" * len(threads) + "---|")
        for fam, v in sorted(by_fam.items(), key=lambda kv: -kv[1][t0]):
            sp = v[t0] / v[threads[-1]] if v[threads[-1]] > 0 else 0
            print(f"| {fam} | {v['steps']} | " + " | ".join(f"{v[t]:.3f}" for t in threads) +
                  f" | {sp:.2f} |")
        if a.steps:
            for s, v in best.items():
                print(f"  {s:<8}{v['family']:<28}" + "".join(f"{v.get(t, 0):9.3f}" for t in
                                                             threads) + f"  {v['nodes'][:60]}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
