"""Export the fixtures of as_strided, out= forms and the inlined higher-order ops
(tests/aot/test_aot_op_views.cpp) with PyTorch 2.11, as scripts/export_op_cases.py does:

    python scripts/export_op_views.py [OUTDIR [NAME,NAME...]]   (default tests/fixtures/aot, all)

Writes ops_NAME.pt2 with ops_NAME.in{i}.npy / .out{i}.npy (PyTorch eager's outputs) and prints
each export's distinct ops. Non-strict export without decompositions, as users run it, except
where a case says otherwise (auto_functionalized only appears after run_decompositions())."""
import io
import json
import os
import sys
import zipfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._higher_order_ops.map import map as hop_map

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/aot"
ONLY = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else None


def save_io(name, inputs, outputs):
    for i, t in enumerate(inputs):
        np.save(os.path.join(OUT, f"{name}.in{i}.npy"), t.detach().numpy())
    outs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    for i, t in enumerate(outs):
        np.save(os.path.join(OUT, f"{name}.out{i}.npy"), t.detach().numpy())


def export(name, model, inputs, decompose=False, rewrite=None, with_io=True, dynamic_shapes=None):
    """Exports `model`; `rewrite(model_json)` edits the saved graph (a case built from a real
    export whose op is swapped, see custom_to_aten_mul); an archive anvil must
    refuse (with_io=False: no inputs / outputs, so the fixture sweeps skip it)."""
    if ONLY is not None and name not in ONLY:
        return
    model = model.eval()
    ep = torch.export.export(model, tuple(inputs), dynamic_shapes=dynamic_shapes, strict=False)
    if decompose:
        ep = ep.run_decompositions({})
    path = os.path.join(OUT, f"{name}.pt2")
    torch.export.save(ep, path)
    if rewrite is not None:
        buf = io.BytesIO()
        with zipfile.ZipFile(path) as src, zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as dst:
            for item in src.infolist():
                data = src.read(item.filename)
                if item.filename.endswith("models/model.json"):
                    data = json.dumps(rewrite(json.loads(data))).encode()
                dst.writestr(item, data)
        with open(path, "wb") as f:
            f.write(buf.getvalue())
    if with_io:
        with torch.no_grad():
            save_io(name, inputs, model(*[t.clone() for t in inputs]))
    ops = sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function"})
    print(f"exported {name}: {', '.join(ops)}")


class AsStrided(nn.Module):
    """as_strided over an input, a slice (the offset defaults to the slice's), a transpose with
    an explicit offset, overlapping windows, a computed tensor, a channels-last copy (storage not
    row-major) and a chain of two."""

    def forward(self, x, img):
        t = x * 2
        cl = img.contiguous(memory_format=torch.channels_last)
        w = x.as_strided((4, 3), (2, 1))                       # sliding windows, overlapping
        return (
            x.as_strided((2, 3), (1, 2)),
            x[1:].as_strided((2, 2), (3, 1)),
            x.t().as_strided((3,), (5,), 1),
            w * 1.5,
            t.as_strided((3, 2), (4, 1), 1) + 1,
            cl.as_strided((2, 3), (1, 3), 2),
            w.as_strided((2, 2), (1, 6), 4),
            x[:, 2:].as_strided((2, 3), (5, 1)),
        )


class OutForms(nn.Module):
    """out= forms as users write them: atan2, add with alpha, sum over a dim, mean with keepdim,
    sin into an empty (resized) tensor, mul into a float64 tensor (cast), clamp into a tensor
    a view was taken of before (the view sees the write) and bitwise_and on integers."""

    def forward(self, x, y, i):
        o = torch.empty_like(x)
        torch.atan2(x, y, out=o)
        p = torch.empty(3, 4)
        torch.add(x, y, alpha=2, out=p)
        s = torch.empty(3)
        torch.sum(x, 1, out=s)
        m = torch.empty(1, 4)
        torch.mean(x, 0, keepdim=True, out=m)
        q = torch.empty(0)
        torch.sin(x, out=q)
        d = torch.empty(3, 4, dtype=torch.float64)
        torch.mul(x, y, out=d)
        w = torch.zeros(3, 4)
        v = w[1]
        torch.clamp(x, -0.5, 0.5, out=w)
        k = torch.empty(3, 4, dtype=torch.int64)
        torch.bitwise_and(i, 6, out=k)
        return o, p, s, m, q, d, w, v, k


