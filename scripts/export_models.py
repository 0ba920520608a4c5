"""Export tiny models as anvil test fixtures (needs PyTorch 2.11 and transformers; run on a machine that has them).

    python3 scripts/export_models.py OUTDIR TOOLSDIR

TOOLSDIR holds export_fixture.py (save_case) and compile_bench_defs.py (MLP, Block). Every model is tiny
(fp32 on the CPU, well under 1 MB of weights) so the .pt2 files can be checked in. For each model the
exporter tries the dynamic-shape specs in order (batch+seq, seq only, static) and keeps the first that
exports; with a dynamic spec it also writes extra input/output sets of other shapes (NAME.in0_0.npy ...).
A model that does not export at all prints "FAILED name" with its traceback; the others still run.
Writes OUTDIR/EXPORTED_OPS.txt: per model, the spec used, the inputs and the distinct ops.
"""
import glob
import os
import sys
import traceback

import torch
import torch.nn as nn

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures"
TOOLS = sys.argv[2] if len(sys.argv) > 2 else "../shared/tools"
ONLY = set(sys.argv[3].split(",")) if len(sys.argv) > 3 else None
sys.path.insert(0, TOOLS)
from export_fixture import save_case  # noqa: E402
import compile_bench_defs as defs  # noqa: E402

Dim = torch.export.Dim
VOCAB = 256
REPORT = []


def describe(inputs):
    return ", ".join(f"{tuple(t.shape)} {str(t.dtype).replace('torch.', '')}" for t in inputs)


def export_one(name, model, make_inputs, specs, final=True):
    """make_inputs(B, T) -> tuple of tensors; specs: list of (label, dynamic_shapes or None, extra (B, T) list)."""
    torch.manual_seed(0)
    inputs = make_inputs(2, 16)
    last = None
    for label, dyn, extra_bt in specs:
        try:
            extra = []
            for b, t in extra_bt:
                torch.manual_seed(1 + b * 1000 + t)
                extra.append(make_inputs(b, t))
            ep = save_case(OUT, name, model, inputs, dynamic_shapes=dyn, extra=extra)
            if dyn is not None and not ep.range_constraints:
                raise RuntimeError(f"spec '{label}' exported with every dim specialized")
            user = [n for n in ep.graph.nodes if n.op == "placeholder" and n.name in ep.graph_signature.user_inputs]
            rc = {str(k): v for k, v in ep.range_constraints.items()}
            for more in extra:  # every extra shape must lie inside the exported ranges
                for n, t in zip(user, more):
                    for d, size in zip(n.meta["val"].shape, t.shape):
                        r = rc.get(str(d))
                        if r is not None and not (int(r.lower) <= size <= int(r.upper)):
                            raise RuntimeError(f"extra input dim {size} outside exported range {r} of {d}")
            with torch.no_grad():  # the artifact itself must take the other shapes and agree with eager
                for more in extra:
                    got, want = ep.module()(*more), model(*more)
                    got = got if isinstance(got, (tuple, list)) else (got,)
                    want = want if isinstance(want, (tuple, list)) else (want,)
                    for g, w in zip(got, want):
                        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4)
        except Exception:
            last = traceback.format_exc()
            for f in glob.glob(os.path.join(OUT, f"{name}.*_*.npy")):
                os.remove(f)
            why = [l for l in last.splitlines() if "Error" in l or "Not all values" in l or "guard" in l]
            where = [l.strip() for l in last.splitlines() if "transformers/" in l or "compile_bench_defs" in l]
            print(f"note: {name} did not export with spec '{label}': {why[-3:]}\n  model frames: {where[-4:]}",
                  flush=True)
            continue
        ops = sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function"})
        nparam = sum(p.numel() for p in model.parameters())
        lines = [f"## {name}",
                 f"spec: {label}; params: {nparam}; inputs: {describe(inputs)}",
                 f"range_constraints: {dict((str(k), str(v)) for k, v in ep.range_constraints.items())}"]
        for k, more in enumerate(extra):
            lines.append(f"extra {k}: {describe(more)}")
        lines.append(f"exported {name}: {len(ops)} distinct ops: {', '.join(ops)}")
        print("\n".join(lines), flush=True)
        REPORT.append("\n".join(lines))
        return True
    if final:
        print(f"FAILED {name}\n{last}", flush=True)
        REPORT.append(f"## {name}\nFAILED\n{last}")
    return False


def both(ndims_seq_at=1):
    b, t = Dim("batch", min=1, max=64), Dim("seq", min=2, max=128)
    return {0: b, ndims_seq_at: t}


def hf_model(cls, cfg, attn="sdpa"):
    """Build a transformers model from a config, asking for an attention implementation where supported."""
    try:
        m = cls._from_config(cfg, attn_implementation=attn)
    except Exception as e:
        print(f"note: {cls.__name__}._from_config(attn_implementation={attn!r}) failed: {e}; using the default", flush=True)
        m = cls(cfg)
    m = m.float().eval()
    print(f"{cls.__name__}: attn_implementation={getattr(m.config, '_attn_implementation', '?')}", flush=True)
    return m


