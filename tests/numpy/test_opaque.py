"""Opaque primitives (``yota.primitive(opaque=True)``): a Python function called on NumPy
arrays when the compiled program runs, with the user's ``diffrule``. Values and gradients
on the interpreter, llvm (a call out of native code), the CUDA emulation (host staging)
and mlir; an ODE solved by ``scipy.integrate.odeint`` whose adjoint rule is another
opaque primitive; errors (the user's exception, a changed result shape, a missing rule,
a primitive not defined in the process) with the user's line; the on-disk cache across
processes (a hit calls back; an edited function misses); calls from several threads;
second order through a traceable rule.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.integrate import odeint
from support.gradcheck import check_grad
from support.mlir_cases import needs_mlir  # noqa: E402
from yota.ir.ops.callback import CallbackError

import yota

BACKENDS = ["interp", "llvm"]
CALLS: list[int] = []


@yota.primitive(opaque=True)
def cube(x: Any, k: int = 2) -> Any:
    CALLS.append(1)
    assert isinstance(x, np.ndarray)  # plain arrays, never tracers
    return np.asarray(x) ** 3 * k


@yota.diffrule(cube, "x")
def _(x: Any, k: int = 2, *, y: Any, dy: Any) -> Any:
    return 3 * k * x ** 2 * dy


@yota.primitive(opaque=True)
def polar(a: Any, b: Any, scale: float) -> tuple[Any, Any]:
    """Two results, a float argument (a float again at run time)."""
    assert isinstance(scale, float)
    return np.hypot(a, b) * scale, np.arctan2(b, a)


@yota.diffrule(polar, "a")
def _(a: Any, b: Any, scale: float, *, y: Any, dy: Any) -> Any:
    (r, _), (dr, dth) = y, dy
    return dr * scale * a / (r / scale) - dth * b / (a * a + b * b)


@yota.diffrule(polar, "b")
def _(a: Any, b: Any, scale: float, *, y: Any, dy: Any) -> Any:
    (r, _), (dr, dth) = y, dy
    return dr * scale * b / (r / scale) + dth * a / (a * a + b * b)


@yota.diffrule(polar, "scale")
def _(a: Any, b: Any, scale: float, *, y: Any, dy: Any) -> Any:
    (r, _), (dr, _) = y, dy
    return np.sum(dr * r / scale)


@yota.primitive(opaque=True)
def picky(x: Any) -> Any:
    if np.any(x < 0):
        raise ValueError("negative input")
    return np.sqrt(x)


def cube_loss(x: np.ndarray) -> Any:
    return np.sum(np.tanh(cube(x[::2], k=3)) * np.arange(1.0, 4.0))


def polar_loss(x: np.ndarray, y: np.ndarray, s: float) -> Any:
    r, th = polar(x, y.T, s)
    return np.sum(r * th) + np.sum(r ** 2)


X = np.array([0.3, -0.1, 0.5, 0.2, -0.4])
PX, PY = np.array([[1.0, 2.0], [0.5, -1.0]]), np.array([[0.3, -0.7], [1.5, 0.2]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_values_and_gradients(backend: str) -> None:
    f = yota.compile(lambda x: cube(x, 2) + 1.0, X, backend=backend)
    np.testing.assert_allclose(f(X), X ** 3 * 2 + 1.0, rtol=1e-15)
    _, g = yota.grad(cube_loss, X, backend=backend)
    assert check_grad(cube_loss, [X], g) == 1
    args = [PX, PY, 1.5]
    v, g = yota.grad(polar_loss, *args, backend=backend)
    assert np.isclose(float(v), float(polar_loss(*args)), rtol=1e-14)
    assert check_grad(polar_loss, args, g) == 3


def test_the_function_runs_at_every_call_on_plain_arrays() -> None:
    f = yota.compile(lambda x: cube(x) * 2.0, X)
    before = len(CALLS)
    for _ in range(3):
        f(X)
    assert len(CALLS) - before == 3
    assert np.allclose(cube(X), X ** 3 * 2)  # called outside a trace: plain Python


@pytest.mark.parametrize("backend", BACKENDS)
def test_edges_size_zero_and_one_and_float32(backend: str) -> None:
    for x in (np.zeros(0), np.ones(1), np.array(2.0), np.arange(6.0, dtype=np.float32)
              .reshape(2, 3)[:, ::2]):
        got = yota.compile(lambda v: cube(v) - 1.0, x, backend=backend)(x)
        want = cube(x) - 1.0
        assert np.asarray(got).dtype == want.dtype and np.shape(got) == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6)


# -- an ODE through scipy.integrate.odeint, its adjoint another opaque primitive ------------------
def lotka_volterra(s: np.ndarray, t: float, th: np.ndarray) -> np.ndarray:
    x, y = s
    a, b, c, d = th
    return np.array([a * x - b * x * y, d * x * y - c * y])


def lv_jacobians(s: np.ndarray, th: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x, y = s
    a, b, c, d = th
    return (np.array([[a - b * y, -b * x], [d * y, d * x - c]]),
            np.array([[x, -x * y, 0.0, 0.0], [0.0, 0.0, -y, x * y]]))


@yota.primitive(opaque=True)
def trajectory(y0: Any, t: Any, th: Any) -> Any:
    return odeint(lotka_volterra, y0, t, args=(th,), rtol=1e-10, atol=1e-10)


@yota.primitive(opaque=True)
def adjoint(ys: Any, t: Any, th: Any, dys: Any) -> tuple[Any, Any]:
    """The gradients of ``sum(dys * ys)`` w.r.t. ``y0`` and ``th``: the adjoint ODE
    integrated backwards between the observation times."""
    lam, g = dys[-1].copy(), np.zeros_like(th)

    def back(z: np.ndarray, s: float, th: np.ndarray) -> np.ndarray:
        fs, fth = lv_jacobians(z[:2], th)
        return np.concatenate([lotka_volterra(z[:2], s, th), -z[2:4] @ fs, -z[2:4] @ fth])
    for i in range(len(t) - 1, 0, -1):
        z = odeint(back, np.concatenate([ys[i], lam, g]), [t[i], t[i - 1]], args=(th,),
                   rtol=1e-10, atol=1e-10)[-1]
        lam, g = z[2:4] + dys[i - 1], z[4:]
    return lam, g


@yota.diffrule(trajectory, "y0")
def _(y0: Any, t: Any, th: Any, *, y: Any, dy: Any) -> Any:
    return adjoint(y, t, th, dy)[0]


@yota.diffrule(trajectory, "th")
def _(y0: Any, t: Any, th: Any, *, y: Any, dy: Any) -> Any:
    return adjoint(y, t, th, dy)[1]


yota.nodiff(trajectory, "t")


def ode_loss(y0: np.ndarray, th: np.ndarray, t: np.ndarray, data: np.ndarray) -> Any:
    return np.sum((trajectory(y0, t, th) - data) ** 2)


T = np.linspace(0.0, 2.0, 9)
Y0, TH = np.array([1.0, 0.5]), np.array([1.0, 0.6, 0.8, 0.4])
DATA = odeint(lotka_volterra, Y0 * 1.1, T, args=(TH * 0.9,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_odeint_with_an_adjoint_rule(backend: str) -> None:
    args = [Y0, TH, T, DATA]
    v, g = yota.grad(ode_loss, *args, backend=backend)
    assert np.isclose(float(v), float(ode_loss(*args)), rtol=1e-12)
    assert g[2] is None or not np.any(g[2])
    leaves = [Y0, TH]
    assert check_grad(lambda a, b: ode_loss(a, b, T, DATA), leaves, [g[0], g[1]],
                      rtol=1e-5, atol=1e-7) == 2


# -- other backends --------------------------------------------------------------------------------
def _emulator() -> Any:
    from yota.backends.cuda.emulate import EmuDevice, emulation_available

    why = emulation_available()
    if why:
        pytest.skip(why)
    return EmuDevice()


def test_cuda_emulation_stages_through_the_host() -> None:
    from yota.backends import cuda
    from yota.backends.cuda.artifact import Artifact, pack, unpack
    from yota.backends.program import Callback
    from yota.ir import run

    from yota.pipeline import program_ir

    dev = _emulator()
    progs = [program_ir(cube_loss, [X])[0], program_ir(polar_loss, [PX, PY, 1.5])[0],
             program_ir(ode_loss, [Y0, TH, T, DATA])[0]]
    inputs = [[X], [PX, PY, np.array(1.5)], [Y0, TH, T, DATA]]
    for fn, args, exe in zip(progs, inputs, cuda.compile_many(progs, device=dev), strict=True):
        for w, g in zip(run(fn, *args), exe(*args), strict=True):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-12, atol=1e-12)
    mod = cuda.lower(progs[0])
    assert any(isinstance(s, Callback) for p in mod.plans.values() for s in p.steps)
    back = unpack(Artifact.from_bytes(pack(mod, b"cubin", {"arch": "sm_90"}).to_bytes()))
    assert {n: p.steps for n, p in back.plans.items()} == {n: p.steps for n, p in
                                                         mod.plans.items()}
    exe = cuda.compile_many([program_ir(picky, [X ** 2], kind="forward")[0]], device=dev)[0]
    with pytest.raises(CallbackError, match=r"picky raised ValueError: negative input.*"
                       r"test_opaque\.py"):
        exe(X)


@needs_mlir
def test_mlir_calls_back() -> None:
    for f, args in [(cube_loss, [X]), (ode_loss, [Y0, TH, T, DATA])]:
        v0, g0 = yota.grad(f, *args)
        v1, g1 = yota.grad(f, *args, backend="mlir", cache=False)
        assert np.isclose(float(v1), float(v0), rtol=1e-13)
        for a, b in zip(g1, g0, strict=True):
            if a is not None:
                np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


# -- errors ---------------------------------------------------------------------------------------
def picky_sum(x: np.ndarray) -> Any:
    return np.sum(picky(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_users_exception_with_the_line(backend: str) -> None:
    f = yota.compile(picky_sum, np.ones(3), backend=backend)
    assert float(f(4 * np.ones(3))) == 6.0
    with pytest.raises(CallbackError, match=r"picky raised ValueError: negative input "
                       r"\(at .*test_opaque\.py:\d+") as e:
        f(-np.ones(3))
    assert isinstance(e.value, yota.YotaError) and isinstance(e.value.__cause__, ValueError)
    assert float(f(np.ones(3))) == 3.0  # the program still runs after a failure


@yota.primitive(opaque=True)
def shifty(x: Any) -> Any:
    return x[: int(x[0])] if x[0] < len(x) else x


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_result_of_another_shape_is_an_error(backend: str) -> None:
    f = yota.compile(lambda x: shifty(x) * 1.0, np.array([5.0, 1, 2]), backend=backend)
    with pytest.raises(CallbackError, match=r"returned float64\[2\] as result 0 at run "
                       r"time, f64\[3\] when traced"):
        f(np.array([2.0, 1, 2]))


def test_a_missing_rule_says_what_to_write() -> None:
    with pytest.raises(yota.MissingRuleError, match=r"@yota\.diffrule\(.*picky"):
        yota.grad(picky_sum, np.ones(3))


def test_unsupported_library_calls_point_to_opaque_primitives() -> None:
    with pytest.raises(yota.UnsupportedError, match=r"primitive\(opaque=True\)"):
        yota.grad(lambda y0: np.sum(odeint(lotka_volterra, y0, T, args=(TH,))), Y0)


def test_constant_arguments_must_be_literals() -> None:
    k = np.full(5, 2)  # an array from outside: not a literal
    with pytest.raises(yota.TraceError, match="Python literals"):
        yota.compile(lambda x: cube(x, k=k), X)
    np.testing.assert_allclose(yota.compile(lambda x: cube(x, k=np.int64(3)), X)(X),
                               X ** 3 * 3)  # a NumPy scalar is a number


# -- threads, nesting, cache -------------------------------------------------------------------------
def test_compiled_code_calls_back_from_several_threads() -> None:
    f = yota.compile(lambda x: cube(x, 2) * 2.0, X)
    out: list[Any] = [None] * 8

    def work(i: int) -> None:
        for _ in range(20):
            out[i] = f(X + i)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, o in enumerate(out):
        np.testing.assert_allclose(o, (X + i) ** 3 * 4, rtol=1e-14)


@yota.primitive(opaque=True)
def opaque_sin(x: Any) -> Any:
    return np.sin(x)


@yota.diffrule(opaque_sin, "x")
def _(x: Any, *, y: Any, dy: Any) -> Any:
    return np.cos(x) * dy  # traceable: second order through it


def test_second_order_through_a_traceable_rule() -> None:
    def f(x: np.ndarray) -> Any:
        return np.sum(opaque_sin(x) ** 2)

    def gnorm(x: np.ndarray) -> Any:
        return np.sum(yota.grad(f, x)[1][0] * np.arange(1.0, 6.0))

    _, g = yota.grad(gnorm, X)
    assert check_grad(gnorm, [X], g, rtol=1e-6) == 1


def test_closures_with_other_values_are_other_primitives() -> None:
    def make(k: float) -> Any:
        @yota.primitive(opaque=True)
        def scaled(x: Any) -> Any:
            return x * k
        return scaled

    a, b = make(2.0), make(3.0)
    assert a.callback_key != b.callback_key
    fa = yota.compile(lambda x: a(x) + 0.0, X)
    fb = yota.compile(lambda x: b(x) + 0.0, X)
    np.testing.assert_allclose(fa(X), 2 * X)
    np.testing.assert_allclose(fb(X), 3 * X)


MODULE = '''
import numpy as np, yota

@yota.primitive(opaque=True)
def scaled(x):
    return np.asarray(x) * 2.0

@yota.diffrule(scaled, "x")
def _(x, *, y, dy):
    return 2.0 * dy

def loss(x):
    return np.sum(np.tanh(scaled(x)))
'''
SCRIPT = '''
import json
import numpy as np, mod, yota  # mod: beside this script, on its sys.path
from yota.backends import llvm
v, g = yota.grad(mod.loss, np.linspace(-1, 1, 5))
print(json.dumps({"value": float(v), "grad": g[0].tolist(), "cache": vars(yota.cache.stats),
                  "compiles": llvm.stats["compiles"], "loads": llvm.stats["loads"]}))
'''


def _run(src: Path, cache: Path) -> dict[str, Any]:
    env = {**os.environ, "YOTA_CACHE_DIR": str(cache), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("YOTA_CACHE", None)
    p = subprocess.run([sys.executable, str(src / "run.py"), str(src)], capture_output=True,
                       text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_on_disk_cache_across_processes(tmp_path: Path) -> None:
    """A second process loads the object code and calls back into its own function; an
    edited function is another program (a miss, the new values), editing it back hits."""
    src, cache = tmp_path / "src", tmp_path / "cache"
    src.mkdir()
    (src / "mod.py").write_text(textwrap.dedent(MODULE))
    (src / "run.py").write_text(textwrap.dedent(SCRIPT))
    x = np.linspace(-1, 1, 5)
    first = _run(src, cache)
    assert first["compiles"] == 1 and first["cache"]["misses"] == 1
    second = _run(src, cache)
    assert second["compiles"] == 0 and second["loads"] == 1 and second["cache"]["hits"] == 1
    assert second["value"] == first["value"] == pytest.approx(np.sum(np.tanh(2 * x)))
    (src / "mod.py").write_text(textwrap.dedent(MODULE).replace("np.asarray(x) * 2.0",
                                                                "np.asarray(x) * 3.0"))
    third = _run(src, cache)
    assert third["compiles"] == 1 and third["cache"]["misses"] == 1
    assert third["value"] == pytest.approx(np.sum(np.tanh(3 * x)))
    (src / "mod.py").write_text(textwrap.dedent(MODULE))
    back = _run(src, cache)
    assert back["compiles"] == 0, back


def test_a_program_whose_primitive_is_not_defined_says_so() -> None:
    from yota.ir.ops.callback import CALLBACKS

    f = yota.compile(lambda x: cube(x) + 0.0, X)
    saved = CALLBACKS.pop(cube.callback_key)
    try:
        with pytest.raises(CallbackError, match="not defined in this process"):
            f(X)
    finally:
        CALLBACKS[cube.callback_key] = saved
