"""Weights as formulas of their element index, for fixtures whose weights are too big for the
repository (spec/aot.md cases 49 and 83). Every floating-point parameter or buffer is

    h = (i * 2654435761 + seed * 40503 + 12345) mod 2^32;  v = offset + scale * (h / 2^32 - 0.5)

computed in float64 and rounded once to the tensor's dtype, which a C++ test reproduces bit for
bit. save_zeroed() writes the exported archive with those entries zeroed and deflated (a few KB
per 100 MB) plus NAME.weights.json listing entry -> seed, scale, offset, element count, dtype."""
import json
import os
import zipfile

import torch

FORMULA = ("v = offset + scale * (((i * 2654435761 + seed * 40503 + 12345) mod 2^32) / 2^32 "
           "- 0.5), computed in float64, then rounded to dtype")


def formula(n, seed, scale, offset, dtype=torch.float64):
    i = torch.arange(n, dtype=torch.int64)
    h = (i * 2654435761 + (seed * 40503 + 12345)) % (2 ** 32)
    return (offset + scale * (h.double() / 2 ** 32 - 0.5)).to(dtype)


def fill(model, scale_of):
    """Sets every floating-point tensor of model.state_dict() (sorted by name; the position is
    the seed) to its formula; scale_of(fqn, tensor) -> (scale, offset). Returns the params."""
    params = {}
    with torch.no_grad():
        for seed, (fqn, t) in enumerate(sorted(model.state_dict().items())):
            if not t.is_floating_point():
                continue
            scale, off = scale_of(fqn, t)
            t.copy_(formula(t.numel(), seed, scale, off, t.dtype).view_as(t))
            params[fqn] = dict(seed=seed, scale=scale, offset=off, numel=t.numel(),
                               dtype=str(t.dtype).replace("torch.", ""))
    return params


def save_zeroed(ep, model, params, outdir, name, inputs):
    """torch.export.save(ep) with the formula entries zeroed and deflated, and the JSON sidecar;
    `inputs` is a list of dict(shape, seed, scale, offset, dtype) for the test's inputs."""
    full = os.path.join(outdir, name + ".full.pt2")
    torch.export.save(ep, full)
    by_bytes = {}
    for k, v in model.state_dict().items():
        if k in params:
            by_bytes.setdefault(v.contiguous().numpy().tobytes(), []).append(k)
    entries = []
    with zipfile.ZipFile(full) as zin, \
            zipfile.ZipFile(os.path.join(outdir, name + ".pt2"), "w", allowZip64=True) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            fqns = by_bytes.get(data) if len(data) >= 64 else None
            if fqns:
                entries.append(dict(entry=info.filename, fqn=fqns[0], **params[fqns[0]]))
                zout.writestr(info.filename, bytes(len(data)), compress_type=zipfile.ZIP_DEFLATED)
            else:
                zout.writestr(info, data, compress_type=zipfile.ZIP_STORED)
    missing = sorted(set(params) - {e["fqn"] for e in entries})
    print(name, "weight entries:", len(entries), "params:", len(params), "unmatched:", missing[:5])
    with open(os.path.join(outdir, name + ".weights.json"), "w") as f:
        json.dump(dict(formula=FORMULA, inputs=inputs, entries=entries), f, indent=1)
    os.remove(full)
    print(name, "pt2 size", os.path.getsize(os.path.join(outdir, name + ".pt2")))
