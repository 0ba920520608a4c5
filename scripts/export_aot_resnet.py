"""Export spec/aot.md case 49 (needs PyTorch 2.11): a ResNet-50 backbone in float64 (Bottleneck
[3,4,6,3], layer4 dilated as torchvision's replace_stride_with_dilation=[False, False, True]) on
input (4,3,64,64), returning 4 feature maps (4,64,32,32), (4,256,16,16), (4,512,8,8), (4,2048,4,4).

    python3 scripts/export_aot_resnet.py OUTDIR

The fp64 weights are ~200 MB, too big for the repository, so every floating-point tensor (weights,
buffers and the input) is a formula of its element index that a C++ test can reproduce bit for bit
(scripts/formula_weights.py). OUTDIR gets aot_49_resnet50_fp64.pt2 with those entries zeroed and
deflated, aot_49_resnet50_fp64.weights.json (entry name -> seed, scale, offset, element count; and
the input's), and aot_49_resnet50_fp64.out{0..3}.npy (PyTorch's outputs, stored as float32).
"""
import math
import os
import sys

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from formula_weights import fill, formula, save_zeroed  # noqa: E402

OUT = sys.argv[1]
NAME = "aot_49_resnet50_fp64"
os.makedirs(OUT, exist_ok=True)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes, planes, stride=1, downsample=None, dilation=1):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, padding=dilation, dilation=dilation,
                               bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        idt = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + idt)


class Backbone(nn.Module):
    def __init__(self):
        super().__init__()
        self.inplanes, self.dilation = 64, 1
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = self._make(64, 3)
        self.layer2 = self._make(128, 4, stride=2)
        self.layer3 = self._make(256, 6, stride=2)
        self.layer4 = self._make(512, 3, stride=2, dilate=True)

    def _make(self, planes, blocks, stride=1, dilate=False):
        prev = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        down = None
        if stride != 1 or self.inplanes != planes * 4:
            down = nn.Sequential(nn.Conv2d(self.inplanes, planes * 4, 1, stride, bias=False),
                                 nn.BatchNorm2d(planes * 4))
        layers = [Bottleneck(self.inplanes, planes, stride, down, prev)]
        self.inplanes = planes * 4
        layers += [Bottleneck(self.inplanes, planes, dilation=self.dilation)
                   for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        s = self.relu(self.bn1(self.conv1(x)))
        l1 = self.layer1(self.maxpool(s))
        l2 = self.layer2(l1)
        l4 = self.layer4(self.layer3(l2))
        return [s, l1, l2, l4]


def scale_of(fqn, t):
    if fqn.endswith("running_var"):
        return 0.5, 1.0
    if "bn" in fqn or "downsample.1" in fqn:
        gamma = 0.25 if "bn3" in fqn else 1.0
        return 0.2, (gamma if fqn.endswith("weight") else 0.0)
    return math.sqrt(6.0 / t[0].numel()), 0.0


model = Backbone().double().eval()
params = fill(model, scale_of)
with torch.no_grad():
    x = formula(4 * 3 * 64 * 64, 100000, 2.0, 0.0).view(4, 3, 64, 64)
    ep = torch.export.export(model, (x,))
    outs = model(x)
for k, o in enumerate(outs):
    print(NAME, "out", k, tuple(o.shape), float(o.abs().max()), float(o.abs().mean()))
    np.save(os.path.join(OUT, f"{NAME}.out{k}.npy"), o.float().numpy())
save_zeroed(ep, model, params, OUT, NAME,
            [dict(shape=[4, 3, 64, 64], seed=100000, scale=2.0, offset=0.0, dtype="float64")])
print("ops:", sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function"}))
