"""A package with compiled collectives (tp_mlp_allreduce: every rank computes the same partial
result and all_reduce sums them) run by anvil.load under `anvil launch -n 2` and, where torch is
installed, torchrun: the process group comes from the launcher's RANK / WORLD_SIZE / MASTER_ADDR /
MASTER_PORT. A 1-rank world gives
the reference (all_reduce is then the identity): each of 2 ranks must hold twice that."""

import os
import pathlib
import shutil
import socket
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO, fixture, rel_error

WORKER = pathlib.Path(__file__).with_name("dist_worker.py")


def anvil_cli():
    cli = os.environ.get("ANVIL_CLI") or shutil.which("anvil")
    if not cli:
        built = REPO / "build" / "bin" / "anvil"
        cli = str(built) if built.exists() else None
    return cli


def run(cmd, env):
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))}\n{r.stdout}\n{r.stderr}"


def torchrun_available():
    try:
        import torch.distributed.run  # noqa: F401
    except ImportError:
        return False
    return True


LAUNCHERS = [pytest.param("anvil", marks=pytest.mark.skipif(
                 not anvil_cli(), reason="needs the anvil CLI (ANVIL_CLI) for anvil launch")),
             pytest.param("torchrun", marks=pytest.mark.skipif(
                 not torchrun_available(), reason="needs torch for torchrun"))]


def launch(launcher, n):
    if launcher == "anvil":
        return [anvil_cli(), "launch", "-n", str(n), "--", sys.executable]
    with socket.socket() as s:  # a free port (torchrun hands --master-port 0 on as 0)
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(n),
            "--master-addr", "127.0.0.1", "--master-port", str(port)]


@pytest.mark.parametrize("launcher", LAUNCHERS)
def test_tp_mlp_under_a_launcher_two_ranks(launcher, compiled, tmp_path):
    pkg = compiled("tp_mlp_allreduce")
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
    env["ANVIL_DIST_TIMEOUT"] = "60"
    one = tmp_path / "one"
    one.mkdir()
    run(launch(launcher, 1) + [WORKER, pkg, tmp_path / "x.npy", one], env)
    reference = 2 * np.load(one / "out0.npy")
    two = tmp_path / "two"
    two.mkdir()
    run(launch(launcher, 2) + [WORKER, pkg, tmp_path / "x.npy", two], env)
    for rank in range(2):
        got = np.load(two / f"out{rank}.npy")
        assert rel_error(got, reference) <= 1e-4, f"rank {rank}"
    assert fixture("tp_mlp_allreduce.pt2").exists()


def test_a_collectives_package_without_a_launcher_says_what_to_set(compiled, tmp_path):
    import anvil

    pkg = compiled("tp_mlp_allreduce")
    code = ("import anvil\n"
            f"try:\n    anvil.load({str(pkg)!r})\n"
            "except anvil.Error as e:\n    print(e)\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                        "PMI_RANK", "PMI_SIZE")}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=60)
    assert "uses collectives" in r.stdout, r.stdout + r.stderr
    assert "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT" in r.stdout
    assert anvil is not None
