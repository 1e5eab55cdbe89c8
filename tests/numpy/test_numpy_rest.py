"""The rest of NumPy found missing (issue 30, deliverable 6), the parts a row of
``tests/numpy/test_numpy_functions.py``'s table cannot hold (that table has the stacking of one
array, lists holding traced values, traced ``linspace``/``logspace``/``geomspace``, the
computed ``np.pad`` modes and ``ufunc.at`` rows, with values, gradients, second order and
the CUDA emulation):

- gathers from plain arrays read from outside (a global, a closure cell) with traced
  integer indices: ``G[ix, iy]``, ``np.take``, ``np.take_along_axis``, the indices from
  ``np.floor(x).astype(int)``; the gradient flows to the traced values, and the array is
  read when the program runs (a change in place is seen);
- ``np.int64(x)``, ``x.astype(int)``, ``np.floor(x).astype(int)`` as integer values with no
  gradient, usable as indices;
- float16 arguments of ``yota.grad`` and ``yota.compile``: computed in float32, results
  cast back as NumPy types them;
- what NumPy does with lists that cannot be arrays (ragged), the ufunc stand-ins outside
  traces, traced shapes still read through NumPy's own code, edge cases of the spaces and
  of ``ufunc.at``, and the new modules' doctests.

Finite differences are central (step 1e-6 on float64, truncation error ~1e-12 relative
for these smooth functions); inputs of ``floor`` stay at least 0.1 from an integer, so
no step crosses one.
"""

from __future__ import annotations

import doctest
import importlib
import warnings
from typing import Any

import numpy as np
import pytest
from support.gradcheck import check_grad

import yota

BACKENDS = ["interp", "llvm"]
GRID = np.sin(np.arange(42.0)).reshape(6, 7) + 2.0  # a small plain array (a constant)
BIG = np.cos(np.arange(3000.0)).reshape(50, 60)  # a large one (a run-time input)


def _positions(n: int, high: float, seed: int = 0) -> np.ndarray:
    """``n`` values in [0.2, high - 1), each at least 0.1 from an integer."""
    r = np.random.default_rng(seed).uniform(0.2, high - 1.2, n)
    return np.floor(r) + 0.15 + 0.7 * (r - np.floor(r))


def _check(f: Any, *args: Any, backend: str) -> None:
    """Value of ``yota.grad`` equals ``f``'s, gradients equal finite differences."""
    val, g = yota.grad(f, *args, backend=backend)
    np.testing.assert_allclose(val, f(*args), rtol=1e-12, atol=1e-12)
    assert check_grad(f, list(args), g) >= 1


# -- gathers from plain arrays read from outside ----------------------------------------------
def gather_global(x: Any) -> Any:
    ix = np.floor(x).astype(int)
    return np.sum(GRID[ix, ix + 1] * x)


def gather_take(x: Any) -> Any:
    ix = np.floor(x).astype(np.int64)
    return np.sum(np.take(GRID, ix, axis=1) * x[0]) + np.sum(np.take(GRID, ix) * x)


def gather_take_along(x: Any) -> Any:
    ix = np.floor(x).astype(int)[:, None]
    return np.sum(np.take_along_axis(GRID[:2], ix, axis=1) * x[:, None])


def gather_big(x: Any) -> Any:
    ix = np.floor(x * 7).astype(int)
    return np.sum(BIG[ix, ix] ** 2 * x)


def make_closure(grid: np.ndarray) -> Any:
    def f(x: Any) -> Any:
        i = np.floor(x).astype(int)
        w = x - i  # linear interpolation between grid[i] and grid[i + 1]
        return np.sum((1 - w) * grid[i] + w * grid[i + 1])
    return f


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("f", [gather_global, gather_take, gather_take_along, gather_big,
                               make_closure(np.linspace(0.0, 3.0, 9) ** 2)],
                         ids=["global", "take", "take_along_axis", "large", "closure"])
def test_gathers_from_plain_arrays_read_from_outside(f: Any, backend: str) -> None:
    for seed in range(2):  # a second call: the program again, on other positions
        _check(f, _positions(2, 6.0, seed), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_gathered_array_changed_in_place_is_read_again(backend: str) -> None:
    grid = np.arange(8.0) ** 2
    f = make_closure(grid)
    x = np.array([1.5, 4.25])
    assert float(yota.grad(f, x, backend=backend)[0]) == f(x)
    grid[2] = 100.0  # read at every call (a run-time input), never stale
    val, g = yota.grad(f, x, backend=backend)
    assert float(val) == f(x)
    np.testing.assert_allclose(g[0], [100.0 - 1.0, 25.0 - 16.0])


def test_an_array_made_by_the_function_and_indexed_by_a_traced_index_is_a_clear_error() -> None:
    def f(x: Any) -> Any:
        table = np.arange(5.0) ** 2  # made here: a plain NumPy array
        return np.sum(table[np.floor(x).astype(int)] * x)

    with pytest.raises(yota.UnsupportedError, match="np.take"):
        yota.grad(f, np.array([1.5, 2.5]))

    def g(x: Any) -> Any:  # the fix the message gives
        return np.sum(np.take(np.arange(5.0) ** 2, np.floor(x).astype(int)) * x)

    _check(g, np.array([1.5, 2.5]), backend="llvm")


# -- integer values from traced floats ---------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("to_int", [lambda v: v.astype(int), lambda v: np.floor(v).astype(int),
                                    lambda v: v.astype(np.int32), lambda v: np.int64(v[0]),
                                    lambda v: np.int32(v[1])],
                         ids=["astype_int", "floor_astype", "astype_int32", "np.int64",
                              "np.int32"])
