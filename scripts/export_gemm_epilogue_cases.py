"""Export the GEMM-epilogue fixtures of the CUDA target (tests/gpu/test_cuda_gemm_epilogue.cpp)
with PyTorch 2.11: one small module per dtype (float32, bfloat16, float16) whose linear layers
end in each epilogue cuBLASLt can fuse (bias, relu, gelu tanh, bias + relu / gelu tanh, a
residual add, addmm with a vector or a beta-scaled matrix, a batched baddbmm with a bias) and in
gelu's erf form, which stays a loop kernel; and a residual add before a layer norm (the add taken
out of the layer norm's multi-pass kernel). Also vector_<dtype>: pointwise kernels for the
vectorized loads and stores (class Pointwise), and gemm_epilogue_k0_float32: linear layers
over zero input features, whose fused epilogue cuBLASLt cannot take (the unfused path).

    python scripts/export_gemm_epilogue_cases.py [OUTDIR]   (default tests/fixtures/gemm_epilogue)

Writes gemm_epilogue_<dtype>.pt2 and vector_<dtype>.pt2 with .in{i}.npy / .out{i}.npy (PyTorch
eager's outputs on the CPU, 16-bit values stored as float32) through
../shared/tools/export_fixture.py."""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "shared", "tools"))
from export_fixture import save_case  # noqa: E402

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "tests", "fixtures",
                                                         "gemm_epilogue")


class Epilogues(nn.Module):
    """Outputs, in order: relu(linear), gelu_tanh(linear), gelu_erf(linear) (not fused),
    r + linear (bias + residual), addmm(bias, h, w), addmm(r, h, w, beta=0.5) (residual times
    beta), relu(linear without bias), linear of a 3-D input (bias), gelu_tanh(linear) with 20
    outputs (n * 2 bytes not a multiple of 16), baddbmm(bias, b1, b2) (batched bias),
    layer_norm(r + linear) and r + linear (bias + residual: the sum is a store of the layer
    norm's multi-pass kernel, which the GEMM takes over)."""

    def __init__(self):
        super().__init__()
        self.l_relu = nn.Linear(32, 48)
        self.l_gelu = nn.Linear(32, 48)
        self.l_erf = nn.Linear(32, 48)
        self.l_res = nn.Linear(32, 48)
        self.w_mm = nn.Parameter(torch.randn(32, 48) / 6)
        self.b_mm = nn.Parameter(torch.randn(48) / 2)
        self.l_nobias = nn.Linear(32, 48, bias=False)
        self.l_3d = nn.Linear(32, 48)
        self.l_odd = nn.Linear(32, 20)
        self.b_bmm = nn.Parameter(torch.randn(48) / 2)
        self.l_ln = nn.Linear(32, 48)

    def forward(self, h, r, h3, b1, b2):
        res = r + self.l_ln(h)  # an output too: stored by the layer norm's kernel
        return (
            F.relu(self.l_relu(h)),
            F.gelu(self.l_gelu(h), approximate="tanh"),
            F.gelu(self.l_erf(h)),
            r + self.l_res(h),
            torch.addmm(self.b_mm, h, self.w_mm),
            torch.addmm(r, h, self.w_mm, beta=0.5),
            F.relu(self.l_nobias(h)),
            self.l_3d(h3),
            F.gelu(self.l_odd(h), approximate="tanh"),
            torch.baddbmm(self.b_bmm, b1, b2),
            F.layer_norm(res, (48,)),
            res,
        )


class Pointwise(nn.Module):
    """Pointwise kernels for the vectorized CUDA loads and stores: contiguous operands with an
    innermost size a multiple of 8 (vectorized), a per-row operand (a scalar load per lane), an
    innermost size of 13 (scalar kernel), a transposed read (scalar kernel), a 3-D broadcast."""

    def forward(self, x, y, z, u, w):
        return (
            x * y + z,
            F.gelu(x, approximate="tanh") - y * 0.5,
            u * 2.0 + 1.0,
            x.t().contiguous() + 1.0,
            torch.sigmoid(w) * x.unsqueeze(0),
        )


class EmptyK(nn.Module):
    """Linear layers over 0 input features (k = 0): cuBLASLt has no call to fuse relu or a
    residual into, so the GEMM step takes its unfused path (zeros, then the epilogue's kernel)."""

    def __init__(self):
        super().__init__()
        self.l_relu = nn.Linear(0, 48)
        self.l_res = nn.Linear(0, 48)

    def forward(self, h0, r):
        return F.relu(self.l_relu(h0)), r + self.l_res(h0)


def main():
    for name, dt in (("float32", torch.float32), ("bfloat16", torch.bfloat16),
                     ("float16", torch.float16)):
        torch.manual_seed(0)
        model = Epilogues().to(dt)
        g = torch.Generator().manual_seed(1)
        inputs = (
            torch.randn(24, 32, generator=g).to(dt),
            torch.randn(24, 48, generator=g).to(dt),
            torch.randn(2, 5, 32, generator=g).to(dt),
            (torch.randn(3, 24, 32, generator=g) / 3).to(dt),
            (torch.randn(3, 32, 48, generator=g) / 3).to(dt),
        )
        save_case(OUT, f"gemm_epilogue_{name}", model, inputs)
        g = torch.Generator().manual_seed(2)
        pw = (
            torch.randn(6, 64, generator=g).to(dt),
            torch.randn(6, 64, generator=g).to(dt),
            torch.randn(6, 1, generator=g).to(dt),
            torch.randn(6, 13, generator=g).to(dt),
            torch.randn(3, 6, 64, generator=g).to(dt),
        )
        save_case(OUT, f"vector_{name}", Pointwise().to(dt), pw)
    torch.manual_seed(3)
    empty = EmptyK()
    with torch.no_grad():  # nn.Linear(0, n) initializes its bias from a zero fan-in: give it values
        empty.l_relu.bias.copy_(torch.randn(48))
        empty.l_res.bias.copy_(torch.randn(48))
    save_case(OUT, "gemm_epilogue_k0_float32", empty,
              (torch.randn(24, 0), torch.randn(24, 48)))


if __name__ == "__main__":
    main()
