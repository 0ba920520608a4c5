#!/usr/bin/env python3
"""Rewrites a small static-shape .pt2 (a tensor-parallel block such as tp_overlap: x f32[16, 64],
hidden 256) at a benchmark's size: every dim equal to one of OLD gets its NEW (strides made
contiguous again), the dtype of every floating tensor may change (--dtype bf16 / fp16 / fp32),
and every weight is refilled with seeded normal values (std 0.02) of its new shape. Only the
archive's JSON and weight files change (no torch needed); the sample inputs are left as they
were (anvil does not read them).
    scale_tp_pt2.py IN.pt2 OUT.pt2 OLD=NEW [OLD=NEW ...] [--dtype bf16]
e.g. scale_tp_pt2.py tp_overlap.pt2 big.pt2 16=8192 64=4096 256=8192 --dtype bf16
"""
import json
import sys
import zipfile

import numpy as np

# torch.export's ScalarType codes of the floating dtypes, and numpy's storage of each
CODES = {"fp32": 7, "fp16": 6, "bf16": 13}
FLOATS = set(CODES.values()) | {8}


def rewrite_meta(meta, dims, code):
    sizes = [dims.get(s["as_int"], s["as_int"]) for s in meta["sizes"]]
    meta["sizes"] = [{"as_int": v} for v in sizes]
    strides, step = [], 1
    for v in reversed(sizes):
        strides.insert(0, {"as_int": step})
        step *= v
    meta["strides"] = strides
    if code is not None and meta["dtype"] in FLOATS:
        meta["dtype"] = code
    return sizes


def weight_bytes(sizes, code, rng):
    v = rng.standard_normal(int(np.prod(sizes)) if sizes else 1).astype(np.float32) * 0.02
    if code == CODES["bf16"]:
        return (v.view(np.uint32) >> 16).astype(np.uint16).tobytes()  # truncated to bf16
    if code == CODES["fp16"]:
        return v.astype(np.float16).tobytes()
    return v.tobytes()


def main():
    args = sys.argv[1:]
    code = None
    if "--dtype" in args:
        i = args.index("--dtype")
        code = CODES[args[i + 1]]
        del args[i:i + 2]
    src, dst = args[0], args[1]
    dims = {int(a.split("=")[0]): int(a.split("=")[1]) for a in args[2:]}
    zin = zipfile.ZipFile(src)
    names = zin.namelist()
    mname = [n for n in names if n.endswith("models/model.json")][0]
    wname = [n for n in names if n.endswith("weights/model_weights_config.json")][0]
    model = json.loads(zin.read(mname))
    for tv in model["graph_module"]["graph"]["tensor_values"].values():
        rewrite_meta(tv, dims, code)
    wcfg = json.loads(zin.read(wname))
    rng = np.random.default_rng(0)
    files = {}
    for entry in wcfg["config"].values():
        sizes = rewrite_meta(entry["tensor_meta"], dims, code)
        dtype = entry["tensor_meta"]["dtype"]
        files[wname.rsplit("/", 1)[0] + "/" + entry["path_name"]] = weight_bytes(sizes, dtype, rng)
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == mname:
                data = json.dumps(model).encode()
            elif info.filename == wname:
                data = json.dumps(wcfg).encode()
            elif info.filename in files:
                data = files[info.filename]
            zout.writestr(info.filename, data)
    print(f"{dst}: dims {dims}, {len(files)} weights refilled", file=sys.stderr)


if __name__ == "__main__":
    main()