def test_integer_values_have_no_gradient_and_index(to_int: Any, backend: str) -> None:
    def f(x: Any) -> Any:
        i = to_int(x)
        return np.sum(GRID[i, 2] * x) + np.sum(i * x)

    x = np.array([2.5, 1.3])
    _check(f, x, backend=backend)
    _, g = yota.grad(f, x, backend=backend)
    i = to_int(x)  # d/dx of GRID[i, 2] * x + i * x with i constant
    np.testing.assert_allclose(g[0], np.broadcast_to(GRID[i, 2] + i, x.shape), rtol=1e-12)


def test_np_int64_of_a_traced_scalar_is_guarded() -> None:
    """``np.int64(x)`` leaves the trace as ``int(x)`` does: a constant, checked per call."""
    f = lambda x: x * np.int64(x)  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", yota.RetraceWarning)
        for x in (2.5, 2.75, 3.5, -1.5):
            val, g = yota.grad(f, np.array(x))
            assert float(val) == x * np.int64(x) and float(g[0]) == np.int64(x)


def test_np_int64_of_a_traced_array_says_what_to_write() -> None:
    with pytest.raises(yota.UnsupportedError, match=r"x\.astype\(np\.int64\)"):
        yota.grad(lambda x: np.sum(np.int64(x) * x), np.ones(2))


# -- float16 arguments -------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_float16_arguments_compute_in_float32_and_keep_their_dtype(backend: str) -> None:
    x = np.array([0.5, 1.25, -2.0], np.float16)
    f = lambda x: np.sum(np.sin(x) * x)  # noqa: E731
    val, g = yota.grad(f, x, backend=backend)
    x32 = x.astype(np.float32)
    v32, g32 = yota.grad(f, x32, backend=backend)
    assert np.asarray(val).dtype == f(x).dtype == np.float16 and g[0].dtype == np.float16
    assert val == np.float16(v32) and np.array_equal(g[0], g32[0].astype(np.float16))
    cf = yota.compile(lambda x: np.tanh(x) * 2, x, backend=backend)
    out = cf(x)
    assert out.dtype == np.float16 and np.array_equal(out, (np.tanh(x32) * 2).astype(np.float16))
    assert np.abs(out.astype(np.float32) - np.tanh(x32) * 2).max() < 1e-3  # float16 rounding


def test_float16_with_wider_arguments_and_in_structures() -> None:
    x = np.array([0.5, 1.5], np.float16)
    val, g = yota.grad(lambda x, w: np.sum(x * w), x, np.array([2.0, 3.0]))
    assert np.asarray(val).dtype == np.float64 and g[0].dtype == np.float16  # as NumPy
    assert g[1].dtype == np.float64 and np.array_equal(g[1], x.astype(np.float64))
    params = {"w": np.ones(2, np.float16), "b": 0.5, "n": 3}
    val, g = yota.grad(lambda p, x: np.sum(p["w"] * x) * p["n"] + p["b"], params, x)
    assert np.asarray(val).dtype == np.float16 and float(val) == 6.5
    assert g[0]["w"].dtype == np.float16 and g[0]["b"] == 1.0 and g[0]["n"] is None
    val, g = yota.grad(lambda s: s * s, np.float16(3.0))
    assert type(val) is np.float16 and float(g[0]) == 6.0 and g[0].dtype == np.float16


def test_float16_in_other_transforms_says_what_to_do() -> None:
    with pytest.raises(yota.YotaError, match="float16"):
        yota.jvp(lambda x: x * 2, (np.ones(2, np.float16),), (np.ones(2, np.float16),))


# -- lists, ufuncs and NumPy's own code -----------------------------------------------------------
def test_a_ragged_list_is_numpys_error() -> None:
    with pytest.raises(ValueError, match="inhomogeneous"):
        yota.grad(lambda a, b: np.mean([a, b]), np.ones(2), np.ones(3))


