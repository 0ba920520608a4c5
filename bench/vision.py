#!/usr/bin/env python3
"""Vision models at 224x224, fp32: anvil beside PyTorch eager and torch.compile on this CPU, per
batch size and thread count, side by side, and the thread-scaling curve (issue 19).

    PYTHONPATH=<torchvision dir> <python with torch 2.x> bench/vision.py \
        [--anvil build/bin/anvil] [--models resnet18,resnet50,...] [--batch 1,8] \
        [--threads 1,2] [--pin] [--rounds 2] [--iters 30] [--seconds 3] [--budget-s S] \
        [--work /tmp/vision] [--no-eager] [--no-compile] [--json OUT]

Needs PyTorch 2.x with torchvision (random weights, seeded; nothing is downloaded). Per model and
batch size B (the model's name carries it: resnet18_b8): a child process builds the model in eval
mode, torch.export writes NAME_bB.pt2 with the input and eager's output; anvil compiles it and
its output is compared with eager's (max abs error printed). Then, per round and thread count T,
anvil (`anvil bench --threads T`), eager and torch.compile (`torch.set_num_threads(T)`) are timed
in fresh processes, the order rotated so that a noisy neighbour hits all alike; with --pin each
timed process runs under `taskset -c 0-(T-1)`. One measurement is at most --iters timed runs and
stops early after --seconds (a first one-run probe of anvil at the largest T sizes it), after 1-3
warm-up runs. Medians of the rounds' p50s are printed: one table per batch and thread count
against the peers, and the scaling table (each one's time at every T and its speed-up over T=1).
Nothing new starts after --budget-s seconds (a running child is killed then); what was measured
is printed. Exports and packages are kept in --work and reused by later runs.

anvil's bundle (bench/gpu_bundle.sh) works as --anvil: LD_LIBRARY_PATH gets <bin>/../lib, as in
bench/host_cpu.py. On the GPU machine's 16-core host, device calls of at most 9 minutes, the
curve with anvil alone (torch.compile's first call takes 40-70 s per process there), one model
group per call, from the repository root with gpu_bundle/ unpacked:

    V="python3 bench/vision.py --anvil gpu_bundle/bin/anvil --pin --threads 1,2,4,8 \
       --batch 1,8 --rounds 2 --no-eager --no-compile --budget-s 500 --work build/vision"
    $V --models resnet18,mobilenet_v3_small,regnet_y_400mf
    $V --models efficientnet_b0,mobilenet_v2,resnet50
    $V --models densenet121,convnext_tiny
    $V --models vit_b_16 --rounds 1

(a model the budget cut short: rerun it alone; exports and packages in --work are reused while
the machine stays warm), and the peers at 2 and 8 pinned cores (batch 1; eager and
torch.compile beside anvil), two or three models per call (--no-compile where time is short):

    python3 bench/vision.py --anvil gpu_bundle/bin/anvil --pin --threads 2,8 --batch 1 \
        --rounds 1 --budget-s 500 --work build/vision --models resnet18,resnet50

Which kernel families keep a model under issue 19's 5x (ms per family per thread count):

    python3 bench/step_scaling.py --anvil gpu_bundle/bin/anvil --pin --threads 1,8 \
        build/vision/densenet121_b8.anvil

and `ANVIL_CONV_SPLIT=bands` in front of either compares oneDNN's split of small batches by
output-channel blocks with bands of output rows.
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time

import numpy as np

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, BENCH)
from host_cpu import Runner, anvil_env, tail  # noqa: E402  budgeted children, the bundle's env
MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
          "convnext_tiny", "densenet121", "regnet_y_400mf", "vit_b_16"]
PEERS = ("eager", "compile")


def export_child(spec):
    """Writes NAME_bB.pt2, .in0.npy and .out0.npy (eager's output) into the work folder."""
    name, batch, work = spec.split("|")
    import torch
    import torchvision
    base = os.path.join(work, f"{name}_b{batch}")
    torch.manual_seed(0)
    m = getattr(torchvision.models, name)().eval()
    with torch.no_grad():  # batch-norm statistics and affines that are not the identity
        for mod in m.modules():
            if isinstance(mod, torch.nn.BatchNorm2d):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
                mod.weight.uniform_(0.5, 1.5)
                mod.bias.uniform_(-0.2, 0.2)
            elif isinstance(mod, torch.nn.Linear) and not mod.weight.any():
                mod.weight.normal_(0, 0.05)  # ViT's zero-initialised head: an all-zero output
                if mod.bias is not None:
                    mod.bias.uniform_(-0.1, 0.1)
    x = torch.randn(int(batch), 3, 224, 224)
    with torch.no_grad():
        ep = torch.export.export(m, (x,))
        y = m(x)
    np.save(base + ".in0.npy", x.numpy())
    np.save(base + ".out0.npy", y.numpy())
    torch.export.save(ep, base + ".part.pt2")
    os.replace(base + ".part.pt2", base + ".pt2")  # complete or absent, if the budget kills it


def torch_child(spec):
    """Times eager or torch.compile of the exported module; prints one JSON line."""
    s = json.loads(spec)
    import torch
    torch.set_num_threads(s["threads"])
    m = torch.export.load(s["pt2"]).module()
    x = torch.from_numpy(np.load(s["input"]))
    f = m if s["mode"] == "eager" else torch.compile(m)
    with torch.inference_mode():
        t0 = time.perf_counter()
        f(x)
        first = time.perf_counter() - t0
        for _ in range(s["warmup"]):
            f(x)
        ts = []
        end = time.perf_counter() + s["seconds"]
        for _ in range(s["iters"]):
            t = time.perf_counter()
            f(x)
            ts.append((time.perf_counter() - t) * 1e3)
            if time.perf_counter() > end:
                break
    print(json.dumps({"p50_ms": statistics.median(ts), "first_s": first, "n": len(ts)}))


def last_json(text):
    return json.loads(text.strip().splitlines()[-1])


def runs_for(est_ms, a):
    """(timed runs, warm-up runs) that take about --seconds when one run takes est_ms."""
    n = int(a.seconds * 1e3 / max(est_ms, 1e-3))
    return max(3, min(a.iters, n)), 3 if n >= 30 else 1


def measure(runner, a, env, tenv, key, r):
    """The rounds of one model and batch: r["rounds"][who][T] gets each round's p50."""
    pt2, inp, pkg = (os.path.join(a.work, key + ext) for ext in (".pt2", ".in0.npy", ".anvil"))
    top = max(a.thread_list)
    pin = (lambda t: f"0-{t - 1}") if a.pin else (lambda t: None)
    res = runner.run([a.anvil, "bench", pkg, "-i", inp, "-q", "--threads", str(top), "--iters",
                      "1", "--warmup", "1"], env, pin(top))
    if res is None or res[0] != 0:
        if res is not None:
            r["errors"]["anvil_probe"] = tail(res[1] + res[2])
        return
    probe = last_json(res[1])["p50_ms"]
    r["probe_ms"] = probe
    whos = ["anvil"] + a.peers
    for rnd in range(a.rounds):
        for t in a.thread_list:
            rot = rnd + a.thread_list.index(t)
            for who in whos[rot % len(whos):] + whos[:rot % len(whos)]:
                seen = r["rounds"]["anvil"].get(str(t))
                est = statistics.median(seen) if seen else probe * top / t
                iters, warmup = runs_for(est, a)
                tenv_t = dict(env if who == "anvil" else tenv, OMP_NUM_THREADS=str(t))
                if who == "anvil":
                    cmd = [a.anvil, "bench", pkg, "-i", inp, "-q", "--threads", str(t), "--iters",
                           str(iters), "--warmup", str(warmup)]
                else:
                    spec = {"pt2": pt2, "input": inp, "mode": who, "threads": t,
                            "iters": a.iters, "warmup": warmup, "seconds": a.seconds}
                    cmd = [sys.executable, os.path.abspath(__file__), "--torch-child",
                           json.dumps(spec)]
                res = runner.run(cmd, tenv_t, pin(t))
                if res is None:
                    return
                try:
                    j = last_json(res[1])
                except (ValueError, IndexError):
                    r["errors"][f"{who}_t{t}"] = f"exit {res[0]}: {tail(res[1] + res[2])}"
                    continue
                r["rounds"][who].setdefault(str(t), []).append(round(j["p50_ms"], 4))
                if who == "compile":
                    r["compile_first_s"].append(round(j["first_s"], 1))


def prepare(runner, a, env, name, batch, r):
    """Exports (unless present), compiles and checks one model and batch; False on failure."""
    key = f"{name}_b{batch}"
    base = os.path.join(a.work, key)
    if not os.path.exists(base + ".pt2"):
        res = runner.run([sys.executable, os.path.abspath(__file__), "--export-child",
                          f"{name}|{batch}|{a.work}"], os.environ)
        if res is None:
            return False
        if res[0] != 0 or not os.path.exists(base + ".pt2"):
            r["errors"]["export"] = f"exit {res[0]}: {tail(res[1] + res[2])}"
            return False
        r["export_s"] = round(res[3], 1)
    res = runner.run([a.anvil, "compile", base + ".pt2", "-o", base + ".anvil", "-q"], env)
    if res is None:
        return False
    if res[0] != 0:
        r["errors"]["anvil_compile"] = f"exit {res[0]}: {tail(res[1] + res[2])}"
        return False
    r["anvil_compile_s"] = round(res[3], 2)
    res = runner.run([a.anvil, "run", base + ".anvil", "-i", base + ".in0.npy", "-o",
                      base + "_out", "-q"], env)
    if res is None:
        return False
    if res[0] != 0:
        r["errors"]["anvil_run"] = f"exit {res[0]}: {tail(res[1] + res[2])}"
        return False
    got = np.load(os.path.join(base + "_out", "out0.npy"))
    want = np.load(base + ".out0.npy")
    r["max_abs_err"] = float(np.max(np.abs(got.astype(np.float64) - want)))
    r["max_abs_ref"] = float(np.max(np.abs(want)))
    return True


def summarize(r):
    for who, per_t in r["rounds"].items():
        for t, v in per_t.items():
            r[f"{who}_t{t}_ms"] = round(statistics.median(v), 3)


def cell(v, width=9):
    return f"{v:{width}.2f}" if v else f"{'-':>{width}}"


def ratio(x, y, width=9):
    return f"{x / y:{width}.2f}" if x and y else f"{'-':>{width}}"


def print_tables(res, a):
    peers = a.peers
    print(f"\n{res['cpu']}, {res['cores']} CPUs, PyTorch {res['torch']}; 3x224x224 fp32; "
          f"{'pinned to cores 0-(T-1); ' if a.pin else ''}p50 ms (median of the rounds)")
    head = f"{'model':<22}{'thr':>4}{'anvil':>9}" + "".join(f"{p:>9}" for p in peers) + \
        "".join(f"{'a/' + p[:5]:>9}" for p in peers) + f"{'max err':>10}"
    print(head)
    for key, r in res["models"].items():
        for t in a.thread_list:
            an = r.get(f"anvil_t{t}_ms")
            line = f"{key:<22}{t:>4}{cell(an)}"
            line += "".join(cell(r.get(f"{p}_t{t}_ms")) for p in peers)
            line += "".join(ratio(an, r.get(f"{p}_t{t}_ms")) for p in peers)
            err = r.get("max_abs_err")
            line += f"{err:10.1e}" if err is not None else f"{'-':>10}"
            print(line)
    if len(a.thread_list) < 2:
        return
    measured = any(k.endswith("_ms") and k.split("_t")[0] in ["anvil"] + peers
                   for r in res["models"].values() for k in r)
    if not measured:
        print("\nthread scaling: nothing was measured (the budget ended the run first)")
        return
    print("\nthread scaling: p50 ms at each thread count (speed-up over 1 thread)\n")
    print("| model | who | " + " | ".join(f"{t} thr" for t in a.thread_list) + " |")
    print("|---|---|" + "---|" * len(a.thread_list))
    for key, r in res["models"].items():
        for who in ["anvil"] + peers:
            base = r.get(f"{who}_t1_ms")
            cells = []
            for t in a.thread_list:
                v = r.get(f"{who}_t{t}_ms")
                cells.append("-" if not v else
                             f"{v:.2f}" + (f" ({base / v:.2f}x)" if base and t != 1 else ""))
            if any(c != "-" for c in cells):
                print(f"| {key} | {who} | " + " | ".join(cells) + " |")


def parse_list(text, what):
    try:
        v = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        sys.exit(f"vision.py: {what} '{text}': expected a comma list of positive integers")
    if not v or min(v) < 1:
        sys.exit(f"vision.py: {what} '{text}': expected a comma list of positive integers")
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--anvil", default=os.path.join(ROOT, "build", "bin", "anvil"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch", default="1", help="batch sizes, comma list (default 1)")
    ap.add_argument("--threads", default="1,2", help="thread counts, comma list (default 1,2)")
    ap.add_argument("--pin", action="store_true",
                    help="run each timed process under taskset -c 0-(T-1) for T threads")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=30, help="timed runs per measurement, at most")
    ap.add_argument("--seconds", type=float, default=3.0,
                    help="a measurement stops its timed runs after about this long")
    ap.add_argument("--budget-s", type=float, default=0,
                    help="start nothing new after this many seconds (0: no limit)")
    ap.add_argument("--work", default="/tmp/vision")
    ap.add_argument("--no-eager", action="store_true", help="skip PyTorch eager")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--json", default=None)
    ap.add_argument("--torch-child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--export-child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_child:
        return torch_child(a.torch_child)
    if a.export_child:
        return export_child(a.export_child)
    import torch
    a.thread_list = parse_list(a.threads, "--threads")
    batches = parse_list(a.batch, "--batch")
    if a.rounds < 1 or a.iters < 3 or a.seconds <= 0:
        sys.exit("vision.py: --rounds must be at least 1, --iters at least 3, --seconds > 0")
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    for m in models:
        if m not in MODELS:
            sys.exit(f"vision.py: --models: unknown model '{m}' (known: {','.join(MODELS)})")
    a.anvil = os.path.abspath(a.anvil)
    if not os.access(a.anvil, os.X_OK):
        sys.exit(f"vision.py: --anvil {a.anvil}: no executable there (a build has "
                 "build/bin/anvil; bench/gpu_bundle.sh makes gpu_bundle/bin/anvil)")
    if a.pin:
        if shutil.which("taskset") is None:
            sys.exit("vision.py: --pin needs taskset (util-linux)")
        missing = sorted(set(range(max(a.thread_list))) - os.sched_getaffinity(0))
        if missing:
            sys.exit(f"vision.py: --pin with {max(a.thread_list)} threads needs CPUs 0-"
                     f"{max(a.thread_list) - 1}; CPU {missing[0]} is not available to this "
                     f"process ({sorted(os.sched_getaffinity(0))})")
    a.peers = [p for p in PEERS if not getattr(a, "no_" + p)]
    a.work = os.path.abspath(a.work)
    os.makedirs(a.work, exist_ok=True)
    runner = Runner(a.budget_s if a.budget_s > 0 else 1e6)
    env = dict(anvil_env(a.anvil), ANVIL_CACHE_DIR=os.path.join(a.work, "cache"))
    tenv = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(a.work, "inductor_cache"))
    res = {"cpu": platform.processor() or platform.machine(), "torch": torch.__version__,
           "cores": os.cpu_count(), "pin": a.pin, "models": {}}
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                res["cpu"] = line.split(":", 1)[1].strip()
                break
    for name in models:
        for batch in batches:
            if runner.left() < 1:
                break
            key = f"{name}_b{batch}"
            r = res["models"][key] = {"errors": {}, "rounds": {w: {} for w in ["anvil"] + a.peers},
                                      "compile_first_s": []}
            if prepare(runner, a, env, name, batch, r):
                measure(runner, a, env, tenv, key, r)
            summarize(r)
            if runner.out_of_budget:
                r["cut_by_budget"] = True
            print(key, json.dumps(r), flush=True)
    if runner.out_of_budget:
        print(f"budget of {a.budget_s:.0f} s spent: later measurements were not started",
              flush=True)
    print_tables(res, a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
