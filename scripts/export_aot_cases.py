"""Export the small models behind the CPU cases of spec/aot.md section 4, the benchmark models and a few
more collective graphs (needs PyTorch 2.11; run on a machine that has it).

    python3 scripts/export_aot_cases.py OUTDIR TOOLSDIR

OUTDIR/aot/      aot_NN_name.pt2 + inputs/outputs (case NN of spec/aot.md section 4)
OUTDIR/bench/    block256 (Block(256,4,688), input 2x32x256) and mlp1024 (1024->4096->4096->1024, batch 64);
                 mlp1024 is ~100 MB of weights, so its archive is also written as a skeleton
                 (mlp1024.skel.pt2: weight entries emptied, sizes in mlp1024.skel.json) that
                 bench/make_models.py refills with seeded random weights.
OUTDIR/coll/     collective graphs exported under the fake process group (2 ranks), no outputs.
A model that fails to export prints FAILED with the reason; the others still run.
"""
import json
import os
import sys
import traceback
import zipfile

import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from export_fixture import save_case, init_fake_world  # noqa: E402
import compile_bench_defs as defs  # noqa: E402

Dim = torch.export.Dim
AOT = os.path.join(OUT, "aot")
BENCH = os.path.join(OUT, "bench")
COLL = os.path.join(OUT, "coll")
for d in (AOT, BENCH, COLL):
    os.makedirs(d, exist_ok=True)
R = lambda *s, dt=torch.float32: torch.randn(*s).to(dt)


