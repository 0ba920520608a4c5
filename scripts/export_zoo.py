"""Export the model zoo (issue 18 part 3) into tests/fixtures/zoo/ (needs PyTorch 2.11,
torchvision 0.26, timm and transformers):

    python scripts/export_zoo.py [--out tests/fixtures/zoo] [--only a,b] [--list] [--ci-sample]

Every model gets random but seeded weights: each floating-point parameter and buffer is a formula
of its element index (scripts/formula_weights.py), scaled so activations stay in a sane range; its
inputs are formulas too (token ids: floor of a formula over [0, vocab)). For each model the script
writes

  NAME.pt2            torch.export.export(model, args, strict=False), no decompositions, with
                      the formula weight entries zeroed and deflated;
  NAME.weights.json   entry -> seed/scale/offset, "inputs" (the first shape set) and "sets": one
                      per checked shape, each with its input formulas and output files;
  NAME.sK.outJ.npy    PyTorch eager's output J for shape set K with the formula weights.

Decoders and the text encoders are exported with Dim.AUTO batch and sequence and checked at
2x5, 3x17 and 8x128 (the exported program must agree with eager at each). ZOO.json lists, per
model: family, source, dynamic, shapes, parameter count, the distinct op targets, the tolerance
and whether it is in the CI sample (ci_sample(): seeded, preferring models that
EXPECTED_FAILURES.txt does not list; --ci-sample recomputes it alone). A model that fails to
export prints FAILED with the reason; the others continue, and ZOO.json keeps earlier entries of
models not exported this run.
"""
import argparse
import json
import math
import os
import sys
import time
import traceback
import zipfile

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from formula_weights import fill, formula, save_zeroed  # noqa: E402

Dim = torch.export.Dim
DYN_SHAPES = [(2, 5), (3, 17), (8, 128)]
VOCAB = 128
INPUT_SEED = 100000


def scale_of(fqn, t):
    """(scale, offset) of a parameter: LeCun-uniform for weights with a fan-in, small values
    around 1 for norm scales and running variances, small values around 0 for the rest."""
    leaf = fqn.rsplit(".", 1)[-1]
    if leaf == "running_var":
        return 0.5, 1.0
    if t.dim() <= 1:
        if leaf in ("weight", "gamma", "scale", "g") and "bias" not in fqn:
            return 0.2, 1.0
        return 0.2, 0.0
    fan_in = max(1, t[0].numel())
    return math.sqrt(12.0 / fan_in), 0.0


def image(shape):
    return dict(shape=list(shape), seed=INPUT_SEED, scale=2.0, offset=0.0, dtype="float32")


def token_ids(b, t, vocab=VOCAB):
    """int64 ids in [0, vocab): floor(formula) with scale vocab, offset vocab / 2."""
    return dict(shape=[b, t], seed=INPUT_SEED + 1, scale=float(vocab), offset=vocab / 2.0,
                dtype="int64")


def calibrate_batchnorm(model, params, args):
    """Formula weights do not keep activations at unit scale through deep conv nets, so their
    outputs would collapse to the classifier bias. Each BatchNorm's running_var is refilled with
    the same seed but scale 0.5 v and offset v, v the variance of that layer's input in one
    forward pass on `args` (pre-hooks run in order, so each layer sees calibrated layers before
    it); the sidecar records the new scale and offset."""
    def hook(name):
        def pre(mod, inp):
            v = max(float(inp[0].detach().double().var()), 1e-6)
            rec = params[name + ".running_var"]
            rec.update(scale=0.5 * v, offset=v)
            mod.running_var.copy_(formula(rec["numel"], rec["seed"], rec["scale"], rec["offset"],
                                          mod.running_var.dtype))
        return pre
    handles = [m.register_forward_pre_hook(hook(n)) for n, m in model.named_modules()
               if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.running_var is not None]
    with torch.no_grad():
        model(*args)
    for h in handles:
        h.remove()
    return len(handles)


def make_input(spec):
    n = int(np.prod(spec["shape"]))
    if spec["dtype"] == "int64":
        v = torch.floor(formula(n, spec["seed"], spec["scale"], spec["offset"])).to(torch.int64)
        return v.clamp_(0, int(spec["scale"]) - 1).view(spec["shape"])
    dt = getattr(torch, spec["dtype"])
    return formula(n, spec["seed"], spec["scale"], spec["offset"], dt).view(spec["shape"])


