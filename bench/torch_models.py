"""PyTorch 1.13 (Debian python3-torch) twins of the benchmark models, loading the weights of the very .pt2
archives anvil compiles, so both sides compute the same function on the same numbers.

1.13 has no torch.export and no scaled_dot_product_attention: the LLaMA block writes attention as
matmul + causal mask + softmax + matmul, as the issue asks."""
import json
import math
import zipfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# torch.export schema ScalarType codes -> numpy dtypes (the ones these models use)
_DTYPES = {7: np.float32, 5: np.int64, 8: np.float64, 6: np.float16}


def load_pt2_weights(path):
    """Returns {fully qualified name: torch.Tensor} from a .pt2 archive's weights config + raw files."""
    out = {}
    with zipfile.ZipFile(path) as z:
        cfg_name = next(n for n in z.namelist() if n.endswith("data/weights/model_weights_config.json"))
        base = cfg_name[: -len("model_weights_config.json")]
        for name, entry in json.loads(z.read(cfg_name))["config"].items():
            meta = entry["tensor_meta"]
            sizes = [s["as_int"] for s in meta["sizes"]]
            raw = z.read(base + entry["path_name"])
            arr = np.frombuffer(raw, dtype=_DTYPES[meta["dtype"]]).copy()
            out[name] = torch.from_numpy(arr[: int(np.prod(sizes)) if sizes else 1].reshape(sizes))
    return out


class MlpSmall(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(256, 512), nn.Linear(512, 512), nn.Linear(512, 256)

    def forward(self, x):
        return self.l3(F.gelu(self.l2(F.gelu(self.l1(x)))))


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.c2, self.fc = nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.Linear(32, 10)

    def forward(self, x):
        x = F.relu(self.c2(F.relu(self.b1(self.c1(x)))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Mlp(nn.Module):
    def __init__(self, d=1024, h=4096):
        super().__init__()
        self.l1, self.l2, self.l3 = nn.Linear(d, h), nn.Linear(h, h), nn.Linear(h, d)

    def forward(self, x):
        return self.l3(F.gelu(self.l2(F.gelu(self.l1(x)))))


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w


class Block(nn.Module):
    """Block(d, nh, ff) of ../shared/anchors/compile_bench_defs.py with attention spelled out."""

    def __init__(self, d=256, nh=4, ff=688):
        super().__init__()
        self.nh = nh
        self.n1, self.n2 = RMSNorm(d), RMSNorm(d)
        self.qkv, self.o = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.g, self.u = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False)
        self.dn = nn.Linear(ff, d, bias=False)

    def rope(self, x):
        T, hd = x.shape[-2], x.shape[-1]
        inv = 1.0 / (10000 ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        f = torch.outer(torch.arange(T, dtype=torch.float32), inv)
        c, sn = f.cos(), f.sin()
        x1, x2 = x[..., ::2], x[..., 1::2]
        return torch.stack([x1 * c - x2 * sn, x1 * sn + x2 * c], -1).flatten(-2)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(self.n1(x)).view(B, T, 3, self.nh, D // self.nh).permute(2, 0, 3, 1, 4)
        q, k = self.rope(q), self.rope(k)
        s = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
        a = torch.matmul(torch.softmax(s, -1), v)
        x = x + self.o(a.transpose(1, 2).reshape(B, T, D))
        h = self.n2(x)
        return x + self.dn(F.silu(self.g(h)) * self.u(h))


class Chain(nn.Module):
    """The fused pointwise + reduction chain of bench/models/chain16m.pt2."""

    def __init__(self, d=4096):
        super().__init__()
        self.w = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt((x + 1.0).pow(2).mean(-1, keepdim=True) + 1e-6) * self.w


MODELS = {"mlp_small": MlpSmall, "small_cnn": SmallCnn, "block256": Block, "mlp1024": Mlp, "chain16m": Chain}


def build(name, pt2_path):
    """The model `name` with the weights of `pt2_path`, in eval mode."""
    model = MODELS[name]()
    model.load_state_dict(load_pt2_weights(pt2_path), strict=True)
    return model.eval()
