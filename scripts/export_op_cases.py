"""Export the op-surface fixtures of issue 18 (tests/aot/test_aot_op_cases.cpp) with PyTorch 2.11:
small modules whose exports carry the ops real models stopped on — in-place forms (silu_,
hardswish_, dropout_, fill_.Tensor, clamp_, masked_fill_ ...), pad in every mode, roll,
linalg_vector_norm, addcmul / addcdiv, reshape_as, numpy_T, max / min of two tensors, a
torch.no_grad() region (higher_order.wrap_with_set_grad_enabled) with a dynamic size, and the
Core ATen pointwise ops (inverse trigonometric / hyperbolic functions, fmod, remainder, xor, ...).

    python scripts/export_op_cases.py [OUTDIR [NAME,NAME...]]   (default tests/fixtures/aot, all)

Writes ops_NAME.pt2 with ops_NAME.in{i}.npy / .out{i}.npy (PyTorch eager's outputs; extra shape
sets as _0, _1 for dynamic exports) and prints each export's distinct ops. Non-strict export
without decompositions, as users run it."""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/aot"
Dim = torch.export.Dim


def save_io(name, inputs, outputs, suffix=""):
    for i, t in enumerate(inputs):
        np.save(os.path.join(OUT, f"{name}.in{i}{suffix}.npy"), t.detach().numpy())
    outs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    for i, t in enumerate(outs):
        np.save(os.path.join(OUT, f"{name}.out{i}{suffix}.npy"), t.detach().numpy())


def export(name, model, inputs, dynamic_shapes=None, extra=(), train=False):
    model = model.train() if train else model.eval()
    ep = torch.export.export(model, tuple(inputs), dynamic_shapes=dynamic_shapes, strict=False)
    torch.export.save(ep, os.path.join(OUT, f"{name}.pt2"))
    with torch.no_grad():
        save_io(name, inputs, model(*[t.clone() for t in inputs]))
        for k, more in enumerate(extra):
            save_io(name, more, model(*[t.clone() for t in more]), suffix=f"_{k}")
    ops = sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function"})
    print(f"exported {name}: {', '.join(ops)}")


class InPlace(nn.Module):
    """In-place forms as activations and buffers write them (ResNet / MobileNet / EfficientNet
    style `inplace=True`), on an intermediate so the input stays untouched."""

    def forward(self, x, m):
        y = x * 1.5
        F.silu(y, inplace=True)
        z = x - 0.25
        F.hardswish(z, inplace=True)
        F.hardsigmoid(x + 0.5, inplace=True)
        w = F.dropout(z.clone(), p=0.1, training=False, inplace=True)
        v = torch.empty_like(x)
        v.fill_(x.sum())                      # fill_.Tensor
        u = x.clone()
        u.clamp_(min=-0.3, max=0.4)
        u.masked_fill_(m, 2.0)
        u.add_(y, alpha=0.5).mul_(2.0).sub_(w)
        r = (x * 3).relu_()
        h = F.relu6(x * 4, inplace=True)
        return y, z, w, v, u, r, h


class Pad(nn.Module):
    def forward(self, x3, x4):
        return (
            F.pad(x4, (1, 2, 0, 3), value=0.5),             # constant
            F.pad(x4, (-1, 1, 2, -2)),                      # negative: crops
            F.pad(x4, (2, 1, 1, 3), mode="reflect"),
            F.pad(x4, (3, 0, 2, 1), mode="replicate"),
            F.pad(x4, (2, 2, 1, 0), mode="circular"),
            F.pad(x3, (3, 2), mode="reflect"),
            F.pad(x3, (1, 4), mode="replicate"),
            F.pad(x3, (2, 3), mode="circular"),
            F.pad(x3, (1, 1, 2, 0, 1, 0)),                  # constant over 3 dims
        )


class PadDynamic(nn.Module):
    def forward(self, x):
        return F.pad(x, (1, 2, 2, 1), mode="reflect") * 2, F.pad(x, (0, 3), value=-1.0)


class Roll(nn.Module):
    def forward(self, x):
        return torch.roll(x, shifts=(1, -2), dims=(1, 2)), torch.roll(x, 7), torch.roll(x, -1, 0)


