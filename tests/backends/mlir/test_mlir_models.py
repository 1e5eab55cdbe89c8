"""The MLIR backend on whole models: the README's example and the benchmark workloads
(quick sizes) export to modules ``mlir-opt-22`` verifies (gradient and optimized stages),
and ``yota.grad(..., backend="mlir")`` gives the llvm backend's value and gradients; the
``yota-ir mlir`` command; compiled programs saved, reloaded and found in the on-disk
cache by a new process; LAPACK failures (``LinAlgError``) at the user's line, and an object
calling LAPACK loaded in a new process. The Gaussian-process workload W8 (``cholesky``,
``triangular_solve``) is among the benchmark workloads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bench.check import tolerance
from bench.systems import prepare_yota
from bench.workloads import workloads
from click.testing import CliRunner
from support import backend_cases  # noqa: E402
from support.mlir_cases import MISSING, needs_mlir, verify_exports  # noqa: E402
from yota.backends import mlir
from yota.backends.mlir.emit import EMITTERS
from yota.ir.errors import UnsupportedError

import yota
from yota import cli, pipeline


@dataclass
class Linear:
    W: np.ndarray
    b: np.ndarray


def readme_loss(m: Linear, X: np.ndarray) -> Any:
    return np.sum(m.W @ X + m.b[:, None])


def _readme_args() -> tuple[Linear, np.ndarray]:
    rng = np.random.default_rng(0)
    return Linear(rng.random((3, 4)), rng.random(3)), rng.random((4, 5))


def _close(a: Any, b: Any, tol: float) -> bool:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return a.shape == b.shape and bool(np.all(np.abs(a - b) <= tol * (1 + np.abs(b))))


def _same_grads(g1: Any, g2: Any, tol: float) -> None:
    if isinstance(g2, dict):
        assert g1.keys() == g2.keys()
        for k in g2:
            _same_grads(g1[k], g2[k], tol)
    elif isinstance(g2, (list, tuple)):
        assert len(g1) == len(g2)
        for a, b in zip(g1, g2, strict=True):
            _same_grads(a, b, tol)
    else:
        assert _close(g1, g2, tol), (g1, g2)


def _stages(f: Any, *args: Any) -> list[Any]:
    _, tape = yota.trace(f, *args)
    st = dict(pipeline.stages(tape, "fused"))
    return [st["traced"], st["grad"], st["fuse"]]


@needs_mlir
def test_readme_example_exports_and_matches_llvm() -> None:
    m, X = _readme_args()
    assert verify_exports(_stages(readme_loss, m, X)) == []
    v1, g1 = yota.grad(readme_loss, m, X, backend="mlir", cache=False)
    v2, g2 = yota.grad(readme_loss, m, X, backend="llvm", cache=False)
    v3, g3 = yota.grad(readme_loss, m, X, backend="interp", cache=False)
    assert _close(v1, v2, 1e-12) and _close(v1, v3, 1e-12)
    for g in (g2, g3):
        _same_grads(dict(g1[0]), dict(g[0]), 1e-12)
        _same_grads(g1[1], g[1], 1e-12)


@needs_mlir
@pytest.mark.parametrize("w", workloads(quick=True), ids=lambda w: w.name)
def test_bench_workloads_export_and_match_llvm(w: Any) -> None:
    inputs = w.make(np.random.default_rng(0))
    loss = w.loss(np)
    args, consts = w.call_args(inputs)

    def f(*a: Any) -> Any:
        return loss(*a, *consts)
    try:
        stages = _stages(f, *args)
        errors = verify_exports(stages)
    except UnsupportedError as e:
        op = str(e).split("op '")[1].split("'")[0]
        assert op not in EMITTERS
        pytest.skip(f"{w.name} uses an op the MLIR backend does not express: {e}")
    assert errors == [], errors[0]
    runs = []
    for backend in ("mlir", "llvm"):
        step, read = prepare_yota(backend)(yota, w, inputs)
        runs.append(read(step()))  # (value, {param: gradient})
    (v1, g1), (v2, g2) = runs
    tol = tolerance(w.dtype)
    assert _close(v1, v2, tol)
    _same_grads(g1, g2, tol)


def _chol_sum(a: Any) -> Any:
    return np.sum(np.linalg.cholesky(a))


@needs_mlir
def test_linalg_error_at_the_users_line() -> None:
    """``yota.grad(..., backend="mlir")`` of a Cholesky: the llvm backend's gradient, and
    a matrix that is not positive definite raises ``LinAlgError`` at this file's line."""
    import inspect

    from yota.ir.errors import LinAlgError

    line = inspect.getsourcelines(_chol_sum)[1] + 1
    a = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
    v1, g1 = yota.grad(_chol_sum, a, backend="mlir", cache=False)
    v2, g2 = yota.grad(_chol_sum, a, backend="llvm", cache=False)
    assert _close(v1, v2, 1e-12)
    np.testing.assert_allclose(g1[0], g2[0], rtol=1e-12, atol=1e-12)
    with pytest.raises(LinAlgError, match=rf"not positive definite .*test_mlir_models\.py:{line}"):
        yota.grad(_chol_sum, -np.eye(3), backend="mlir", cache=False)