class Map(nn.Module):
    """torch.map (higher_order.map_impl) over two tensors with an extra operand, two outputs."""

    def forward(self, xs, zs, y):
        def body(x, z, y):
            return x.sin() * y + z, (x * z).sum(0, keepdim=True)
        return hop_map(body, xs, zs, y)


class Region(nn.Module):
    @torch.compiler.nested_compile_region
    def forward(self, x, b):
        return F.gelu(x @ b) + x.mean(-1, keepdim=True)


class InvokeSubgraph(nn.Module):
    """A torch.compiler.nested_compile_region module called twice (higher_order.invoke_subgraph)."""

    def __init__(self):
        super().__init__()
        self.r = Region()

    def forward(self, x, b):
        return self.r(x, b) - self.r(x * 0.5 + 1, b)


@torch.library.custom_op("anvil_fixture::scale_", mutates_args=("x",))
def scale_(x: torch.Tensor, k: float) -> None:
    x.mul_(k)


@scale_.register_fake
def _(x, k):
    return None


class AutoFunctionalized(nn.Module):
    """A custom op with mutates_args, on a clone and on a slice of one: run_decompositions()
    writes it as higher_order.auto_functionalized_v2 (the slice as _x_slice_dim / start / end)."""

    def forward(self, x):
        y = x.clone()
        scale_(y, 3.0)
        z = x + 1
        scale_(z[1:], -2.0)
        return y + 1, z


def custom_to_aten_mul(model):
    """AutoFunctionalized's graph with anvil_fixture.scale_(x, k) swapped for aten.mul_.Tensor(
    self=x, other=k), which computes the same (scale_'s kernel is x.mul_(k)): a mutating aten op
    under auto_functionalized_v2, which 2.11 emits only for custom ops."""
    for n in model["graph_module"]["graph"]["nodes"]:
        if n["target"] != "torch.ops.higher_order.auto_functionalized_v2":
            continue
        for a in n["inputs"]:
            if a["arg"].get("as_operator") == "torch.ops.anvil_fixture.scale_.default":
                a["arg"]["as_operator"] = "torch.ops.aten.mul_.Tensor"
            elif a["name"] == "k":
                a["name"] = "other"
            elif a["name"].startswith("_x_"):
                a["name"] = "_self_" + a["name"][3:]
    return model


