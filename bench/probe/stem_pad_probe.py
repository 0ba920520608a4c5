"""How fast cuDNN runs a vision stem (7x7 stride 2, 3 -> 64 channels, bf16, channels-last) with
its 3 input channels as they are against zero-padded to 4 or 8 (issue 19: ResNet's and
DenseNet's stems took ~0.3 ms of a 1.4 ms ResNet-50 at batch 32 on an H200).

Run on the GPU machine: python3 bench/probe/stem_pad_probe.py [--batch 32]
Prints µs per call (a CUDA graph of 20 calls, cuDNN benchmark mode) and the max difference of
each padded form from the unpadded one.
"""
import argparse

import torch


def timed(fn, iters=20, rounds=10):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(iters):
            fn()
    best = float("inf")
    for _ in range(rounds):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        best = min(best, a.elapsed_time(b) * 1000 / iters)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    dev = "cuda"
    dt = torch.bfloat16
    x = torch.randn(args.batch, 3, 224, 224, device=dev, dtype=dt)
    w = torch.randn(64, 3, 7, 7, device=dev, dtype=dt) * 0.1
    ref = torch.nn.functional.conv2d(x, w, stride=2, padding=3)
    for layout in ("nchw", "nhwc"):
        for cp in (3, 4, 8):
            xp = torch.zeros(args.batch, cp, 224, 224, device=dev, dtype=dt)
            xp[:, :3] = x
            wp = torch.zeros(64, cp, 7, 7, device=dev, dtype=dt)
            wp[:, :3] = w
            if layout == "nhwc":
                xp = xp.contiguous(memory_format=torch.channels_last)
                wp = wp.contiguous(memory_format=torch.channels_last)
            out = torch.nn.functional.conv2d(xp, wp, stride=2, padding=3)
            err = (out.float() - ref.float()).abs().max().item()
            us = timed(lambda: torch.nn.functional.conv2d(xp, wp, stride=2, padding=3))
            print(f"{layout} C={cp}: {us:8.1f} us  max|diff| {err:.3g}  out {out.is_contiguous(memory_format=torch.channels_last) and 'nhwc' or 'nchw'}")
    # what the padding costs: an NCHW image to padded NHWC
    for cp in (3, 4, 8):
        buf = torch.zeros(args.batch, 224, 224, cp, device=dev, dtype=dt)
        us = timed(lambda: buf[..., :3].copy_(x.permute(0, 2, 3, 1)))
        print(f"copy NCHW -> NHWC C={cp}: {us:8.1f} us")


if __name__ == "__main__":
    main()
