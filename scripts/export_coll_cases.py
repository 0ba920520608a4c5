"""Export collective graphs for the compiler cases of spec/collectives.md section 4 (needs PyTorch 2.11;
run on a machine that has it). Graphs are traced under the fake process group for W ranks (default
2) and saved without outputs (tests run them on real ranks against the interpreter).

    python3 scripts/export_coll_cases.py OUTDIR TOOLSDIR [W]

OUTDIR/coll_cNN_name.pt2 for case NN (coll_cNN_name_wW.pt2 when W is not 2). A graph that fails
to export prints FAILED with the reason.
"""
import os
import sys
import traceback

import torch
import torch.nn as nn

OUT = sys.argv[1]
sys.path.insert(0, sys.argv[2])
W = int(sys.argv[3]) if len(sys.argv) > 3 else 2
from export_fixture import save_case, init_fake_world  # noqa: E402

Dim = torch.export.Dim
os.makedirs(OUT, exist_ok=True)
init_fake_world(W)
fc = torch.ops._c10d_functional
R = lambda *s: torch.randn(*s)


def case(name, model, inputs, dyn=None):
    torch.manual_seed(0)
    if W != 2:
        name = f"{name}_w{W}"
    try:
        save_case(OUT, name, model, inputs, dynamic_shapes=dyn, run=False)
    except Exception as e:  # noqa: BLE001
        print(f"FAILED {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        traceback.print_exc(limit=2)


class C31(nn.Module):  # coalesced all_reduce on intermediates (stolen) and on graph inputs (copied)
    def forward(self, x, y):
        a = fc.all_reduce_coalesced([x + 42, x * 2], "sum", "0")
        b = fc.all_reduce_coalesced([x, y], "avg", "0")
        return tuple(fc.wait_tensor(t) for t in (*a, *b))


class C32(nn.Module):  # broadcast src 1 of an intermediate, src 0 of the graph input
    def forward(self, x):
        a = fc.wait_tensor(fc.broadcast(x + 42, 1, "0"))
        b = fc.wait_tensor(fc.broadcast(x, 0, "0"))
        return a, b


class C39(nn.Module):  # reduce_scatter_tensor_coalesced of 4 inputs
    def forward(self, x):
        outs = fc.reduce_scatter_tensor_coalesced([x, x + 1, x * 2, x - 1], "sum", W, "0")
        return tuple(fc.wait_tensor(o) for o in outs)


class C41(nn.Module):  # input buffer reuse: ar = all_reduce(a); c = relu(a); d = c @ c; e = d + ar
    def forward(self, a):
        ar = fc.all_reduce(a, "sum", "0")
        d = torch.relu(a) @ torch.relu(a)
        return d + fc.wait_tensor(ar)


class C42(nn.Module):  # output buffer reuse: embedding -> all_gather dim 0 -> chunk(W) + cat(-1)
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)

    def forward(self, idx):
        g = fc.wait_tensor(fc.all_gather_into_tensor(self.emb(idx), W, "0"))
        return torch.cat(torch.chunk(g, W), dim=-1)


class C43(nn.Module):  # matmul / cat / all_reduce / matmul / wait / add
    def forward(self, x, w):
        m = x @ w
        ar = fc.all_reduce(torch.cat([m, m]), "sum", "0")
        m2 = (x * 2) @ w
        return torch.cat([m2, m2]) + fc.wait_tensor(ar)


class C47(nn.Module):  # the graph waits on a collective issued before it ran
    def forward(self, x):
        return fc.wait_tensor(x) + 1


class C48(nn.Module):  # the graph returns an all_reduce it never waits for
    def forward(self, x):
        return fc.all_reduce(x * 2, "sum", "0")


class C60(nn.Module):  # transpose_ + contiguous before an all_gather whose result is unused
    def forward(self, x):
        y = x.clone()
        y.transpose_(0, 1)
        fc.wait_tensor(fc.all_gather_into_tensor(y.contiguous(), W, "0"))
        return x + 1


class C62(nn.Module):  # all_to_all_single without split sizes on a dynamic number of rows
    def forward(self, x):  # the Python-level API turns splits None into s0 // W
        import torch.distributed._functional_collectives as funcol
        y = funcol.all_to_all_single(x, None, None, "0")
        return y / y.sum(dim=1, keepdim=True)