class LogitsOnly(nn.Module):
    def __init__(s, m):
        super().__init__(); s.m = m

    def forward(s, ids):
        return s.m(input_ids=ids, use_cache=False).logits


class BertWrap(nn.Module):
    def __init__(s, m):
        super().__init__(); s.m = m

    def forward(s, ids, mask):
        o = s.m(input_ids=ids, attention_mask=mask)
        return o.last_hidden_state, o.pooler_output


def ids(b, t):
    return torch.randint(0, VOCAB, (b, t), dtype=torch.int64)


def case_block_tiny():
    torch.manual_seed(0)
    m = defs.Block(d=64, nh=4, ff=176)
    mk = lambda b, t: (torch.randn(b, t, 64),)
    return export_one("block_tiny", m, mk, [
        ("batch+seq", ({0: Dim("batch", min=1, max=64), 1: Dim("seq", min=2, max=256)},), [(3, 7), (1, 32)]),
        ("seq", ({1: Dim("seq", min=2, max=256)},), [(2, 7), (2, 32)]),
        ("static", None, []),
    ])


def case_llama_tiny():
    """transformers 5.17's Llama adds a guard min(16*T, 32*T) == 16*T with a plain Dim on seq (the export
    cannot prove it), so try Dim.DYNAMIC hints, then eager attention, then static."""
    from transformers import LlamaConfig, LlamaForCausalLM

    def build(attn):
        torch.manual_seed(0)
        cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                          tie_word_embeddings=False, use_cache=False)
        return LogitsOnly(hf_model(LlamaForCausalLM, cfg, attn))

    mk = lambda b, t: (ids(b, t),)
    D = Dim.DYNAMIC
    try:
        hint = ({0: D(min=2, max=64), 1: D(min=2, max=128)},)  # batch 1 gets specialized away (min becomes 2)
    except TypeError:
        hint = ({0: D, 1: D},)
    dyn = [("batch+seq (Dim.DYNAMIC)", hint, [(3, 7), (4, 32)]),
           ("batch+seq", (both(),), [(3, 7), (1, 32)]),
           ("seq (Dim.DYNAMIC)", ({1: D},), [(2, 7), (2, 32)])]
    for attn in ("sdpa", "eager"):
        if export_one("llama_tiny", build(attn), mk, dyn, final=False):
            return True
    return export_one("llama_tiny", build("sdpa"), mk, [("static", None, [])])


def case_gpt2_tiny():
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    cfg = GPT2Config(vocab_size=VOCAB, n_positions=128, n_embd=64, n_layer=2, n_head=4, use_cache=False)
    m = LogitsOnly(hf_model(GPT2LMHeadModel, cfg))
    mk = lambda b, t: (ids(b, t),)
    return export_one("gpt2_tiny", m, mk, [
        ("batch+seq", (both(),), [(3, 7), (1, 32)]),
        ("seq", ({1: Dim("seq", min=2, max=128)},), [(2, 7), (2, 32)]),
        ("static", None, []),
    ])


def case_bert_tiny():
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=128, max_position_embeddings=128)
    m = BertWrap(hf_model(BertModel, cfg))

    def mk(b, t):
        mask = torch.ones(b, t, dtype=torch.int64)
        if b > 1:
            mask[-1, t - t // 3:] = 0  # pad the tail of the last sequence
        return ids(b, t), mask

    def dyn_both():
        b, t = Dim("batch", min=1, max=64), Dim("seq", min=2, max=128)
        return ({0: b, 1: t}, {0: b, 1: t})

    t_only = Dim("seq", min=2, max=128)
    return export_one("bert_tiny", m, mk, [
        ("batch+seq", dyn_both(), [(3, 7), (1, 32)]),
        ("seq", ({1: t_only}, {1: t_only}), [(2, 7), (2, 32)]),
        ("static", None, []),
    ])


CASES = [case_block_tiny, case_llama_tiny, case_gpt2_tiny, case_bert_tiny]


def main():
    os.makedirs(OUT, exist_ok=True)
    try:
        import transformers
        tv = transformers.__version__
    except Exception as e:
        tv = f"unavailable ({e})"
    head = f"torch {torch.__version__}, transformers {tv}"
    print(head, flush=True)
    REPORT.append(head)
    ok = True
    for case in CASES:
        name = case.__name__[len("case_"):]
        if ONLY and name not in ONLY:
            continue
        try:
            ok = case() and ok
        except Exception:
            tb = traceback.format_exc()
            print(f"FAILED {name}\n{tb}", flush=True)
            REPORT.append(f"## {name}\nFAILED\n{tb}")
            ok = False
    with open(os.path.join(OUT, "EXPORTED_OPS.txt"), "w") as f:
        f.write("\n\n".join(REPORT) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
