"""Export the control-flow cases of spec/aot.md section 4 (torch.cond, while_loop) and a few more
CPU cases (needs PyTorch 2.11; run on a machine that has it). Same layout as
scripts/export_aot_cases.py:

    python3 scripts/export_aot_cf.py OUTDIR TOOLSDIR   -> OUTDIR/aot_NN_name.pt2 + inputs/outputs

Every predicate or counter value is one more input set (NAME.inK_J.npy / NAME.outK_J.npy).

60 nonzero -> fp16 matmul -> sum   62 mask select with an asserted length of 256
64 cond Simple        65 cond Nested (8 predicate combinations)    66 cond with submodules
67 cond on views      68 cond with 3 outputs    69 outer code before/after    70 outer intermediates
71 cond on a shape predicate (static and dynamic)
72 while_loop Simple  73 Nested    74 parameterised body and outer code    75 closure buffers
23 addmm with grad-requiring inputs   25 structured output (loss, {"dl": loss})   46 randn
61/62 boolean-mask select (data-dependent length)
"""
import itertools
import os
import sys
import traceback

import torch
import torch.nn as nn
from torch.export import Dim
from torch._higher_order_ops.while_loop import while_loop

OUT = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from export_fixture import save_case  # noqa: E402

os.makedirs(OUT, exist_ok=True)
R = lambda *s: torch.randn(*s)