def case(name, model, inputs, dyn=None, extra=(), outdir=AOT, run=True):
    torch.manual_seed(0)
    if dyn is not None and isinstance(model, Fn):  # Fn.forward(*a): the specs describe the one varargs tuple
        dyn = (tuple(dyn),)
    try:
        save_case(outdir, name, model, inputs, dynamic_shapes=dyn, extra=extra, run=run)
    except Exception as e:  # noqa: BLE001
        print(f"FAILED {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        traceback.print_exc(limit=2)


class Fn(nn.Module):
    def __init__(self, f, **params):
        super().__init__()
        self.f = f
        for k, v in params.items():
            if isinstance(v, nn.Parameter):
                self.register_parameter(k, v)
            elif isinstance(v, nn.Module):
                self.add_module(k, v)
            else:
                self.register_buffer(k, v)

    def forward(self, *a):
        return self.f(self, *a)


torch.manual_seed(0)
P = lambda *s: nn.Parameter(torch.randn(*s))
case("aot_01_identity", Fn(lambda s, x: x.clone()), (R(8, 4, 4),))
case("aot_02_add_linear", Fn(lambda s, x, y: x + F.linear(y, s.W, s.b), W=P(10, 10), b=P(10)), (R(10, 10), R(10, 10)))
case("aot_04_sin_mm_cos", Fn(lambda s, x, y: torch.cos(torch.mm(torch.sin(x), y))), (R(10, 10), R(10, 10)))
case("aot_05_batched_linear", Fn(lambda s, a: F.linear(a, s.W, s.b), W=P(6, 16), b=P(6)), (R(2, 8, 16),))
case("aot_06_memplan", Fn(lambda s, x, y: torch.mm(torch.relu(torch.mm(torch.sin(x), torch.cos(y))), torch.sigmoid(y))
                          + torch.mm(x, y)), (R(4, 4), R(4, 4)))


def c07(s, x, y):
    d = torch.cat([2 * x, 2 * y], -1) + 1
    return torch.mm(d, d.t())[:, :2] + 2 * x


case("aot_07_cat_slice", Fn(c07), (R(4, 2), R(4, 2)))


class C08(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(10)

    def forward(self, x):
        return torch.relu(self.ln(torch.relu(self.ln(x))))


case("aot_08_shared_module", C08(), (R(10),))


class C09(nn.Module):
    def __init__(self):
        super().__init__()
        self.p = P(6)
        self.q = self.p

    def forward(self, x):
        return self.p * x + self.q


case("aot_09_param_two_names", C09(), (R(6),))
case("aot_10_no_inputs", Fn(lambda s: s.W * s.alpha, W=P(6, 4), alpha=P(6, 4)), ())


class C11Child(nn.Module):
    def __init__(self):
        super().__init__()
        self.cp = nn.Parameter(torch.tensor(3.0))
        self.register_buffer("cb", torch.tensor(1.0))

    def forward(self, x):
        return x / self.cp + self.cb


class C11(nn.Module):
    def __init__(self):
        super().__init__()
        self.rp = nn.Parameter(torch.tensor(4.0))
        self.child = C11Child()
        self.register_buffer("rb", torch.tensor(2.0))

    def forward(self, x):
        return self.child(x * self.rp) - self.rb


case("aot_11_nested", C11(), (R(2, 3),))
case("aot_13_split_cat", Fn(lambda s, x: torch.cat(torch.split(x, 4, dim=1), dim=-2)), (R(2, 8),))


def c14(s, x, y):
    c = torch.cat([x.unsqueeze(0), y.unsqueeze(0)])
    return torch.sigmoid(c[0]), c[1]


case("aot_14_offset_view_out", Fn(c14), (R(10, 10), R(10, 10)))


def c15(s, x):
    y = torch.sin(x)
    return y, y, y.view(3, 10), y.view(1, 3, 10)


case("aot_15_same_output", Fn(c15), (R(3, 10),))


def c16(s, x):
    sq = x * x
    return sq, sq.contiguous(), sq.reshape(sq.shape), sq * x


case("aot_16_alias_outputs", Fn(c16), (R(4, 4),))


def c17(s, x):
    sq = x * x
    return sq.t(), sq.t().contiguous()


case("aot_17_fp16_transpose_out", Fn(c17), (R(3, 4, dt=torch.float16),))
case("aot_18_const_clone_t", Fn(lambda s, x: (x + 0, s.C.clone(), s.C.t()), C=R(5, 5)), (R(5, 5),))


def c19(s, x, y):
    base = s.R[0]
    return x + F.linear(y, base[:10]) + base[5:]


case("aot_19_const_views", Fn(c19, R=R(2, 15, 10)), (R(10, 10), R(10, 10)))
case("aot_20_shape_scalar", Fn(lambda s, x: x * torch.sqrt(torch.tensor(x.shape[0] * 3.0))), (R(5, 5),))


class SE(nn.Module):
    def __init__(self, c=4, r=8):
        super().__init__()
        self.fc1 = nn.Linear(c, c // r)
        self.fc2 = nn.Linear(c // r, c)

    def forward(self, inp):
        s = inp.mean((2, 3))
        s = torch.sigmoid(self.fc2(torch.relu(self.fc1(s))))
        return inp * s[:, :, None, None]


case("aot_21_se_zero_width", SE(), (R(4, 4, 4, 4),))
case("aot_22_add_alpha", Fn(lambda s, a, b: torch.add(a, b, alpha=2.0)), (R(10), R(10)))
case("aot_31_fold_relu_t", Fn(lambda s, x: torch.matmul(x, torch.relu(s.W.t()) + s.b), W=R(4, 4), b=R(4)), (R(4, 4),))
case("aot_32_fold_cat", Fn(lambda s, x: torch.cat([x, torch.cat([s.w1, s.w2, s.w3, s.w4])]),
                           w1=R(4, 4), w2=R(4, 4), w3=R(4, 4), w4=R(4, 4)), (R(4, 4),))
case("aot_33_linear_f32", nn.Linear(10, 10), (R(10, 10),))
case("aot_33_linear_bf16", nn.Linear(10, 10).to(torch.bfloat16), (R(10, 10, dt=torch.bfloat16),))
for g in (1, 2):
    case(f"aot_34_conv_g{g}_f32", nn.Conv2d(2 * g, 3 * g, 3, groups=g), (R(2, 2 * g, 10, 10),))
    case(f"aot_34_conv_g{g}_bf16", nn.Conv2d(2 * g, 3 * g, 3, groups=g).to(torch.bfloat16),
         (R(2, 2 * g, 10, 10, dt=torch.bfloat16),))
    case(f"aot_35_convt_g{g}", nn.ConvTranspose2d(4, 2 * g * g, 2, groups=g), (R(1, 4, 3, 3),))
case("aot_36_convt1d_s4", nn.ConvTranspose1d(32, 16, 8, stride=4), (R(2, 32, 90),))


def c37(s, x):
    s.foo.add_(1)
    return s.foo + x


case("aot_37_buffer_persist", Fn(c37, foo=torch.zeros(4, 4)), (R(4, 4),))


def c38(s, x):
    s.bar.mul_(2)
    s.foo[5] = s.bar[0]
    return x + s.bar, x * s.foo


case("aot_38_int_buffers", Fn(c38, foo=torch.arange(10), bar=torch.arange(10)), (R(10),))
case("aot_39_scatter", Fn(lambda s, src, index: torch.zeros(2, 5, dtype=torch.int64).scatter(1, index, src)),
     (torch.ones(3, 5, dtype=torch.int64), torch.tensor([[0, 1, 2, 0]])))
case("aot_40_scatter_reduce",
     Fn(lambda s, x, idx, src: x.scatter_reduce(0, idx, src, "sum")),
     (torch.tensor([1.0, 10.0, 100.0, 1000.0]), torch.tensor([0, 1, 0, 1, 2, 1]), torch.arange(1.0, 7.0)))
case("aot_41_index_put_mask",
     Fn(lambda s, x, m, v: torch.index_put(x, (m,), v, accumulate=True)),
     (torch.ones(4, dtype=torch.int64), torch.ones(4, dtype=torch.bool), torch.ones(4, dtype=torch.int64)))
case("aot_43_embedding_bag", nn.EmbeddingBag(10, 4, mode="sum"), (torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 2, 6])))
case("aot_45_repeat_interleave", Fn(lambda s, r: torch.repeat_interleave(r, output_size=12)),
     (torch.tensor([12], dtype=torch.int32),))


class C48(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 32))
        self.emb = nn.EmbeddingBag(128, 32, mode="mean")
        self.top = nn.Sequential(nn.Linear(64, 32), nn.ReLU())

    def forward(self, dense, ids):
        return self.top(torch.cat([self.mlp(dense), self.emb(ids)], 1))


case("aot_48_mlp_embbag", C48(), (R(16, 128), torch.randint(0, 128, (16, 10))))
B = Dim("B", min=1, max=2048)
case("aot_50_dyn_relu_add", Fn(lambda s, x, y: torch.relu(x + y)), (R(128, 64), R(128, 64)),
     dyn=({0: B}, {0: B}), extra=[(R(64, 64), R(64, 64)), (R(211, 64), R(211, 64))])
case("aot_52_dyn_unsqueeze_cat", Fn(lambda s, x, y: torch.cat([x.unsqueeze(0), y.unsqueeze(0)])),
     (R(128, 64), R(128, 64)), dyn=({0: B}, {0: B}), extra=[(R(64, 64), R(64, 64)), (R(211, 64), R(211, 64))])
case("aot_53_dyn_batched_linear", Fn(lambda s, a: F.linear(a, s.W, s.b), W=P(6, 16), b=P(6)), (R(128, 8, 16),),
     dyn=({0: B},), extra=[(R(2, 8, 16),), (R(300, 8, 16),)])
case("aot_54_dyn_bmm", Fn(lambda s, a, b: torch.bmm(a, b)), (R(128, 8, 16), R(128, 16, 6)),
     dyn=({0: B}, {0: B}), extra=[(R(1024, 8, 16), R(1024, 16, 6)), (R(300, 8, 16), R(300, 16, 6))])
case("aot_55_dyn_cat_indep", Fn(lambda s, a, b: torch.cat([a, b])), (R(5, 4), R(7, 4)),
     dyn=({0: Dim("da", min=1, max=10)}, {0: Dim("db", min=1, max=20)}), extra=[(R(10, 4), R(2, 4)), (R(3, 4), R(20, 4))])
d56 = Dim("d", min=2, max=1024)
case("aot_56_derived_dim", Fn(lambda s, x, y: x.sum(0) + y.sum(0)), (R(8, 5), R(9, 5)),
     dyn=({0: d56}, {0: d56 + 1}), extra=[(R(10, 5), R(11, 5)), (R(100, 5), R(101, 5))])


def c57(s, x, y):
    def br(t):
        z = t.unsqueeze(0).expand(6, -1, -1, -1).reshape(6, -1, 8)
        return torch.bmm(z.transpose(1, 2), z)[:, :, :4]
    return torch.cat([br(x), br(y)])


case("aot_57_shared_branches", Fn(c57), (R(2, 6, 8), R(2, 6, 8)),
     dyn=({0: Dim("d57", min=1, max=2048)}, {0: Dim("d57", min=1, max=2048)}), extra=[(R(5, 6, 8), R(5, 6, 8))])
case("aot_58_zero_size", Fn(lambda s, x, b: x + b), (R(3, 2), R(1, 2)),
     dyn=({0: Dim("n", min=0, max=64)}, None), extra=[(R(0, 2), R(1, 2)), (R(7, 2), R(1, 2))])


def c63(s, x):
    u = x.item()
    torch._check(u > 3)
    return torch.ones(u)[0:1] * 1.0


case("aot_63_item_check", Fn(c63), (torch.tensor(23),))
case("aot_78_fp16_in", Fn(lambda s, x: x * 2), (R(1, 4, dt=torch.float16),))
case("aot_79_dyn_fp16", Fn(lambda s, x: x + 1), (R(8, 4, 4, dt=torch.float16),),
     dyn=({0: Dim("d0", min=4, max=1024)},), extra=[(R(4, 4, 4, dt=torch.float16),)])
x84 = R(4, 4)
x84[0, 0] = float("inf")
x84[1, 1] = float("nan")
case("aot_84_nan_inf", Fn(lambda s, x: torch.relu(x) * 2 + torch.softmax(x, -1).sum(-1, keepdim=True)), (x84,))

# ---- benchmark models ----
torch.manual_seed(0)
case("block256", defs.Block(256, 4, 688), (R(2, 32, 256),), outdir=BENCH)
torch.manual_seed(0)
case("mlp1024", defs.MLP(1024, 4096), (R(64, 1024),), outdir=BENCH)
src = os.path.join(BENCH, "mlp1024.pt2")
if os.path.exists(src):
    sizes = {}
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(os.path.join(BENCH, "mlp1024.skel.pt2"), "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.file_size > (1 << 16) and "/data/" in info.filename:
                sizes[info.filename] = info.file_size
                data = b""
            zout.writestr(info, data)
    json.dump(sizes, open(os.path.join(BENCH, "mlp1024.skel.json"), "w"), indent=1)
    os.remove(src)
    for f in os.listdir(BENCH):  # keep only the input (batch 64 x 1024) and the skeleton
        if f.startswith("mlp1024.out"):
            os.remove(os.path.join(BENCH, f))

# ---- collective graphs (2 ranks, fake group) ----
init_fake_world(2)
fc = torch.ops._c10d_functional


class AG(nn.Module):
    def forward(self, x):
        g = fc.wait_tensor(fc.all_gather_into_tensor(x * 2, 2, "0"))
        return g + 1


class RS(nn.Module):
    def forward(self, x):
        r = fc.wait_tensor(fc.reduce_scatter_tensor(x + 1, "sum", 2, "0"))
        return r * 3


class Bucket(nn.Module):  # several small all_reduces on one group, issued back to back
    def __init__(self):
        super().__init__()
        self.ws = nn.ParameterList([P(8, 8) for _ in range(4)])

    def forward(self, x):
        outs = [fc.all_reduce(x @ w, "sum", "0") for w in self.ws]
        return sum(fc.wait_tensor(o) for o in outs)


class Legacy(nn.Module):
    def forward(self, x):
        y = x * 2
        torch.distributed.all_reduce(y)
        return y + 1


class Mixed(nn.Module):  # all_reduce avg, broadcast and all_to_all on one graph
    def forward(self, x):
        a = fc.wait_tensor(fc.all_reduce(x, "avg", "0"))
        b = fc.wait_tensor(fc.broadcast(x + 1, 0, "0"))
        c = fc.wait_tensor(fc.all_to_all_single(x * 3, [2, 2], [2, 2], "0"))
        return a + b + c


case("coll_allgather", AG(), (R(4, 8),), outdir=COLL, run=False)
case("coll_reduce_scatter", RS(), (R(4, 8),), outdir=COLL, run=False)
case("coll_bucket", Bucket(), (R(4, 8),), outdir=COLL, run=False)
case("coll_legacy_inplace", Legacy(), (R(4, 8),), outdir=COLL, run=False)
case("coll_mixed", Mixed(), (R(4, 8),), outdir=COLL, run=False)
print("done")