LOAD_LINALG = """
import sys, numpy as np
from yota.backends import mlir
exe = mlir.load(open(sys.argv[1], "rb").read())
print(exe(4 * np.eye(2))[0].tolist())
try:
    exe(-np.eye(2))
except Exception as e:
    print(type(e).__name__, e)
"""


@needs_mlir
def test_linalg_object_loads_in_a_new_process(tmp_path: Path) -> None:
    """The LAPACK routines are bound by name when the object is loaded: saved object
    code runs (and fails) in another process."""
    from yota.ir import Builder, TensorType

    b = Builder("c")
    x = b.input(TensorType("f64", (2, 2)))
    with b.at("model.py:9"):
        fn = b.build([b.cholesky(x)])
    path = tmp_path / "chol.obj"
    path.write_bytes(mlir.save(mlir.compile(fn)))
    got = subprocess.run([sys.executable, "-c", LOAD_LINALG, str(path)], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert got == ["[[2.0, 0.0], [0.0, 2.0]]",
                   "LinAlgError Matrix is not positive definite (np.linalg 'cholesky' at "
                   "model.py:9)"]


@needs_mlir
def test_save_and_load() -> None:
    m, X = _readme_args()
    _, tape = yota.trace(readme_loss, m, X)
    fn = dict(pipeline.stages(tape, "fused"))["fuse"]
    exe = mlir.compile(fn)
    again = mlir.load(mlir.save(exe))
    args = [m.W, m.b, X]
    for a, b in zip(exe(*args), again(*args), strict=True):
        assert np.array_equal(a, b)
    assert exe.backend == "mlir" and "linalg" in (exe.mlir or "")


@needs_mlir
def test_cache_hit_in_a_new_process(tmp_path: Path) -> None:
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent("""
        import json, numpy as np, yota
        from yota.backends import mlir
        def loss(W, x):
            return np.sum(np.tanh(W @ x))
        W, x = np.arange(6.0).reshape(2, 3) / 10, np.ones(3)
        v, g = yota.grad(loss, W, x, backend="mlir")
        print(json.dumps({"v": float(v), "g": g[0].tolist(), **mlir.stats}))
    """))
    env = {**os.environ, "YOTA_CACHE_DIR": str(tmp_path / "cache"), "YOTA_CACHE": "1"}

    def go() -> dict[str, Any]:
        p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           env=env, check=True)
        return json.loads(p.stdout.strip().splitlines()[-1])
    first, second = go(), go()
    assert first["compiles"] == 1 and first["loads"] == 0
    assert second["compiles"] == 0 and second["loads"] == 1
    assert first["v"] == second["v"] and first["g"] == second["g"]


def test_target_key_names_the_mlir_tools() -> None:
    if MISSING:
        pytest.skip(f"MLIR tools: {MISSING}")
    key = mlir.target_key()
    assert key["mlir"] == mlir.tools.version() and key["pipeline"] == mlir.PIPELINE
    assert key["mlir"].split(".")[0] == mlir.tools.VERSION


MODEL = """
import numpy as np

def loss(W, b, X):
    h = np.tanh(W @ X + b[:, None])
    return np.sum(h * h)

def example():
    r = np.random.default_rng(0)
    return r.standard_normal((3, 4)), r.standard_normal(3), r.standard_normal((4, 5))
"""


@needs_mlir
def test_cli_prints_verifiable_mlir(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text(MODEL)
    target = [f"{tmp_path / 'model.py'}:loss", "--example", "example"]
    runner = CliRunner()
    out = tmp_path / "loss.mlir"
    r = runner.invoke(cli.main, ["mlir", *target, "-o", str(out)])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert 'loc("model.py":5:0)' in text and "linalg.matmul" in text
    assert mlir.tools.opt(text)  # parses and verifies
    for stage in ("traced", "grad", "optimized"):
        r = runner.invoke(cli.main, ["mlir", *target, "--stage", stage])
        assert r.exit_code == 0 and "func.func @loss" in r.output, r.output
        mlir.tools.opt(r.output)
    r = runner.invoke(cli.main, ["mlir", *target, "--lower"])
    assert r.exit_code == 0 and "llvm.func @yota_main" in r.output, r.output


@needs_mlir
def test_concurrent_calls_with_large_temporaries() -> None:
    """Large temporaries come from a cache of buffers shared by concurrent calls."""
    from concurrent.futures import ThreadPoolExecutor

    from yota.ir import Builder, TensorType, run

    b = Builder("big")
    x = b.input(TensorType("f64", (512, 512)))
    t = b.tanh(x)
    e = b.exp(b.neg(b.transpose(t, perm=(1, 0))))
    fn = b.build([b.sum(b.mul(t, e), axes=(1,)), b.max(e, axes=(0,))])
    exe = mlir.compile(fn)
    xs = [np.random.default_rng(k).standard_normal((512, 512)) for k in range(6)]
    want = [run(fn, a) for a in xs]
    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            got = list(pool.map(lambda a: exe(a), xs))
            for a, g, w in zip(xs, got, want, strict=True):
                assert backend_cases.mismatch(fn, [a], g, w) is None