class Strides2(nn.Module):
    """Table ops no other fixture carried, on transposed and channels-last inputs so the export
    records the strides PyTorch gives each result (tests/interp/test_strides.cpp audits the
    interpreter's against them). Core ATen forms that exports keep only when called so (the
    Scalar overloads, _to_copy, _softmax, convolution, the explicit pads and upsamples, ...) are
    called through torch.ops.aten, as run_decompositions() would leave them; random results are
    multiplied by 0 (their layout is audited, not their values). 0-d results (full reductions,
    scalar_tensor) have no strides: the audit counts them as covered."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(31)
        self.w = nn.Parameter(torch.randn(5, 3, 3, 3, generator=g))
        self.b = nn.Parameter(torch.randn(5, generator=g))
        self.register_buffer("rm", torch.randn(3, generator=g))
        self.register_buffer("rv", torch.rand(3, generator=g) + 0.5)

    def forward(self, x, img, i, j):
        aten = torch.ops.aten
        t = x.transpose(0, 1)                                   # (6, 4), transposed
        cl = img.contiguous(memory_format=torch.channels_last)  # NCHW in NHWC memory
        y = x.clone()
        y.transpose_(0, 1)
        idx = torch.tensor([[0, 2, 1], [2, 0, 0], [1, 1, 2]])
        c = torch.fft.fft(t)
        return (
            aten.add.Scalar(t, 2), aten.sub.Scalar(cl, 1), aten.mul.Scalar(t, 3),
            aten.div.Scalar(cl, 4), torch.rsub(t, x.t()), t < x.t(), cl >= img,
            torch.bitwise_and(i.t(), j), torch.bitwise_or(i.t(), j), torch.clamp_max(t, 0.2),
            aten._to_copy.default(cl, dtype=torch.float64), aten._softmax.default(cl, 1, False),
            aten._native_batch_norm_legit_no_training.default(cl, None, None, self.rm, self.rv,
                                                              0.1, 1e-5)[0],
            aten.std.correction(t, [1], correction=0), *aten.var_mean.dim(t, [0]),
            *aten.std_mean.correction(t, [1]), torch.sort(t, stable=True).values,
            torch.argsort(t, dim=0, stable=True),
            aten.convolution.default(cl, self.w, self.b, [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
            t[:3, :3].scatter(1, idx, 2.0), t[:3, :3].scatter_add(0, idx, t[3:, 1:]),
            aten._unsafe_view.default(x * 2, [6, 4]), y * 1.0, t.unsqueeze(0).squeeze((0,)),
            torch.scalar_tensor(2.0), x.new_empty((2, 3)).fill_(1.0), torch.rand_like(t) * 0,
            torch.randn_like(t) * 0, torch.rand(3, 2) * 0,
            c.imag, torch.fft.ifftn(cl).real, torch.fft.rfft(t).real, torch.fft.irfft(c),
            aten.constant_pad_nd.default(cl, [1, 0, 2, 1], 0.5),
            aten.reflection_pad1d.default(t, [1, 2]), aten.reflection_pad2d.default(cl, [1, 1, 2, 0]),
            aten.reflection_pad3d.default(cl, [1, 1, 1, 0, 1, 1]),
            aten.replication_pad1d.default(t, [2, 1]),
            aten.replication_pad2d.default(cl, [0, 1, 1, 2]),
            aten.replication_pad3d.default(cl, [1, 0, 1, 1, 0, 1]),
            aten.upsample_bilinear2d.default(cl, [6, 7], False),
            aten.upsample_nearest2d.default(cl, [8, 10]),
            torch.full((2, 3), 1.5), aten.fill.Scalar(t, 0.5), aten.fill.Tensor(cl, x[0, 0]),
            F.cross_entropy(t, torch.tensor([0, 3, 1, 2, 2, 0]), reduction="none"),
            x.sum(), t.mean(), (t > 0).any(), (cl > -9).all(), (t * 0.5 + 1).prod(),
            (t > 0).any(dim=(0, 1)),
        )


def aten_mul_v1(model):
    """custom_to_aten_mul, then its first auto_functionalized_v2 (on the whole clone) written as
    auto_functionalized (v1), which passes the written tensor itself as `self`."""
    model = custom_to_aten_mul(model)
    for n in model["graph_module"]["graph"]["nodes"]:
        if n["target"] != "torch.ops.higher_order.auto_functionalized_v2":
            continue
        n["target"] = "torch.ops.higher_order.auto_functionalized"
        bases = next(a for a in n["inputs"] if a["name"] == "_all_bases")["arg"]["as_tensors"]
        n["inputs"] = [a for a in n["inputs"] if not a["name"].startswith("_")]
        n["inputs"].append({"name": "self", "arg": {"as_tensor": bases[0]}, "kind": 2})
        break
    return model


def main():
    os.makedirs(OUT, exist_ok=True)
    g = torch.Generator().manual_seed(30)

    def r(*shape):
        return torch.randn(*shape, generator=g)

    export("ops_as_strided", AsStrided(), (r(3, 4), r(1, 3, 2, 2)))
    export("ops_out_forms", OutForms(), (r(3, 4), r(3, 4), torch.randint(0, 9, (3, 4), generator=g)))
    export("ops_map", Map(), (r(3, 4), r(3, 4), r(4)))
    export("ops_invoke_subgraph", InvokeSubgraph(), (r(2, 3, 4), r(4, 4)))
    export("ops_strides2", Strides2(), (r(4, 6), r(2, 3, 4, 5), torch.randint(0, 9, (4, 6), generator=g),
                                        torch.randint(0, 9, (6, 4), generator=g)))
    x = r(3, 4)
    export("ops_auto_functionalized_custom", AutoFunctionalized(), (x,), decompose=True, with_io=False)
    export("ops_auto_functionalized_aten", AutoFunctionalized(), (x,), decompose=True,
           rewrite=custom_to_aten_mul)
    export("ops_auto_functionalized_v1", AutoFunctionalized(), (x,), decompose=True,
           rewrite=aten_mul_v1)
    # torch.map over a dynamic leading size: refused at import (the body is unrolled)
    n = torch.export.Dim("n", min=2, max=16)
    export("ops_map_dynamic", Map(), (torch.ones(3, 4), torch.ones(3, 4), torch.ones(4)),
           dynamic_shapes=({0: n}, {0: n}, None), with_io=False)


if __name__ == "__main__":
    main()
