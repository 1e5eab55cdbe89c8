"""The front-end fixes of issue 29, each as a user met it: stacking one traced array,
``np.array(x, copy=np._CopyMode.IF_NEEDED)``, losses of one element, simplegrad of a
dict argument, large graphs drawn by source line, the profile's accounting of a call,
and errors that named Yota's internals or lacked the user's line (``a.item(i)``,
``as_strided``, ``np.full`` with a traced fill value, indices out of range at run time)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import yota

BACKENDS = ["interp", "llvm"]


def numeric_grad(f: Any, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    out = np.zeros(x.size)
    for i in range(x.size):
        e = np.zeros(x.size)
        e[i] = eps
        out[i] = (f(x + e.reshape(x.shape)) - f(x - e.reshape(x.shape))) / (2 * eps)
    return out.reshape(x.shape)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["vstack", "hstack", "row_stack", "column_stack", "dstack"])
@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 2, 2)])
def test_stacking_one_traced_array_stacks_its_rows(name: str, shape: tuple[int, ...],
                                                   backend: str) -> None:
    stack = getattr(np, name, None)
    if stack is None:
        pytest.skip(f"np.{name} is not in this NumPy")

    def f(x: Any) -> Any:
        w = np.arange(float(np.size(stack(np.ones(shape))))).reshape(stack(np.ones(shape)).shape)
        return np.sum(np.sin(stack(x)) * w)

    x = np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape)
    val, g = yota.grad(f, x, backend=backend)
    np.testing.assert_allclose(val, f(x), rtol=1e-12)
    np.testing.assert_allclose(g[0], numeric_grad(f, x), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("mode", ["IF_NEEDED", "ALWAYS", "NEVER"])
def test_np_array_takes_numpys_copy_modes(mode: str) -> None:
    copy = getattr(np._CopyMode, mode)  # SciPy's asarray passes these
    f = lambda x: np.sum(np.array(x, copy=copy) ** 2)  # noqa: E731
    val, g = yota.grad(f, np.arange(3.0))
    assert float(val) == 5.0 and np.array_equal(g[0], [0.0, 2.0, 4.0])


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loss_of_one_element_is_differentiated_as_autograd_does(backend: str) -> None:
    x = np.arange(3.0)
    for f, shape in [(lambda x: np.sum(x ** 2, keepdims=True), (1,)),
                     (lambda x: (x @ x).reshape(1, 1), (1, 1))]:
        for _ in range(3):  # (the fast path too)
            val, g = yota.grad(f, x, backend=backend)
            assert np.shape(val) == shape and float(np.ravel(val)[0]) == 5.0
            np.testing.assert_allclose(g[0], 2 * x)
    (val, aux), g = yota.grad(lambda x: (np.sum(x, keepdims=True), {"x": x}), x,
                              has_aux=True, backend=backend)
    assert val.shape == (1,) and np.array_equal(g[0], np.ones(3))
    with pytest.raises(yota.TraceError, match="scalar float"):
        yota.grad(lambda x: x * 2, np.ones(2))  # two elements: not a loss


def test_simplegrad_of_a_dict_argument() -> None:
    def f(p: dict[str, Any], x: Any) -> Any:
        return np.sum(np.tanh(p["W"] @ x + p["b"])) * p["scale"]

    p = {"W": np.ones((2, 3)), "b": np.zeros(2), "scale": 2.0}
    x = np.linspace(0.1, 0.3, 3)
    sg = yota.simplegrad(f, p, x)
    assert "p['W']" in sg.source and "p.W" not in sg.source
    val, gp, gx = sg(p, x)
    want_v, want = yota.grad(f, p, x)
    np.testing.assert_allclose(val, want_v, rtol=1e-12)
    np.testing.assert_allclose(gp[("W",)], want[0]["W"], rtol=1e-12)
    np.testing.assert_allclose(gx, want[1], rtol=1e-12)


def gru(params: list[Any], xs: Any) -> Any:
    Wz, Uz, Wr, Ur, Wh, Uh = params
    h = np.zeros(Uz.shape[0])
    for x in xs:
        z = 1 / (1 + np.exp(-(Wz @ x + Uz @ h)))
        r = 1 / (1 + np.exp(-(Wr @ x + Ur @ h)))
        hh = np.tanh(Wh @ x + Uh @ (r * h))
        h = (1 - z) * h + z * hh
    return np.sum(h ** 2)


def test_a_large_graph_is_drawn_by_source_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YOTA_ROLL", "0")  # 30 GRU steps unrolled: thousands of ops
    rng = np.random.default_rng(0)
    params = [rng.normal(size=(8, 4) if i % 2 == 0 else (8, 8)) for i in range(6)]
    g = yota.graph(gru, params, rng.normal(size=(30, 4)))
    assert len(g.fn.ops) > yota.graphview.MAX_NODES
    assert "drawn by source line" in g.dot and "max_nodes=None" in g.dot
    assert len(g.dot.splitlines()) < 100  # a few nodes per line of gru, not one per op
    assert "grad of test_front_end_fixes.py:" in g.dot
    small = yota.graph(gru, params, rng.normal(size=(2, 4)), max_nodes=None)
    assert "drawn by source line" not in small.dot


def test_the_profile_accounts_for_yota_grad_around_the_program() -> None:
    f = lambda x: np.sum(np.tanh(x))  # noqa: E731
    x = np.ones(8)
    yota.grad(f, x)
    with yota.profile() as p:
        for _ in range(5):
            yota.grad(f, x)
    ops = {r.op: r for r in p.rows()}
    assert ops["(yota.grad) <lambda>"].calls == 5  # flattening, checks, shaping the result
    assert ops["(call) <lambda>"].calls == 5
    assert "in all" in str(p)


def test_item_with_an_index_reads_one_element() -> None:
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    val, g = yota.grad(lambda x: x.item(3) * np.sum(x) + x.item(0, 1), x)
    assert float(val) == 4.0 * 10.0 + 2.0
    with pytest.raises(IndexError, match=r"out of bounds.*x\.item at test_front_end_fixes"):
        yota.grad(lambda x: np.sum(x) * x.item(7), x)


def test_as_strided_of_a_traced_array_is_a_clear_error() -> None:
    with pytest.raises(yota.UnsupportedError, match="as_strided.*test_front_end_fixes.py.*"
                       "sliding_window_view"):
        yota.grad(lambda x: np.sum(np.lib.stride_tricks.as_strided(x, (2,), (8,))),
                  np.arange(3.0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_np_full_with_a_traced_fill_value(backend: str) -> None:
    def f(x: Any) -> Any:
        y = np.full(3, x[0] * 2.0)
        y[1] = x[2]  # a new array the function owns: writable
        return np.sum(y * x) + np.sum(np.full_like(x, x[1], dtype=np.float32))

    x = np.array([1.0, 2.0, 3.0])
    val, g = yota.grad(f, x, backend=backend)
    np.testing.assert_allclose(val, f(x))
    np.testing.assert_allclose(g[0], [4 * x[0] + 2 * x[2], x[2] + 3, x[1] + 2 * x[0]])


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_index_out_of_range_at_run_time_names_the_line(backend: str) -> None:
    cf = yota.compile(lambda x, i: x[i] * 2.0, np.arange(3.0), np.array(1), backend=backend)
    with pytest.raises(IndexError, match=r"index 5 is out of bounds .*\(at test_front_end"):
        cf(np.arange(3.0), np.array(5))
