"""Export more CPU cases of spec/aot.md section 4 (needs PyTorch 2.11; run on a machine that has
it, with a GPU for case 80). Same layout as scripts/export_aot_cases.py:

    python3 scripts/export_aot_misc.py OUTDIR TOOLSDIR   -> OUTDIR/aot_NN_name.pt2 + inputs/outputs

59  jagged: nested_tensor_from_jagged(values (N,128), offsets (B+1)) -> MLP -> .values(), N and
    B+1 dynamic, four (N, offsets) sets. torch.export 2.11 cannot export it (non-strict: "does not
    support tracing with fx.symbolic_trace"; strict: "Unable to cast NotImplemented to Tensor"), so
    the attempt stays here for a later PyTorch and no fixture exists
12  complex64 add of two 8-element vectors (anvil has no complex dtype: a clear compile error, 81)
42  index_put with (None, None, zeros(3,14,1,1), ones(14,3).t()) and accumulate; x is
    (2,4,30,30) instead of the spec's (8,192,30,30) to keep the fixture small: still 1,764
    adds into each [:, :, 0, 1]
47  Linear(10,10) under torch.autocast("cpu", bfloat16): a bf16 output; and a bf16 region holding
    a disabled region (f32 result) and an f64 matmul (f64 result)
80  a Linear exported with its example input on cuda:0 (the CPU compiler refuses the device)
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


def case(name, model, inputs, **kw):
    torch.manual_seed(0)
    try:
        save_case(OUT, name, model, inputs, **kw)
    except Exception as e:  # noqa: BLE001
        print(f"FAILED {name}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        traceback.print_exc(limit=3)


class C59(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 32), nn.Sigmoid())

    def forward(self, values, offsets):
        nt = torch.nested.nested_tensor_from_jagged(values, offsets)
        return self.mlp(nt).values()


class C12(nn.Module):
    def forward(self, a, b):
        return a + b


class C42(nn.Module):
    def forward(self, x, values):
        i1 = torch.zeros(3, 14, 1, 1, dtype=torch.long)
        i2 = torch.ones(14, 3, dtype=torch.long).t()
        return torch.ops.aten.index_put.default(x, [None, None, i1, i2], values, True)


class C47(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(10, 10)

    def forward(self, x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return self.lin(x)


class C47Nested(nn.Module):
    """An enabled bf16 region holding a disabled one (f32 stays f32) and an f64 matmul (never
    cast by autocast)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(10, 10)
        self.lin2 = nn.Linear(10, 10)

    def forward(self, x, y):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            a = self.lin(x)
            with torch.autocast("cpu", enabled=False):
                b = self.lin2(x)
            c = y @ y
        return a, b, c


class C80(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 4)

    def forward(self, x):
        return self.lin(x)


torch.manual_seed(0)
sets59 = [(torch.randn(15, 128), torch.tensor([0, 3, 4, 10, 15])),
          (torch.randn(31, 128), torch.tensor([0, 1, 20, 25, 31])),
          (torch.randn(15, 128), torch.tensor([0, 3, 10, 15])),
          (torch.randn(37, 128), torch.tensor([0, 5, 16, 25, 29, 37]))]
from torch.export import Dim  # noqa: E402
case("aot_59_jagged_mlp", C59(), sets59[0],
     dynamic_shapes={"values": {0: Dim("dim0_values", min=1, max=128)},
                     "offsets": {0: Dim("dim0_offsets", min=1, max=9)}}, extra=sets59[1:])
torch.manual_seed(0)
case("aot_12_complex_add", C12(), (torch.randn(8, dtype=torch.complex64),
                                    torch.randn(8, dtype=torch.complex64)), run=False)
torch.manual_seed(0)
case("aot_42_index_put_accumulate", C42(), (torch.randn(2, 4, 30, 30),
                                             torch.randn(2, 4, 3, 14, 3, 14)))
torch.manual_seed(0)
case("aot_47_autocast_bf16", C47(), (torch.randn(10, 10),))
torch.manual_seed(0)
case("aot_47_autocast_nested", C47Nested(), (torch.randn(10, 10), torch.randn(6, 6).double()))
if torch.cuda.is_available():
    torch.manual_seed(0)
    case("aot_80_cuda_inputs", C80().cuda(), (torch.randn(2, 8, device="cuda"),), run=False)
print("done")
