"""anvil's Python API beyond the fixtures: zero-copy inputs and outputs, exceptions carrying
anvil's message, threads sharing one model, specs, constants, profiling, compile options."""

import os
import shutil
import sys
import threading
import time

import numpy as np
import pytest

import anvil
from conftest import fixture, read_set, rel_error


@pytest.fixture(scope="module")
def mlp(compiled):
    return compiled("mlp_small")


def test_outputs_and_inputs_are_not_copied(mlp):
    model = anvil.load(mlp)
    (x,) = read_set("mlp_small", "in")
    y = model(x)
    ins, outs = anvil._anvil._last_run_pointers()
    # anvil read the caller's buffer in place ...
    assert ins == [x.__array_interface__["data"][0]]
    # ... and the array handed back is the memory anvil wrote, owned by anvil's tensor
    assert outs == [y.__array_interface__["data"][0]]
    assert not y.flags.owndata
    assert y.flags.writeable
    # the output outlives the model that made it
    del model
    assert rel_error(y, read_set("mlp_small", "out")[0]) <= 1e-4


def test_torch_inputs_and_outputs_are_not_copied(mlp):
    torch = pytest.importorskip("torch")
    model = anvil.load(mlp)
    x = torch.from_numpy(read_set("mlp_small", "in")[0])
    y = model(x)
    ins, outs = anvil._anvil._last_run_pointers()
    assert isinstance(y, torch.Tensor)
    assert ins == [x.data_ptr()]
    assert outs == [y.data_ptr()]


def test_non_contiguous_input_gives_the_same_result(mlp):
    model = anvil.load(mlp)
    (x,) = read_set("mlp_small", "in")
    xf = np.asfortranarray(x)
    assert not xf.flags.c_contiguous
    np.testing.assert_array_equal(model(xf), model(x))
    read_only = x.copy()
    read_only.flags.writeable = False  # inputs the model does not write may be read-only
    np.testing.assert_array_equal(model(read_only), model(x))


def test_bad_inputs_raise_anvil_errors_naming_input_dim_expected_actual(mlp):
    model = anvil.load(mlp)
    (x,) = read_set("mlp_small", "in")
    with pytest.raises(anvil.Error) as e:
        model(x[:, :3].copy())
    msg = str(e.value)
    assert "input 'x'" in msg and "dim 1" in msg and "expected 256" in msg and "got 3" in msg
    with pytest.raises(anvil.Error) as e:
        model(x.astype(np.float64))
    msg = str(e.value)
    assert "input 'x'" in msg and "dtype" in msg and "expected f32" in msg and "got f64" in msg
    with pytest.raises(anvil.Error) as e:
        model(x, x)
    assert "number of inputs" in str(e.value) and "expected 1" in str(e.value)
    assert "got 2" in str(e.value)
    with pytest.raises(anvil.Error) as e:
        model([[1.0] * 256] * 8)
    assert "input 0 'x'" in str(e.value) and "not an array" in str(e.value)
    assert "got list" in str(e.value)
    assert isinstance(e.value, RuntimeError)
    # the model stays usable after errors
    assert rel_error(model(x), read_set("mlp_small", "out")[0]) <= 1e-4


def test_bad_arguments_to_compile_and_load(tmp_path):
    with pytest.raises(FileNotFoundError):
        anvil.compile(tmp_path / "missing.pt2")
    with pytest.raises(ValueError, match="unknown target 'riscv'.*native"):
        anvil.compile(fixture("mlp_small.pt2"), target="riscv")
    with pytest.raises(TypeError, match="unknown option.*optimise"):
        anvil.compile(fixture("mlp_small.pt2"), optimise=3)
    with pytest.raises(TypeError, match="src must be"):
        anvil.compile(42)
    not_pt2 = tmp_path / "garbage.pt2"
    not_pt2.write_bytes(b"not a zip archive")
    with pytest.raises(anvil.Error, match="garbage.pt2"):
        anvil.compile(not_pt2, tmp_path / "g.anvil")
    with pytest.raises(anvil.Error):
        anvil.load(tmp_path / "missing.anvil")
    with pytest.raises(ValueError, match="num_runners"):
        anvil.load(fixture("mlp_small.pt2"), num_runners=0)


def test_four_threads_on_one_model_give_identical_results(compiled):
    x = read_set("small_cnn", "in")[0]
    for runners in (1, 4):
        model = anvil.load(compiled("small_cnn"), num_runners=runners)
        want = model(x)
        results, errors = [[] for _ in range(4)], []

        def work(k):
            try:
                for _ in range(25):
                    results[k].append(model(x))
            except Exception as e:  # reported below: a thread's exception is otherwise lost
                errors.append(e)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        for k in range(4):
            assert len(results[k]) == 25
            for r in results[k]:
                np.testing.assert_array_equal(r, want)


