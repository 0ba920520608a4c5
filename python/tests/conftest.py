"""Shared helpers of the Python API tests: fixture paths, compiled fixture packages (compiled
once per session into a temporary folder), reference comparison as the C++ tests do it."""

import os
import pathlib

import numpy as np
import pytest

import anvil

REPO = pathlib.Path(os.environ.get("ANVIL_SOURCE_DIR",
                                   pathlib.Path(__file__).resolve().parents[2]))
FIXTURES = pathlib.Path(os.environ.get("ANVIL_FIXTURES_DIR", REPO / "tests" / "fixtures"))


def fixture(name):
    return FIXTURES / name


def read_set(name, kind, suffix=""):
    """NAME.in0.npy, NAME.in1.npy... (or out), with an optional variant suffix (_0, _1)."""
    out, k = [], 0
    while (FIXTURES / f"{name}.{kind}{k}{suffix}.npy").exists():
        out.append(np.load(FIXTURES / f"{name}.{kind}{k}{suffix}.npy"))
        k += 1
    return out


def fixtures_with_references():
    """Every top-level fixture with PyTorch's inputs and outputs beside it."""
    return sorted(p.stem for p in FIXTURES.glob("*.pt2")
                  if (FIXTURES / f"{p.stem}.in0.npy").exists()
                  and (FIXTURES / f"{p.stem}.out0.npy").exists())


def rel_error(got, want):
    """max |got - want| / max(1, max |want|): tests/codegen/harness.cpp's measure."""
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if got.size == 0:
        return 0.0
    scale = max(1.0, float(np.max(np.abs(want[np.isfinite(want)]), initial=0.0)))
    both_nan = np.isnan(got) & np.isnan(want)
    err = np.where(both_nan, 0.0, np.abs(got - want))
    return float(np.max(np.where(np.isnan(err), np.inf, err))) / scale


@pytest.fixture(scope="session")
def package_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("packages")


_compiled = {}


@pytest.fixture(scope="session")
def compiled(package_dir):
    """compiled(name) -> path of the fixture's package, compiled once per session through
    anvil.compile (objects come from anvil's object cache after the first run)."""

    def get(name, target="native"):
        key = (name, target)
        if key not in _compiled:
            _compiled[key] = anvil.compile(fixture(name + ".pt2"),
                                           package_dir / f"{name}.{target}.anvil", target=target)
        return _compiled[key]

    return get
