"""anvil.compile: a .pt2 path, a torch.export.ExportedProgram or an nn.Module (exported here) into
a .anvil package, through the C++ compile driver (driver::compile_pt2). torch is imported only
when the caller hands over a torch object."""

import os
import sys
import tempfile
import threading
import time

from . import _anvil

_HERE = os.path.dirname(os.path.abspath(__file__))
# The wheel carries the headers generated code includes; a build tree uses the source tree's.
_INCLUDE_DIR = os.path.join(_HERE, "include")
if not os.path.isfile(os.path.join(_INCLUDE_DIR, "anvil", "anvil_rt.h")):
    _INCLUDE_DIR = ""

_OPTIONS = ("args", "kwargs", "dynamic_shapes", "strict", "cache_dir", "jobs", "emit_source",
            "autotune", "progress", "progress_after", "report")


def targets():
    """The target names anvil.compile accepts (as `anvil compile --target` names them)."""
    return _anvil.target_names()


def _is_exported_program(obj):
    ep = sys.modules.get("torch.export")
    return ep is not None and isinstance(obj, ep.ExportedProgram)


def _is_module(obj):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.nn.Module)


def _export(module, args, kwargs, dynamic_shapes, strict):
    import torch  # only here: a caller that passes a module has torch

    if args is None:
        raise ValueError("anvil.compile: an nn.Module needs example inputs: "
                         "anvil.compile(module, args=(x,), dynamic_shapes=...)")
    if not isinstance(args, tuple):
        args = (args,)
    return torch.export.export(module, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes,
                               strict=strict)


class _Progress:
    """Reports a compile that runs long: after `after` seconds, a line on stderr every few
    seconds (progress=None), or calls progress(elapsed_seconds) every second (a callable)."""

    def __init__(self, what, progress, after):
        self._what, self._progress, self._after = what, progress, after
        self._done = threading.Event()
        self._start = time.monotonic()
        self._reported = False
        self._thread = None
        if progress is None or callable(progress):
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()

    def _loop(self):
        interval = 1.0 if callable(self._progress) else 5.0
        if self._done.wait(self._after):
            return
        while True:
            elapsed = time.monotonic() - self._start
            if callable(self._progress):
                self._progress(elapsed)
            else:
                print(f"anvil: compiling {self._what}: {elapsed:.0f} s so far", file=sys.stderr,
                      flush=True)
                self._reported = True
            if self._done.wait(interval):
                return

    def finish(self, ok):
        self._done.set()
        if self._thread:
            self._thread.join()
        if self._reported and ok:
            print(f"anvil: compiled {self._what} in {time.monotonic() - self._start:.1f} s",
                  file=sys.stderr, flush=True)


def compile(src, path=None, target="native", **options):
    """Compiles `src` into a .anvil package and returns the package's path.

    src: a .pt2 path (torch.export.save), a torch.export.ExportedProgram, or an nn.Module with
      its example inputs in args= (and kwargs=, dynamic_shapes=, strict= as torch.export.export
      takes them; the export is done here).
    path: where to write the package; None: anvil's package cache (ANVIL_CACHE_DIR or
      ~/.cache/anvil), where the same .pt2 with the same target is compiled once.
    target: "native" (this CPU), "x86_64-avx2", "x86_64-avx512", "x86_64", "cuda-sm90"...
      (anvil.targets()).
    Options: cache_dir (object and package cache), jobs (compiler processes), emit_source (a
      folder to write the generated sources to), autotune ("off", "fast", "max": GEMM
      autotuning), progress (None: a line on stderr every 5 s once a compile passes
      progress_after seconds, default 3; True: the build's own progress bar or lines; False:
      silent; a callable: called with the elapsed seconds every second after progress_after),
      report (True: return (path, report), the report a dict of kernels, sizes and seconds per
      phase as `anvil compile` prints them).
    Errors in the model (an unsupported op, a failing build) raise anvil.Error with anvil's
    message.
    """
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise TypeError(f"anvil.compile: unknown option(s) {', '.join(unknown)} "
                        f"(options: {', '.join(_OPTIONS)})")
    names = _anvil.target_names()
    if target not in names:
        raise ValueError(f"anvil.compile: unknown target {target!r} (targets: {', '.join(names)})")
    progress = options.get("progress")
    if not (progress is None or isinstance(progress, bool) or callable(progress)):
        raise TypeError("anvil.compile: progress must be None, True, False or a callable, "
                        f"got {type(progress).__name__}")
    out = "" if path is None else os.fspath(path)
    if out and os.path.isdir(out):
        raise ValueError(f"anvil.compile: path {out!r} is a directory (expected a package file "
                         "name such as m.anvil)")

    tmp = None
    try:
        if isinstance(src, (str, bytes, os.PathLike)):
            pt2 = os.fsdecode(src)
            if not os.path.isfile(pt2):
                raise FileNotFoundError(f"anvil.compile: no .pt2 file at {pt2!r}")
            what = os.path.basename(pt2)
        else:
            if _is_module(src):
                src = _export(src, options.get("args"), options.get("kwargs"),
                              options.get("dynamic_shapes"), options.get("strict", False))
            elif not _is_exported_program(src):
                raise TypeError("anvil.compile: src must be a .pt2 path, a "
                                "torch.export.ExportedProgram or an nn.Module (with args=), got "
                                f"{type(src).__name__}")
            import torch

            fd, tmp = tempfile.mkstemp(prefix="anvil_export_", suffix=".pt2")
            os.close(fd)
            torch.export.save(src, tmp)
            pt2, what = tmp, type(src).__name__
        watch = _Progress(f"{what} (target {target})", progress, options.get("progress_after", 3.0))
        ok = False
        try:
            report = _anvil.compile_pt2(
                pt2, out, target=target, cache_dir=os.fspath(options.get("cache_dir") or ""),
                jobs=int(options.get("jobs") or 0),
                emit_source=os.fspath(options.get("emit_source") or ""),
                include_dir=_INCLUDE_DIR, progress="auto" if progress is True else "quiet",
                autotune=options.get("autotune") or "")
            ok = True
        finally:
            watch.finish(ok)
    finally:
        if tmp:
            os.unlink(tmp)
    if options.get("report"):
        return report["package_path"], report
    return report["package_path"]
