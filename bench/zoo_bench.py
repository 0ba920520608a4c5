"""Times the model zoo (tests/fixtures/zoo, scripts/export_zoo.py): per model, anvil's compile
time (a fresh object cache, so nothing is reused), anvil's latency (`anvil bench` on the
package) and PyTorch eager's latency on the same inputs and thread count, and whether anvil's
outputs match PyTorch's; writes the table to docs/models.md.

    /work/venv211/bin/python bench/zoo_bench.py [--anvil build/bin/anvil] [--only a,b]
        [--threads 2] [--iters 20] [--out docs/models.md]

Needs PyTorch 2.11 with torchvision, timm and transformers (the eager models are rebuilt with
scripts/export_zoo.py's builders and the same formula weights). Dynamic models are timed at
their largest checked shape (8x128). A model anvil cannot compile is listed with its error. Text after the notes marker
line of docs/models.md is kept when the table is rewritten.
"""
import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import export_zoo  # noqa: E402
from formula_weights import fill, formula  # noqa: E402

ZOO = os.path.join(ROOT, "tests", "fixtures", "zoo")
NOTES_MARKER = "<!-- notes: kept by bench/zoo_bench.py -->"


def refill(name, out_path):
    """Writes NAME.pt2 with its formula weight entries filled in (what formula_archive.cpp
    does in the C++ test)."""
    with open(os.path.join(ZOO, name + ".weights.json")) as f:
        side = json.load(f)
    by_entry = {e["entry"]: e for e in side["entries"]}
    with zipfile.ZipFile(os.path.join(ZOO, name + ".pt2")) as zin, \
            zipfile.ZipFile(out_path, "w", allowZip64=True) as zout:
        for info in zin.infolist():
            e = by_entry.get(info.filename)
            if e is None:
                zout.writestr(info.filename, zin.read(info.filename))
                continue
            dt = getattr(torch, e["dtype"])
            zout.writestr(info.filename,
                          formula(e["numel"], e["seed"], e["scale"], e["offset"], dt).numpy().tobytes())
    return side["sets"]


def eager_model(name):
    """The eager model with the formula weights and calibrated BatchNorms of the export."""
    family, source, build, dynamic, tol = export_zoo.MODELS[name]
    torch.manual_seed(0)
    model, sets = build()
    model = model.float().eval()
    params = fill(model, export_zoo.scale_of)
    export_zoo.calibrate_batchnorm(model, params, [export_zoo.make_input(s) for s in sets[0]])
    return model


def time_eager(model, args, iters, warmup):
    with torch.no_grad():
        for _ in range(warmup):
            model(*args)
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter()
            model(*args)
            ts.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(ts))


def run(cmd, timeout):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def short_error(text):
    line = next((l for l in text.splitlines() if "error" in l.lower()), text.strip()[:200])
    if "unsupported ops: " in line:
        return "missing ops: " + line.split("unsupported ops: ", 1)[1].split(" (expected")[0]
    return line.replace("anvil: error: ", "")[:200]


def bench_one(name, rec, a, tmp):
    row = dict(name=name, source=rec["source"], family=rec["family"], params=rec["params"])
    pt2 = os.path.join(tmp, name + ".pt2")
    sets = refill(name, pt2)
    last = sets[-1]
    row["shape"] = "x".join(map(str, last["shape"]))
    inputs = [export_zoo.make_input(s) for s in last["inputs"]]
    in_files = []
    for k, t in enumerate(inputs):
        in_files.append(os.path.join(tmp, f"{name}.in{k}.npy"))
        np.save(in_files[-1], t.numpy())
    pkg = os.path.join(tmp, name + ".anvil")
    cache = os.path.join(tmp, "cache-" + name)
    t0 = time.perf_counter()
    rc, out, err = run([a.anvil, "compile", pt2, "-o", pkg, "--cache-dir", cache, "-q",
                        "-j", str(a.threads)], a.timeout)
    row["compile_s"] = time.perf_counter() - t0
    shutil.rmtree(cache, ignore_errors=True)
    if rc != 0:
        row["status"] = "compile fails: " + short_error(err + out)
        return row
    outdir = os.path.join(tmp, name + ".out")
    rc, out, err = run([a.anvil, "run", pkg, "-o", outdir, "-q", "--threads", str(a.threads)] +
                       sum([["-i", f] for f in in_files], []), a.timeout)
    if rc != 0:
        row["status"] = "run fails: " + short_error(err + out)
        return row
    worst = 0.0
    for k, o in enumerate(last["outputs"]):
        want = np.load(os.path.join(ZOO, o["file"])).astype(np.float64)
        got = np.load(os.path.join(outdir, f"out{k}.npy")).astype(np.float64)
        worst = max(worst, float(np.abs(got - want).max() / np.abs(want).max())
                    if got.shape == want.shape else float("inf"))
    row["error"] = worst
    ok = worst <= rec["tolerance"]
    rc, out, err = run([a.anvil, "bench", pkg, "-q", "--iters", str(a.iters), "--warmup", "3",
                        "--threads", str(a.threads)] + sum([["-i", f] for f in in_files], []),
                       a.timeout)
    if rc == 0:
        row["anvil_ms"] = json.loads(out.strip().splitlines()[-1])["p50_ms"]
    torch.set_num_threads(a.threads)
    model = eager_model(name)
    with torch.no_grad():  # the rebuilt eager model must be the exported one
        eager = export_zoo.as_tuple(model(*inputs))
    want0 = np.load(os.path.join(ZOO, last["outputs"][0]["file"]))
    if not np.allclose(eager[0].numpy(), want0, rtol=1e-4, atol=1e-5):
        raise RuntimeError("the rebuilt eager model disagrees with the fixture's outputs")
    row["eager_ms"] = time_eager(model, inputs, a.iters, 3)
    row["status"] = (f"ok (max error {worst:.1e})" if ok else
                     f"MISMATCH (max error {worst:.1e} > {rec['tolerance']:.0e})")
    if rc != 0:
        row["status"] += "; bench fails: " + short_error(err + out)
    return row


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def fmt_params(n):
    return f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.0f}K"


