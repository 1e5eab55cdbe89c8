"""``yota.vmap``: batches against a Python loop over the examples; per-example gradients
as one program of GEMMs; in_axes/out_axes as ints, None and structures; random draws per
example; guards per example; compositions (vmap of grad, grad of vmap, jvp of vmap, vmap
of jvp, vmap of vmap, loops); errors; interp and llvm."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import yota
import yota.autograd as ag
from yota.transforms import TransformError, _programs

BACKENDS = ["interp", "llvm"]


def loss(params: Any, x: Any, y: Any) -> Any:
    W1, b1, W2, b2 = params
    h = np.tanh(W1 @ x + b1)
    return (W2 @ h + b2 - y) ** 2


def data(n: int = 5, d: int = 4, h: int = 6) -> tuple[Any, Any, Any]:
    r = np.random.default_rng(0)
    params = (r.normal(size=(h, d)), r.normal(size=h), r.normal(size=h), 0.3)
    return params, r.normal(size=(n, d)), r.normal(size=n)


@pytest.mark.parametrize("backend", BACKENDS)
def test_per_example_gradients(backend: str) -> None:
    params, X, Y = data()
    grad = ag.grad(loss)
    pe = yota.vmap(grad, in_axes=(None, 0, 0), backend=backend)
    g = leaves(pe(params, X, Y))
    for i in range(len(X)):
        for a, b in zip(g, leaves(grad(params, X[i], Y[i])), strict=True):
            np.testing.assert_allclose(a[i], b, rtol=1e-10)
    g2 = leaves(pe(params, X * 2, Y))  # replayed
    np.testing.assert_allclose(g2[1][3], leaves(grad(params, X[3] * 2, Y[3]))[1], rtol=1e-10)


def leaves(g: Any) -> list[Any]:
    """A structure's gradients in order (a dict by path, or the argument's structure)."""
    return list(g.values()) if isinstance(g, dict) else list(g)


def test_per_example_gradients_are_one_program_of_gemms() -> None:
    params, X, Y = data(n=8)
    grad = ag.grad(loss)
    pe = yota.vmap(grad, in_axes=(None, 0, 0))
    pe(params, X, Y)
    (programs,) = _programs[grad].values()
    text = str(programs[0].fn)
    assert "loop" not in text and "call " not in text.replace("callee", "")
    assert text.count("= matmul") <= 3  # W1 x for all examples at once, W2 h, dh


def test_in_axes_int_none_negative_and_structures() -> None:
    r = np.random.default_rng(1)
    w, X = r.normal(size=3), r.normal(size=(3, 4))
    f = lambda w, x: np.sin(w * x)  # noqa: E731
    np.testing.assert_allclose(yota.vmap(f, in_axes=(None, 1))(w, X), np.sin(w * X.T))
    np.testing.assert_allclose(yota.vmap(f, in_axes=(None, -1))(w, X), np.sin(w * X.T))
    np.testing.assert_allclose(yota.vmap(f, out_axes=1)(X.T, X.T), np.sin(X.T * X.T).T)
    p = {"a": X.T, "b": w}
    g = yota.vmap(lambda p: p["a"] * p["b"], in_axes=({"a": 0, "b": None},))
    np.testing.assert_allclose(g(p), X.T * w)
    t = yota.vmap(lambda p, s: (p[0] + p[1] * s, 2.0), in_axes=((0, None), None),
                  out_axes=(0, None))
    out, two = t((X.T, w), 3.0)
    assert two == 2.0
    np.testing.assert_allclose(out, X.T + w * 3.0)


@dataclass
class Model:
    W: np.ndarray
    b: np.ndarray


def test_structured_arguments_and_results() -> None:
    r = np.random.default_rng(2)
    m, X = Model(r.normal(size=(2, 3)), r.normal(size=2)), r.normal(size=(4, 3))

    def f(m: Model, x: np.ndarray) -> Any:
        z = m.W @ x + m.b
        return {"z": z, "s": np.sum(z), "c": 1.0}

    out = yota.vmap(f, in_axes=(None, 0))(m, X)
    np.testing.assert_allclose(out["z"], X @ m.W.T + m.b)
    np.testing.assert_allclose(out["s"], (X @ m.W.T + m.b).sum(1))
    np.testing.assert_allclose(out["c"], np.ones(4))  # a constant, broadcast


def test_random_draws_per_example_as_a_loop_draws_them() -> None:
    f = yota.vmap(lambda x: x + np.random.standard_normal(2))
    np.random.seed(3)
    got = [f(np.zeros((3, 2))) for _ in range(2)]
    np.random.seed(3)
    eager = [np.random.standard_normal(2) for _ in range(6)]
    np.testing.assert_allclose(np.vstack(got), np.vstack(eager), rtol=1e-15)


def test_branches_per_example() -> None:
    f = yota.vmap(lambda x: np.sin(x) if np.sum(x) > 0 else np.cos(x))
    X = np.abs(np.random.default_rng(4).normal(size=(3, 2)))
    np.testing.assert_allclose(f(X), np.sin(X))
    with pytest.raises(TransformError, match="different branches"):
        f(X * np.array([[1.0], [-1.0], [1.0]]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_of_vmap_and_jvp_of_vmap(backend: str) -> None:
    r = np.random.default_rng(5)
    W, X = r.normal(size=(2, 3)), r.normal(size=(4, 3))
    batched = yota.vmap(lambda W, x: np.tanh(W @ x), in_axes=(None, 0))

    def total(W: Any, X: Any) -> Any:
        return np.sum(batched(W, X) ** 2)

    _, g = yota.grad(total, W, X, backend=backend)
    t = np.tanh(X @ W.T)
    np.testing.assert_allclose(g[0], (2 * t * (1 - t ** 2)).T @ X, rtol=1e-10)
    _, tv = yota.jvp(batched, (W, X), (np.ones_like(W), np.zeros_like(X)), backend=backend)
    np.testing.assert_allclose(tv, (1 - t ** 2) * X.sum(1, keepdims=True), rtol=1e-10)


def test_vmap_of_jvp_and_of_vmap() -> None:
    r = np.random.default_rng(6)
    x, V = r.normal(size=3), r.normal(size=(5, 3))
    jv = yota.vmap(lambda v: yota.jvp(np.sin, (x,), (v,))[1])(V)
    np.testing.assert_allclose(jv, np.cos(x) * V)
    A, B = r.normal(size=(3, 4)), r.normal(size=5)
    ff = yota.vmap(yota.vmap(lambda a, b: a * b + np.sin(a), in_axes=(0, None)),
                   in_axes=(None, 0))
    expect = np.array([[A[i] * B[j] + np.sin(A[i]) for i in range(3)] for j in range(5)])
    np.testing.assert_allclose(ff(A, B), expect)


def test_a_rolled_python_loop_per_example() -> None:
    def rnn(W: Any, xs: Any) -> Any:
        h = np.zeros(3)
        for t in range(40):
            h = np.tanh(W @ h + xs[t])
        return h

    r = np.random.default_rng(7)
    W, XS = r.normal(size=(3, 3)) * 0.5, r.normal(size=(4, 40, 3))
    out = yota.vmap(rnn, in_axes=(None, 0))(W, XS)
    np.testing.assert_allclose(out, [rnn(W, xs) for xs in XS], rtol=1e-12)
    g = yota.vmap(ag.grad(lambda W, xs: np.sum(rnn(W, xs))), in_axes=(None, 0))(W, XS)
    for i in range(4):
        gi = yota.grad(lambda W, xs: np.sum(rnn(W, xs)), W, XS[i])[1][0]
        np.testing.assert_allclose(g[i], gi, rtol=1e-10)


def test_linear_algebra_per_example() -> None:
    r = np.random.default_rng(8)
    A = r.normal(size=(4, 3, 3)) + 3 * np.eye(3)
    b = r.normal(size=3)
    out = yota.vmap(lambda a: np.linalg.solve(a, b))(A)
    np.testing.assert_allclose(out, [np.linalg.solve(a, b) for a in A], rtol=1e-12)


def test_errors_are_clear() -> None:
    f = lambda a, b: a + b  # noqa: E731
    with pytest.raises(TransformError, match="different batch sizes"):
        yota.vmap(f)(np.ones(3), np.ones(4))
    with pytest.raises(TransformError, match="no argument is batched"):
        yota.vmap(f, in_axes=None)(np.ones(3), np.ones(3))
    with pytest.raises(TransformError, match="in_axes"):
        yota.vmap(f, in_axes=(0,))(np.ones(3), np.ones(3))
    with pytest.raises(TransformError, match="no axis 1"):
        yota.vmap(f, in_axes=(1, None))(np.ones(3), np.ones(3))
    with pytest.raises(YotaErrorOrSubclass, match="out_axes is None"):
        yota.vmap(f, in_axes=(0, None), out_axes=None)(np.ones(3), np.ones(3))


YotaErrorOrSubclass = yota.YotaError
