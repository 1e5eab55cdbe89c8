"""``yota.jacobian`` and ``yota.hessian``: against Jacobians built row by row from
``yota.grad`` and Hessians from nested gradients, in both modes, with structured
arguments and results, argnums, and errors; interp and llvm. Each is one program."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import yota
from yota.transforms import TransformError, _programs

BACKENDS = ["interp", "llvm"]
MODES = ["fwd", "rev", "auto"]


def f(x: Any, A: Any) -> Any:
    return np.tanh(A @ x) * np.sum(x ** 2)


def rows_by_grad(g: Any, x: Any, n: int) -> np.ndarray:
    """The Jacobian of vector function ``g`` at ``x``, one ``yota.grad`` per row."""
    return np.array([yota.grad(lambda z, i=i: g(z)[i], x)[1][0] for i in range(n)])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MODES)
def test_jacobian_equals_rows_of_gradients(mode: str, backend: str) -> None:
    r = np.random.default_rng(0)
    x, A = r.normal(size=3), r.normal(size=(5, 3))
    J = yota.jacobian(f, x, A, mode=mode, backend=backend)
    assert J.shape == (5, 3)
    np.testing.assert_allclose(J, rows_by_grad(lambda z: f(z, A), x, 5), rtol=1e-10)
    JA = yota.jacobian(f, x, A, argnums=1, mode=mode, backend=backend)
    assert JA.shape == (5, 5, 3)
    flat = rows_by_grad(lambda a: f(x, a), A, 5)
    np.testing.assert_allclose(JA, flat, rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("mode", MODES)
def test_shapes_out_shape_plus_arg_shape(mode: str) -> None:
    x = np.arange(6.0).reshape(2, 3) / 10
    J = yota.jacobian(lambda x: np.sin(x).T, x, mode=mode)
    assert J.shape == (3, 2, 2, 3)
    expect = np.einsum("ji,jk,il->ijkl", np.cos(x), np.eye(2), np.eye(3))
    np.testing.assert_allclose(J, expect, rtol=1e-12)
    s = yota.jacobian(lambda x: np.sum(x ** 2), x, mode=mode)
    np.testing.assert_allclose(s, 2 * x)
    v = yota.jacobian(lambda a: a * np.ones(3), 2.0, mode=mode)
    np.testing.assert_allclose(v, np.ones(3))


@dataclass
class Layer:
    W: np.ndarray
    b: np.ndarray
    act: str


def layer(p: Layer, x: np.ndarray) -> Any:
    h = p.W @ x + p.b
    return {"h": np.tanh(h) if p.act == "tanh" else h, "norm": np.sum(h ** 2)}


@pytest.mark.parametrize("mode", MODES)
def test_structured_arguments_and_results(mode: str) -> None:
    r = np.random.default_rng(1)
    p, x = Layer(r.normal(size=(2, 3)), r.normal(size=2), "tanh"), r.normal(size=3)
    Jp, Jx = yota.jacobian(layer, p, x, argnums=(0, 1), mode=mode)["h"]
    assert isinstance(Jp, Layer) and Jp.act == "tanh"
    assert Jp.W.shape == (2, 2, 3) and Jp.b.shape == (2, 2) and Jx.shape == (2, 3)
    h = p.W @ x + p.b
    d = 1 - np.tanh(h) ** 2
    np.testing.assert_allclose(Jp.b, np.diag(d), rtol=1e-12)
    np.testing.assert_allclose(Jx, d[:, None] * p.W, rtol=1e-12)
    np.testing.assert_allclose(Jp.W, np.einsum("i,ij,k->ijk", d, np.eye(2), x), rtol=1e-12)
    norm = yota.jacobian(layer, p, x, mode=mode)["norm"]
    np.testing.assert_allclose(norm.W, 2 * np.outer(h, x), rtol=1e-12)


def logreg(w: Any, X: Any, y: Any) -> Any:
    return np.mean(np.log1p(np.exp(-y * (X @ w)))) + 0.01 * np.sum(w ** 4)


def test_hessian_equals_nested_gradients() -> None:
    r = np.random.default_rng(2)
    w, X, y = r.normal(size=4), r.normal(size=(10, 4)), np.sign(r.normal(size=10))
    H = yota.hessian(logreg, w, X, y)
    grad = lambda w: yota.grad(logreg, w, X, y)[1][0]  # noqa: E731
    nested = np.array([yota.grad(lambda z, i=i: grad(z)[i], w)[1][0] for i in range(4)])
    np.testing.assert_allclose(H, nested, rtol=1e-10)
    np.testing.assert_allclose(H, H.T, rtol=1e-12)
    eps = 1e-5
    fd = np.array([(grad(w + eps * e) - grad(w - eps * e)) / (2 * eps) for e in np.eye(4)])
    np.testing.assert_allclose(H, fd, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("backend", BACKENDS)
def test_hessian_of_structures_and_argnums(backend: str) -> None:
    def g(p: dict[str, Any], s: Any) -> Any:
        return np.sum(p["a"] ** 2 * p["b"]) * s

    p, s = {"a": np.array([1.0, 2.0]), "b": np.array([3.0, -1.0])}, 2.0
    H = yota.hessian(g, p, s, backend=backend)
    np.testing.assert_allclose(H["a"]["a"], np.diag(2 * p["b"] * s))
    np.testing.assert_allclose(H["a"]["b"], np.diag(2 * p["a"] * s))
    np.testing.assert_allclose(H["b"]["b"], np.zeros((2, 2)))
    Hp, Hs = yota.hessian(g, p, s, argnums=(0, 1), backend=backend)  # as jacfwd(jacrev)
    np.testing.assert_allclose(Hp["a"][0]["b"], np.diag(2 * p["a"] * s))
    np.testing.assert_allclose(Hp["a"][1], 2 * p["a"] * p["b"])
    np.testing.assert_allclose(Hs[0]["b"], p["a"] ** 2)
    assert float(Hs[1]) == 0.0


def test_one_program_per_jacobian() -> None:
    def h(x: Any) -> Any:
        return np.sin(x) * 2.0

    yota.jacobian(h, np.ones(50), mode="fwd")
    (programs,) = _programs[h].values()
    text = str(programs[0].fn)
    assert "loop" not in text  # the 50 basis tangents are one batch, not 50 calls


def test_errors_are_clear() -> None:
    x = np.ones(3)
    with pytest.raises(TransformError, match="mode"):
        yota.jacobian(np.sin, x, mode="sideways")
    with pytest.raises(TransformError, match="argnums"):
        yota.jacobian(np.sin, x, argnums=2)
    with pytest.raises(TransformError, match="no float leaf"):
        yota.jacobian(lambda i: i * 2.0, np.arange(3))
    with pytest.raises(TransformError, match="scalar"):
        yota.hessian(np.sin, x)


def test_repeated_calls_run_the_remembered_program() -> None:
    from yota.transforms import stats

    def g(x: Any) -> Any:
        return np.sum(np.exp(x) * x)

    x = np.array([0.1, 0.2])
    yota.hessian(g, x)
    hits = stats.hits
    H = yota.hessian(g, x * 2)
    J = yota.jacobian(np.exp, x)
    J2 = yota.jacobian(np.exp, x * 3)
    assert stats.hits == hits + 2
    np.testing.assert_allclose(H, np.diag(np.exp(2 * x) * (2 + 2 * x)))
    np.testing.assert_allclose(J2, np.diag(np.exp(3 * x)))
    assert J.shape == (2, 2)