def write_table(rows, zoo, a, path):
    ms = lambda v: f"{v:.2f}" if v is not None else "-"  # noqa: E731
    lines = [
        "# The model zoo",
        "",
        "Real architectures exported with PyTorch " + zoo["torch"] + " (torchvision " +
        zoo["torchvision"] + ", timm " + zoo["timm"] + ", transformers " + zoo["transformers"] +
        ") by `scripts/export_zoo.py` into `tests/fixtures/zoo/`, weight-stripped: every weight is",
        "an index formula (`scripts/formula_weights.py`) that the test refills. Vision models keep",
        "their standard configuration on a small input (224x224 where the model needs it); the",
        "transformers models are tiny configurations (hidden 32, 2 layers, vocabulary 128) with",
        "`Dim.AUTO` batch and sequence, checked at 2x5, 3x17 and 8x128 from one package.",
        "`ctest -L zoo` runs the CI sample (`\"ci\": true` in ZOO.json); `bench/zoo.sh` runs every",
        "model; models anvil cannot compile yet are listed with their reason in",
        "`tests/fixtures/zoo/EXPECTED_FAILURES.txt`.",
        "",
        f"Figures from `bench/zoo_bench.py` on {cpu_name()} ({os.cpu_count()} cores), "
        f"{a.threads} thread{'s' if a.threads > 1 else ''}, median of {a.iters} runs; "
        "compile time with an empty object "
        "cache. Latency at the shape shown (the largest checked shape of dynamic models); "
        "error relative to max |PyTorch output|." + (" " + a.note if a.note else ""),
        "",
        "| model | source | family | params | shape | compile (s) | anvil (ms) | eager (ms) | status |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| {r['name']} | {r['source']} | {r['family']} | {fmt_params(r['params'])} | "
                     f"{r.get('shape', '-')} | {r.get('compile_s', 0):.1f} | "
                     f"{ms(r.get('anvil_ms'))} | {ms(r.get('eager_ms'))} | {r['status']} |")
    notes = ""  # what follows the notes marker is written by hand and kept
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
        if NOTES_MARKER in old:
            notes = old[old.index(NOTES_MARKER):]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n" + ("\n" + notes if notes else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--anvil", default=os.path.join(ROOT, "build", "bin", "anvil"))
    ap.add_argument("--only", default="")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per anvil command")
    ap.add_argument("--out", default=os.path.join(ROOT, "docs", "models.md"))
    ap.add_argument("--note", default="", help="a sentence on the conditions, for the table")
    a = ap.parse_args()
    with open(os.path.join(ZOO, "ZOO.json")) as f:
        zoo = json.load(f)
    names = [n for n in a.only.split(",") if n] or list(zoo["models"])
    rows = []
    with tempfile.TemporaryDirectory(prefix="anvil_zoo_") as tmp:
        for name in names:
            try:
                row = bench_one(name, zoo["models"][name], a, tmp)
            except Exception as e:  # noqa: BLE001 - one model's failure does not stop the table
                row = dict(name=name, source=zoo["models"][name]["source"],
                           family=zoo["models"][name]["family"],
                           params=zoo["models"][name]["params"],
                           status=f"bench failed: {type(e).__name__}: {e}")
            rows.append(row)
            print(f"{name}: {row['status']}; compile {row.get('compile_s', 0):.1f} s, anvil "
                  f"{row.get('anvil_ms')} ms, eager {row.get('eager_ms')} ms", flush=True)
    write_table(rows, zoo, a, a.out)
    print("wrote", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
