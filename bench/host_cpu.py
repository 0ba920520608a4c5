#!/usr/bin/env python3
"""Issue 16's whole-model CPU targets on one host: anvil's default and `--autotune max` packages
beside PyTorch eager and torch.compile (default mode), same pinned cores, same run.

    python3 bench/host_cpu.py [--anvil gpu_bundle/bin/anvil] [--core-sets "0-1;0-7"] \
        [--models mlp_1024x4096,llama_block_d1024_t256] [--rounds 3] [--budget-s 540] \
        [--work DIR] [--json OUT]

Needs numpy and PyTorch 2.x only (no network). The models are bench/cuda_bench.py's (the anchors'
compile_bench_defs.py): the MLP 1024->4096->4096->1024 (GELU) at batch 64 and the LLaMA-style
block (d 1024, 16 heads, ffn 2816, B 4, T 256), fp32, weights seeded (torch.manual_seed(0)),
exported with torch.export. Also (--models, not in the default list) issue 16's bf16 models,
hf_llama_bf16 and hf_bert_bf16: transformers' LlamaForCausalLM and BertModel (hidden 256, 2
layers, 4 heads, intermediate 1024, vocab 1000, random weights, cast to bf16) on 4 x 128 token
ids; they need the transformers package and are checked at bf16's tolerance (2e-2). Per model:
eager's output on this CPU is the reference; `anvil
compile` writes the default package (unpinned). Per core set (a taskset list; threads = its
cores): `anvil compile --autotune max` pinned to the set with ANVIL_NUM_THREADS set, so the
tuner's timing children run as the package will, into an empty object cache and an empty
--autotune-cache of the set's own (the tuning cache key holds no thread count), timed cold, then
again warm; both packages' outputs are checked against eager (max abs error; within tolerance:
<= 1e-4 * max(1, max|eager|)). Then --rounds rounds, each timing anvil default, anvil max
(`anvil bench --threads N`), eager and torch.compile (a child Python, torch.set_num_threads(N))
in fresh pinned processes, the order rotated each round; the median of the rounds' p50s is
reported. torch.compile's Inductor cache is a fresh folder per run: its first round compiles
cold, later rounds and sets find the cache warm (first-call times are reported per round).

One JSON line per (model, core set) as each finishes, then a markdown table. Nothing new starts
after --budget-s seconds from the start (a running child is killed at that time); what was
measured is printed. When the budget cuts a run short, run one model per call (--models).
anvil's bundle: LD_LIBRARY_PATH gets <bin>/../lib; ANVIL_INCLUDE_DIR (unless set) the first of
<bin>/../include and <bin>/../../include holding anvil/anvil_rt.h. anvil-gemm-time must sit
beside anvil (bench/gpu_bundle.sh packs it) or the tuning keeps the default GEMMs.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cuda_bench import MODELS  # noqa: E402  MLP and Block with their inputs (one definition)

DEFAULT_MODELS = "mlp_1024x4096,llama_block_d1024_t256"
# (timed iterations, warm-up calls) per call of a measurement: the block takes ~50-130 ms a call
# on 2 cores, the MLP ~10-20 ms, the bf16 decoders ~10-25 ms
ITERS = {"mlp_1024x4096": (40, 5), "llama_block_d1024_t256": (12, 2),
         "hf_llama_bf16": (40, 5), "hf_bert_bf16": (40, 5)}


class HfDecoder(torch.nn.Module):
    """Issue 16's bf16 models: transformers' LlamaForCausalLM or BertModel with hidden 256,
    2 layers, 4 heads, intermediate 1024, vocab 1000, random weights, cast to bf16; the input is
    4 x 128 token ids, the output the logits (Llama) or the last hidden state (BERT)."""

    def __init__(self, kind):
        super().__init__()
        import transformers as tf  # only these two models need it (pip install transformers)
        if kind == "llama":
            self.m = tf.LlamaForCausalLM(tf.LlamaConfig(
                hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=4, intermediate_size=1024, vocab_size=1000,
                use_cache=False))  # logits only, as the export returns
        else:
            self.m = tf.BertModel(tf.BertConfig(
                hidden_size=256, num_hidden_layers=2, num_attention_heads=4,
                intermediate_size=1024, vocab_size=1000))
        self.m = self.m.to(torch.bfloat16)

    def forward(self, ids):
        return self.m(input_ids=ids)[0]


def token_ids(_dtype):
    return torch.randint(0, 1000, (4, 128), generator=torch.Generator().manual_seed(1))


ALL_MODELS = dict(MODELS, hf_llama_bf16=(lambda: HfDecoder("llama"), token_ids),
                  hf_bert_bf16=(lambda: HfDecoder("bert"), token_ids))
KINDS = ("anvil_default", "anvil_max", "eager", "compile")


def parse_cores(spec):
    """The CPUs of a taskset list ("0,1", "0-7", "0-3,8-11"), checked against this process's."""
    cpus = set()
    for part in spec.split(","):
        try:
            lo, _, hi = part.strip().partition("-")
            first, last = int(lo), int(hi) if hi else int(lo)
        except ValueError:
            sys.exit(f"host_cpu.py: core set '{spec}': expected a taskset list such as 0,1 or "
                     f"0-7, got the part '{part}'")
        if first > last:
            sys.exit(f"host_cpu.py: core set '{spec}': range {part} runs backwards")
        cpus.update(range(first, last + 1))
    allowed = os.sched_getaffinity(0)
    missing = sorted(cpus - allowed)
    if missing:
        sys.exit(f"host_cpu.py: core set '{spec}': CPU {missing[0]} is not available here "
                 f"(this process may use {sorted(allowed)})")
    return len(cpus)