class Norms(nn.Module):
    def forward(self, x):
        return (
            torch.linalg.vector_norm(x),
            torch.linalg.vector_norm(x, dim=-1, keepdim=True),
            torch.linalg.vector_norm(x, ord=1, dim=(0, 2)),
            torch.linalg.vector_norm(x, ord=float("inf"), dim=1),
            torch.linalg.vector_norm(x, ord=float("-inf"), dim=2),
            torch.linalg.vector_norm(x, ord=3.0, dim=-1),
            torch.linalg.vector_norm(x.round(), ord=0, dim=1),
            x / x.norm(dim=-1, keepdim=True).clamp_min(1e-6),
            F.normalize(x, dim=1),
        )


class AddC(nn.Module):
    def forward(self, a, b, c):
        return (torch.addcmul(a, b, c, value=0.5), torch.addcdiv(a, b, c.abs() + 1, value=-2),
                torch.addcmul(a, b, c))


class Views(nn.Module):
    def forward(self, x, y, m):
        return x.reshape_as(y) + y, m.T * 2, torch.max(x, x.flip(0)), torch.min(m, m * 0.5)


class NoGrad(nn.Module):
    """A rotary-style table built under torch.no_grad() from a dynamic length (LLaMA-family
    exports carry it as higher_order.wrap_with_set_grad_enabled)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8)))

    def forward(self, x):
        with torch.no_grad():
            t = torch.arange(x.shape[1], dtype=torch.float32)
            freqs = torch.outer(t, self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos(), emb.sin()
        x1, x2 = x[..., :4], x[..., 4:]
        rot = torch.cat((-x2, x1), dim=-1)
        return x * cos + rot * sin


class ConvNorms(nn.Module):
    """wav2vec2's feature encoder pieces: conv1d, group_norm, and a weight-normed conv
    (aten._weight_norm)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(2, 8, 5, stride=2)
        self.gn = nn.GroupNorm(4, 8)
        self.pos = nn.utils.parametrizations.weight_norm(nn.Conv1d(8, 8, 3, padding=1), dim=2)
        self.gn2 = nn.GroupNorm(8, 8, affine=False)

    def forward(self, x):
        y = F.gelu(self.gn(self.conv(x)))
        return self.gn2(y + self.pos(y))


class Attention(nn.Module):
    """torchvision's ViT attention: nn.MultiheadAttention (batch_first) whose sdpa output is
    viewed with the strides PyTorch's CPU kernel gives it."""

    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 4, batch_first=True)

    def forward(self, x):
        y, _ = self.mha(x, x, x, need_weights=False)
        return y


class Upsample(nn.Module):
    """F.interpolate as segmentation heads use it (DeepLabV3 / LRASPP: bilinear to a size)."""

    def forward(self, x):
        return (F.interpolate(x, size=(9, 13), mode="bilinear", align_corners=False),
                F.interpolate(x, scale_factor=2, mode="bilinear"),
                F.interpolate(x, size=(7, 4), mode="bilinear", align_corners=True),
                F.interpolate(x, scale_factor=2, mode="nearest"),
                F.interpolate(x, size=(11, 9), mode="nearest"),
                F.interpolate(x, size=(3, 2), mode="bilinear"))