def test_the_gil_is_released_while_a_model_runs(compiled):
    # With a switch interval far longer than the test, this thread gives up the GIL only where
    # code releases it. The other thread counts and yields the GIL after each step (sleep(0)),
    # so it counts only while this thread is inside a run that released the GIL.
    model = anvil.load(compiled("small_cnn"))
    x = read_set("small_cnn", "in")[0]
    stop, count = threading.Event(), [0]

    def counter():
        while not stop.is_set():
            count[0] += 1
            time.sleep(0)

    old = sys.getswitchinterval()
    sys.setswitchinterval(30.0)
    t = threading.Thread(target=counter)
    try:
        t.start()
        before = count[0]
        for _ in range(200):
            model(x)
        during = count[0] - before
    finally:
        stop.set()
        sys.setswitchinterval(old)
        t.join()
    assert during > 0


def test_specs_of_a_dynamic_model(compiled):
    model = anvil.load(compiled("mlp_dynbatch"))
    (spec,) = model.input_specs
    assert spec["name"] == "x" and spec["dtype"] == "f32" and not spec["mutated"]
    assert spec["sizes"][1] == "256" and not spec["sizes"][0].isdigit()  # a symbol
    lo, hi = spec["ranges"][0]
    assert lo <= 5 <= hi and spec["ranges"][1] == (256, 256)
    assert model.output_specs[0]["dtype"] == "f32"
    assert model.device == "cpu" and model.num_runners == 1
    x = np.random.default_rng(0).standard_normal((lo + 1, 256), dtype=np.float32)
    assert model(x).shape == (lo + 1, 256)


def test_constants_update_and_swap(mlp):
    model = anvil.load(mlp)
    (x,) = read_set("mlp_small", "in")
    want = model(x)
    names = model.constant_names()
    assert names and set(model.constant_original_names()) == set(names)
    original = {n: model.constant(n) for n in names}
    zeroed = {n: np.zeros_like(v) for n, v in original.items()}
    # into the inactive set: no effect until the swap
    model.update_constants(zeroed, inactive=True)
    np.testing.assert_array_equal(model(x), want)
    model.swap_constants()
    np.testing.assert_array_equal(model(x), np.zeros_like(want))  # every weight and bias zero
    # back, in place (copy-on-write on the active set)
    model.update_constants(original)
    np.testing.assert_array_equal(model(x), want)
    first = names[0]
    with pytest.raises(anvil.Error, match=first):
        model.update_constants({first: np.zeros((3, 3), np.float32)})
    with pytest.raises(anvil.Error, match="no_such_constant"):
        model.update_constants({"no_such_constant": original[first]})
    with pytest.raises(anvil.Error):
        model.update_constants({first: original[first]}, require_full=True)
    np.testing.assert_array_equal(model(x), want)  # failed updates changed nothing


def test_profiling(mlp):
    model = anvil.load(mlp)
    (x,) = read_set("mlp_small", "in")
    model(x)
    model.set_profiling(True)
    for _ in range(3):
        model(x)
    steps = model.profile()
    assert steps and all(s["calls"] == 3 for s in steps)
    assert sum(s["total_ms"] for s in steps) > 0
    assert {"name", "kind", "nodes", "bytes", "gb_per_s"} <= set(steps[0])
    model.reset_profile()
    assert all(s["calls"] == 0 for s in model.profile())


def test_check_nan_inf(mlp):
    model = anvil.load(mlp)
    (x,) = read_set("mlp_small", "in")
    bad = x.copy()
    bad.flat[0] = np.inf
    assert not np.isfinite(model(bad)).all()  # off by default: the Inf runs through
    model.set_check_nan_inf(True)
    with pytest.raises(anvil.Error, match=r"NaN/Inf check: step \d+ .* wrote -?inf into buffer"):
        model(bad)
    assert rel_error(model(x), read_set("mlp_small", "out")[0]) <= 1e-4


