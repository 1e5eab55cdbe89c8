"""Convolutions (``yota.numpy.convolve``, ``scipy_signal``): ``np.convolve``,
``np.correlate``, ``sliding_window_view``, ``scipy.signal.convolve``/``correlate``
(N-d), ``convolve2d``/``correlate2d`` (every boundary): values against NumPy/SciPy on
the interpreter and llvm over every mode and size order (kernel longer than the signal,
size 1, 0-d, integers, float32, non-contiguous), both lowerings (shifted slices and
im2col), gradients against finite differences, the gradient programs on the CUDA
emulation and on mlir.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
import scipy.signal as ss
from numpy.lib.stride_tricks import sliding_window_view
from support.gradcheck import check_grad
from support.mlir_cases import needs_mlir  # noqa: E402

import yota
from yota.numpy import convolve as conv

BACKENDS = ["interp", "llvm"]
MODES = ["full", "same", "valid"]
R = np.random.default_rng(0)


@contextmanager
def strategy(name: str | None, ruled: bool = True) -> Iterator[None]:
    conv.STRATEGY, conv.RULED = name, ruled
    try:
        yield
    finally:
        conv.STRATEGY, conv.RULED = None, True


def _close(got: Any, want: Any, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape,
                                                                 got.dtype, want.dtype)
    tol = 1e-5 if want.dtype == np.float32 else 1e-11
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)


def one_d_cases() -> list[tuple[str, Callable[..., Any], list[np.ndarray]]]:
    out = []
    for n, m in [(6, 3), (5, 4), (3, 5), (2, 6), (1, 1), (4, 1), (1, 3)]:
        a, v = R.standard_normal(n), R.standard_normal(m)
        for mode in MODES:
            for name, f in [("np.convolve", np.convolve), ("np.correlate", np.correlate),
                            ("ss.convolve", ss.convolve), ("ss.correlate", ss.correlate)]:
                out.append((f"{name} {n} {m} {mode}",
                            lambda a, v, f=f, mode=mode: f(a, v, mode), [a, v]))
    return out


def nd_cases() -> list[tuple[str, Callable[..., Any], list[np.ndarray]]]:
    out = []
    for s1, s2 in [((5, 6), (3, 2)), ((3, 3), (4, 5)), ((4, 5, 3), (2, 3, 2)), ((4, 4), (1, 1)),
                   ((2, 7), (2, 3))]:
        x, k = R.standard_normal(s1), R.standard_normal(s2)
        for mode in MODES:
            for f in (ss.convolve, ss.correlate, ss.fftconvolve):
                try:
                    f(x, k, mode)
                except ValueError:
                    continue
                out.append((f"{f.__name__} {s1} {s2} {mode}",
                            lambda x, k, f=f, mode=mode: f(x, k, mode), [x, k]))
            if len(s1) != 2:
                continue
            for bd in ("fill", "wrap", "symm"):
                for f in (ss.convolve2d, ss.correlate2d):
                    try:
                        f(x, k, mode, bd)
                    except ValueError:
                        continue
                    out.append((f"{f.__name__} {s1} {s2} {mode} {bd}",
                                lambda x, k, f=f, m=mode, bd=bd: f(x, k, m, bd), [x, k]))
                    out.append((f"{f.__name__} {s1} {s2} {mode} {bd} fillvalue",
                                lambda x, k, f=f, m=mode, bd=bd: f(x, k, m, bd, 1.5), [x, k]))
    return out


def window_cases() -> list[tuple[str, Callable[..., Any], list[np.ndarray]]]:
    x = R.standard_normal((5, 6))
    t = np.ascontiguousarray(x.T).T  # non-contiguous
    return [("swv 1-d", lambda v: sliding_window_view(v, 3), [x[0]]),
            ("swv axis -1", lambda v: sliding_window_view(v, 3, axis=-1), [x]),
            ("swv 2-d", lambda v: sliding_window_view(v, (2, 3)), [t]),
            ("swv axes reversed", lambda v: sliding_window_view(v, (2, 2), axis=(1, 0)), [x]),
            ("swv repeated axis", lambda v: sliding_window_view(v, (2, 2), axis=(0, 0)), [x]),
            ("swv whole", lambda v: sliding_window_view(v, 6, axis=1), [x]),
            ("swv moving average", lambda v: sliding_window_view(v, 3).mean(axis=-1), [x[1]])]


def edge_cases() -> list[tuple[str, Callable[..., Any], list[Any]]]:
    x = R.standard_normal((5, 6))
    return [("int np.convolve", lambda a: np.convolve(a, np.array([1, 2])), [np.arange(5)]),
            ("int ss.convolve", lambda a: ss.convolve(a, np.array([1, 2, 3]), "same"),
             [np.arange(6)]),
            ("scalar np.convolve", lambda a: np.convolve(a, 3.0), [np.array(2.0)]),
            ("0-d ss.correlate", lambda a: ss.correlate(a, np.array(3.0)), [np.array(2.0)]),
            ("float32 convolve2d", lambda a, b: ss.convolve2d(a, b, "same"),
             [x.astype(np.float32), x[:3, :2].astype(np.float32)]),
            ("non-contiguous correlate", lambda a, b: ss.correlate(a, b, "valid"),
             [x.T, x[:2, ::2]]),
            ("big kernel convolve2d", lambda a, b: ss.convolve2d(a, b, "same", "wrap"),
             [x, R.standard_normal((5, 5))]),
            ("mode as number", lambda a, b: np.convolve(a, b, 1), [x[0], x[1, :3]])]


ALL = one_d_cases() + nd_cases() + window_cases() + edge_cases()
IDS = [c[0] for c in ALL]


@pytest.mark.parametrize("backend", BACKENDS)
def test_values_match_numpy_and_scipy(backend: str) -> None:
    """Every case on the interpreter; every third on llvm (all of them: the slow test)."""
    for name, f, args in ALL if backend == "interp" else ALL[::3]:
        _close(yota.compile(f, *args, backend=backend)(*args), f(*args), f"{name} {backend}")


@pytest.mark.slow
def test_values_match_numpy_and_scipy_all_cases_on_llvm() -> None:
    for name, f, args in ALL:
        _close(yota.compile(f, *args)(*args), f(*args), name)


@pytest.mark.parametrize("how", ["shifts", "gemm"])
def test_both_lowerings_give_the_values(how: str) -> None:
    with strategy(how):
        for name, f, args in nd_cases()[::7] + one_d_cases()[::11]:
            _close(yota.compile(f, *args, cache=False)(*args), f(*args), f"{name} {how}")


def _loss(f: Callable[..., Any], args: list[Any]) -> Callable[..., Any]:
    w = np.random.default_rng(1).standard_normal(np.shape(f(*args)))
    return lambda *xs: np.sum(f(*xs) * w)


GRAD_CASES = [c for c in ALL if not c[0].startswith("int") and "float32" not in c[0]][::7]


@pytest.mark.parametrize("how", [None, "shifts", "gemm", "ops' rules"])
def test_gradients_match_finite_differences(how: str | None) -> None:
    """Every lowering (and the ops' own rules in place of the correlation's)."""
    with strategy(None if how == "ops' rules" else how, how != "ops' rules"):
        for name, f, args in GRAD_CASES if how is None else GRAD_CASES[1::3]:
            loss = _loss(f, args)
            _, g = yota.grad(loss, *args, cache=how is None)
            assert check_grad(loss, args, g) >= 1, name


def test_gradients_on_the_interpreter_and_second_order() -> None:
    x, k = R.standard_normal((6, 5)), R.standard_normal((3, 3))

    def f(x: np.ndarray, k: np.ndarray) -> Any:
        return np.sum(np.tanh(ss.convolve2d(x, k, "same", "symm")) ** 2)

    _, g = yota.grad(f, x, k, backend="interp")
    assert check_grad(f, [x, k], g) == 2

    def gnorm(x: np.ndarray, k: np.ndarray) -> Any:
        return np.sum(yota.grad(f, x, k)[1][1] ** 2)

    _, gg = yota.grad(gnorm, x, k)
    assert check_grad(gnorm, [x, k], gg, rtol=1e-5, atol=1e-7) == 2


def _emulator() -> Any:
    from yota.backends.cuda.emulate import EmuDevice, emulation_available

    why = emulation_available()
    if why:
        pytest.skip(why)
    return EmuDevice()


def test_gradient_programs_on_the_cuda_emulation() -> None:
    from yota.backends import cuda
    from yota.ir import run

    from yota.pipeline import program_ir

    dev = _emulator()
    progs = []
    for how in ("shifts", "gemm"):
        with strategy(how):
            for name, f, args in GRAD_CASES[::3]:
                fn, _ = program_ir(_loss(f, args), args)
                progs.append((f"{name} {how}", fn, [np.asarray(a, float) for a in args]))
    for (name, fn, args), exe in zip(progs, cuda.compile_many([p[1] for p in progs],
                                                              device=dev), strict=True):
        for w, g in zip(run(fn, *args), exe(*args), strict=True):
            np.testing.assert_allclose(np.asarray(g), w, rtol=1e-9, atol=1e-9, err_msg=name)


@needs_mlir
def test_gradients_on_mlir() -> None:
    for name, f, args in GRAD_CASES[::6]:
        loss = _loss(f, args)
        v0, g0 = yota.grad(loss, *args)
        v1, g1 = yota.grad(loss, *args, backend="mlir", cache=False)
        assert np.isclose(float(v1), float(v0), rtol=1e-12), name
        for a, b in zip(g1, g0, strict=True):
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12, err_msg=name)


def test_errors_are_numpys_and_scipys_with_the_line() -> None:
    x = R.standard_normal(5)
    with pytest.raises(ValueError, match=r"np\.convolve|convolve.*test_convolve\.py"):
        yota.compile(lambda a: np.convolve(a, np.zeros(0)), x)
    with pytest.raises(ValueError, match="test_convolve.py"):
        yota.compile(lambda a: ss.convolve(a, np.ones((2, 2))), x)
    with pytest.raises(ValueError):
        yota.compile(lambda a: ss.convolve2d(a[None], np.ones((1, 2)), boundary="nope"), x)
    with pytest.raises(yota.UnsupportedError, match="axes"):
        yota.compile(lambda a: ss.fftconvolve(a, np.ones(2), axes=0), x)
