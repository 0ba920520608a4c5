#!/usr/bin/env python3
"""anvil's CUDA packages beside PyTorch eager and torch.compile, same GPU, same run.

Models: the anchors' GPU bench models (../shared/anchors/compile_bench_defs.py, redefined here so
the script runs on the GPU machine alone): MLP 1024->4096->4096->1024 with GELU at batch 64, and the
LLaMA-style decoder block d1024, 16 heads, T=256, B=4 (RMSNorm, RoPE, causal SDPA, SwiGLU 2816);
fp32 and bf16. Each is exported with torch.export on the CPU, compiled by
`anvil compile --target cuda-sm90`, checked against eager on the GPU, and timed with `anvil bench`
(inputs already on the GPU): single = median of calls each followed by a synchronize; b2b = per
call over calls queued back to back (anvil: Model::enqueue, one synchronize at the end; PyTorch:
CUDA events around the loop, as ../shared/anchors/gpu_modes.py). anvil with CUDA graphs (the
default) and without; PyTorch eager and torch.compile in the --modes given (default and
reduce-overhead, i.e. CUDA graphs).

    python3 bench/cuda_bench.py [--anvil gpu_bundle/bin/anvil] [--iters 300] [--json out.json]
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class MLP(nn.Module):  # as in compile_bench_defs.py
    def __init__(s, d=1024, h=4096):
        super().__init__(); s.l1 = nn.Linear(d, h); s.l2 = nn.Linear(h, h); s.l3 = nn.Linear(h, d)

    def forward(s, x):
        return s.l3(F.gelu(s.l2(F.gelu(s.l1(x)))))


class RMSNorm(nn.Module):
    def __init__(s, d):
        super().__init__(); s.w = nn.Parameter(torch.ones(d))

    def forward(s, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * s.w


class Block(nn.Module):  # LLaMA-style decoder block, as in compile_bench_defs.py
    def __init__(s, d=1024, nh=16, ff=2816):
        super().__init__(); s.nh = nh; s.n1 = RMSNorm(d); s.n2 = RMSNorm(d)
        s.qkv = nn.Linear(d, 3 * d, bias=False); s.o = nn.Linear(d, d, bias=False)
        s.g = nn.Linear(d, ff, bias=False); s.u = nn.Linear(d, ff, bias=False)
        s.dn = nn.Linear(ff, d, bias=False)

    def rope(s, x):
        T, hd = x.shape[-2], x.shape[-1]
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, device=x.device, dtype=torch.float32) / hd))
        f = torch.outer(torch.arange(T, device=x.device, dtype=torch.float32), inv)
        c, sn = f.cos().to(x.dtype), f.sin().to(x.dtype)
        x1, x2 = x[..., ::2], x[..., 1::2]
        return torch.stack([x1 * c - x2 * sn, x1 * sn + x2 * c], -1).flatten(-2)

    def forward(s, x):
        B, T, D = x.shape
        q, k, v = s.qkv(s.n1(x)).view(B, T, 3, s.nh, D // s.nh).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(s.rope(q), s.rope(k), v, is_causal=True)
        x = x + s.o(a.transpose(1, 2).reshape(B, T, D))
        h = s.n2(x)
        return x + s.dn(F.silu(s.g(h)) * s.u(h))


class BasicBlock(nn.Module):  # ResNet-18's block (torchvision's layout, written out here)
    def __init__(s, cin, cout, stride):
        super().__init__()
        s.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False); s.b1 = nn.BatchNorm2d(cout)
        s.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False); s.b2 = nn.BatchNorm2d(cout)
        s.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(s, x):
        y = s.b2(s.c2(F.relu(s.b1(s.c1(x)))))
        return F.relu(y + (x if s.down is None else s.down(x)))


class Bottleneck(nn.Module):  # ResNet-50's block
    def __init__(s, cin, width, stride):
        super().__init__(); cout = width * 4
        s.c1 = nn.Conv2d(cin, width, 1, bias=False); s.b1 = nn.BatchNorm2d(width)
        s.c2 = nn.Conv2d(width, width, 3, stride, 1, bias=False); s.b2 = nn.BatchNorm2d(width)
        s.c3 = nn.Conv2d(width, cout, 1, bias=False); s.b3 = nn.BatchNorm2d(cout)
        s.down = None if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(s, x):
        y = F.relu(s.b1(s.c1(x)))
        y = s.b3(s.c3(F.relu(s.b2(s.c2(y)))))
        return F.relu(y + (x if s.down is None else s.down(x)))


class ResNet(nn.Module):  # ResNet-18 (basic blocks 2-2-2-2) or -50 (bottlenecks 3-4-6-3), 1000 classes
    def __init__(s, depth=18):
        super().__init__()
        s.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                               nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 64
        for i, n in enumerate((2, 2, 2, 2) if depth == 18 else (3, 4, 6, 3)):
            width = 64 << i
            for j in range(n):
                stride = 2 if i > 0 and j == 0 else 1
                if depth == 18:
                    layers.append(BasicBlock(cin, width, stride)); cin = width
                else:
                    layers.append(Bottleneck(cin, width, stride)); cin = width * 4
        s.layers = nn.Sequential(*layers)
        s.fc = nn.Linear(cin, 1000)

    def forward(s, x):
        return s.fc(torch.flatten(F.adaptive_avg_pool2d(s.layers(s.stem(x)), 1), 1))


MODELS = {
    "mlp_1024x4096": (MLP, lambda dt: torch.randn(64, 1024, dtype=dt)),
    "llama_block_d1024_t256": (Block, lambda dt: torch.randn(4, 256, 1024, dtype=dt)),
    # vision at 224^2 (issue 19 / 14: convolutions through cuDNN), not in the default list
    "resnet18_b1": (lambda: ResNet(18), lambda dt: torch.randn(1, 3, 224, 224, dtype=dt)),
    "resnet50_b16": (lambda: ResNet(50), lambda dt: torch.randn(16, 3, 224, 224, dtype=dt)),
    "resnet18_b32": (lambda: ResNet(18), lambda dt: torch.randn(32, 3, 224, 224, dtype=dt)),
    "resnet50_b32": (lambda: ResNet(50), lambda dt: torch.randn(32, 3, 224, 224, dtype=dt)),
}
DEFAULT_MODELS = "mlp_1024x4096,llama_block_d1024_t256"


def torchvision_model(mname):
    """tv_NAME_bN: torchvision.models.NAME (random weights, seeded) at batch N, 3x224x224 (issue
    19's GPU target: the eight acceptance models at bf16 batch 32), e.g. tv_convnext_tiny_b32."""
    import torchvision
    name, batch = mname[3:].rsplit("_b", 1)

    def make():
        torch.manual_seed(0)
        m = getattr(torchvision.models, name)()
        if name.startswith("vit"):  # its head starts at zero: the output would be all zeros
            torch.nn.init.normal_(m.heads.head.weight, std=0.02)
        return m
    return make, lambda dt: torch.randn(int(batch), 3, 224, 224, dtype=dt)


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


def time_torch_b2b(fn, x, iters, warmup=20):
    """Per call over `iters` calls back to back (CUDA events), as the anchors' gpu_modes.py."""
    for _ in range(warmup):
        fn(x)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    s.record()
    for _ in range(iters):
        fn(x)
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) / iters