def torch_child(spec):
    """Times eager or torch.compile of the model in this (pinned) process; one JSON line."""
    s = json.loads(spec)
    torch.set_num_threads(s["threads"])
    cls, _ = ALL_MODELS[s["model"]]
    m = cls().eval()
    m.load_state_dict(torch.load(s["state"]))
    x = torch.from_numpy(np.load(s["input"]))
    f = m if s["mode"] == "eager" else torch.compile(m)
    with torch.inference_mode():
        t0 = time.perf_counter()
        f(x)
        first = time.perf_counter() - t0
        for _ in range(s["warmup"]):
            f(x)
        ms = []
        for _ in range(s["iters"]):
            t = time.perf_counter()
            f(x)
            ms.append((time.perf_counter() - t) * 1e3)
    print(json.dumps({"p50_ms": statistics.median(ms), "min_ms": min(ms), "first_s": first,
                      "n": len(ms)}))


class Runner:
    """Starts children while the budget lasts; kills a child (its whole group) at the deadline."""

    def __init__(self, budget_s):
        self.deadline = time.monotonic() + budget_s
        self.out_of_budget = False

    def left(self):
        return self.deadline - time.monotonic()

    def run(self, cmd, env, cpus=None):
        """(returncode, stdout, stderr, seconds), or None when the budget is spent."""
        if self.left() < 1:
            self.out_of_budget = True
            return None
        if cpus:
            cmd = ["taskset", "-c", cpus] + cmd
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
        try:
            out, err = p.communicate(timeout=self.left())
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err = p.communicate()
            self.out_of_budget = True
            return None
        return p.returncode, out, err, time.monotonic() - t0


def tail(text, n=400):
    return " ".join(text.strip().split())[-n:]


def anvil_env(anvil):
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(anvil))
    lib = os.path.join(root, "lib")
    if os.path.isdir(lib):
        old = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = lib + (":" + old if old else "")
    if not env.get("ANVIL_INCLUDE_DIR"):
        for inc in (os.path.join(root, "include"), os.path.join(os.path.dirname(root), "include")):
            if os.path.isfile(os.path.join(inc, "anvil", "anvil_rt.h")):
                env["ANVIL_INCLUDE_DIR"] = inc
                break
    return env


def check_output(runner, anvil, env, pkg, inp, want, out_dir, r, key):
    """Runs `pkg` once on `inp`; records its max abs error against eager's `want` in r."""
    res = runner.run([anvil, "run", pkg, "-i", inp, "-o", out_dir, "-q"], env)
    if res is None:
        return
    if res[0] != 0:
        r["errors"][key] = f"anvil run exit {res[0]}: {tail(res[1] + res[2])}"
        return
    got = np.load(os.path.join(out_dir, "out0.npy"))
    if got.shape != want.shape:
        r["errors"][key] = f"output shape {got.shape}, eager's {want.shape}"
        return
    err = float(np.max(np.abs(got.astype(np.float64) - want)))
    r[key] = err
    # the repo's fp32 and bf16 tolerances
    tol = (2e-2 if r["dtype"] == "bfloat16" else 1e-4) * max(1.0, float(np.max(np.abs(want))))
    r[key.replace("max_abs_err", "within_tol")] = err <= tol


def tuned_choices(tune_dir):
    """{"mm m64 n1024 k4096 ...": chosen candidate} from an --autotune-cache folder."""
    out = {}
    for root, _, files in os.walk(tune_dir):
        for fn in sorted(files):
            try:
                with open(os.path.join(root, fn)) as fh:
                    j = json.load(fh)
                out[" ".join(j["key"].split("\n")[1].split()[:4])] = j["choice"]
            except (OSError, ValueError, KeyError, IndexError):
                continue
    return out


