"""Export the models of more CPU cases of spec/aot.md section 4 (needs PyTorch 2.11; run on a machine
that has it). Same layout as scripts/export_aot_cases.py:

    python3 scripts/export_aot_more.py OUTDIR TOOLSDIR      -> OUTDIR/aot_NN_name.pt2 + inputs/outputs

24  dict input {"x", "y"} -> list [2x, y]
29  linear (2,16,128) x W(10,128), then the same model with W + 1 (a second archive)
30  constants test_param, test_buf, foo_bar.0, foo_bar.test_param, foo_bar.test_buf (FQN map)
47  Linear(10,10) traced under CPU autocast: bf16 output
"""
import os
import sys
import traceback

import torch
import torch.nn as nn

OUT = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from export_fixture import save_case  # noqa: E402

os.makedirs(OUT, exist_ok=True)
R = lambda *s: torch.randn(*s)


def case(name, model, inputs):
    torch.manual_seed(0)
    try:
        save_case(OUT, name, model, inputs)
    except Exception as e:  # noqa: BLE001
        print(f"FAILED {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        traceback.print_exc(limit=2)


class C24(nn.Module):
    def forward(self, d):
        return [d["x"] * 2, d["y"]]


class C29(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(128, 10)

    def forward(self, x):
        return self.lin(x)


class FooBar(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_parameter("0", nn.Parameter(torch.randn(3)))
        self.test_param = nn.Parameter(torch.randn(3))
        self.register_buffer("test_buf", torch.randn(3))


class C30(nn.Module):
    def __init__(self):
        super().__init__()
        self.test_param = nn.Parameter(torch.randn(3))
        self.register_buffer("test_buf", torch.randn(3))
        self.foo_bar = FooBar()

    def forward(self, x):
        fb = self.foo_bar
        return (x + self.test_param + self.test_buf + getattr(fb, "0") + fb.test_param
                + fb.test_buf)


class C47(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(10, 10)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.lin(x)


torch.manual_seed(0)
case("aot_24_dict_input", C24(), ({"x": torch.ones(5), "y": torch.ones(5)},))
torch.manual_seed(0)
m29 = C29().eval()
x29 = R(2, 16, 128)
case("aot_29_linear_w", m29, (x29,))
with torch.no_grad():
    m29.lin.weight.add_(1.0)
case("aot_29_linear_w_plus_1", m29, (x29,))
torch.manual_seed(0)
case("aot_30_fqn_constants", C30(), (R(3),))
torch.manual_seed(0)
case("aot_47_autocast_bf16", C47(), (R(10, 10),))
print("done")