def case(name, model, inputs, dynamic_shapes=None, extra=()):
    torch.manual_seed(0)
    try:
        save_case(OUT, name, model, inputs, dynamic_shapes=dynamic_shapes, extra=extra)
    except Exception as e:  # noqa: BLE001
        print(f"FAILED {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        traceback.print_exc(limit=3)


def preds(n, tensors):
    """All 2^n predicate combinations prepended to `tensors`."""
    return [tuple(torch.tensor(v) for v in combo) + tuple(tensors)
            for combo in itertools.product([False, True], repeat=n)]


def counters(n, tensors, values=(0, 1, 5)):
    return [tuple(torch.tensor(v) for v in combo) + tuple(tensors)
            for combo in itertools.product(values, repeat=n)]


class CondSimple(nn.Module):
    def forward(self, p, a, b):
        return torch.cond(p, lambda x, y: x + y, lambda x, y: x - y, [a, b])


class CondNested(nn.Module):
    def forward(self, p0, p1, p2, a, b, c):
        def true_fn(x0, y0, z0):
            def tt(x1, y1, z1):
                return (x1 - y1 * z1) * 3.14

            def tf(x1, y1, z1):
                return torch.cond(p2, lambda x2, y2, z2: (x2 * y2 * z2) / 2.71,
                                  lambda x2, y2, z2: (x2 + y2 + z2) * 1.23, [x1, y1, z1])
            return torch.cond(p1, tt, tf, [x0, y0, z0])

        def false_fn(x0, y0, z0):
            def ft(x1, y1, z1):
                return torch.cond(p2, lambda x2, y2, z2: (x2 - y2 - z2) + 1.23,
                                  lambda x2, y2, z2: (x2 / y2 / z2) - 3.14, [x1, y1, z1])

            def ff(x1, y1, z1):
                return (x1 - y1 * z1) / 2.71
            return torch.cond(p1, ft, ff, [x0, y0, z0])
        return torch.cond(p0, true_fn, false_fn, [a, b, c])


class CondInner1(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(20, 30)

    def forward(self, x):
        return self.layer(x + 1) * 3.14


class CondInner2(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Linear(20, 10)
        self.layer2 = nn.Linear(10, 30)

    def forward(self, x):
        return self.layer2(self.layer1(x - 2)) * 3.14


class CondParameters(nn.Module):
    def __init__(self):
        super().__init__()
        self.true_fn = CondInner1()
        self.false_fn = CondInner2()

    def forward(self, p, a):
        return torch.cond(p, self.true_fn, self.false_fn, [a])


class CondReinterpretView(nn.Module):
    def forward(self, p, a, b):
        def true_fn(x, y):
            z1 = x + y
            z2 = x - y
            return z1[2:], z2[:, 4:].contiguous()

        def false_fn(x, y):
            z1 = x - y
            z2 = x + y
            return z1[2:], z2[:, 4:].contiguous()
        return torch.cond(p, true_fn, false_fn, [a[:-1], b[:-1]])


class CondMultipleOutputs(nn.Module):
    def forward(self, p, a, b, c):
        return torch.cond(p, lambda x, y, z: (x * y, z / 2.71, (y - x).sum(dim=1)),
                          lambda x, y, z: (y / x, z * 3.14, (x + y).mean(dim=1)), [a, b, c])


class CondOuterCode(nn.Module):
    def forward(self, p, a, b):
        c = a * b + 3.14
        d = a / b - 2.71
        e = torch.cond(p, lambda x, y: x + y, lambda x, y: x - y, [c, d])
        return e * e / 1.41


class CondOuterBuffers(nn.Module):
    def forward(self, p, a, b, c):
        d = a * 2
        e = b / 2
        return torch.cond(p, lambda x: x + d, lambda x: x - e, [c])


class CondShapePredicate(nn.Module):
    def forward(self, a, b):
        return torch.cond(a.size(0) > b.size(0), lambda x, y: x.sum(0) / 3.14,
                          lambda x, y: y.sum(0) * 2.71, [a, b])


class WhileSimple(nn.Module):
    def forward(self, ci, a, b):
        return while_loop(lambda i, x, y: i > 0, lambda i, x, y: (i - 1, x + y, y - x), [ci, a, b])


class WhileNested(nn.Module):
    def forward(self, ci, cj, a, b):
        def cond_fn(i1, j1, x1, y1):
            return i1 > 0

        def body_fn(i1, j1, x1, y1):
            def inner_cond(i2, j2, x2, y2):
                return j2 > 0

            def inner_body(i2, j2, x2, y2):
                return i2.clone(), j2 - 1, x2 + 3.14, y2 - 2.71
            i1, j1, x1, y1 = while_loop(inner_cond, inner_body, [i1, j1, x1, y1])
            return i1 - 1, j1.clone(), x1 * 2, y1 / 2
        return while_loop(cond_fn, body_fn, (ci, cj, a, b))


class WhileBody(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer1 = nn.Linear(20, 30)
        self.layer2 = nn.Linear(30, 20)

    def forward(self, c, a):
        return c - 1, self.layer2(self.layer1(a - 2)) * 3.14


class WhileParameters(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = WhileBody()

    def forward(self, c, a):
        return while_loop(lambda c, a: c > 0, lambda c, a: self.body(c, a), [c, a])


class WhileOuterCode(nn.Module):
    def forward(self, c, a, b):
        d = a * b + 3.14
        e = a / b - 2.71
        _, f, g = while_loop(lambda c, d, e: c > 0, lambda c, d, e: (c - 1, d + e, d - e), [c, d, e])
        return f * g / 1.41


class WhileOuterBuffers(nn.Module):
    def forward(self, c, a, b):
        d = a * 2
        e = b / 2
        return while_loop(lambda c, a, b: c > 0, lambda c, a, b: (c - 1, a + d, b - e), [c, a, b])


class C23(nn.Module):
    def forward(self, b, w, x):
        return torch.addmm(b, w, x)


class C25(nn.Module):
    def forward(self, x, target):
        loss = torch.nn.functional.cross_entropy(x, target, reduction="sum")
        return loss, {"dl": loss.float()}


class C46(nn.Module):
    def forward(self, x):
        return x + torch.randn(4, 1, 4, 4)


class C60(nn.Module):
    def forward(self, x, y):
        nz = torch.nonzero(x)
        ones = torch.ones(nz.shape[0], 1, dtype=torch.float16)
        return (ones @ y).sum()


class C62(nn.Module):
    def forward(self, x):
        m = x.abs() >= 0.001
        y = x[m]
        torch._check(y.shape[0] == 256)
        return torch.sin(y) / y


class C61(nn.Module):
    def forward(self, x):
        m = x.abs() >= 0.001
        return torch.sin(x[m]) / x[m]


def dyn(names, ranges):
    return {n: ({0: ranges[n], 1: None} if n in ranges else {}) for n in names}


def run_all():
    s0 = Dim("s0", min=2, max=1024)
    ab, abc = (R(10, 20), R(10, 20)), (R(10, 20), R(10, 20), R(10, 20))
    sets = preds(1, ab)
    case("aot_64_cond_simple", CondSimple(), sets[0], dyn("pab", {"a": s0, "b": s0}),
         extra=sets[1:] + preds(1, (R(50, 20), R(50, 20))))
    sets = preds(3, abc)
    case("aot_65_cond_nested", CondNested(), sets[0],
         dyn(["p0", "p1", "p2", "a", "b", "c"], {"a": s0, "b": s0, "c": s0}), extra=sets[1:])
    sets = preds(1, (R(10, 20),))
    case("aot_66_cond_submodules", CondParameters(), sets[0], dyn("pa", {"a": s0}),
         extra=sets[1:] + preds(1, (R(7, 20),)))
    s1 = Dim("s1", min=2, max=1024)
    sets = preds(1, ab + (R(30, 40),))
    case("aot_68_cond_multi_out", CondMultipleOutputs(), sets[0],
         dyn("pabc", {"a": s0, "b": s0, "c": s1}), extra=sets[1:])
    sets = preds(1, ab)
    case("aot_69_cond_outer_code", CondOuterCode(), sets[0], dyn("pab", {"a": s0, "b": s0}),
         extra=sets[1:])
    sets = preds(1, abc)
    case("aot_70_cond_outer_buffers", CondOuterBuffers(), sets[0],
         dyn("pabc", {"a": s0, "b": s0, "c": s0}), extra=sets[1:])
    case("aot_71_cond_shape_pred_static", CondShapePredicate(), (R(10, 20), R(15, 20)))
    case("aot_71_cond_shape_pred_dynamic", CondShapePredicate(), (R(10, 20), R(15, 20)),
         dyn("ab", {"a": s0, "b": s1}), extra=[(R(10, 20), R(5, 20))])
    sets = counters(1, ab)
    case("aot_72_while_simple", WhileSimple(), sets[0], dyn(["ci", "a", "b"], {"a": s0, "b": s0}),
         extra=sets[1:])
    sets = counters(2, ab)
    case("aot_73_while_nested", WhileNested(), sets[0],
         dyn(["ci", "cj", "a", "b"], {"a": s0, "b": s0}), extra=sets[1:])
    sets = counters(1, (R(10, 20),))
    case("aot_74_while_parameters", WhileParameters(), sets[0], dyn("ca", {"a": s0}), extra=sets[1:])
    sets = counters(1, ab)
    case("aot_74_while_outer_code", WhileOuterCode(), sets[0], dyn("cab", {"a": s0, "b": s0}),
         extra=sets[1:])
    sets = counters(1, ab)
    case("aot_75_while_outer_buffers", WhileOuterBuffers(), sets[0], extra=sets[1:])

    w, x, b = R(8, 8), R(8, 8), R(8)
    torch.manual_seed(0)
    try:  # case 23 runs with grad enabled, so save_case's no_grad does not apply to the outputs
        m = C23()
        args = (b.requires_grad_(), w.requires_grad_(), x.requires_grad_())
        ep = torch.export.export(m, args)
        torch.export.save(ep, os.path.join(OUT, "aot_23_grad_inputs.pt2"))
        import numpy as np
        for i, t in enumerate(args):
            np.save(os.path.join(OUT, f"aot_23_grad_inputs.in{i}.npy"), t.detach().numpy())
        np.save(os.path.join(OUT, "aot_23_grad_inputs.out0.npy"), m(*args).detach().numpy())
        print("exported aot_23_grad_inputs")
    except Exception as e:  # noqa: BLE001
        print(f"FAILED aot_23: {e}")
    case("aot_25_struct_out", C25(), (R(4, 4, 4, 4), R(4, 4, 4, 4).softmax(1)))
    case("aot_46_randn", C46(), (R(4, 1, 4, 4),))
    case("aot_61_mask_select", C61(), (R(4, 4, 4, 4),))
    case("aot_60_nonzero_mm", C60(), (torch.tensor([1, 1, 1]), R(1, 32).half()))
    case("aot_62_mask_select_256", C62(), (torch.ones(4, 4, 4, 4),))
    # 67: torch.export 2.11 fails on the spec's range d0 in [3, 1024] (an internal range
    # assertion; [4, 1024] violates a constraint, static shapes hit the stride check), so the
    # fixture uses [5, 1024]
    s5 = Dim("s0", min=5, max=1024)
    sets = preds(1, (R(10, 20), R(10, 20)))
    case("aot_67_cond_views_min5", CondReinterpretView(), sets[0], dyn("pab", {"a": s5, "b": s5}),
         extra=sets[1:] + preds(1, (R(6, 20), R(6, 20))))


run_all()
print("done")