class C65(nn.Module):  # every collective kind in one graph
    def forward(self, x):
        a = fc.wait_tensor(fc.all_reduce(x + 1, "sum", "0"))
        b0, b1 = fc.all_reduce_coalesced([x * 2, x * 3], "max", "0")
        c = fc.wait_tensor(fc.all_gather_into_tensor(x, W, "0"))
        d = fc.wait_tensor(fc.reduce_scatter_tensor(x * 4, "sum", W, "0"))
        e0, e1 = fc.reduce_scatter_tensor_coalesced([x, x + 5], "avg", W, "0")
        f = fc.wait_tensor(fc.broadcast(x - 1, 1, "0"))
        return (a, fc.wait_tensor(b0), fc.wait_tensor(b1), c, d, fc.wait_tensor(e0),
                fc.wait_tensor(e1), f)


class C61(nn.Module):  # split sizes arrive as tensors and become lists of unbacked ints
    def forward(self, x, in_splits, out_splits):
        import torch.distributed._functional_collectives as funcol
        ins, outs = in_splits.tolist(), out_splits.tolist()
        for v in ins + outs:
            torch._check_is_size(v)
        torch._check(sum(ins) == x.size(0))
        y = funcol.all_to_all_single(x, outs, ins, "0")
        return y / y.sum(dim=0, keepdim=True)


class C63(nn.Module):  # the native op with data-dependent split lists, waited
    def forward(self, x, in_splits, out_splits):
        ins, outs = in_splits.tolist(), out_splits.tolist()
        for v in ins + outs:
            torch._check_is_size(v)
        torch._check(sum(ins) == x.size(0))
        y = fc.wait_tensor(fc.all_to_all_single(x, outs, ins, "0"))
        return y * 2 + 1


class C24Legacy(nn.Module):  # the legacy namespace: the group is (tag, ranks, group_size)
    def forward(self, x):
        import torch.distributed._functional_collectives  # noqa: F401 (registers c10d_functional)
        y = torch.ops.c10d_functional.all_reduce(x + 1, "sum", "", list(range(W)), W)
        return torch.ops.c10d_functional.wait_tensor(y) * 2


class C25(nn.Module):  # Python-level all_reduce over ranks [0..W-1]: the export names group "0"
    def forward(self, x):
        import torch.distributed._functional_collectives as funcol
        return funcol.all_reduce(x, "sum", list(range(W))) + 1


case("coll_c31_coalesced", C31(), (R(4, 8), R(3, 5)))
case("coll_c32_broadcast", C32(), (R(4, 8),))
case("coll_c39_rs_coalesced", C39(), (R(12, 8),))
case("coll_c41_input_reuse", C41(), (R(4, 4),))
case("coll_c42_output_reuse", C42(), (torch.tensor([1, 7, 3]),))
case("coll_c43_overlap", C43(), (R(4, 6), R(6, 6)))
case("coll_c47_wait_input", C47(), (R(4, 8),))
case("coll_c48_unwaited", C48(), (R(4, 8),))
case("coll_c60_transpose_gather", C60(), (R(4, 6),))
case("coll_c62_a2a_dynamic", C62(), (torch.rand(2 * W, 3) + 0.5,),
     dyn={"x": {0: W * Dim("part", min=1, max=32)}})
case("coll_c65_all_kinds", C65(), (R(12, 8),))
# rank 0 with split[i] = (i+1)(r+1): in [1, 2, ...], out the same, rows W(W+1)/2
SPL = torch.arange(1, W + 1)
case("coll_c61_a2a_split_lists", C61(), (torch.rand(int(SPL.sum()), 5) + 0.5, SPL, SPL.clone()),
     dyn={"x": {0: Dim("rows", min=1, max=4096)}, "in_splits": None, "out_splits": None})
case("coll_c63_a2a_native_splits", C63(), (R(int(SPL.sum()), 5), SPL, SPL.clone()),
     dyn={"x": {0: Dim("rows", min=1, max=4096)}, "in_splits": None, "out_splits": None})


class C61Loose(nn.Module):  # fallback without the size facts, in case export insists on its own
    def forward(self, x, in_splits, out_splits):
        import torch.distributed._functional_collectives as funcol
        y = funcol.all_to_all_single(x, out_splits.tolist(), in_splits.tolist(), "0")
        return y / y.sum(dim=0, keepdim=True)


case("coll_c61_loose", C61Loose(), (torch.rand(int(SPL.sum()), 5) + 0.5, SPL, SPL.clone()),
     dyn={"x": {0: Dim("rows", min=1, max=4096)}, "in_splits": None, "out_splits": None})
case("coll_legacy_ns", C24Legacy(), (R(4, 3),))
case("coll_c25_ranks_group", C25(), (R(4, 3),))
print("done")