def test_the_ufuncs_are_numpys_outside_traces() -> None:
    exp, add = np.exp, np.add
    seen: list[Any] = []

    def f(x: Any) -> Any:
        seen.append((np.exp, np.add.at, np.exp.nin, repr(np.exp)))
        return np.sum(np.exp([x[0], x[1]]))

    yota.grad(f, np.ones(2))
    assert np.exp is exp and np.add is add and isinstance(np.exp, np.ufunc)
    # traced once as any function (NumPy converts the list: an error), then again with
    # NumPy answering lists, as the function's later traces are from the start
    assert [s[0] is exp for s in seen] == [True, False]
    stand_in, at, nin, text = seen[-1]
    assert at == add.at and nin == 1 and text == repr(exp)
    yota.grad(f, np.ones(3))
    assert len(seen) == 3 and seen[-1][0] is not exp and np.exp is exp


@pytest.mark.parametrize("backend", BACKENDS)
def test_traced_shapes_still_reach_numpys_code(backend: str) -> None:
    """A list holding a traced int (a shape, a count) is NumPy's business (``__index__``:
    a guard), not an array to build."""
    def f(x: Any) -> Any:
        n = np.argmax(x[:2]) + 2  # a traced int
        return np.sum(np.reshape(np.ones(6), (n, -1)) @ np.ones(6 // int(n)) * x[0]) + \
            np.sum(np.repeat(np.arange(3.0), [n, 1, 1]) * x[1])

    x = np.array([0.5, 2.0, 1.0])
    _check(f, x, backend=backend)


def test_spaces_keep_numpys_errors() -> None:
    a = np.array(1.0)
    with pytest.raises(ValueError, match="non-negative"):
        yota.grad(lambda a: np.sum(np.linspace(a, 2.0, -1)), a)
    with pytest.raises(ValueError, match="zero"):
        yota.grad(lambda a: np.sum(np.geomspace(a - 1.0, 2.0, 3)), a)


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_linspace_is_numpys(backend: str) -> None:
    f = lambda a, b: np.linspace(a, b, 7, dtype=int)  # noqa: E731
    a, b = np.array(-1.3), np.array(4.6)
    out = yota.compile(f, a, b, backend=backend)(a, b)
    want = f(a, b)
    assert out.dtype == want.dtype and np.array_equal(out, want)


def test_ufunc_at_edge_cases() -> None:
    def f(x: Any) -> Any:
        y = x.copy()
        np.maximum.at(y, (), 0.5)  # 0-d: the whole array once
        return y

    for x in (np.array(0.25), np.array(2.0)):
        assert float(yota.compile(f, x)(x)) == max(float(x), 0.5)

    def bad(x: Any) -> Any:
        y = x * 1.0
        np.multiply.at(y, [0, 5], 2.0)
        return y

    with pytest.raises(IndexError):
        yota.compile(bad, np.ones(3))
    outside = np.ones(3)
    with pytest.raises(yota.UnsupportedError, match="writes traced values into a plain"):
        yota.compile(lambda x: np.multiply.at(outside, [0], x), np.ones(1))
    assert np.array_equal(outside, np.ones(3))


PAD_EDGES = [(mode, kw, shape, w) for mode, kw in [
    ("linear_ramp", {"end_values": (1.5, -2.0)}), ("maximum", {"stat_length": ((1, 2), (3, 1))}),
    ("mean", {}), ("median", {"stat_length": 2}), ("minimum", {}),
    ("reflect", {"reflect_type": "odd"}), ("symmetric", {"reflect_type": "odd"})]
    for shape, w in [((), 0), ((0, 3), ((0, 0), (1, 1))), ((0, 3), 1), ((1, 3), ((2, 1), (3, 4)))]]


@pytest.mark.parametrize("mode, kw, shape, w", PAD_EDGES,
                         ids=[f"{m}-{s}-{w}" for m, _, s, w in PAD_EDGES])
def test_computed_pad_modes_at_the_edges(mode: str, kw: dict[str, Any], shape: Any,
                                         w: Any) -> None:
    """0-d and empty arrays, a size-1 axis, integer arrays (NumPy rounds a mean, floors a
    ramp): NumPy's values, or NumPy's error."""
    x = np.arange(1.0, 1.0 + int(np.prod(shape))).reshape(shape) * 1.7
    for to in (np.float64, np.int64):
        def f(x: Any, to: Any = to) -> Any:
            return np.pad(x.astype(to), w, mode, **kw)

        try:
            want = f(x)
        except ValueError as e:
            with pytest.raises(ValueError, match=str(e)[:20]):
                yota.compile(f, x, backend="interp")
            continue
        got = yota.compile(f, x, backend="interp")(x)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_pad_stat_length_of_zero_is_numpys_error() -> None:
    with pytest.raises(ValueError, match="stat_length of 0"):
        yota.grad(lambda x: np.sum(np.pad(x, 1, "maximum", stat_length=0)), np.ones(3))


@pytest.mark.parametrize("name", ["yota.numpy.sequences", "yota.numpy.padding",
                                  "yota.numpy.ufunc_at", "yota.numpy.creation"])
def test_module_doctests(name: str) -> None:
    assert doctest.testmod(importlib.import_module(name)).failed == 0, name