class Outputs(nn.Module):
    """Wraps a model so it returns a tensor or a tuple of tensors: `pick` maps the model's
    output to them (e.g. lambda o: o.last_hidden_state)."""

    def __init__(self, m, pick, call=None):
        super().__init__()
        self.m, self.pick, self.call = m, pick, call

    def forward(self, x):
        return self.pick(self.call(self.m, x) if self.call else self.m(x))


# ---- model builders: each returns (module, [input-spec lists, one per shape set]) ----

def tv(name, size=64, **kw):
    def build():
        import torchvision.models as M
        return getattr(M, name)(weights=None, **kw), [[image((1, 3, size, size))]]
    return build


def tv_seg(name, size=64):
    def build():
        import torchvision.models.segmentation as S
        m = getattr(S, name)(weights=None, weights_backbone=None, num_classes=8)
        return Outputs(m, lambda o: o["out"]), [[image((1, 3, size, size))]]
    return build


def timm_model(name, size=64, **kw):
    def build():
        import timm
        return timm.create_model(name, pretrained=False, **kw), [[image((1, 3, size, size))]]
    return build


def hf_config(kind, **kw):
    import transformers
    return getattr(transformers, kind)(**kw)


def hf_build(model_cls, cfg):
    import transformers
    cls = getattr(transformers, model_cls)
    try:
        m = cls._from_config(cfg, attn_implementation="sdpa")
    except Exception:  # noqa: BLE001 - models without sdpa use their default
        m = cls(cfg)
    return m


def decoder(config_cls, model_cls, **extra):
    """A tiny decoder (hidden 32, 2 layers, vocab 128) returning its last hidden state."""
    def build():
        cfg = hf_config(config_cls, vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                        max_position_embeddings=256, use_cache=False, **extra)
        m = hf_build(model_cls, cfg)
        wrap = Outputs(m, lambda o: o.last_hidden_state,
                       call=lambda m, ids: m(input_ids=ids, use_cache=False))
        return wrap, [[token_ids(b, t)] for b, t in DYN_SHAPES]
    return build


def hf_text(config_cls, model_cls, pick=lambda o: o.last_hidden_state, **cfg_kw):
    def build():
        m = hf_build(model_cls, hf_config(config_cls, **cfg_kw))
        wrap = Outputs(m, pick, call=lambda m, ids: m(input_ids=ids))
        return wrap, [[token_ids(b, t)] for b, t in DYN_SHAPES]
    return build


def wav2vec2():
    cfg = hf_config("Wav2Vec2Config", hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=64, conv_dim=(32, 32, 32), conv_stride=(5, 2, 2),
                    conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16,
                    num_conv_pos_embedding_groups=4, vocab_size=VOCAB)
    m = hf_build("Wav2Vec2Model", cfg)
    return (Outputs(m, lambda o: o.last_hidden_state),
            [[dict(shape=[1, 4000], seed=INPUT_SEED, scale=2.0, offset=0.0, dtype="float32")]])


# name -> (family, source, builder, dynamic, tolerance)
MODELS = {
    "resnet18": ("cnn", "torchvision", tv("resnet18"), False, 1e-4),
    "mobilenet_v3_large": ("cnn", "torchvision", tv("mobilenet_v3_large"), False, 1e-4),
    "efficientnet_b0": ("cnn", "torchvision", tv("efficientnet_b0"), False, 1e-4),
    "mnasnet1_0": ("cnn", "torchvision", tv("mnasnet1_0"), False, 1e-4),
    "swin_t": ("vit", "torchvision", tv("swin_t", 224), False, 1e-4),
    "vit_b_16": ("vit", "torchvision", tv("vit_b_16", 224), False, 1e-4),
    "lraspp_mobilenet_v3_large": ("segmentation", "torchvision",
                                  tv_seg("lraspp_mobilenet_v3_large"), False, 1e-4),
    "deeplabv3_mobilenet_v3_large": ("segmentation", "torchvision",
                                     tv_seg("deeplabv3_mobilenet_v3_large"), False, 1e-4),
    "mobilevit_xxs": ("vit", "timm", timm_model("mobilevit_xxs", 64), False, 1e-4),
    "convnextv2_atto": ("cnn", "timm", timm_model("convnextv2_atto", 64), False, 1e-4),
    "levit_128s": ("vit", "timm", timm_model("levit_128s", 224), False, 1e-4),
    "llama": ("decoder", "transformers", decoder("LlamaConfig", "LlamaModel"), True, 1e-4),
    "mistral": ("decoder", "transformers", decoder("MistralConfig", "MistralModel"), True, 1e-4),
    "qwen2": ("decoder", "transformers", decoder("Qwen2Config", "Qwen2Model"), True, 1e-4),
    "phi3": ("decoder", "transformers", decoder("Phi3Config", "Phi3Model", pad_token_id=0), True,
             1e-4),
    "gemma": ("decoder", "transformers", decoder("GemmaConfig", "GemmaModel", head_dim=8), True,
              1e-4),
    "falcon": ("decoder", "transformers",
               hf_text("FalconConfig", "FalconModel", vocab_size=VOCAB, hidden_size=32,
                       num_hidden_layers=2, num_attention_heads=4, use_cache=False),
               True, 1e-4),
    "t5_encoder": ("encoder", "transformers",
                   hf_text("T5Config", "T5EncoderModel", vocab_size=VOCAB, d_model=32, d_kv=8,
                           d_ff=64, num_layers=2, num_heads=4), True, 1e-4),
    "bert": ("encoder", "transformers",
             hf_text("BertConfig", "BertModel", vocab_size=VOCAB, hidden_size=32,
                     num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                     max_position_embeddings=256), True, 1e-4),
    "gpt2": ("decoder", "transformers",
             hf_text("GPT2Config", "GPT2Model", vocab_size=VOCAB, n_positions=256, n_embd=32,
                     n_layer=2, n_head=4, use_cache=False), True, 1e-4),
    "opt": ("decoder", "transformers",
            hf_text("OPTConfig", "OPTModel", vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                    ffn_dim=64, num_attention_heads=4, max_position_embeddings=256,
                    word_embed_proj_dim=32, use_cache=False), True, 1e-4),
    "wav2vec2": ("audio", "transformers", wav2vec2, False, 1e-4),
}