def test_hostile_arrays_are_refused_with_the_runtimes_checks(mlp):
    """Arrays go through the C ABI's DLPack intake checks (runtime::borrow_strided): sizes and
    strides whose reach wraps past 2^63 bytes, and data not aligned to the element size, are
    refused before anything reads them."""
    model = anvil.load(mlp)
    (x,) = read_set("mlp_small", "in")
    assert x.dtype == np.float32
    huge = np.lib.stride_tricks.as_strided(x, shape=(3, x.shape[1]), strides=(2**62, 4))
    with pytest.raises(anvil.Error) as e:
        model(huge)
    msg = str(e.value)
    assert "input 0 'x'" in msg or "input 'x'" in msg, msg
    assert "reach past the address space" in msg and "strides" in msg, msg
    raw = np.zeros(x.nbytes + 1, dtype=np.uint8)
    misaligned = np.frombuffer(raw.data, dtype=np.float32, count=x.size, offset=1)
    misaligned = misaligned.reshape(x.shape)
    assert misaligned.ctypes.data % 4 != 0
    with pytest.raises(anvil.Error, match="not aligned to its element size.*multiple of 4 bytes"):
        model(misaligned)
    with pytest.raises(anvil.Error, match="constant.*not aligned to its element size"):
        name = model.constant_names()[0]
        model.update_constants({name: misaligned})
    assert rel_error(model(x), read_set("mlp_small", "out")[0]) <= 1e-4


def test_compile_report_cache_and_progress(tmp_path):
    cache = tmp_path / "cache"
    seen = []
    path, report = anvil.compile(fixture("mlp_small.pt2"), cache_dir=cache, report=True,
                                 progress=seen.append, progress_after=0.0)
    assert path.startswith(str(cache)) and os.path.isfile(path)
    assert not report["cache_hit"] and report["num_kernels"] >= 1
    assert report["seconds"]["total"] > 0
    assert seen and all(isinstance(s, float) for s in seen)  # called at least once at 0 s
    again, report2 = anvil.compile(fixture("mlp_small.pt2"), cache_dir=cache, report=True)
    assert again == path and report2["cache_hit"]
    out = tmp_path / "m.anvil"
    assert anvil.compile(fixture("mlp_small.pt2"), out, cache_dir=cache, progress=False) == str(out)
    assert rel_error(anvil.load(out)(read_set("mlp_small", "in")[0]),
                     read_set("mlp_small", "out")[0]) <= 1e-4


def test_compile_an_nn_module_and_an_exported_program(tmp_path):
    torch = pytest.importorskip("torch")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(16, 8)

        def forward(self, x):
            return torch.relu(self.fc(x)) * 2

    torch.manual_seed(0)
    net = Net().eval()
    x = torch.randn(4, 16)
    want = net(x).detach()
    batch = torch.export.Dim("batch", min=1, max=64)
    path = anvil.compile(net, tmp_path / "net.anvil", args=(x,),
                         dynamic_shapes={"x": {0: batch}})
    model = anvil.load(path)
    torch.testing.assert_close(model(x), want, rtol=1e-5, atol=1e-5)
    x7 = torch.randn(7, 16)
    torch.testing.assert_close(model(x7), net(x7).detach(), rtol=1e-5, atol=1e-5)
    ep = torch.export.export(net, (x,))
    model2 = anvil.load(anvil.compile(ep, tmp_path / "ep.anvil"))
    torch.testing.assert_close(model2(x), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="example inputs"):
        anvil.compile(net)


def test_enqueue_and_metadata_on_a_cpu_package(mlp):
    import json

    model = anvil.load(mlp)
    (x,) = read_set("mlp_small", "in")
    (queued,) = model.enqueue(x)  # a CPU package runs at once
    model.synchronize()
    np.testing.assert_array_equal(queued, model(x))
    assert json.loads(model.manifest_json)["inputs"][0]["name"] == "x"
    assert isinstance(json.loads(model.metadata_json), dict)


def test_a_long_compile_reports_progress_on_stderr(tmp_path, capfd):
    anvil.compile(fixture("mlp_small.pt2"), tmp_path / "c.anvil", cache_dir=tmp_path / "cache",
                  progress_after=0.0)
    err = capfd.readouterr().err
    assert "anvil: compiling mlp_small.pt2 (target native): 0 s so far" in err
    assert "anvil: compiled mlp_small.pt2 (target native) in" in err


def nvcc_found():
    """As the CUDA target looks: $ANVIL_NVCC, nvcc under $CUDA_HOME or /usr/local/cuda, PATH."""
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    return bool(shutil.which(os.environ.get("ANVIL_NVCC") or "nvcc") or
                any(h and os.path.isfile(os.path.join(h, "bin", "nvcc")) for h in homes))


@pytest.mark.skipif(not nvcc_found(), reason="needs nvcc to compile for a CUDA target")
def test_compile_for_a_cuda_target_without_a_gpu(compiled):
    # compiling needs nvcc only; the package then names its device, and loading it on the CPU
    # says which device it wants
    pkg = compiled("mlp_small", target="cuda-sm90")
    assert anvil._anvil.package_device(pkg) == "cuda:0"
    with pytest.raises(anvil.Error, match="compiled for cuda.*expected device cuda, got cpu"):
        anvil.load(pkg)
