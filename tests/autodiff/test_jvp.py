"""``yota.jvp`` and ``yota.hvp``: forward mode compiled like ``yota.grad``: tangents against
central differences and against constructions from ``grad``, structures, caching and
guards, random draws, primitives, loops, and compositions both ways with ``grad``;
interp and llvm."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import yota
from yota.transforms import TransformError, stats

BACKENDS = ["interp", "llvm"]
EPS = 1e-6


def fd(f: Any, primals: tuple[Any, ...], tangents: tuple[Any, ...], eps: float = EPS) -> Any:
    """Central difference of ``f`` along ``tangents`` (arrays and floats)."""
    plus = f(*[p + eps * t for p, t in zip(primals, tangents, strict=True)])
    minus = f(*[p - eps * t for p, t in zip(primals, tangents, strict=True)])
    return (np.asarray(plus) - np.asarray(minus)) / (2 * eps)


def mlp(W1: Any, b1: Any, W2: Any, x: Any) -> Any:
    return np.tanh(W2 @ np.tanh(W1 @ x + b1))


@pytest.mark.parametrize("backend", BACKENDS)
def test_jvp_matches_finite_differences(backend: str) -> None:
    r = np.random.default_rng(0)
    primals = (r.normal(size=(4, 3)), r.normal(size=4), r.normal(size=(2, 4)), r.normal(size=3))
    tangents = tuple(r.normal(size=p.shape) for p in primals)
    y, t = yota.jvp(mlp, primals, tangents, backend=backend)
    np.testing.assert_allclose(y, mlp(*primals), rtol=1e-12)
    np.testing.assert_allclose(t, fd(mlp, primals, tangents), rtol=1e-7, atol=1e-9)


@dataclass
class Params:
    W: np.ndarray
    b: np.ndarray
    scale: float
    name: str


def structured(p: Params, x: np.ndarray, n: int) -> Any:
    z = np.sin(p.W @ x + p.b) * p.scale
    return {"z": z, "s": float(np.sum(z)) * 0.0 + np.sum(z ** 2), "n": n, "k": 2.5}


def test_structured_primals_and_results() -> None:
    r = np.random.default_rng(1)
    p = Params(r.normal(size=(3, 2)), r.normal(size=3), 1.5, "layer")
    tp = Params(r.normal(size=(3, 2)), r.normal(size=3), 0.5, "ignored")
    x, tx = r.normal(size=2), r.normal(size=2)
    y, t = yota.jvp(structured, (p, x, 7), (tp, tx, 0))
    assert y["n"] == 7 and t["n"] is None and t["k"] == 0.0
    assert isinstance(t["s"], np.ndarray) or isinstance(t["s"], float)

    def z_of(W: Any, b: Any, scale: Any, x: Any) -> Any:
        return structured(Params(W, b, scale, "layer"), x, 7)["z"]

    expect = fd(z_of, (p.W, p.b, p.scale, x), (tp.W, tp.b, tp.scale, tx))
    np.testing.assert_allclose(t["z"], expect, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(t["s"], 2 * np.sum(y["z"] * t["z"]), rtol=1e-10)


def test_tangents_must_match_the_primals() -> None:
    x = np.ones(3)
    with pytest.raises(TransformError, match="shape"):
        yota.jvp(np.sin, (x,), (np.ones(2),))
    with pytest.raises(TransformError, match="primals"):
        yota.jvp(np.sin, (x,), (x, x))
    with pytest.raises(TransformError, match=r"tangents\[0\]\.b is missing"):
        yota.jvp(lambda p: p["a"] * p["b"], ({"a": x, "b": x},), ({"a": x},))


def test_repeated_calls_replay_and_a_failed_guard_retraces() -> None:
    def f(x: Any) -> Any:
        return np.sin(x) if np.sum(x) > 0 else np.cos(x)

    before = stats.hits
    x, t = np.array([1.0, 2.0]), np.array([1.0, -1.0])
    _, t1 = yota.jvp(f, (x,), (t,))
    _, t2 = yota.jvp(f, (x * 2,), (t,))
    assert stats.hits >= before + 1
    np.testing.assert_allclose(t1, np.cos(x) * t)
    np.testing.assert_allclose(t2, np.cos(2 * x) * t)
    _, t3 = yota.jvp(f, (-x,), (t,))  # the other branch: traced again
    np.testing.assert_allclose(t3, np.sin(x) * t)


def test_random_draws_are_drawn_again_as_eager_numpy() -> None:
    def f(x: Any) -> Any:
        return x * np.random.standard_normal(x.shape)

    x, t = np.ones(3), np.arange(3.0)
    np.random.seed(5)
    got = [yota.jvp(f, (x,), (t,))[1] for _ in range(3)]
    np.random.seed(5)
    eager = [t * np.random.standard_normal(3) for _ in range(3)]
    np.testing.assert_allclose(got, eager, rtol=1e-15)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_python_loop_rolled_into_a_loop(backend: str) -> None:
    def rnn(W: Any, h: Any, xs: Any) -> Any:
        for t in range(40):
            h = np.tanh(W @ h + xs[t])
        return h

    r = np.random.default_rng(2)
    primals = (r.normal(size=(3, 3)) * 0.5, r.normal(size=3), r.normal(size=(40, 3)))
    tangents = tuple(r.normal(size=p.shape) for p in primals)
    _, t = yota.jvp(rnn, primals, tangents, backend=backend)
    np.testing.assert_allclose(t, fd(rnn, primals, tangents), rtol=1e-6, atol=1e-9)


@yota.primitive
def clip_grad(x: Any) -> Any:
    return np.tanh(x)


@yota.diffrule(clip_grad, "x")
def _(x: Any, *, y: Any, dy: Any) -> Any:
    return 2.0 * dy  # not tanh's derivative: the rule, not the body, defines it


def test_a_primitive_s_rule_defines_its_tangent() -> None:
    x, t = np.array([0.3, -0.2]), np.array([1.0, 3.0])
    y, ty = yota.jvp(lambda x: clip_grad(x) * 1.0, (x,), (t,))
    np.testing.assert_allclose(y, np.tanh(x))
    np.testing.assert_allclose(ty, 2.0 * t)


def loss(x: Any) -> Any:
    A = np.array([[1.0, -0.5, 0.2], [0.3, 0.8, -1.1]])
    return np.sum(np.tanh(A @ x) ** 2) + np.sum(x ** 4) / 4


def grad_of(f: Any) -> Any:
    return lambda x: yota.grad(f, x)[1][0]


def hessian_by_nested_grads(f: Any, x: Any) -> np.ndarray:
    """Row i: the gradient of ``grad(f)[i]`` (a grad of a grad)."""
    return np.array([yota.grad(lambda z, i=i: grad_of(f)(z)[i], x)[1][0]
                     for i in range(x.size)])


@pytest.mark.parametrize("backend", BACKENDS)
def test_jvp_of_grad_is_a_hessian_vector_product(backend: str) -> None:
    r = np.random.default_rng(3)
    x, v = r.normal(size=3), r.normal(size=3)
    g, hv = yota.jvp(grad_of(loss), (x,), (v,), backend=backend)
    np.testing.assert_allclose(g, grad_of(loss)(x), rtol=1e-12)
    np.testing.assert_allclose(hv, hessian_by_nested_grads(loss, x) @ v, rtol=1e-9)
    np.testing.assert_allclose(yota.hvp(loss, (x,), v, backend=backend), hv, rtol=1e-10)


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_of_jvp(backend: str) -> None:
    r = np.random.default_rng(4)
    x, v = r.normal(size=3), r.normal(size=3)

    def directional(x: Any) -> Any:
        return yota.jvp(loss, (x,), (v,))[1]  # <grad loss(x), v>

    val, g = yota.grad(directional, x, backend=backend)
    np.testing.assert_allclose(val, grad_of(loss)(x) @ v, rtol=1e-10)
    np.testing.assert_allclose(g[0], hessian_by_nested_grads(loss, x) @ v, rtol=1e-9)


def test_jvp_of_jvp_is_a_second_directional_derivative() -> None:
    f = lambda x: np.sum(np.sin(x) ** 3)  # noqa: E731
    x, u, v = np.array([0.3, 1.1]), np.array([1.0, 0.5]), np.array([-0.2, 2.0])
    _, d2 = yota.jvp(lambda x: yota.jvp(f, (x,), (u,))[1], (x,), (v,))
    h = np.diag(6 * np.sin(x) * np.cos(x) ** 2 - 3 * np.sin(x) ** 3)
    np.testing.assert_allclose(d2, u @ h @ v, rtol=1e-10)


def test_hvp_by_argnums_and_structures() -> None:
    def f(a: Any, p: dict[str, Any]) -> Any:
        return np.sum(a ** 2 * p["w"]) + np.sum(np.sin(p["w"]) * p["c"])

    a, p = np.array([1.0, 2.0]), {"w": np.array([0.5, -1.0]), "c": np.array([3.0, 1.0])}
    va, vp = np.array([1.0, 0.0]), {"w": np.array([0.0, 1.0]), "c": np.array([1.0, 1.0])}
    ha, hp = yota.hvp(f, (a, p), (va, vp), argnums=(0, 1))
    # d/da = 2 a w; d/dw = a^2 + cos(w) c; d/dc = sin(w)
    np.testing.assert_allclose(ha, 2 * va * p["w"] + 2 * a * vp["w"])
    np.testing.assert_allclose(hp["w"], 2 * a * va - np.sin(p["w"]) * p["c"] * vp["w"]
                               + np.cos(p["w"]) * vp["c"])
    np.testing.assert_allclose(hp["c"], np.cos(p["w"]) * vp["w"])
    with pytest.raises(TransformError, match="scalar"):
        yota.hvp(lambda x: x * 2.0, (a,), va)


def test_programs_are_cached_on_disk_across_processes(tmp_path: Any) -> None:
    import os
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import numpy as np, yota, yota.cache
        f = lambda x, W: np.tanh(W @ x)
        x, W = np.ones(3), np.eye(3) * 0.5
        yota.jvp(f, (x, W), (x, W))
        yota.vmap(f, in_axes=(0, None))(np.ones((2, 3)), W)
        yota.hessian(lambda x: np.sum(f(x, W) ** 2), x)
        s = yota.cache.stats
        print(s.hits, s.compiles)
    """)
    env = {**os.environ, "YOTA_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                           text=True, timeout=300) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    assert runs[0].stdout.split() == ["0", "3"] and runs[1].stdout.split() == ["3", "0"]
