#!/usr/bin/env python3
"""Rewrites a static-shape .pt2 for a larger batch: every tensor value whose dim 0 equals the
first user input's dim 0 gets dim 0 = NEW (strides stay contiguous). Weights are unchanged.
Only the JSON of the archive is edited (no torch needed). For benchmarks of graphs exported
with a small batch (tp_overlap: x f32[16, 64]).
    scale_batch_pt2.py IN.pt2 OUT.pt2 NEW
"""
import json
import sys
import zipfile


def main():
    src, dst, new = sys.argv[1], sys.argv[2], int(sys.argv[3])
    zin = zipfile.ZipFile(src)
    name = [n for n in zin.namelist() if n.endswith("models/model.json")][0]
    model = json.loads(zin.read(name))
    graph = model["graph_module"]["graph"]
    first = None
    for spec in model["graph_module"]["signature"]["input_specs"]:
        if "user_input" in spec:
            first = spec["user_input"]["arg"]["as_tensor"]["name"]
            break
    old = graph["tensor_values"][first]["sizes"][0]["as_int"]
    changed = 0
    for tv in graph["tensor_values"].values():
        sizes = tv["sizes"]
        if sizes and sizes[0].get("as_int") == old:
            sizes[0] = {"as_int": new}
            changed += 1
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == name:
                data = json.dumps(model).encode()
            zout.writestr(info, data)
    print(f"{dst}: dim 0 {old} -> {new} in {changed} tensor values", file=sys.stderr)


if __name__ == "__main__":
    main()