class Strides(nn.Module):
    """Table ops on non-contiguous inputs (a channels-last view, a transposed view), so the
    export records the strides PyTorch gives each result; tests/interp/test_strides.cpp audits
    the interpreter's against them."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 6, 3, padding=1)

    def forward(self, x, m):
        cl = x.contiguous(memory_format=torch.channels_last)       # N, C, H, W in NHWC memory
        t = x.transpose(-1, -2)                                     # a transposed view
        b = m.transpose(-1, -2)
        outs = [
            cl + 1.5, cl - 2, 3 - cl, cl * 0.5, cl / 4, torch.div(cl, 3, rounding_mode="floor"),
            torch.maximum(cl, t.transpose(-1, -2)), torch.minimum(t, t * 2),
            cl == 0.5, t != t * 2, cl < 0, t <= 0.1, cl > t.transpose(-1, -2), t >= 0,
            b & (t > 0), b | (t > 0), torch.logical_and(b, t < 1), torch.logical_or(b, t > 1),
            torch.where(b, t, t * 2), torch.where(b, t, 0.0), torch.where(b, 1.0, t),
            t.masked_fill(b, 0.25), t.masked_fill(b, torch.tensor(2.0)),
            cl.clamp(-0.5, 0.5), cl.clamp(max=0.2), F.hardtanh(t), F.relu6(cl * 4),
            cl.abs().sqrt(), t.exp(), (cl.abs() + 1).log(), t.erf(), (t * 3).floor(),
            (cl * 3).ceil(), (t * 3).trunc(), (cl * 3).round(), F.hardswish(t), F.hardsigmoid(cl),
            torch.logical_not(b), ~b, cl.to(torch.float64), t.type_as(x), t.detach(),
            torch.full_like(cl, 2.0), torch.zeros_like(t), torch.ones_like(cl), t.new_ones(3, 2),
            t.new_zeros(2, 3), t.new_full((2, 2), 7.0), cl.sum(), t.mean(), cl.amax(dim=1),
            t.amin(dim=-1), cl.argmax(dim=1), b.any(dim=2), torch.softmax(cl, dim=1),
            torch.log_softmax(t, dim=-1), F.max_pool2d(cl, 2), F.avg_pool2d(cl, 2),
            self.conv(cl), t.index_select(2, torch.tensor([0, 2])), t.narrow(3, 1, 2),
            *cl.split([1, 3], dim=1), *t.chunk(2, dim=2), t.repeat(1, 1, 2, 1),
            t[:, :1].squeeze(1), cl[:, :, :1].squeeze(), F.pad(cl, (1, 1)),
            F.pad(t, (1, 2, 0, 1), mode="reflect"), F.pad(cl, (2, 0, 1, 1), mode="replicate"),
            F.interpolate(cl, scale_factor=2, mode="nearest"),
            F.interpolate(cl, size=(7, 9), mode="bilinear"), torch.roll(t, 1, 2), t.flip(1),
            torch.addcmul(cl, t.transpose(-1, -2), cl), F.silu(t), F.gelu(cl), torch.tanh(t),
            torch.sigmoid(cl), t.neg(), cl.reciprocal(), t.sin(),
            cl.cos(), t.pow(2), cl.pow(t.transpose(-1, -2).abs()), t.cumsum(dim=3),
            F.layer_norm(t, (5,)), F.group_norm(cl, 2), torch.linalg.vector_norm(cl, dim=1),
        ]
        return tuple(outs)
class ReductionsMore(nn.Module):
    """Reductions with index results, NaN-free ties (argmin / max / min take the first index),
    the variance family, logsumexp, scans and sorting (topk on distinct values)."""

    def forward(self, x, m):
        mx = x.max(dim=1)
        mn = x.min(dim=0, keepdim=True)
        vm = torch.var_mean(x, dim=1, correction=0)
        srt = x.sort(dim=1, descending=True)
        tk = x.topk(2, dim=1)
        tks = x.topk(3, dim=0, largest=False)
        r = x.round()                                  # ties for argmin / sort
        return (
            m.any(), m.any(dim=(0, 1)), m.all(), m.all(dim=1),
            x.argmin(dim=1), r.argmin(), mx.values, mx.indices, mn.values, mn.indices,
            x.prod(), (x * 0.5 + 1).prod(dim=0),
            x.var(dim=1), x.var(), x.std(dim=0, unbiased=False), vm[0], vm[1],
            torch.std_mean(x, dim=1)[0],
            torch.logsumexp(x, dim=1), torch.logsumexp(x, dim=(0, 1), keepdim=True),
            (x * 0.5 + 1).cumprod(dim=1),
            srt.values, srt.indices, tk.values, tk.indices, tks.values, tks.indices,
            r.sort(dim=1).indices, r.argsort(dim=0, descending=True),
        )


class CoreForms(nn.Module):
    """Core ATen forms as run_decompositions() leaves them, called directly: the native norms
    with their statistics, _log_softmax, native_dropout, _adaptive_avg_pool2d, var.correction,
    plus diagonal, select_scatter / slice_scatter, copy, masked_scatter and empty_strided."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.linspace(0.5, 1.5, 6))
        self.b = nn.Parameter(torch.linspace(-0.2, 0.3, 6))

    def forward(self, x, img, m, src):
        aten = torch.ops.aten
        ln = aten.native_layer_norm.default(x, [6], self.w, self.b, 1e-5)
        gn = aten.native_group_norm.default(img, self.w, self.b, 2, 6, 20, 3, 1e-5)
        dr = aten.native_dropout.default(x, 0.3, False)
        e = aten.empty_strided.default([4, 6], [1, 4]).fill_(0.5)
        return (
            ln[0], ln[1], ln[2], gn[0], gn[1], gn[2],
            aten._log_softmax.default(x, 1, False), dr[0], dr[1],
            aten._adaptive_avg_pool2d.default(img, [3, 2]),
            aten.var.correction(x, [0], correction=0, keepdim=True),
            aten.diagonal.default(img, 1, 2, 3), x.diagonal(-1),
            torch.select_scatter(x, src[:6], 0, 2),
            torch.slice_scatter(x, src.reshape(2, 6), 0, 1, 4, 2),
            aten.copy.default(x, src[:6] * 2), x.masked_scatter(m, src.repeat(2)) + e,
        )