def anvil_bench(anvil, pkg, iters, extra=()):
    out = subprocess.run([anvil, "bench", pkg, "--iters", str(iters), "--warmup", "30", "-q",
                          *extra], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def print_profile(anvil, pkg, top):
    """The `top` steps of `pkg` taking the most time (anvil bench --profile, 50 runs)."""
    out = subprocess.run([anvil, "bench", pkg, "--iters", "50", "--warmup", "10", "--profile"],
                         check=True, capture_output=True, text=True).stdout
    prof = json.loads(out.strip().splitlines()[-1]).get("profile", [])
    ins = subprocess.run([anvil, "inspect", pkg], check=True, capture_output=True, text=True).stdout
    nodes, in_kernels = {}, False
    for line in ins.splitlines():  # "kernels: N" then "  NAME  KIND  node, node, ..."
        in_kernels = in_kernels or line.startswith("kernels:")
        parts = line.split(None, 2)
        if in_kernels and line.startswith("  ") and len(parts) == 3:
            nodes[parts[0]] = parts[2]
    prof.sort(key=lambda st: -st.get("ms_per_call", 0))
    total = sum(st.get("ms_per_call", 0) for st in prof)
    print(f"# profile of {os.path.basename(pkg)}: {len(prof)} steps, {total:.3f} ms", file=sys.stderr)
    for st in prof[:top]:
        print(f"#  {st.get('ms_per_call', 0):.4f} ms  {st.get('name')}  {st.get('kind')}  "
              f"{st.get('gb_per_s', 0):.0f} GB/s  {nodes.get(st.get('name'), '')[:100]}",
              file=sys.stderr)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--anvil", default="gpu_bundle/bin/anvil")
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--json", default="")
    ap.add_argument("--models", default=DEFAULT_MODELS,  # or tv_NAME_bN: torchvision's NAME
                    help=f"comma list of {', '.join(MODELS)} or tv_NAME_bN (torchvision NAME at batch N) (default {DEFAULT_MODELS})")
    ap.add_argument("--serving", action="store_true",
                    help="also serve the MLP at batch 1 from 4 threads (gpu_bundle/bin/serving_bench)")
    ap.add_argument("--serving-calls", type=int, default=10000)
    ap.add_argument("--work", default="", help="folder for the exports and packages (default: a temp folder)")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--profile", type=int, default=0, metavar="N",
                    help="also print the N slowest steps of each anvil package (anvil bench --profile)")
    ap.add_argument("--tuned", default="",
                    help="also compile each model with these extra `anvil compile` flags (e.g. "
                         "'--autotune fast') and time that package beside the default one")
    ap.add_argument("--variant-env", default="",  # "A=1,B=2" or several: "A=1;B=2;A=1,B=2"
                    help="NAME=VALUE[,...][;NAME=VALUE...]: more packages, each compiled with "
                         "one ';'-separated environment (with --tuned's arguments, if any), "
                         "timed alternately with the default (keys tuned_* for the first, "
                         "tuned1_*, tuned2_* ... for the others), e.g. ANVIL_CONV_LAYOUT=nchw")
    ap.add_argument("--modes", default="default,reduce-overhead",
                    help="torch.compile modes to time (max-autotune compiles for minutes)")
    a = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.device("cuda")
    results = []
    work = a.work or tempfile.mkdtemp()
    os.makedirs(work, exist_ok=True)
    ap_models = a.models.split(",")
    dtypes = [getattr(torch, d) for d in a.dtypes.split(",")]
    for mname, dt in [(mn, d) for mn in ap_models for d in dtypes]:
        name = f"{mname}_{str(dt).split('.')[-1]}"
        cls, make_x = MODELS[mname] if mname in MODELS else torchvision_model(mname)
        m = cls().to(dt).eval()
        x = make_x(dt)
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
        graphs = anvil_bench(a.anvil, pkg, a.iters)
        plain = anvil_bench(a.anvil, pkg, a.iters, ["--no-cuda-graphs"])
        note(f"{name}: compiled in {compile_s:.1f} s, b2b {graphs['b2b_ms']:.3f} ms "
             f"(no graphs {plain['b2b_ms']:.3f}), rel err {rel:.1e}")
        r = {"model": name, "gpu": torch.cuda.get_device_name(),
             "anvil_single_ms": graphs["single_ms"], "anvil_b2b_ms": graphs["b2b_ms"],
             "anvil_cuda_graphs": graphs["cuda_graphs"],
             "anvil_nographs_single_ms": plain["single_ms"], "anvil_nographs_b2b_ms": plain["b2b_ms"],
             "anvil_compile_s": compile_s, "max_rel_err_vs_eager": rel}
        # variants: --tuned's compile arguments, or each ';'-separated set of --variant-env
        # (keys tuned_* for the first, tuned<i>_* for the i-th after it)
        variants = [(a.tuned, e) for e in a.variant_env.split(";")] if a.variant_env else (
            [(a.tuned, "")] if a.tuned else [])
        vpkgs = []
        for vi, (vargs, venv_text) in enumerate(variants):
            key = "tuned" if vi == 0 else f"tuned{vi}"
            tpkg = os.path.join(work, f"{name}_{key}.anvil")
            t0 = time.perf_counter()
            venv = dict(os.environ)
            for kv in filter(None, venv_text.split(",")):
                venv[kv.split("=", 1)[0]] = kv.split("=", 1)[1]
            subprocess.run([a.anvil, "compile", pt2, "-o", tpkg, "--target", "cuda-sm90", "-q",
                            *vargs.split()], check=True, env=venv)
            r[f"{key}_args"] = vargs
            r[f"{key}_env"] = venv_text
            r[f"{key}_compile_s"] = time.perf_counter() - t0
            tout = os.path.join(work, f"{name}_{key}_out")
            subprocess.run([a.anvil, "run", tpkg, "-i", xin, "-o", tout, "-q"], check=True)
            tgot = torch.from_numpy(np.load(os.path.join(tout, "out0.npy")))
            r[f"{key}_max_rel_err_vs_eager"] = ((tgot - want).abs().max() / want.abs().max().clamp(min=1)).item()
            vpkgs.append((key, tpkg))
        # alternate the default and the variants' packages, twice, so drift hits all alike
        for rnd in range(2 if vpkgs else 0):
            for key, pk in [("anvil", pkg)] + vpkgs:
                b = anvil_bench(a.anvil, pk, a.iters)
                r[f"{key}_single_ms_r{rnd}"] = b["single_ms"]
                r[f"{key}_b2b_ms_r{rnd}"] = b["b2b_ms"]
                note(f"{name} {key} [{r.get(key + '_env', '') or r.get(key + '_args', '')}] "
                     f"round {rnd}: b2b {b['b2b_ms']:.3f} ms")
        if a.profile:
            for pk in [pkg] + [v[1] for v in vpkgs]:
                print_profile(a.anvil, pk, a.profile)
        with torch.no_grad():
            r["eager_single_ms"] = time_torch(mg, xg, a.iters)
            r["eager_b2b_ms"] = time_torch_b2b(mg, xg, a.iters)
            note(f"{name} eager: b2b {r['eager_b2b_ms']:.3f} ms")
            for mode in filter(None, a.modes.split(",")):
                torch._dynamo.reset()
                cm = torch.compile(mg, mode=None if mode == "default" else mode)
                r[f"compile_{mode}_single_ms"] = time_torch(cm, xg, a.iters)
                r[f"compile_{mode}_b2b_ms"] = time_torch_b2b(cm, xg, a.iters)
                note(f"{name} torch.compile {mode}: b2b {r[f'compile_{mode}_b2b_ms']:.3f} ms")
        results.append(r)
        print(json.dumps(r))
        sys.stdout.flush()
        if a.json:  # after each model, so that a run cut short keeps the models it finished
            write_json(a.json, results)
    if a.serving:
        # issue 14's serving check: the MLP at batch 1 in bf16, 4 threads on one package
        m = MLP().to(torch.bfloat16).eval()
        x = torch.randn(1, 1024, dtype=torch.bfloat16)
        with torch.no_grad():
            ep = torch.export.export(m, (x,))
        pt2 = os.path.join(work, "mlp_b1.pt2")
        torch.export.save(ep, pt2)
        pkg = os.path.join(work, "mlp_b1.anvil")
        subprocess.run([a.anvil, "compile", pt2, "-o", pkg, "--target", "cuda-sm90", "-q"], check=True)
        sb = os.path.join(os.path.dirname(a.anvil), "serving_bench")
        out = subprocess.run([sb, pkg, "--threads", "4", "--calls", str(a.serving_calls)],
                             capture_output=True, text=True)
        print(out.stdout.strip(), out.stderr.strip())
        if out.stdout.strip():
            results.append({"serving": json.loads(out.stdout.strip().splitlines()[-1])})
    if a.json:
        write_json(a.json, results)


def note(text):
    """A progress line on stderr, flushed at once: a run cut short by a time limit keeps the
    figures it measured."""
    print(f"# {text}", file=sys.stderr, flush=True)


def write_json(path, results):
    with open(path, "w") as f:
        json.dump({"torch": torch.__version__, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
