"""Data-parallel gradients (``yota.distributed``) under real MPI.

The cases live in ``tests/support/distributed_cases.py``; each launch of ``mpiexec -n N`` (about a
second) runs all of them on every rank, and every rank's verdict per case is checked
here. Launches run with a timeout and in their own process group: a collective left
hanging by a bug fails the test instead of stalling the run.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import TESTS

import yota

CASES_SCRIPT = TESTS / "support" / "distributed_cases.py"
TIMEOUT_S = 240  # compiling the cases' programs on a loaded 2-core machine, then seconds


def _mpiexec() -> str | None:
    """The mpiexec next to this Python (the venv's, from the mpich wheel), else on PATH."""
    near = Path(sys.executable).parent / "mpiexec"
    return str(near) if near.exists() else shutil.which("mpiexec")


def _why_skip() -> str | None:
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return "mpi4py is not installed (pip install -e '.[test,mpi]')"
    if _mpiexec() is None:
        return "no mpiexec (pip install mpich, or an MPI library's mpiexec on PATH)"
    return None


needs_mpi = pytest.mark.skipif(_why_skip() is not None, reason=_why_skip() or "")

CASE_NAMES = [
    "full_batch_llvm", "full_batch_interp", "full_batch_float32", "sgd_bit_identical",
    "buckets_and_overlap", "argnums_keep_local", "allreduce_in_place",
    "inputs_never_overwritten", "float_args_and_aux", "fail_yota_error_on_one_rank",
    "fail_exception_in_f", "fail_guard_changes_program_on_one_rank", "fail_shape_differs",
    "fail_dtype_differs", "fail_allreduce_and_broadcast_structure", "broadcast_leaves",
    "device_path_with_host_stand_in",
]


def launch(n: int, names: list[str], tmp: Path) -> dict[int, dict[str, str]]:
    """Run the named cases under ``mpiexec -n n``; {rank: {case: verdict}}."""
    mpiexec = _mpiexec()
    assert mpiexec is not None
    # MPIEXEC_TIMEOUT: MPICH's mpiexec ends the job itself too (its ranks with it)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
               MPIEXEC_TIMEOUT=str(TIMEOUT_S + 10))
    cmd = [mpiexec, "-n", str(n), sys.executable, str(CASES_SCRIPT), "--out", str(tmp), *names]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"mpiexec -n {n} hung for {TIMEOUT_S} s (a collective left waiting?):\n"
                    f"{out[-4000:]}")
    reports = {}
    for r in range(n):
        path = tmp / f"rank{r}.json"
        assert path.exists(), f"rank {r} wrote no report (exit {proc.returncode}):\n{out[-4000:]}"
        reports[r] = json.loads(path.read_text())["results"]
    assert proc.returncode == 0, out[-4000:]
    return reports


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, str]]:
    return launch(2, CASE_NAMES, tmp_path_factory.mktemp("mpi2"))


@needs_mpi
@pytest.mark.parametrize("name", CASE_NAMES)
def test_two_ranks(two_ranks: dict[int, dict[str, str]], name: str) -> None:
    for rank, results in two_ranks.items():
        assert results.get(name) == "ok", f"rank {rank}: {results.get(name)}"


@needs_mpi
@pytest.mark.slow
def test_three_ranks(tmp_path: Path) -> None:
    """Three ranks (a non-power-of-two ring, oversubscribed on two cores): the same cases."""
    for rank, results in launch(3, CASE_NAMES, tmp_path).items():
        bad = {k: v for k, v in results.items() if v != "ok"}
        assert not bad, f"rank {rank}: {bad}"


@needs_mpi
def test_one_process_without_mpiexec() -> None:
    """A single process (MPI's singleton start, no mpiexec): the mean over one rank is the
    rank's own result; bad communicators and arguments are YotaErrors naming them."""
    code = """
import numpy as np, yota
from mpi4py import MPI
from yota.distributed import DataParallel, allreduce_, broadcast_
w = np.arange(3.0)
v0, g0 = yota.grad(lambda w: np.sum(w * w), w)
v, g = yota.grad(lambda w: np.sum(w * w), w, comm=MPI.COMM_WORLD)
assert v == v0 and np.array_equal(g[0], g0[0])
for bad, words in [(object(), "mpi4py intracommunicator"),
                   (DataParallel(MPI.COMM_WORLD, bucket_bytes=0), "bucket_bytes"),
                   (DataParallel(MPI.COMM_WORLD, argnums=(5,)), "no argument 5")]:
    try:
        yota.grad(lambda w: np.sum(w * w), w, comm=bad)
    except yota.YotaError as e:
        assert words in str(e), str(e)
    else:
        raise AssertionError(words)
for call, words in [(lambda: allreduce_([1.0]), "GradientResult"),
                    (lambda: broadcast_(w, root=3), "root must be a rank")]:
    try:
        call()
    except yota.YotaError as e:
        assert words in str(e), str(e)
    else:
        raise AssertionError(words)
def outer(x):  # a data-parallel gradient inside a traced function
    return np.sum(yota.grad(lambda x: np.sum(x ** 3), x, comm=MPI.COMM_WORLD)[1][0])
try:
    yota.grad(outer, np.ones(3))
except yota.YotaError as e:
    assert "inside a function Yota is tracing" in str(e), str(e)
else:
    raise AssertionError("nested")
ro = np.ones(2); ro.setflags(write=False)
try:
    broadcast_({"w": ro})
except yota.YotaError as e:
    assert "read-only" in str(e) and "w" in str(e), str(e)
else:
    raise AssertionError("read-only")
print("ok")
"""
    if _why_skip() is not None:
        pytest.skip(_why_skip() or "")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=TIMEOUT_S, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr


def test_without_mpi4py_the_error_says_how_to_install(monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py fails
    with pytest.raises(yota.YotaError, match=r"pip install 'yota\[mpi\]'"):
        yota.grad(lambda w: np.sum(w * w), np.ones(2), comm=object())


def _gpus() -> int:
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


@needs_mpi
@pytest.mark.skipif(_gpus() == 0, reason="no GPU: the CuPy path (NCCL, or MPI on host copies "
                    "when ranks share a GPU) runs only where CuPy sees a device")
def test_cupy_arrays(tmp_path: Path) -> None:
    """CuPy gradients: one rank per GPU where there are two (NCCL), else two ranks on one
    GPU (NCCL refuses a shared GPU: MPI on host copies); equal to the NumPy result."""
    n = 2
    for rank, results in launch(n, ["cupy_arrays"], tmp_path).items():
        assert results["cupy_arrays"] == "ok", f"rank {rank}: {results['cupy_arrays']}"
