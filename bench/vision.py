#!/usr/bin/env python3
"""Vision models at 224x224, batch 1, fp32: anvil beside PyTorch eager and torch.compile on this
CPU, at each thread count, printed side by side (issue 19, item 3).

    PYTHONPATH=<torchvision dir> <python with torch 2.x> bench/vision.py \
        [--anvil build/bin/anvil] [--models resnet18,resnet50,...] \
        [--threads 1,2] [--rounds 2] [--work /tmp/vision] [--no-compile] [--json OUT]

Needs PyTorch 2.x with torchvision (random weights, seeded; nothing is downloaded). Per model:
torchvision builds it in eval mode, torch.export writes NAME.pt2 with the input and eager's
output; anvil compiles it and its output is compared with eager's (max abs error printed);
then, per thread count and round, anvil (`anvil bench`), eager and torch.compile are timed in
fresh processes, alternated so that a noisy neighbour hits all three alike. Medians of the
rounds' p50s are printed. On a shared machine compare only figures of one run.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
          "convnext_tiny", "densenet121", "regnet_y_400mf", "vit_b_16"]


def export(name, work):
    """Writes NAME.pt2, NAME.in0.npy and NAME.out0.npy (eager's output) into `work`."""
    import torch
    import torchvision
    pt2 = os.path.join(work, name + ".pt2")
    if os.path.exists(pt2):
        return
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
    x = torch.randn(1, 3, 224, 224)
    with torch.no_grad():
        ep = torch.export.export(m, (x,))
        y = m(x)
    torch.export.save(ep, pt2)
    np.save(os.path.join(work, name + ".in0.npy"), x.numpy())
    np.save(os.path.join(work, name + ".out0.npy"), y.numpy())


def torch_child(pt2, inp, mode, threads, iters):
    """Times eager or torch.compile of the exported module; prints one JSON line."""
    import torch
    torch.set_num_threads(threads)
    m = torch.export.load(pt2).module()
    x = torch.from_numpy(np.load(inp))
    f = m if mode == "eager" else torch.compile(m)
    with torch.inference_mode():
        t0 = time.perf_counter()
        f(x)
        first = time.perf_counter() - t0
        for _ in range(3):
            f(x)
        ts = []
        end = time.perf_counter() + 30
        for _ in range(iters):
            t = time.perf_counter()
            f(x)
            ts.append((time.perf_counter() - t) * 1e3)
            if time.perf_counter() > end:
                break
    print(json.dumps({"p50_ms": statistics.median(ts), "first_s": first, "n": len(ts)}))


def last_json(text):
    return json.loads(text.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--anvil", default=os.path.join(ROOT, "build", "bin", "anvil"))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--work", default="/tmp/vision")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--json", default=None)
    ap.add_argument("--torch-child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_child:
        pt2, inp, mode, threads, iters = a.torch_child.split("|")
        torch_child(pt2, inp, mode, int(threads), int(iters))
        return
    import torch
    os.makedirs(a.work, exist_ok=True)
    env = dict(os.environ, ANVIL_CACHE_DIR=os.path.join(a.work, "cache"))
    threads = [int(t) for t in a.threads.split(",")]
    modes = ["eager"] + ([] if a.no_compile else ["compile"])
    res = {"cpu": platform.processor() or platform.machine(), "torch": torch.__version__,
           "cores": os.cpu_count(), "models": {}}
    try:
        res["cpu"] = subprocess.run("lscpu | sed -n 's/^Model name: *//p'", shell=True,
                                    capture_output=True, text=True).stdout.strip() or res["cpu"]
    except OSError:
        pass
    for name in a.models.split(","):
        export(name, a.work)
        pt2 = os.path.join(a.work, name + ".pt2")
        inp = os.path.join(a.work, name + ".in0.npy")
        pkg = os.path.join(a.work, name + ".anvil")
        r = res["models"].setdefault(name, {})
        t0 = time.time()
        c = subprocess.run([a.anvil, "compile", pt2, "-o", pkg, "-q"], env=env,
                           capture_output=True, text=True)
        r["anvil_compile_s"] = round(time.time() - t0, 2)
        if c.returncode:
            r["error"] = (c.stderr or c.stdout)[-400:]
            print(name, "anvil compile failed:", r["error"], flush=True)
            continue
        outdir = os.path.join(a.work, name + "_out")
        o = subprocess.run([a.anvil, "run", pkg, "-i", inp, "-o", outdir], env=env,
                           capture_output=True, text=True)
        if o.returncode == 0:
            got = np.load(os.path.join(outdir, "out0.npy"))
            want = np.load(os.path.join(a.work, name + ".out0.npy"))
            r["max_abs_err"] = float(np.max(np.abs(got - want)))
            r["max_abs_ref"] = float(np.max(np.abs(want)))
        times = {}
        for t in threads:
            for rnd in range(a.rounds):
                b = subprocess.run([a.anvil, "bench", pkg, "-i", inp, "-q", "--threads", str(t),
                                    "--iters", str(a.iters), "--warmup", "3"], env=env,
                                   capture_output=True, text=True)
                times.setdefault(("anvil", t), []).append(last_json(b.stdout)["p50_ms"])
                for mode in modes:
                    ch = subprocess.run([sys.executable, os.path.abspath(__file__), "--torch-child",
                                         "|".join([pt2, inp, mode, str(t), str(a.iters)])],
                                        capture_output=True, text=True)
                    try:
                        j = last_json(ch.stdout)
                    except (ValueError, IndexError):
                        r[f"{mode}_error"] = ch.stderr[-300:]
                        continue
                    times.setdefault((mode, t), []).append(j["p50_ms"])
                    if mode == "compile":
                        r["compile_first_s"] = round(j["first_s"], 1)
        for (who, t), v in times.items():
            r[f"{who}_t{t}_ms"] = round(statistics.median(v), 3)
        print(name, json.dumps(r), flush=True)
    print(f"\n{res['cpu']}, {res['cores']} cores, PyTorch {res['torch']}; batch 1, 3x224x224, "
          f"fp32; p50 ms (median of {a.rounds} rounds)")
    head = f"{'model':<16}{'thr':>4}{'anvil':>9}{'eager':>9}" + \
        ("" if a.no_compile else f"{'compile':>9}") + f"{'a/eager':>9}" + \
        ("" if a.no_compile else f"{'a/comp':>9}") + f"{'max err':>10}"
    print(head)
    for name, r in res["models"].items():
        for t in threads:
            an, ea, co = (r.get(f"{w}_t{t}_ms") for w in ("anvil", "eager", "compile"))
            cell = lambda v: f"{v:9.2f}" if v else f"{'-':>9}"  # noqa: E731
            ratio = lambda x, y: f"{x / y:9.2f}" if x and y else f"{'-':>9}"  # noqa: E731
            line = f"{name:<16}{t:>4}{cell(an)}{cell(ea)}"
            if not a.no_compile:
                line += cell(co)
            line += ratio(an, ea)
            if not a.no_compile:
                line += ratio(an, co)
            err = r.get("max_abs_err")
            line += f"{err:10.1e}" if err is not None else f"{'-':>10}"
            print(line)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
