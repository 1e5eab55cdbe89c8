"""JAX's ``argnums`` on yota.grad, simplegrad, aot and yota.autograd.grad (unselected
arguments are constants of the call: no gradient computed, None in the result), and
gradients shaped like the arguments (dicts, lists, tuples, NamedTuples, Tangents of
dataclasses and objects), which ``update_`` takes (issue 29)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import pytest

import yota
from yota import autograd as ag
from yota import fastpath
from yota.validate import argnums_tuple

grad_mod = importlib.import_module("yota.grad")
BACKENDS = ["interp", "llvm"]


def logistic(w: Any, X: Any, y: Any) -> Any:
    z = X @ w
    return np.mean(np.logaddexp(0.0, z) - y * z)


def data(n: int = 1100, d: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    return rng.normal(size=d), X, (rng.random(n) < 0.5).astype(np.float64)


# -- argnums --------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_argnums_selects_the_gradients(backend: str) -> None:
    w, X, y = data()
    val, full = yota.grad(logistic, w, X, y, backend=backend)
    for argnums in (0, (0,), -3, [0]):
        v, g = yota.grad(logistic, w, X, y, argnums=argnums, backend=backend)
        assert float(v) == pytest.approx(float(val), rel=1e-14)
        np.testing.assert_allclose(g[0], full[0], rtol=1e-12)
        assert g[1] is None and g[2] is None and len(g) == 3
    v, g = yota.grad(logistic, w, X, y, argnums=(0, 2), backend=backend)
    np.testing.assert_allclose(g[2], full[2], rtol=1e-12)
    assert g[1] is None


def test_unselected_arguments_cost_what_a_closure_over_them_costs() -> None:
    w, X, y = data()  # arrays of more than CONST_LIMIT elements: inputs either way
    yota.grad(logistic, w, X, y, argnums=0)
    [p_args] = [p for k, v in grad_mod.variants_of(logistic).items()
                if k[4] == (0,) and k[1] is None for p in v.programs]
    closure = lambda w: logistic(w, X, y)  # noqa: E731
    yota.grad(closure, w)
    [p_closure] = grad_mod.programs_of(closure)
    assert p_args.grads == (0,) and len(p_args.fn.outputs) == 2  # the value, dw
    assert sorted(op.name for op in p_args.fn.ops) == sorted(op.name for op in
                                                             p_closure.fn.ops)


def test_argnums_calls_take_the_fast_path() -> None:
    w, X, y = data(50)
    for _ in range(3):
        yota.grad(logistic, w, X, y, argnums=0)
    hits = yota.stats.hits
    for _ in range(4):
        _, g = yota.grad(logistic, w, X, y, argnums=0)
        assert g[1] is None
    assert yota.stats.hits == hits + 4
    table = fastpath.FAST_WRT[(None, (0,))]
    assert type(table[id(logistic)][1]).__name__ == "builtin_function_or_method"


@pytest.mark.parametrize("bad", [3, -4, (0, 5), "0", 1.0, (), None])
def test_bad_argnums_are_errors_naming_them(bad: Any) -> None:
    w, X, y = data(5)
    if bad is None:
        return  # None: every argument
    with pytest.raises(yota.YotaError, match="argnums .* does not name arguments"):
        yota.grad(logistic, w, X, y, argnums=bad)


def test_argnums_read_as_the_transformations_read_them() -> None:
    from yota.transforms import argnums_of

    for a, n in [(0, 3), (-1, 3), ((0, 2), 3), ([1, -1], 2)]:
        assert argnums_tuple(a, n, "grad") == argnums_of(a, n, "jacobian")


def test_argnums_inside_a_trace_and_of_simplegrad_and_autograd() -> None:
    w, X, y = data(8)

    def outer(w: Any) -> Any:
        _, g = yota.grad(logistic, w, X, y, argnums=0)
        assert g[1] is None and g[2] is None
        return np.sum(g[0] ** 2)

    val, g = yota.grad(outer, w)
    eps = 1e-6
    num = [(outer(w + eps * e) - outer(w - eps * e)) / (2 * eps) for e in np.eye(3)]
    np.testing.assert_allclose(g[0], num, rtol=1e-6)
    sg = yota.simplegrad(logistic, w, X, y, argnums=(0,))
    v, gw, gX, gy = sg(w, X, y)
    np.testing.assert_allclose(gw, yota.grad(logistic, w, X, y)[1][0], rtol=1e-12)
    assert gX is None and gy is None
    gw2 = ag.grad(logistic, argnums=0)(w, X, y)
    both = ag.grad(logistic, argnums=(0, 2))(w, X, y)
    assert isinstance(both, tuple) and len(both) == 2
    np.testing.assert_allclose(gw2, gw, rtol=1e-12)
    np.testing.assert_allclose(both[0], gw, rtol=1e-12)
    g_loss = ag.gradloss(logistic, argnums=-3)(w, X, y)
    np.testing.assert_allclose(g_loss[0], gw, rtol=1e-12)


def test_aot_with_argnums(tmp_path: Any) -> None:
    w, X, y = data(8)
    r = yota.aot(logistic, w, X, y, argnums=0, path=tmp_path)
    assert r.compiled and r.path.exists()


# -- gradients shaped like the arguments --------------------------------------------------------
@dataclass
class Linear:
    W: np.ndarray
    b: np.ndarray


@dataclass(frozen=True)
class Frozen:
    a: np.ndarray
    n: int


class Pair(NamedTuple):
    x: np.ndarray
    s: float


class Plain:
    def __init__(self) -> None:
        self.v = np.array([1.0, 2.0])
        self.name = "plain"


def loss(m: Linear, p: dict[str, Any], xs: list[Any], pair: Pair, fr: Frozen, pl: Plain,
         t: tuple[Any, ...]) -> Any:
    y = m.W @ xs[0] + m.b + p["W1"] @ xs[1] * p["scale"]
    return (np.sum(y ** 2) * pair.s + np.sum(pair.x) + np.sum(fr.a ** 2) * fr.n
            + np.sum(pl.v * t[0]) + t[1])


def args() -> tuple[Any, ...]:
    rng = np.random.default_rng(1)
    return (Linear(rng.normal(size=(2, 3)), rng.normal(size=2)),
            {"W1": rng.normal(size=(2, 2)), "scale": 0.5, "n": 3, "unused": np.ones(4)},
            [rng.normal(size=3), rng.normal(size=2)], Pair(rng.normal(size=2), 1.5),
            Frozen(rng.normal(size=2), 2), Plain(), (rng.normal(size=2), 0.25))


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_are_shaped_like_the_arguments(backend: str) -> None:
    a = args()
    for _ in range(3):  # the first call, then the fast path (natively on llvm)
        _, g = yota.grad(loss, *a, backend=backend)
        m, p, xs, pair, fr, pl, t = g
        assert isinstance(m, yota.Tangent) and m._type is Linear and m.W.shape == (2, 3)
        assert type(p) is dict and list(p) == ["W1", "scale", "n", "unused"]
        assert p["W1"].shape == (2, 2) and isinstance(p["scale"], float)
        assert p["n"] is None and p["unused"] is None  # not differentiable; not used
        assert type(xs) is list and len(xs) == 2 and xs[0].shape == (3,)
        assert type(pair) is Pair and isinstance(pair.s, float)
        assert isinstance(fr, yota.Tangent) and fr.n is None and fr.a.shape == (2,)
        assert isinstance(pl, yota.Tangent) and pl.name is None and pl.v.shape == (2,)
        assert type(t) is tuple and isinstance(t[1], float)
        flat = g.flat
        assert flat[0][("W",)] is m.W and flat[1][("W1",)] is p["W1"]
        assert ("n",) not in flat[1]


def test_tangents_are_read_only_and_say_their_fields() -> None:
    _, g = yota.grad(lambda m: np.sum(m.W) + np.sum(m.b), Linear(np.ones((2, 2)), np.ones(2)))
    t = g[0]
    assert "Tangent[Linear](W=" in repr(t) and dict(t)["b"] is t.b
    with pytest.raises(AttributeError, match="read-only"):
        t.W = np.zeros((2, 2))
    with pytest.raises(AttributeError, match="has no field 'c'.*W, b"):
        _ = t.c


def test_update_takes_shaped_gradients_and_the_flat_view() -> None:
    a, b = args(), args()
    _, g = yota.grad(loss, *a)
    for i in (0, 1, 2, 5):  # (3, 6: a NamedTuple, a tuple holding a float: immutable)
        yota.update_(a[i], g[i], lambda x, gx: x - 0.1 * gx)
        yota.update_(b[i], g.flat[i], lambda x, gx: x - 0.1 * gx)
    np.testing.assert_array_equal(a[0].W, b[0].W)
    np.testing.assert_array_equal(a[1]["W1"], b[1]["W1"])
    assert a[1]["scale"] == b[1]["scale"] != 0.5
    np.testing.assert_array_equal(a[2][1], b[2][1])
    np.testing.assert_array_equal(a[5].v, b[5].v)


def test_autograd_gradients_are_shaped_too() -> None:
    params = {"W": np.ones((2, 2)), "b": np.zeros(2)}
    g = ag.grad(lambda p, x: np.sum(p["W"] @ x + p["b"]))(params, np.ones(2))
    assert type(g) is dict and g["b"].shape == (2,)
    m = Linear(np.ones((2, 2)), np.zeros(2))
    t = ag.grad(lambda m, x: np.sum(m.W @ x + m.b))(m, np.ones(2))
    assert isinstance(t, yota.Tangent) and t.W.shape == (2, 2)
    J = ag.diff(lambda: np.sum(w.value * 2.0)) if (w := ag.Param(np.ones(2))) else None
    np.testing.assert_allclose(ag.grad(J, w), [2.0, 2.0])


def test_nested_gradients_of_structures_are_shaped() -> None:
    def inner(p: dict[str, Any], x: Any) -> Any:
        return np.sum(np.tanh(p["w"] * x))

    def outer(x: Any) -> Any:
        _, g = yota.grad(inner, {"w": np.array([0.5, 1.5])}, x)
        return np.sum(g[0]["w"] ** 2)

    x = np.array([0.3, -0.7])
    val, g = yota.grad(outer, x)
    eps = 1e-6
    num = [(outer(x + eps * e) - outer(x - eps * e)) / (2 * eps) for e in np.eye(2)]
    np.testing.assert_allclose(g[0], num, rtol=1e-6)