def measure(runner, a, anvil, env, tenv, prep, cores, r):
    """Fills r (one model, one core set): the tuned package's compiles, checks, then the rounds."""
    name, n = r["model"], r["threads"]
    iters, warmup = ITERS[name] if a.iters is None else (a.iters, min(5, a.iters))
    tag = f"{name}_c{cores.replace(',', '_')}"
    cache, tune = (os.path.join(a.work, tag + d) for d in ("_objcache", "_autotune"))
    for d in (cache, tune):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    max_pkg = os.path.join(a.work, tag + "_max.anvil")
    cenv = dict(env, ANVIL_CACHE_DIR=cache, ANVIL_NUM_THREADS=str(n), OMP_NUM_THREADS=str(n))
    cmd = [anvil, "compile", prep["pt2"], "-o", max_pkg, "--autotune", "max", "--autotune-cache",
           tune, "--jobs", str(n)]
    for key in ("anvil_max_cold_compile_s", "anvil_max_warm_compile_s"):
        res = runner.run(cmd, cenv, cores)
        if res is None:
            return
        if res[0] != 0:
            r["errors"][key] = f"anvil compile exit {res[0]}: {tail(res[1] + res[2])}"
            max_pkg = None
            break
        r[key] = round(res[3], 2)
        if key == "anvil_max_cold_compile_s":  # the summary's tuning line and the choices
            lines = (res[1] + res[2]).replace("\r", "\n").splitlines()
            r["anvil_max_autotune"] = " ".join(ln.split(":", 1)[1].strip() for ln in lines
                                               if "GEMMs tuned" in ln)
            r["anvil_max_choices"] = tuned_choices(tune)
    if max_pkg:
        check_output(runner, anvil, env, max_pkg, prep["input"], prep["want"],
                     os.path.join(a.work, tag + "_max_out"), r, "max_abs_err_max")
    bench = ["--threads", str(n), "--iters", str(iters), "--warmup", str(warmup), "-q"]
    cmds = {
        "anvil_default": ([anvil, "bench", prep["pkg"], "-i", prep["input"]] + bench, env)
        if prep["pkg"] else None,
        "anvil_max": ([anvil, "bench", max_pkg, "-i", prep["input"]] + bench, env)
        if max_pkg else None,
    }
    for mode in ("eager", "compile"):
        spec = json.dumps({"model": name, "state": prep["state"], "input": prep["input"],
                           "mode": mode, "threads": n, "iters": iters, "warmup": warmup})
        cmds[mode] = ([sys.executable, os.path.abspath(__file__), "--torch-child", spec], tenv)
    for rnd in range(a.rounds):
        for kind in KINDS[rnd % 4:] + KINDS[:rnd % 4]:  # rotate who goes first
            if cmds[kind] is None:
                continue
            res = runner.run(cmds[kind][0], dict(cmds[kind][1], OMP_NUM_THREADS=str(n)), cores)
            if res is None:
                return
            try:
                j = json.loads(res[1].strip().splitlines()[-1])
                r["rounds"][kind].append(round(j["p50_ms"], 4))
                if kind == "compile":
                    r["torch_compile_first_call_s"].append(round(j["first_s"], 2))
            except (IndexError, ValueError, KeyError):
                r["errors"][kind] = f"exit {res[0]}: {tail(res[1] + res[2])}"


def summarize(r):
    for kind in KINDS:
        if r["rounds"][kind]:
            r[kind + "_ms"] = round(statistics.median(r["rounds"][kind]), 4)
    for kind in ("anvil_default", "anvil_max"):
        for ref in ("compile", "eager"):
            if r.get(kind + "_ms") and r.get(ref + "_ms"):
                r[f"{kind}_over_{ref}"] = round(r[kind + "_ms"] / r[ref + "_ms"], 3)


