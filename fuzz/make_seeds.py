#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/*.cpp) from the repository's fixtures.

usage: fuzz/make_seeds.py OUT_DIR [--anvil-cli PATH] [--package FILE.anvil ...] [--max-seeds N]

OUT_DIR/<target>/ gets one file per seed:
  pt2       .pt2 fixtures in the structured entry form of fuzz/fuzz_util.h (weights as "<N"
            padding, JSON entries verbatim), plus the smallest archives as they are
  package   fuzz/seeds/package/* (checked in, small) and any --package given, structured
  npy       the small .npy fixtures and tests/core/data
  ir_parser graphs of the tests' IR texts (tests/ir) and, with --anvil-cli, `anvil inspect`
            of the small .pt2 fixtures
  tcp_store request scripts built from real TCPStore frames (see fuzz_tcp_store.cpp)
  dlpack    a few DLPack descriptions (see fuzz_dlpack.cpp)
Nothing here is large: the corpora are generated, not checked in.
"""
import argparse
import hashlib
import os
import re
import struct
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
KEEP_LITERAL = 2048  # entries larger than this (and not JSON) become zero padding
MAX_PT2_SEED = 65536  # larger graphs make slow inputs; the small fixtures cover the same code


def write_seed(out_dir, data):
    os.makedirs(out_dir, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(out_dir, name), "wb") as f:
        f.write(data)


def structured(path, keep=lambda name, size: size <= KEEP_LITERAL, shrink=lambda name: None):
    """The structured entry form of the zip at `path`; entries that `shrink` gives a size for
    are cut to that many bytes."""
    parts = []
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            data = z.read(info.filename)
            if shrink(info.filename) is not None:
                data = data[:shrink(info.filename)]
            if info.filename.endswith(".json") or keep(info.filename, len(data)):
                parts.append(b"=== " + info.filename.encode() + b"\n" + data)
            else:
                parts.append(b"=== %s <%d\n" % (info.filename.encode(), len(data)))
    return b"\n".join(parts)


def files_under(folder, suffix):
    for base, _, names in os.walk(folder):
        for n in sorted(names):
            if n.endswith(suffix):
                yield os.path.join(base, n)


def pt2_seeds(out, max_seeds):
    paths = sorted(files_under(FIXTURES, ".pt2"), key=os.path.getsize)
    kept = 0
    for p in paths:
        seed = structured(p)
        if len(seed) <= MAX_PT2_SEED and kept < max_seeds:
            write_seed(out, seed)
            kept += 1
    for p in paths[:3]:
        with open(p, "rb") as f:
            write_seed(out, f.read())


def package_seeds(out, packages):
    seed_dir = os.path.join(ROOT, "fuzz", "seeds", "package")
    for p in sorted(os.listdir(seed_dir)):
        with open(os.path.join(seed_dir, p), "rb") as f:
            write_seed(out, f.read())
    for p in packages:
        write_seed(out, package_seed(p))


def package_seed(path):
    """A package's structured form: the manifest, weights.bin (zeros when large), model.so and
    the sources cut short (Package::open checks only their CRCs, which the harness computes)."""
    keep = lambda name, size: name == "weights.bin" and size <= 8192
    shrink = lambda name: 64 if name == "model.so" or name.startswith("src/") else None
    return structured(path, keep, shrink)


def npy_seeds(out, max_seeds):
    paths = list(files_under(FIXTURES, ".npy")) + list(
        files_under(os.path.join(ROOT, "tests", "core", "data"), ".npy"))
    paths = [p for p in paths if os.path.getsize(p) <= 4096]
    seen = set()
    for p in sorted(paths, key=os.path.getsize):
        with open(p, "rb") as f:
            data = f.read()
        head = data[:128]  # one seed per distinct header is enough
        if head in seen or len(seen) >= max_seeds:
            continue
        seen.add(head)
        write_seed(out, data)


def ir_seeds(out, anvil_cli, max_seeds):
    raw = re.compile(r'R"(\w*)\((\s*graph \{.*?)\)\1"', re.S)
    for p in files_under(os.path.join(ROOT, "tests", "ir"), ".cpp"):
        with open(p, encoding="utf-8") as f:
            for m in raw.finditer(f.read()):
                write_seed(out, m.group(2).encode())
    if not anvil_cli:
        return
    paths = sorted(files_under(FIXTURES, ".pt2"), key=os.path.getsize)[:max_seeds]
    for p in paths:
        r = subprocess.run([anvil_cli, "inspect", p], capture_output=True)
        text = r.stdout
        if r.returncode == 0 and b"\ngraph {" in text:
            write_seed(out, text[text.index(b"\ngraph {") + 1:])


def frame(code, items):
    body = struct.pack("<BI", code, len(items))
    for s in items:
        body += struct.pack("<I", len(s)) + s
    return struct.pack("<I", len(body)) + body


def script(chunks):
    """A fuzz_tcp_store input: (client, bytes, hang_up) chunks, split at 255 bytes."""
    out = b""
    for client, data, hang_up in chunks:
        pieces = [data[i:i + 255] for i in range(0, len(data), 255)] or [b""]
        for k, piece in enumerate(pieces):
            last = k == len(pieces) - 1
            out += bytes([client | (0x80 if hang_up and last else 0), len(piece)]) + piece
    return out


def tcp_seeds(out):
    SET, GET, ADD, CHECK, WAIT, DELETE, NUMKEYS, PING = range(1, 9)
    write_seed(out, script([(0, frame(SET, [b"rank0", b"addr:1234"]), False),
                            (1, frame(GET, [b"rank0"]), False),
                            (1, frame(GET, [b"missing"]), False)]))
    write_seed(out, script([(0, frame(WAIT, [b"a", b"b"]), False),
                            (1, frame(SET, [b"a", b"1"]), False),
                            (2, frame(SET, [b"b", b"2"]), False),
                            (3, frame(CHECK, [b"a", b"b"]), False)]))
    write_seed(out, script([(0, frame(ADD, [b"count", b"1"]), False),
                            (1, frame(ADD, [b"count", b"-5"]), False),
                            (2, frame(ADD, [b"count", b"9223372036854775807"]), False),
                            (0, frame(NUMKEYS, []), False),
                            (0, frame(DELETE, [b"count"]), False),
                            (3, frame(PING, []), True)]))
    write_seed(out, script([(0, frame(WAIT, [b"x"]), True), (1, frame(SET, [b"x", b""]), False)]))
    big = frame(SET, [b"k" * 300, b"v" * 600])
    write_seed(out, script([(2, big[:100], False), (3, frame(PING, []), False),
                            (2, big[100:], False)]))
    write_seed(out, script([(0, frame(GET, [b"a", b"b"]), False), (0, frame(99, [b"?"]), False),
                            (1, b"\x05\x00\x00\x00\x01\xff\xff\xff\xff", False)]))


def dlpack_seeds(out):
    # flags, [device], dtype code, bits index, ndim, shape tags, stride tags, byte offset
    f32 = (2, 2)  # kDLFloat, 32 bits
    write_seed(out, bytes([0x01, *f32, 2, 3, 4, 0]))                    # f32[3, 4], contiguous
    write_seed(out, bytes([0x11, *f32, 2, 3, 4, 1, 3, 0]))              # transposed strides
    write_seed(out, bytes([0x91, 1, 0, 1, 5, 0]))                       # u8[5] as bool
    write_seed(out, bytes([0x11, 0, 3, 3, 2, 7, 0, 1, 0, 8]))           # i64 with a 0 stride
    write_seed(out, bytes([0x01, *f32, 1, 0, 0]))                       # empty tensor
    write_seed(out, bytes([0x51, *f32, 1, 0, 0]))                       # empty, null data
    write_seed(out, bytes([0x11, *f32, 2, 0xF0]) + struct.pack("<q", 1 << 40) +
               bytes([2, 0xF0]) + struct.pack("<q", 1 << 40) + bytes([1, 0]))  # huge extent


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--anvil-cli", help="anvil CLI of the main build (IR seeds by inspect)")
    ap.add_argument("--package", action="append", default=[], help="a .anvil to seed from")
    ap.add_argument("--max-seeds", type=int, default=200, help="seeds per fixture kind")
    args = ap.parse_args()
    pt2_seeds(os.path.join(args.out, "pt2"), args.max_seeds)
    package_seeds(os.path.join(args.out, "package"), args.package)
    npy_seeds(os.path.join(args.out, "npy"), args.max_seeds)
    ir_seeds(os.path.join(args.out, "ir_parser"), args.anvil_cli, args.max_seeds)
    tcp_seeds(os.path.join(args.out, "tcp_store"))
    dlpack_seeds(os.path.join(args.out, "dlpack"))
    for t in sorted(os.listdir(args.out)):
        print(f"{t}: {len(os.listdir(os.path.join(args.out, t)))} seeds", file=sys.stderr)


if __name__ == "__main__":
    main()
