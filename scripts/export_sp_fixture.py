"""Export the sequence-parallel fixture tests/fixtures/sp_block.pt2 (needs PyTorch 2.11):

    /work/venv211/bin/python scripts/export_sp_fixture.py tests/fixtures ../shared/tools [W]

A Megatron-style sequence-parallel MLP block followed by an Ulysses-style all_to_all, for W
ranks (default 2; sp_block_wW.pt2 otherwise) on group "0", traced under the fake process group (no outputs saved: tests run it on real
ranks against the interpreter). The graph holds two independent all_gather_into_tensor (fp32
and bf16: one multi-dtype bucket), two independent reduce_scatter_tensor (one bucket), an
all_to_all_single with equal splits, and a dependent all_gather of the attention result.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from export_fixture import save_case, init_fake_world  # noqa: E402

W = int(sys.argv[3]) if len(sys.argv) > 3 else 2  # ranks
S, H, FF = 8, 16, 32  # sequence, hidden, MLP width (each rank holds S/W rows, FF/W columns)
init_fake_world(W)
fc = torch.ops._c10d_functional


class SpBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln = nn.LayerNorm(H)
        self.up = nn.Linear(H, FF // W)              # column-parallel shard
        self.gate = nn.Linear(H, FF // W, bias=False)
        self.down = nn.Linear(FF // W, H, bias=False)  # row-parallel shards
        self.down2 = nn.Linear(FF // W, H, bias=False)

    def forward(self, x):  # x: this rank's [S/W, H] sequence shard
        g1 = fc.all_gather_into_tensor(self.ln(x), W, "0")
        g2 = fc.all_gather_into_tensor(x.to(torch.bfloat16), W, "0")
        a = F.gelu(self.up(fc.wait_tensor(g1)))
        b = self.gate(fc.wait_tensor(g2).float())  # the cast after the wait
        r1 = fc.reduce_scatter_tensor(self.down(a), "sum", W, "0")
        r2 = fc.reduce_scatter_tensor(self.down2(b), "sum", W, "0")
        y = x + fc.wait_tensor(r1) * fc.wait_tensor(r2)  # [S/W, H]
        # sequence shard -> head shard: block j of the input goes to rank j
        t = y.reshape(S // W, W, H // W).transpose(0, 1).contiguous()  # [W, S/W, H/W]
        z = fc.wait_tensor(fc.all_to_all_single(t, [1] * W, [1] * W, "0")).reshape(S, H // W)
        att = torch.softmax(z @ z.t() * 0.5, dim=-1) @ z  # [S, H/W]: whole sequence, my heads
        full = fc.wait_tensor(fc.all_gather_into_tensor(att, W, "0"))  # depends on the a2a
        return y, full


torch.manual_seed(0)
save_case(OUT, "sp_block" if W == 2 else f"sp_block_w{W}", SpBlock(), (torch.randn(S // W, H),),
          run=False)
