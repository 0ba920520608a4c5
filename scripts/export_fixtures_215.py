"""Export a handful of small models with a newer PyTorch (2.15) as anvil test fixtures.

    python3 scripts/export_fixtures_215.py OUTDIR TOOLSDIR

OUTDIR (default tests/fixtures_215) receives NAME.pt2 with PyTorch's inputs and eager outputs
(NAME.in{i}.npy, NAME.out{i}.npy; extra shapes NAME.in{i}_{k}.npy) through TOOLSDIR's
export_fixture.save_case, the same writer as the PyTorch 2.11 fixtures of tests/fixtures. The
models cover what the reader must keep reading across PyTorch versions: parameters, buffers
mutated in place, tensor constants, a dynamic batch and a dynamic sequence with ranges,
convolution and batch norm, attention, torch.cond, integer inputs and an integer output.
tests/cli/test_torch215.cpp compiles and runs every one of them against these outputs.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures_215"
TOOLS = sys.argv[2] if len(sys.argv) > 2 else "../shared/tools"
sys.path.insert(0, TOOLS)
from export_fixture import save_case  # noqa: E402

Dim = torch.export.Dim


class Mlp(nn.Module):
    def __init__(s):
        super().__init__()
        s.l1, s.l2 = nn.Linear(32, 64), nn.Linear(64, 16)

    def forward(s, x):
        return s.l2(F.gelu(s.l1(x)))


class ConstAndBuffer(nn.Module):
    """A parameter, a float buffer and a counter updated in place, a tensor constant."""

    def __init__(s):
        super().__init__()
        s.l = nn.Linear(8, 8)
        s.register_buffer("running", torch.zeros(8))
        s.register_buffer("steps", torch.zeros((), dtype=torch.int64))
        s.scale = torch.linspace(0.5, 1.5, 8)

    def forward(s, x):
        y = s.l(x) * s.scale
        s.running.mul_(0.9).add_(0.1 * y.mean(0))
        s.steps.add_(1)
        return y - s.running, s.steps.clone()


class SmallCnn(nn.Module):
    def __init__(s):
        super().__init__()
        s.c1, s.b1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        s.c2 = nn.Conv2d(8, 16, 3, stride=2)
        s.fc = nn.Linear(16, 10)
        with torch.no_grad():
            s.b1.running_mean.uniform_(-0.5, 0.5)
            s.b1.running_var.uniform_(0.5, 1.5)

    def forward(s, x):
        x = F.relu(s.b1(s.c1(x)))
        x = F.relu(s.c2(x))
        return s.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class AttnBlock(nn.Module):
    """Pre-norm self-attention (scaled_dot_product_attention, causal) and a GELU MLP."""

    def __init__(s, d=32, nh=4):
        super().__init__()
        s.nh = nh
        s.ln1, s.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        s.qkv, s.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        s.fc1, s.fc2 = nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(s, x):
        b, t, d = x.shape
        q, k, v = s.qkv(s.ln1(x)).split(d, dim=2)
        heads = lambda z: z.view(b, t, s.nh, d // s.nh).transpose(1, 2)
        a = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        x = x + s.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))


class CondModel(nn.Module):
    """torch.cond on a data-dependent predicate, both branches reading a parameter."""

    def __init__(s):
        super().__init__()
        s.l = nn.Linear(6, 6)

    def forward(s, x):
        return torch.cond(x.sum() > 0, lambda z: s.l(z).relu(), lambda z: s.l(-z).sigmoid(), (x,))


class EmbedArgmax(nn.Module):
    """Integer input (token ids), embedding, a masked mean and an integer output (argmax)."""

    def __init__(s):
        super().__init__()
        s.emb, s.head = nn.Embedding(50, 16), nn.Linear(16, 7)

    def forward(s, ids, mask):
        h = s.emb(ids) * mask.unsqueeze(-1).to(torch.float32)
        logits = s.head(h.sum(1) / mask.sum(1, keepdim=True).clamp(min=1))
        return logits, logits.argmax(-1)


def main():
    torch.manual_seed(0)
    batch = Dim("batch", min=1, max=64)
    save_case(OUT, "mlp_dynbatch", Mlp(), (torch.randn(4, 32),), dynamic_shapes=({0: batch},),
              extra=[(torch.randn(1, 32),), (torch.randn(13, 32),)])
    torch.manual_seed(1)
    save_case(OUT, "const_and_buffer", ConstAndBuffer(), (torch.randn(4, 8),))
    torch.manual_seed(2)
    save_case(OUT, "small_cnn", SmallCnn(), (torch.randn(2, 3, 16, 16),))
    torch.manual_seed(3)
    seq = Dim("seq", min=2, max=64)
    save_case(OUT, "attn_block", AttnBlock(), (torch.randn(2, 8, 32),),
              dynamic_shapes=({1: seq},), extra=[(torch.randn(2, 5, 32),), (torch.randn(2, 17, 32),)])
    torch.manual_seed(4)
    x = torch.randn(3, 6)
    save_case(OUT, "cond_model", CondModel(), (x.abs(),), extra=[(-x.abs(),)])
    torch.manual_seed(5)
    ids = torch.randint(0, 50, (3, 9))
    mask = torch.ones(3, 9, dtype=torch.int64)
    mask[2, 5:] = 0
    save_case(OUT, "embed_argmax", EmbedArgmax(), (ids, mask))


if __name__ == "__main__":
    main()