CI_SEED = 18
CI_FAMILIES = ("cnn", "vit", "decoder", "encoder")


def compile_failures(out):
    """Models EXPECTED_FAILURES.txt lists as not compiling ("ops" or "error" lines)."""
    path = os.path.join(out, "EXPECTED_FAILURES.txt")
    if not os.path.exists(path):
        return set()
    with open(path) as f:
        words = [line.split() for line in f if line.strip() and not line.startswith("#")]
    return {w[0] for w in words if len(w) > 1 and w[1] in ("ops", "error")}


def ci_sample(zoo, failing=frozenset()):
    """The models CI runs (the rest need ANVIL_ZOO_ALL=1): a seeded choice of one cheap model
    (input of 64x64 or smaller, under 15M parameters) per family of CI_FAMILIES plus one more
    cheap model; within a family, models anvil compiles (not in `failing`) are preferred so CI
    runs them end to end. The same ZOO.json and failure list give the same sample."""
    import random
    rng = random.Random(CI_SEED)
    cheap = sorted(n for n, r in zoo.items()
                   if r["params"] < 15_000_000 and all(max(s) <= 4000 and
                                                       (len(s) < 4 or s[-1] <= 64)
                                                       for s in r["shapes"]))
    pick = []
    for fam in CI_FAMILIES:
        pool = [n for n in cheap if zoo[n]["family"] == fam]
        pool = [n for n in pool if n not in failing] or pool
        if pool:
            pick.append(rng.choice(pool))
    rest = [n for n in cheap if n not in pick]
    rest = [n for n in rest if n not in failing] or rest
    if rest:
        pick.append(rng.choice(rest))
    for n, r in zoo.items():
        r["ci"] = n in pick
    return pick


def as_tuple(o):
    return tuple(o) if isinstance(o, (tuple, list)) else (o,)


def target_name(t):
    """aten.add.Tensor for OpOverloads, _operator.getitem (as the archive spells it) for
    Python callables."""
    if isinstance(t, torch._ops.OpOverload):
        return str(t)
    return f"{getattr(t, '__module__', None) or '_operator'}.{getattr(t, '__name__', t)}"


def deflate_all(path):
    """Rewrites the archive with every entry deflated (save_zeroed stores the graph JSON)."""
    tmp = path + ".tmp"
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(tmp, "w", allowZip64=True) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info.filename),
                          compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    os.replace(tmp, path)