def table(results):
    def f(v, d=2):
        return "—" if v is None else f"{v:.{d}f}"
    lines = ["| model | cores | anvil default ms | anvil max ms | eager ms | torch.compile ms | "
             "anvil max / torch.compile | anvil max compile cold / warm s | anvil default "
             "compile s | torch.compile first call s | max abs err default / max |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        first = r["torch_compile_first_call_s"]
        lines.append(
            f"| {r['model']} | {r['cores']} ({r['threads']}) | {f(r.get('anvil_default_ms'))} | "
            f"{f(r.get('anvil_max_ms'))} | {f(r.get('eager_ms'))} | {f(r.get('compile_ms'))} | "
            f"{f(r.get('anvil_max_over_compile'))} | {f(r.get('anvil_max_cold_compile_s'), 1)} / "
            f"{f(r.get('anvil_max_warm_compile_s'), 1)} | {f(r.get('anvil_default_compile_s'), 1)} "
            f"| {' / '.join(f'{v:.1f}' for v in first) or '—'} | "
            f"{f(r.get('max_abs_err_default'), 7)} / {f(r.get('max_abs_err_max'), 7)} |")
    return "\n".join(lines)


def host_cpu():
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--anvil", default="gpu_bundle/bin/anvil")
    ap.add_argument("--cores", action="append", default=[],
                    help="a taskset core list (repeatable); threads = its cores")
    ap.add_argument("--core-sets", default="",
                    help='core lists separated by ";" (default "0-1;0-7" when no --cores)')
    ap.add_argument("--models", default=DEFAULT_MODELS,
                    help=f"comma list of {', '.join(ITERS)} (default {DEFAULT_MODELS})")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=None,
                    help="timed calls per measurement (default: block 12, the others 40)")
    ap.add_argument("--budget-s", type=float, default=540)
    ap.add_argument("--work", default="", help="folder for exports, packages and caches "
                                               "(default: a temp folder, removed at the end)")
    ap.add_argument("--json", default="", help="also write every result to this file")
    ap.add_argument("--torch-child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.torch_child:
        torch_child(a.torch_child)
        return
    runner = Runner(a.budget_s)
    sets = a.cores + [s for s in a.core_sets.split(";") if s.strip()]
    sets = [s.strip() for s in sets] or ["0-1", "0-7"]
    threads = {s: parse_cores(s) for s in sets}
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    for m in models:
        if m not in ITERS:
            sys.exit(f"host_cpu.py: --models: unknown model '{m}' (known: {', '.join(ITERS)})")
    if a.rounds < 1 or (a.iters is not None and a.iters < 1):
        sys.exit("host_cpu.py: --rounds and --iters must be at least 1")
    anvil = os.path.abspath(a.anvil)
    if not os.access(anvil, os.X_OK):
        sys.exit(f"host_cpu.py: --anvil {a.anvil}: no executable there (bench/gpu_bundle.sh "
                 "makes gpu_bundle/bin/anvil; a build has build/bin/anvil)")
    if shutil.which("taskset") is None:
        sys.exit("host_cpu.py: taskset (util-linux) is needed to pin the measurements")
    own_work = not a.work
    a.work = os.path.abspath(a.work or tempfile.mkdtemp(prefix="anvil_host_cpu_"))
    os.makedirs(a.work, exist_ok=True)
    env = anvil_env(anvil)
    tenv = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(a.work, "inductor_cache"))
    host, results = host_cpu(), []
    print(f"host: {host}, {os.cpu_count()} CPUs; torch {torch.__version__}; core sets "
          f"{sets}; work {a.work}; budget {a.budget_s:.0f} s", flush=True)
    for name in models:
        if runner.left() < 1:
            break
        cls, make_x = ALL_MODELS[name]
        torch.manual_seed(0)
        m, x = cls().eval(), make_x(torch.float32)
        dtype = str(next(m.parameters()).dtype).replace("torch.", "")
        prep = {p: os.path.join(a.work, name + ext) for p, ext in
                (("pt2", ".pt2"), ("input", ".in0.npy"), ("state", ".state.pt"))}
        with torch.no_grad():
            prep["want"] = m(x).double().numpy()
            torch.export.save(torch.export.export(m, (x,)), prep["pt2"])
        np.save(prep["input"], x.numpy())
        torch.save(m.state_dict(), prep["state"])
        prep["pkg"] = os.path.join(a.work, name + "_default.anvil")
        shared = {"errors": {}, "dtype": dtype}
        res = runner.run([anvil, "compile", prep["pt2"], "-o", prep["pkg"], "-q"],
                         dict(env, ANVIL_CACHE_DIR=os.path.join(a.work, "objcache")))
        if res is not None and res[0] == 0:
            shared["anvil_default_compile_s"] = round(res[3], 2)
            check_output(runner, anvil, env, prep["pkg"], prep["input"], prep["want"],
                         os.path.join(a.work, name + "_default_out"), shared, "max_abs_err_default")
        else:
            if res is not None:
                shared["errors"]["anvil_default"] = (f"anvil compile exit {res[0]}: "
                                                     f"{tail(res[1] + res[2])}")
            prep["pkg"] = None
        for cores in sets:
            if runner.left() < 1:
                break
            r = {"model": name, "cores": cores, "threads": threads[cores],
                 "host": host, "torch": torch.__version__, "rounds": {k: [] for k in KINDS},
                 "torch_compile_first_call_s": [], **json.loads(json.dumps(shared))}
            measure(runner, a, anvil, env, tenv, prep, cores, r)
            summarize(r)
            if runner.out_of_budget:
                r["cut_by_budget"] = True
            results.append(r)
            print(json.dumps(r), flush=True)
    if runner.out_of_budget:
        print(f"budget of {a.budget_s:.0f} s spent: later measurements were not started",
              flush=True)
    print(f"\n{host}, torch {torch.__version__}, p50 ms (median of the rounds)\n")
    print(table(results))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"host": host, "torch": torch.__version__, "results": results}, fh, indent=1)
    if own_work:
        shutil.rmtree(a.work, ignore_errors=True)


if __name__ == "__main__":
    main()