class PointwiseMore(nn.Module):
    """Core ATen pointwise ops on inputs holding NaN, infinities and -0.0: inverse trigonometric /
    hyperbolic functions, expm1 / log1p / log2 / log10, atan2, sign, isnan / isinf, xor and the
    Scalar forms of bitwise and / or (also as ^ & |), fmod / remainder of floats, integers and
    bfloat16, clamp with tensor bounds, div.Scalar_mode, elu and leaky_relu. Each output stacks
    one family: floating math, bool tests, integer results, modulo and clamping of floats."""

    def forward(self, x, y, i, j, lo, hi):
        u = x * 0.5
        math = torch.stack([
            torch.acos(u), torch.asin(u), torch.atan(x), torch.acosh(x), torch.asinh(x),
            torch.atanh(u), torch.tan(x), torch.sinh(x), torch.cosh(x), torch.expm1(x),
            torch.log1p(x), torch.log2(x), torch.log10(x), torch.log2(i),
            torch.atan2(x, y), torch.sign(x),
            F.elu(x), F.elu(x, 0.5), torch.ops.aten.elu.default(x, 0.5, 2.0, 3.0),
            F.leaky_relu(x), F.leaky_relu(x, 0.2),
        ])
        tests = torch.stack([
            torch.isinf(x / y), torch.isnan(torch.log1p(x)), torch.isnan(i),
            torch.logical_xor(x, i),
        ])
        im = i - 2
        ints = torch.stack([
            torch.sign(im), torch.bitwise_xor(im, j), torch.bitwise_xor(im, 5),
            torch.bitwise_and(im, 6), torch.bitwise_or(im, 9), im ^ j, im & 3, im | 4, im ^ 7,
            torch.fmod(im, j), torch.fmod(im, -3), torch.remainder(im, j), torch.remainder(im, -3),
            torch.ops.aten.div.Scalar_mode(im, -2, rounding_mode="trunc"),
        ])
        mods = torch.stack([
            torch.fmod(x, -0.75), torch.fmod(x, y), torch.remainder(x, -0.75),
            torch.remainder(x, y), torch.remainder(x.to(torch.bfloat16), 0.3).float(),
            torch.clamp(x, min=lo, max=hi), torch.clamp(x, max=hi), torch.clamp(i, min=lo),
            torch.ops.aten.div.Scalar_mode(x, 0.4, rounding_mode="floor"),
        ])
        return math, tests, ints, mods