def export_model(name, out):
    family, source, build, dynamic, tol = MODELS[name]
    t0 = time.time()
    torch.manual_seed(0)
    model, sets = build()
    model = model.float().eval()
    params = fill(model, scale_of)
    nparam = sum(p.numel() for p in model.parameters())
    first = [make_input(s) for s in sets[0]]
    calibrate_batchnorm(model, params, first)
    dyn = None
    if dynamic:
        dyn = tuple({0: Dim.AUTO, 1: Dim.AUTO} for _ in first)
    with torch.no_grad():
        ep = torch.export.export(model, tuple(first), dynamic_shapes=dyn, strict=False)
        if dynamic and not ep.range_constraints:
            raise RuntimeError("Dim.AUTO batch and sequence were specialized away")
        module = ep.module()
        set_records = []
        for k, specs in enumerate(sets):
            args = [make_input(s) for s in specs]
            want = as_tuple(model(*args))
            got = as_tuple(module(*args))
            files = []
            for j, (g, w) in enumerate(zip(got, want)):
                torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)
                a = w.detach().float().numpy()
                if not np.isfinite(a).all() or float(np.abs(a).max()) == 0.0:
                    raise RuntimeError(f"output {j} of set {k} is not finite or all zeros")
                f = f"{name}.s{k}.out{j}.npy"
                np.save(os.path.join(out, f), a)
                files.append(dict(file=f, shape=list(a.shape), max_abs=float(np.abs(a).max()),
                                  mean_abs=float(np.abs(a).mean())))
            set_records.append(dict(shape=list(specs[0]["shape"]), inputs=specs, outputs=files))
    # anvil does not read the example inputs: zeros keep the archive small once deflated
    ep._example_inputs = (tuple(torch.zeros_like(x) for x in first), {})
    save_zeroed(ep, model, params, out, name, sets[0])
    deflate_all(os.path.join(out, name + ".pt2"))
    side = os.path.join(out, name + ".weights.json")
    with open(side) as f:
        j = json.load(f)
    j["sets"] = set_records
    with open(side, "w") as f:
        json.dump(j, f, indent=1)
    ops = sorted({target_name(n.target) for n in ep.graph.nodes if n.op == "call_function"})
    size = sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out)
               if f.startswith(name + "."))
    return dict(family=family, source=source, dynamic=dynamic, tolerance=tol, ci=False,
                params=nparam, shapes=[s["shape"] for s in set_records],
                outputs=[[o["shape"] for o in s["outputs"]] for s in set_records],
                ops=ops, fixture_bytes=size, export_seconds=round(time.time() - t0, 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "..", "tests", "fixtures", "zoo"))
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--list", action="store_true", help="print the model names and exit")
    ap.add_argument("--ci-sample", action="store_true",
                    help="only recompute the CI sample of ZOO.json (after EXPECTED_FAILURES.txt "
                         "changes) and exit")
    a = ap.parse_args()
    if a.list:
        print("\n".join(MODELS))
        return 0
    names = [n for n in a.only.split(",") if n] or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"unknown model(s): {', '.join(unknown)}; --list shows the names", file=sys.stderr)
        return 2
    os.makedirs(a.out, exist_ok=True)
    zoo_path = os.path.join(a.out, "ZOO.json")
    zoo = {}
    if os.path.exists(zoo_path):
        with open(zoo_path) as f:
            zoo = json.load(f)["models"]
    if a.ci_sample:
        with open(zoo_path) as f:
            whole = json.load(f)
        print("CI sample:", ", ".join(ci_sample(whole["models"], compile_failures(a.out))))
        with open(zoo_path, "w") as f:
            json.dump(whole, f, indent=1)
        return 0
    import transformers
    import timm
    import torchvision
    failed = []
    for name in names:
        for f in os.listdir(a.out):
            if f.startswith(name + "."):
                os.remove(os.path.join(a.out, f))
        zoo.pop(name, None)
        try:
            rec = export_model(name, a.out)
        except Exception as e:  # noqa: BLE001 - report and go on with the next model
            failed.append(name)
            last = traceback.format_exc().strip().splitlines()[-1]
            print(f"FAILED {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                  f"\n  ({last})", flush=True)
            continue
        zoo[name] = rec
        print(f"ok {name}: {rec['source']} {rec['family']}, {rec['params']} params, shapes "
              f"{rec['shapes']}, {len(rec['ops'])} ops, {rec['fixture_bytes'] // 1024} KB, "
              f"{rec['export_seconds']} s", flush=True)
    print("CI sample:", ", ".join(ci_sample(zoo, compile_failures(a.out))))
    with open(zoo_path, "w") as f:
        json.dump(dict(torch=torch.__version__, torchvision=torchvision.__version__,
                       timm=timm.__version__, transformers=transformers.__version__,
                       models={k: zoo[k] for k in MODELS if k in zoo}), f, indent=1)
    print(f"{len(names) - len(failed)}/{len(names)} exported" +
          (f"; FAILED: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
