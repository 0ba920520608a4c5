"""anvil: compile PyTorch exports ahead of time and run them without libtorch.

    import anvil
    pkg = anvil.compile("model.pt2")          # or an ExportedProgram, or nn.Module + args=
    model = anvil.load(pkg)                    # anvil.Model over runtime::Model
    y = model(x)                               # NumPy in -> NumPy out, torch in -> torch out

The C++ API is bound in anvil._anvil (nanobind): nothing runs through the CLI. See docs/python.md.
"""

import os as _os

from . import _anvil
from ._anvil import Error, Model
from ._compile import compile, targets

__all__ = ["Error", "Model", "compile", "load", "targets", "__version__"]
__version__ = _anvil.version()

_HERE = _os.path.dirname(_os.path.abspath(__file__))


def _find_gemm_time():
    """anvil-gemm-time (the GEMM autotuner's timing child): in the wheel beside this file, in a
    build tree at build/bin (this package being build/python/anvil)."""
    for p in (_os.path.join(_HERE, "anvil-gemm-time"),
              _os.path.join(_HERE, "..", "..", "bin", "anvil-gemm-time")):
        if _os.path.isfile(p) and _os.access(p, _os.X_OK):
            return _os.path.abspath(p)
    return None


if not _os.environ.get("ANVIL_GEMM_TIME"):
    _gemm_time = _find_gemm_time()
    if _gemm_time:
        _os.environ["ANVIL_GEMM_TIME"] = _gemm_time


def load(path, device="cpu", num_runners=1, num_threads=0, cuda_graphs=True, backend=None):
    """Loads a compiled .anvil package and returns an anvil.Model.

    device: "cpu", "cuda" or "cuda:N" (a package runs on the device type it was compiled for),
    or "auto" for the package's own device. num_runners: runs served at once (each with its own
    scratch memory; more callers wait). num_threads: threads per run (0: ANVIL_NUM_THREADS or all).
    backend: for packages with collectives, the process-group backend ("gloo", "mpi", "nccl";
    default ANVIL_BACKEND or gloo); the world is joined at load from the launcher's environment
    (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT as torchrun and `anvil launch` set them, or
    mpirun's), exactly as `anvil run` does.
    """
    path = _os.fspath(path)
    if device == "auto":
        device = _anvil.package_device(path)
    if not isinstance(num_runners, int) or num_runners < 1:
        raise ValueError(f"anvil.load: num_runners must be an int >= 1, got {num_runners!r}")
    if backend is not None:
        if backend not in ("gloo", "mpi", "nccl"):
            raise ValueError(f"anvil.load: backend must be gloo, mpi or nccl, got {backend!r}")
        _os.environ["ANVIL_BACKEND"] = backend
    return Model.load(path, device=device, num_runners=num_runners, num_threads=num_threads,
                      cuda_graphs=cuda_graphs)
