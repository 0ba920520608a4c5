"""Every fixture with PyTorch's reference inputs and outputs, compiled with anvil.compile and run
through anvil.load: NumPy arrays in and out, and torch tensors in and out where torch is
installed. Fixtures with dynamic shapes also run their other recorded sizes (suffix _0, _1)."""

import numpy as np
import pytest

import anvil
from conftest import fixtures_with_references, read_set, rel_error

FIXTURES = fixtures_with_references()


def test_the_fixture_set_is_found():
    # a wrong fixtures folder must fail here, not pass by running nothing
    for name in ("mlp_small", "mlp_dynbatch", "small_cnn", "const_and_buffer", "bert_tiny"):
        assert name in FIXTURES, f"{name} missing from {FIXTURES}"


def variants(name):
    return [s for s in ("", "_0", "_1") if read_set(name, "in", s)]


@pytest.mark.parametrize("name", FIXTURES)
def test_numpy_matches_pytorch(name, compiled):
    model = anvil.load(compiled(name))
    assert len(model.input_specs) == len(read_set(name, "in"))
    for suffix in variants(name):
        ins, want = read_set(name, "in", suffix), read_set(name, "out", suffix)
        got = model.run(*ins)
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            assert isinstance(g, np.ndarray), f"{name}{suffix} output {k}: {type(g)}"
            assert g.dtype == w.dtype, f"{name}{suffix} output {k}"
            assert rel_error(g, w) <= 1e-4, f"{name}{suffix} output {k}"
        if name == "const_and_buffer":
            break  # a mutable buffer: the recorded outputs are those of the first run


@pytest.mark.parametrize("name", FIXTURES)
def test_torch_matches_pytorch(name, compiled):
    torch = pytest.importorskip("torch")
    model = anvil.load(compiled(name))
    for suffix in variants(name):
        ins = [torch.from_numpy(a) for a in read_set(name, "in", suffix)]
        want = read_set(name, "out", suffix)
        got = model.run(*ins)
        for k, (g, w) in enumerate(zip(got, want)):
            assert isinstance(g, torch.Tensor), f"{name}{suffix} output {k}: {type(g)}"
            assert rel_error(g.numpy(), w) <= 1e-4, f"{name}{suffix} output {k}"
        if name == "const_and_buffer":
            break


def cuda_available():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.skipif(not cuda_available(), reason="needs torch with a CUDA GPU")
@pytest.mark.parametrize("name", FIXTURES)
def test_cuda_tensors_stay_on_the_gpu(name, compiled):
    import torch

    model = anvil.load(compiled(name, target="cuda-sm90"), device="cuda")
    side = torch.cuda.Stream()
    for suffix in variants(name):
        with torch.cuda.stream(side):
            # inputs written on a non-default current stream: anvil must see them finished
            ins = [torch.from_numpy(a).cuda().mul_(1) for a in read_set(name, "in", suffix)]
            got = model.run(*ins)
        want = read_set(name, "out", suffix)
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want)):
            assert g.is_cuda, f"{name}{suffix} output {k} left the GPU"
            assert rel_error(g.cpu().numpy(), w) <= 1e-3, f"{name}{suffix} output {k}"
        if name == "const_and_buffer":
            return  # a mutable buffer: the recorded outputs are those of the first run
    # host inputs on a CUDA package: copied over and back (outputs on the host)
    host = model.run(*read_set(name, "in"))
    assert isinstance(host[0], np.ndarray)