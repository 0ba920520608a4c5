#!/usr/bin/env python3
"""Summarises `anvil bench --profile` output: ms per run by step kind and by what the steps
compute (GEMMs, attention, convolutions, layer norms, other loop kernels), and the slowest steps.

    anvil bench PKG -i IN.npy --threads N --profile > prof.txt
    python3 bench/profile_summary.py prof.txt [--top 8]
"""
import argparse
import collections
import re
import sys

STEP = re.compile(r"\s+(\S+)\s+(loop|gemm|extern)\s+([\d.]+)\s+[\d.]+%\s+\d+\s+[\d.]+\s+(.*)")


def group(kind, nodes):
    if kind == "gemm":
        return "gemm"
    if "scaled_dot_product_attention" in nodes:
        return "attention"
    if "conv" in nodes:
        return "conv"
    if "layer_norm" in nodes:
        return "layer_norm (+ what fused into it)"
    if "gelu" in nodes:
        return "gelu loops"
    return kind + " other"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args()
    text = open(a.file).read() if a.file != "-" else sys.stdin.read()
    p50 = re.search(r"p50 ([\d.]+) ms", text)
    steps = []
    for line in text.splitlines():
        m = STEP.match(line)
        if m:
            steps.append((m.group(1), m.group(2), float(m.group(3)), m.group(4)))
    if not steps:
        print("no profile lines in", a.file)
        return
    by_kind, by_group = collections.Counter(), collections.Counter()
    for name, kind, ms, nodes in steps:
        by_kind[kind] += ms
        by_group[group(kind, nodes)] += ms
    total = sum(by_kind.values())
    print(f"p50 {p50.group(1) if p50 else '?'} ms; sum of steps {total:.2f} ms; " +
          ", ".join(f"{k} {v:.2f}" for k, v in by_kind.most_common()))
    print("  " + "; ".join(f"{k} {v:.2f}" for k, v in by_group.most_common()))
    for name, kind, ms, nodes in sorted(steps, key=lambda s: -s[2])[:a.top]:
        print(f"  {name:<8} {kind:<6} {ms:8.3f}  {nodes[:70]}")


if __name__ == "__main__":
    main()