class PoolSample(nn.Module):
    """Pooling with indices and 3-D pooling, grid sampling and sliding blocks as users' exports
    keep them: max_pool2d_with_indices (nn.MaxPool2d(return_indices=True), also on a
    channels-last input), max_pool3d / max_pool3d_with_indices (also channels_last_3d), avg_pool3d (ceil_mode,
    count_include_pad, divisor_override), adaptive_avg_pool3d, grid_sampler (F.grid_sample in
    every interpolation x padding mode, align_corners both ways), im2col (F.unfold) and col2im
    (F.fold); plus the Core ATen forms run_decompositions() gives (_adaptive_avg_pool3d,
    grid_sampler_2d), called directly."""

    def forward(self, x4, x5, grid, cols):
        aten = torch.ops.aten
        v2, i2 = F.max_pool2d(x4, 3, stride=2, padding=1, ceil_mode=True, return_indices=True)
        cl = x4.contiguous(memory_format=torch.channels_last)
        v2c, i2c = F.max_pool2d(cl, (2, 3), stride=(1, 2), dilation=(2, 1), return_indices=True)
        v3, i3 = F.max_pool3d(x5, 2, stride=(1, 2, 2), padding=1, return_indices=True)
        m3 = F.max_pool3d(x5, (2, 3, 2), stride=2, dilation=(1, 1, 2), ceil_mode=True)
        a3 = F.avg_pool3d(x5, 3, stride=2, padding=1, ceil_mode=True)
        a3n = F.avg_pool3d(x5, (2, 3, 3), stride=(1, 2, 1), padding=(1, 1, 0),
                           count_include_pad=False)
        a3d = F.avg_pool3d(x5, 2, divisor_override=3)
        ad3 = F.adaptive_avg_pool3d(x5, (2, 3, 2))
        ad3i = aten._adaptive_avg_pool3d.default(x5, [3, 1, 4])
        # channels_last_3d: max pooling keeps the layout, average pooling gives contiguous
        cl5 = x5.contiguous(memory_format=torch.channels_last_3d)
        v3c, i3c = F.max_pool3d(cl5, (2, 3, 2), stride=1, return_indices=True)
        a3c = F.avg_pool3d(cl5, 2) + F.adaptive_avg_pool3d(cl5, (2, 3, 3))
        samples = torch.stack([
            F.grid_sample(x4, grid, mode=m, padding_mode=p, align_corners=a)
            for m in ("bilinear", "nearest", "bicubic")
            for p in ("zeros", "border", "reflection")
            for a in (False, True)
        ])
        g2 = aten.grid_sampler_2d.default(x4, grid, 0, 2, False)
        unf = F.unfold(x4, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
        fold = F.fold(cols, (5, 6), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
        return (v2, i2, v2c, i2c, v3, i3, m3, a3, a3n, a3d, ad3, ad3i, samples, g2, unf, fold,
                v3c, i3c, a3c)


class Dist(nn.Module):
    """Pairwise distances: torch.cdist for p = 0, 1, 2, inf and 3.5 (batch dims broadcast; p = 2
    with the matrix-product compute_mode and without), F.pdist, and the Core ATen forms
    run_decompositions() gives (_cdist_forward, _pdist_forward), called directly."""

    def forward(self, a, b, c):
        aten = torch.ops.aten
        return (
            torch.cdist(a, b), torch.cdist(a, b, p=0), torch.cdist(a, b, p=1),
            torch.cdist(a, b, p=float("inf")), torch.cdist(a, b, p=3.5),
            torch.cdist(a, b, compute_mode="use_mm_for_euclid_dist"),
            torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist"),
            torch.cdist(c, c[1:]),
            F.pdist(c), F.pdist(c, p=1.5), F.pdist(c, p=float("inf")),
            aten._cdist_forward.default(a, b, 2.0, None), aten._cdist_forward.default(a, b, 1.0, 2),
            aten._pdist_forward.default(c, 2.0),
        )


class PoolSampleDynamic(nn.Module):
    """Pooling with indices, 3-D pooling, grid sampling, unfold / fold and cdist / pdist under a
    dynamic batch (the extern calls' sizes are read at run time)."""

    def forward(self, x4, x5, grid, c):
        v, i = F.max_pool2d(x4, 2, return_indices=True)
        v3, i3 = F.max_pool3d(x5, 2, stride=1, return_indices=True)
        s = F.grid_sample(x4, grid, mode="bicubic", padding_mode="reflection", align_corners=False)
        u = F.unfold(x4, 3, padding=1)
        f = F.fold(u, (6, 7), 3, padding=1)
        d = torch.cdist(c, c[:, 1:], p=1.0)
        return (v, i, v3, i3, F.avg_pool3d(x5, 2), F.adaptive_avg_pool3d(x5, 2), s, u, f, d,
                F.pdist(c[0]))


class Backward(nn.Module):
    """The gradient ops of training steps, called directly as a joint graph after
    run_decompositions() carries them: convolution_backward (2-D; grouped with stride, padding and
    dilation; 1-D; transposed with output_padding; output_mask leaving some gradients out),
    avg_pool2d_backward (ceil_mode without padding counted; divisor_override),
    _adaptive_avg_pool2d_backward, max_pool2d_with_indices_backward (its indices an input, as
    max_pool2d_with_indices computes them), embedding_dense_backward (padding_idx with
    scale_grad_by_freq, and plain), native_layer_norm_backward and native_group_norm_backward
    (statistics from their forward ops)."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(7)
        self.w1 = nn.Parameter(torch.randn(4, 3, 3, 3, generator=g))
        self.w2 = nn.Parameter(torch.randn(6, 2, 3, 3, generator=g))
        self.w3 = nn.Parameter(torch.randn(4, 3, 3, generator=g))
        self.wt = nn.Parameter(torch.randn(4, 3, 3, 3, generator=g))
        self.lw = nn.Parameter(torch.linspace(0.5, 1.5, 6))
        self.lb = nn.Parameter(torch.linspace(-0.2, 0.3, 6))

    def forward(self, x, gy, gy2, x1, gy1, xt, gyt, gp, gp2, ga, gm, idx, ids, ge, lx, lg, nx, ng):
        aten = torch.ops.aten
        c1 = aten.convolution_backward.default(gy, x, self.w1, [4], [1, 1], [1, 1], [1, 1], False,
                                               [0, 0], 1, [True, True, True])
        x4 = torch.cat([x, x[:, :1]], 1).repeat(1, 1, 2, 2)[:, :, :9, :9]
        c2 = aten.convolution_backward.default(gy2, x4, self.w2, [6], [2, 2], [1, 1], [2, 2],
                                               False, [0, 0], 2, [True, True, False])
        c3 = aten.convolution_backward.default(gy1, x1, self.w3, [4], [2], [0], [1], False, [0],
                                               1, [False, True, True])
        ct = aten.convolution_backward.default(gyt, xt, self.wt, [3], [2, 2], [1, 1], [1, 1], True,
                                               [1, 1], 1, [True, True, True])
        ap = aten.avg_pool2d_backward.default(gp, x, [3, 3], [2, 2], [1, 1], True, False, None)
        ap2 = aten.avg_pool2d_backward.default(gp2, x, [2, 2], [2, 2], [0, 0], False, True, 5)
        aa = aten._adaptive_avg_pool2d_backward.default(ga, x[..., :5])
        mp = aten.max_pool2d_with_indices_backward.default(gm, x, [3, 3], [2, 2], [1, 1], [1, 1],
                                                           False, idx)
        e1 = aten.embedding_dense_backward.default(ge, ids, 7, 2, True)
        e2 = aten.embedding_dense_backward.default(ge, ids, 7, -1, False)
        _, mean, rstd = aten.native_layer_norm.default(lx, [6], self.lw, self.lb, 1e-5)
        ln = aten.native_layer_norm_backward.default(lg, lx, [6], mean, rstd, self.lw, self.lb,
                                                     [True, True, True])
        _, gmean, grstd = aten.native_group_norm.default(nx, self.lw, self.lb, 2, 6, 20, 3, 1e-5)
        gn = aten.native_group_norm_backward.default(ng, nx, gmean, grstd, self.lw, 2, 6, 20, 3,
                                                     [True, True, True])
        return (c1[0], c1[1], c1[2], c2[0], c2[1], c3[1], c3[2], ct[0], ct[1], ct[2], ap, ap2, aa,
                mp, e1, e2, ln[0], ln[1], ln[2], gn[0], gn[1], gn[2])


class BatchNormTrain(nn.Module):
    """BatchNorm2d in train() as torch.export keeps it (batch_norm with training=True, updating
    the running statistics in place, which the later reads see), and the Core ATen training
    forms called directly: _native_batch_norm_legit (.default on buffers, .no_stats) and
    _native_batch_norm_legit_functional (run_decompositions()' form)."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(3)
        with torch.no_grad():
            self.bn.weight.copy_(torch.linspace(0.5, 1.5, 3))
            self.bn.bias.copy_(torch.linspace(-0.2, 0.3, 3))
        self.register_buffer("rm", torch.linspace(-0.1, 0.1, 3))
        self.register_buffer("rv", torch.linspace(0.8, 1.2, 3))

    def forward(self, x):
        aten = torch.ops.aten
        y = self.bn(x)
        a = aten._native_batch_norm_legit.default(x * 2, None, None, self.rm, self.rv, True, 0.2,
                                                  1e-5)
        b = aten._native_batch_norm_legit.no_stats(x, self.bn.weight, None, True, 0.1, 1e-3)
        f = aten._native_batch_norm_legit_functional.default(x[:, :, 1:], None, self.bn.bias,
                                                             self.rm * 1, self.rv, True, 0.1, 1e-5)
        return (y, self.bn.running_mean * 1, self.bn.running_var * 1, a[0], a[1], a[2],
                self.rm * 1, self.rv * 1, b[0], b[1], b[2], f[0], f[1], f[2], f[3], f[4])


class TrainMisc(nn.Module):
    """randperm (anvil's own stream: checked as a permutation through sort and a
    permutation-invariant sum), _embedding_bag called directly (mean with padding_idx and max
    with include_last_offset: all four outputs; sum with per_sample_weights: output and
    offset2bag, since anvil's bag_size holds the counts where PyTorch's sum fast path leaves
    zeros, as for embedding_bag.padding_idx) and the FFT forms run_decompositions() leaves,
    _fft_r2c (one-sided over one dim and over two, full over one) and _fft_c2r."""

    def forward(self, x, w, ids, offs, offs_last, psw, s):
        aten = torch.ops.aten
        p = torch.randperm(6)
        b0 = aten._embedding_bag.default(w, ids, offs, False, 0, False, psw, False, -1)
        b1 = aten._embedding_bag.default(w, ids, offs, False, 1, False, None, False, 2)
        b2 = aten._embedding_bag.default(w, ids, offs_last, False, 2, False, None, True, -1)
        r1 = aten._fft_r2c.default(s, [2], 0, True)
        r2 = aten._fft_r2c.default(s, [1, 2], 2, True)
        r3 = aten._fft_r2c.default(s, [1], 1, False)
        c1 = aten._fft_c2r.default(r1, [2], 2, 7)
        c2 = aten._fft_c2r.default(r2, [1, 2], 0, 7)
        return (torch.sort(p).values, x[p].sum(0), b0[0], b0[1], b1[0], b1[1], b1[2], b1[3],
                b2[0], b2[1], b2[2], b2[3], torch.view_as_real(r1), torch.view_as_real(r2),
                torch.view_as_real(r3), c1, c2)


def main():
    os.makedirs(OUT, exist_ok=True)
    g = torch.Generator().manual_seed(18)

    only = set(sys.argv[2].split(",")) if len(sys.argv) > 2 else None
    global export
    full_export = export

    def export(name, *args, **kwargs):  # noqa: F811 (the --only filter)
        if only is None or name in only:
            full_export(name, *args, **kwargs)

    def r(*shape):
        return torch.randn(*shape, generator=g)

    x = r(3, 5)
    export("ops_inplace", InPlace(), (x, x > 0.8))
    export("ops_pad", Pad(), (r(2, 3, 6), r(2, 3, 5, 6)))
    b = Dim("b", min=2, max=16)
    export("ops_pad_dynamic", PadDynamic(), (r(2, 3, 5, 6),), dynamic_shapes=({0: b},),
           extra=[(r(5, 3, 5, 6),)])
    export("ops_roll", Roll(), (r(2, 4, 5),))
    export("ops_norms", Norms(), (r(3, 4, 6) * 2,))
    export("ops_addc", AddC(), (r(2, 3), r(3), r(2, 1)))
    export("ops_views", Views(), (r(4, 3), r(2, 6), r(3, 5)))
    s = Dim("s", min=2, max=64)
    export("ops_no_grad", NoGrad(), (r(2, 5, 8),), dynamic_shapes=({1: s},),
           extra=[(r(2, 17, 8),)])
    torch.manual_seed(18)
    export("ops_conv_norms", ConvNorms(), (r(2, 2, 33),))
    export("ops_attention_view", Attention(), (r(2, 5, 16),))
    export("ops_upsample", Upsample(), (r(2, 3, 5, 6),))
    x = r(4, 6)
    export("ops_reductions_more", ReductionsMore(), (x, x > 0.3))
    export("ops_core_forms", CoreForms(), (x * 2, r(2, 6, 4, 5), x > 0, r(12)))
    torch.manual_seed(19)
    export("ops_strides", Strides(), (r(2, 4, 5, 4), r(2, 4, 5, 4) > 0.3))
    # its own generator: the inputs stay the same when cases are added above
    gp = torch.Generator().manual_seed(18)
    x = torch.randn(3, 5, generator=gp) * 1.5
    x[0, 1], x[1, 2], x[2, 3], x[0, 4] = float("nan"), float("inf"), float("-inf"), -0.0
    y = torch.randn(3, 5, generator=gp)
    i = torch.randint(-2, 5, (3, 5), generator=gp)
    j = torch.randint(1, 6, (3, 5), generator=gp)   # divisors: no integer division by zero
    lo = torch.randn(5, generator=gp) * 0.5 - 0.5
    lo[2] = float("nan")
    hi = torch.randn(3, 1, generator=gp) * 0.5 + 0.5
    export("ops_pointwise_more", PointwiseMore(), (x, y, i, j, lo, hi))
    # their own generator: the inputs of the cases above stay the same
    gq = torch.Generator().manual_seed(21)
    x4 = torch.randn(2, 3, 7, 8, generator=gq)
    x4[0, 1, 2, 3] = float("nan")
    x4[1, 0, 4:6, 4:6] = 1.25  # equal maxima: the first one's index
    x5 = torch.randn(2, 2, 5, 6, 7, generator=gq)
    grid = torch.rand(2, 4, 5, 2, generator=gq) * 2.8 - 1.4  # some points outside [-1, 1]
    cols = torch.randn(2, 2 * 6, 3 * 4, generator=gq)
    export("ops_pool_sample", PoolSample(), (x4, x5, grid, cols))
    a = torch.randn(2, 1, 4, 5, generator=gq)
    b = torch.randn(3, 6, 5, generator=gq)
    b[0, 2] = a[1, 0, 3]  # a zero distance
    a[0, 0, 1, 2] = b[1, 4, 2]  # equal entries for p = 0
    c = torch.randn(7, 4, generator=gq)
    export("ops_dist", Dist(), (a, b, c))
    nb = Dim("nb", min=1, max=8)
    dyn = (torch.randn(2, 3, 6, 7, generator=gq), torch.randn(2, 2, 3, 4, 5, generator=gq),
           torch.rand(2, 3, 4, 2, generator=gq) * 2.4 - 1.2, torch.randn(2, 5, 3, generator=gq))
    more = (torch.randn(3, 3, 6, 7, generator=gq), torch.randn(3, 2, 3, 4, 5, generator=gq),
            torch.rand(3, 3, 4, 2, generator=gq) * 2.4 - 1.2, torch.randn(3, 5, 3, generator=gq))
    export("ops_pool_sample_dynamic", PoolSampleDynamic(), dyn,
           dynamic_shapes=({0: nb}, {0: nb}, {0: nb}, {0: nb}), extra=[more])
    # training ops, each with its own generator
    gb = torch.Generator().manual_seed(21)

    def rb(*shape):
        return torch.randn(*shape, generator=gb)

    x = rb(2, 3, 7, 7)
    _, idx = F.max_pool2d(x, 3, 2, 1, return_indices=True)
    ids = torch.tensor([[0, 2, 5, 2, 6], [1, 2, 2, 3, 0]])
    export("ops_backward", Backward(),
           (x, rb(2, 4, 7, 7), rb(2, 6, 4, 4), rb(2, 3, 10), rb(2, 4, 4), rb(2, 4, 5, 5),
            rb(2, 3, 10, 10), rb(2, 3, 4, 4), rb(2, 3, 3, 3), rb(2, 3, 3, 2), rb(2, 3, 4, 4), idx,
            ids, rb(2, 5, 4), rb(3, 4, 6), rb(3, 4, 6), rb(2, 6, 4, 5), rb(2, 6, 4, 5)))
    export("ops_batchnorm_train", BatchNormTrain(), (rb(4, 3, 5, 5) * 2 + 0.5,), train=True)
    gm = torch.Generator().manual_seed(22)
    ids = torch.tensor([1, 2, 4, 2, 0, 2, 3, 3])
    offs = torch.tensor([0, 3, 3, 6])
    export("ops_train_misc", TrainMisc(),
           (torch.randn(6, 3, generator=gm), torch.randn(5, 4, generator=gm), ids, offs,
            torch.tensor([0, 3, 3, 6, 8]), torch.rand(8, generator=gm), torch.randn(2, 5, 7, generator=gm)))


if __name__ == "__main__":
    main()
