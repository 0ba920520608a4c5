"""Export the traced-call cases 50-59 of spec/collectives.md section 4: models that call the
Python-level collectives (torch.distributed's functional API and its non-functional calls) and
are exported with torch.export (PyTorch 2.11), under the fake process group for W ranks.

    python3 scripts/export_coll_traced.py OUTDIR TOOLSDIR [W]

Writes OUTDIR/coll_cNN_name[_wW].pt2 and prints, per case, the graph's call_function targets and
output kinds (what the spec's op counts are checked against), or FAILED with torch's reason.
"""
import os
import sys
import traceback

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
import torch.nn as nn

OUT = sys.argv[1]
sys.path.insert(0, sys.argv[2])
W = int(sys.argv[3]) if len(sys.argv) > 3 else 2
from export_fixture import init_fake_world  # noqa: E402

os.makedirs(OUT, exist_ok=True)
init_fake_world(W)
R = lambda *s: torch.randn(*s)


def case(name, model, inputs, strict=False):
    torch.manual_seed(0)
    if W != 2:
        name = f"{name}_w{W}"
    try:
        with torch.no_grad():
            ep = torch.export.export(model.eval(), tuple(inputs), strict=strict)
        torch.export.save(ep, os.path.join(OUT, f"{name}.pt2"))
        ops = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
        kinds = [s.kind.name for s in ep.graph_signature.output_specs]
        print(f"exported {name}: ops {ops} outputs {kinds}")
    except Exception as e:  # noqa: BLE001
        print(f"FAILED {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        traceback.print_exc(limit=3)


WORLD = dist.group.WORLD


class C50(nn.Module):  # funcol calls with the group named "0"... here the world group object
    def __init__(self, kind):
        super().__init__()
        self.kind = kind

    def forward(self, x):
        if self.kind == "all_reduce":
            return funcol.all_reduce(x, "sum", WORLD)
        if self.kind == "all_gather":
            return funcol.all_gather_tensor(x, 0, WORLD)
        return funcol.reduce_scatter_tensor(x, "sum", 0, WORLD)


class C51(nn.Module):  # all_gather_tensor with a group object passed as an argument
    def forward(self, x):
        return funcol.all_gather_tensor(x + 1, gather_dim=0, group=dist.group.WORLD)


class C52(nn.Module):  # non-functional all_gather_into_tensor, positional then keywords
    def __init__(self, keywords):
        super().__init__()
        self.keywords = keywords

    def forward(self, x):
        out = torch.empty(x.shape[0] * W, *x.shape[1:], dtype=x.dtype)
        if self.keywords:
            dist.all_gather_into_tensor(output_tensor=out, input_tensor=x)
        else:
            dist.all_gather_into_tensor(out, x)
        return out


class C53(nn.Module):  # non-functional all_gather into a list
    def forward(self, x):
        outs = [torch.empty_like(x) for _ in range(W)]
        dist.all_gather(outs, x)
        return tuple(outs)


class C54(nn.Module):  # non-functional reduce_scatter_tensor, with and without async_op=False
    def __init__(self, explicit):
        super().__init__()
        self.explicit = explicit

    def forward(self, x):
        out = torch.empty(x.shape[0] // W, *x.shape[1:], dtype=x.dtype)
        if self.explicit:
            dist.reduce_scatter_tensor(out, x, async_op=False)
        else:
            dist.reduce_scatter_tensor(out, x)
        return out


class C55(nn.Module):  # non-functional all_reduce on an intermediate, 5 group-argument forms
    def __init__(self, form):
        super().__init__()
        self.form = form

    def forward(self, x):
        y = x + 1
        if self.form == 0:
            dist.all_reduce(y)
        elif self.form == 1:
            dist.all_reduce(y, group=dist.group.WORLD)
        elif self.form == 2:
            dist.all_reduce(y, dist.ReduceOp.SUM, dist.group.WORLD)
        elif self.form == 3:
            dist.all_reduce(y, op=dist.ReduceOp.SUM, group=None)
        else:
            dist.all_reduce(y, group=dist.distributed_c10d._get_default_group())
        return y * 2


class C55Input(nn.Module):  # non-functional all_reduce on the graph input itself (mutates it)
    def forward(self, x):
        dist.all_reduce(x)
        return x + 1


class C56(nn.Module):  # each reduce op through the non-functional call
    def __init__(self, op):
        super().__init__()
        self.op = op

    def forward(self, x):
        y = x * 1
        dist.all_reduce(y, op=self.op)
        return y


class C57(nn.Module):  # the world group obtained one of three ways inside the traced code
    def __init__(self, way):
        super().__init__()
        self.way = way

    def forward(self, x):
        if self.way == 0:
            g = dist.group.WORLD
        elif self.way == 1:
            g = dist.distributed_c10d._get_default_group()
        else:
            g = dist.distributed_c10d._world.default_pg
        y = x + 0
        dist.all_reduce(y, group=g)
        return y


class C58(nn.Module):  # non-functional all_to_all_single(out, in)
    def forward(self, x):
        out = torch.empty_like(x)
        dist.all_to_all_single(out, x)
        return out


class C59(nn.Module):  # async_op=True inside the exported region
    def forward(self, x):
        y = x + 1
        work = dist.all_reduce(y, async_op=True)
        work.wait()
        return y


for k in ("all_reduce", "all_gather", "reduce_scatter"):
    case(f"coll_c50_funcol_{k}", C50(k), (R(2 * W, 3),))
case("coll_c51_group_object", C51(), (R(2, 3),))
case("coll_c52_gather_positional", C52(False), (R(2, 3),))
case("coll_c52_gather_keywords", C52(True), (R(2, 3),))
case("coll_c53_gather_list", C53(), (R(2, 3),))
case("coll_c53_gather_list_long", C53(), (torch.tensor(0),))
case("coll_c54_rs", C54(False), (R(2 * W, 3),))
case("coll_c54_rs_async_false", C54(True), (R(2 * W, 3),))
for form in range(5):
    case(f"coll_c55_all_reduce_form{form}", C55(form), (R(2, 3),))
case("coll_c55_all_reduce_input", C55Input(), (R(2, 3),))
for op in ("SUM", "AVG", "PRODUCT", "MIN", "MAX"):
    case(f"coll_c56_op_{op.lower()}", C56(getattr(dist.ReduceOp, op)), (R(2, 3),))
for way in range(3):
    case(f"coll_c57_world_way{way}", C57(way), (R(2, 3),))
case("coll_c58_a2a_out", C58(), (R(2 * W, 3),))
case("coll_c59_async_op", C59(), (R(2, 3),))
case("coll_c59_async_op_strict", C59(), (R(2, 3),), strict=True)
print("done")
