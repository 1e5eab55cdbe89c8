"""yota.autograd: AutoGrad.jl's interface (Param, diff, value, grad, params, gradloss,
primitive, zerograd, Result.nodes) on Yota's compiler, on interp and llvm."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from support import ROOT

import yota
from yota import autograd as ag
from yota.autograd import Param, diff, grad, gradloss, params, primitive, value, zerograd
from yota.grad import _static_cache, variants_of


@pytest.fixture(params=["interp", "llvm"])
def backend(request: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setattr(ag, "BACKEND", request.param)
    return str(request.param)


def programs_for(owner: Any, backend: str) -> list[Any]:
    return [p for k, v in variants_of(owner).items() if k[1] == backend for p in v.programs]


# -- a training loop -------------------------------------------------------------------------
def regression_data(seed: int = 0) -> tuple[Any, Any, Any]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(50, 3))
    w_true = np.array([1.5, -2.0, 0.5])
    return X, X @ w_true + 0.3, w_true


W = Param(np.zeros(3))
b = Param(0.0)


def predict(x: Any) -> Any:
    return x @ W + b


def mse(x: Any, y: Any) -> Any:
    return np.mean((predict(x) - y) ** 2)


def test_linear_regression_training_loop_runs_native_code_after_step_one(backend: str) -> None:
    W.value, b.value = np.zeros(3), 0.0
    X, y, w_true = regression_data()
    assert params(mse) == [W, b]  # through the global predict and its globals
    losses = []
    for step in range(200):
        J = diff(mse, X, y)
        losses.append(float(value(J)))
        if step == 1:
            traces, hits = yota.stats.traces, yota.stats.hits
        for p in params(mse):
            p -= 0.1 * grad(J, p)  # p.value in place: seen by the next diff
    assert yota.stats.traces == traces  # no step after the first traced again
    assert yota.stats.hits - hits == 198
    [program] = programs_for(mse, backend)
    if backend == "llvm":
        assert type(program.exe).__module__.startswith("yota.backends.llvm")
    assert losses[-1] < 1e-10 < losses[0]
    np.testing.assert_allclose(W.value, w_true, atol=1e-5)
    np.testing.assert_allclose(b.value, 0.3, atol=1e-5)


def test_gradients_match_the_closed_form(backend: str) -> None:
    X, y, _ = regression_data(1)
    W.value, b.value = np.array([0.1, 0.2, 0.3]), 0.5
    J = diff(mse, X, y)
    r = X @ W.value + b.value - y
    np.testing.assert_allclose(value(J), np.mean(r ** 2), rtol=1e-12)
    np.testing.assert_allclose(grad(J, W), 2 * X.T @ r / len(y), rtol=1e-12)
    assert isinstance(grad(J, b), float)
    np.testing.assert_allclose(grad(J, b), 2 * np.mean(r), rtol=1e-12)
    W.value = W.value + 1.0  # rebinding is seen too
    r2 = X @ W.value + b.value - y
    np.testing.assert_allclose(value(diff(mse, X, y)), np.mean(r2 ** 2), rtol=1e-12)


# -- where Params are found -------------------------------------------------------------------
@dataclass
class Dense:
    W: Param
    b: Param

    def __call__(self, x: Any) -> Any:
        return np.tanh(self.W @ x + self.b)


class MLP:
    def __init__(self, rng: Any) -> None:
        self.layers = [Dense(Param(rng.normal(size=(4, 3))), Param(np.zeros(4))),
                       Dense(Param(rng.normal(size=(1, 4))), Param(np.zeros(1)))]
        self.extra = {"scale": Param(np.array(2.0)), "again": self.layers[0].W}

    def loss(self, x: Any, y: Any) -> Any:
        h = x
        for layer in self.layers:
            h = layer(h)
        return np.sum((self.extra["scale"] * h - y) ** 2)


def mlp_loss_fd(m: MLP, x: Any, y: Any, p: Param) -> Any:
    """Central differences of m.loss along a random direction of p (float64, eps 1e-6:
    error ~ 1e-10 relative on this smooth function)."""
    d = np.random.default_rng(7).normal(size=np.shape(p.value))
    old = p.value
    try:
        p.value = old + 1e-6 * d
        up = m.loss(x, y)
        p.value = old - 1e-6 * d
        down = m.loss(x, y)
    finally:
        p.value = old
    return (up - down) / 2e-6, d


def test_params_in_objects_lists_dicts_and_bound_methods(backend: str) -> None:
    rng = np.random.default_rng(2)
    m = MLP(rng)
    x, y = rng.normal(size=3), np.array([0.5])
    ps = params(m)
    assert ps == [m.layers[0].W, m.layers[0].b, m.layers[1].W, m.layers[1].b,
                  m.extra["scale"]]  # once each (extra["again"] is layers[0].W)
    J = diff(m.loss, x, y)
    assert J.params == ps
    np.testing.assert_allclose(value(J), m.loss(x, y), rtol=1e-12)
    for p in ps:
        fd, d = mlp_loss_fd(m, x, y, p)
        np.testing.assert_allclose(np.sum(grad(J, p) * d), fd, rtol=1e-6, atol=1e-9)
    before = yota.stats.traces
    diff(m.loss, x + 1.0, y)  # a new bound-method object, the same program
    assert yota.stats.traces == before


def test_params_as_arguments_and_in_closures(backend: str) -> None:
    a, c = Param(np.array([1.0, 2.0])), Param(np.array([3.0]))

    def outer(k: float) -> Any:
        def f(p: Param, x: Any) -> Any:
            return np.sum(p * x) * k + np.sum(c * c)
        return f

    f = outer(2.0)
    J = diff(f, a, np.array([5.0, 7.0]))
    assert J.params == [c, a]  # the function's reach first, then the arguments
    np.testing.assert_allclose(grad(J, a), [10.0, 14.0])
    np.testing.assert_allclose(grad(J, c), [6.0])
    unused = Param(np.ones(2))
    assert grad(J, unused) is None


def test_a_branch_on_a_traced_value_is_a_guard(backend: str) -> None:
    p = Param(np.array([1.0, -2.0]))

    def f(x: Any) -> Any:
        if np.sum(p * x) > 0:
            return np.sum(p * x) ** 2
        return -np.sum(p * x)

    np.testing.assert_allclose(grad(diff(f, np.array([3.0, 1.0])), p), [6.0, 2.0])
    np.testing.assert_allclose(grad(diff(f, np.array([1.0, 1.0])), p), [-1.0, -1.0])


# -- the function form ------------------------------------------------------------------------
def test_function_form_and_higher_derivatives(backend: str) -> None:
    cube = lambda x: x ** 3
    assert grad(cube)(2.0) == 12.0
    assert grad(grad(cube))(2.0) == 12.0
    assert grad(grad(grad(cube)))(2.0) == 6.0
    f = lambda x: np.sin(x) * np.exp(x)
    np.testing.assert_allclose(grad(grad(f))(0.7), 2 * np.cos(0.7) * np.exp(0.7), rtol=1e-12)
    g = grad(lambda a, x: np.sum(a * x * x), argnum=1)
    np.testing.assert_allclose(g(2.0, np.array([1.0, 3.0])), [4.0, 12.0])
    np.testing.assert_allclose(grad(lambda a, x: np.sum(a * x), 1)(2.0, np.ones(2)), [2., 2.])
    h = lambda x, *, scale: np.sum(x * x) * scale
    np.testing.assert_allclose(grad(h)(np.array([1.0, 2.0]), scale=3.0), [6.0, 12.0])
    gl = gradloss(lambda x: np.sum(x ** 2))(np.array([1.0, 2.0]))
    np.testing.assert_allclose(gl[0], [2.0, 4.0])
    assert gl[1] == 5.0


def test_function_form_is_cached() -> None:
    f = lambda x: np.sum(np.tanh(x))
    g = grad(f)
    g(np.ones(3))
    before = yota.stats.traces
    np.testing.assert_allclose(g(np.zeros(3)), np.ones(3))
    assert yota.stats.traces == before


# -- primitives -------------------------------------------------------------------------------
@primitive(lambda dy, y, x: dy * y * (1 - y))
def sigm(x: Any) -> Any:
    return 1 / (1 + np.exp(-x))


@primitive(lambda dy, y, x, k: dy * k, None)
def scale(x: Any, k: Any) -> Any:
    return x * k


def test_primitive_gradients(backend: str) -> None:
    x = np.array([-1.0, 0.0, 2.0])
    s = 1 / (1 + np.exp(-x))
    np.testing.assert_allclose(grad(lambda x: np.sum(sigm(x)))(x), s * (1 - s), rtol=1e-12)
    # the gradient is traced code: differentiable again
    np.testing.assert_allclose(grad(lambda x: np.sum(grad(lambda x: np.sum(sigm(x)))(x)))(x),
                               s * (1 - s) * (1 - 2 * s), rtol=1e-12)
    _, tape = yota.trace(lambda x: np.sum(sigm(x)), x)
    assert "sigm(%1)" in str(tape)  # one entry
    k = Param(np.array([2.0, 3.0, 4.0]))
    J = diff(lambda x: np.sum(scale(x, k)), np.ones(3))
    assert grad(J, k) is None  # None: no gradient flows into k


def test_zerograd_gives_zeros(backend: str) -> None:
    @zerograd
    def rounded(x: Any) -> Any:
        return np.round(x * 10.0) / 10.0

    p = Param(np.array([0.26, 1.33]))
    J = diff(lambda: np.sum(rounded(p)) + np.sum(p * 0.0))
    np.testing.assert_allclose(value(J), 1.6)
    np.testing.assert_array_equal(grad(J, p), [0.0, 0.0])
    q = Param(np.array([0.5]))
    J = diff(lambda: np.sum(rounded(q)))
    np.testing.assert_array_equal(grad(J, q), [0.0])  # zeros, not None


def one_arg(x: Any) -> Any:
    return x


def test_primitive_errors() -> None:
    with pytest.raises(yota.YotaError, match="2 gradients for one_arg, which has 1"):
        primitive(lambda dy, y, x: dy, lambda dy, y, x: dy)(one_arg)
    with pytest.raises(yota.YotaError, match="must be a Param"):
        J = diff(lambda: np.sum(W * 1.0))
        grad(J, np.ones(3))
    with pytest.raises(yota.YotaError, match="a Result .* or a function"):
        grad(3.0)


# -- inspection -------------------------------------------------------------------------------
def test_nodes_list_ops_lines_values_parents_and_gradients(backend: str) -> None:
    w = Param(np.array([1.0, 2.0]))
    x, y = np.array([3.0, 4.0]), 10.0

    def loss(x: Any, y: float) -> Any:
        err = np.sum(w * x) - y  # the line the first nodes point at
        return err ** 2

    J = diff(loss, x, y)
    nodes = J.nodes()
    assert [n.op for n in nodes] == ["Param", "multiply", "sum", "subtract", "power"]
    line = loss.__code__.co_firstlineno + 1
    assert {str(n.loc) for n in nodes[1:4]} == {f"test_autograd.py:{line}"}
    assert nodes[1].parents == ("P0", "args[0]")
    assert nodes[3].parents == ("#2", "args[1]")
    np.testing.assert_allclose(nodes[1].value, [3.0, 8.0])
    assert float(nodes[3].value) == 1.0 and float(nodes[4].value) == 1.0
    assert all(n.grad is None for n in nodes)  # gradients only once grad was asked for
    grad(J, w)
    nodes = J.nodes()
    np.testing.assert_allclose(nodes[0].grad, [6.0, 8.0])  # 2 * err * x
    np.testing.assert_allclose(nodes[1].grad, [2.0, 2.0])
    assert float(nodes[3].grad) == 2.0 and float(nodes[4].grad) == 1.0
    table = str(nodes)
    assert re.search(r"#3\s+subtract\s+test_autograd.py:\d+\s+1\s+#2, args\[1\]\s+2", table)
    assert table.splitlines()[0].split() == ["node", "op", "where", "value", "parents", "grad"]


def test_nodes_use_the_values_of_their_call() -> None:
    p = Param(np.array([1.0, 2.0]))
    f = lambda: np.sum(p * p)
    J1 = diff(f)
    p.value *= 3.0  # in place, after the first diff
    J2 = diff(f)
    np.testing.assert_allclose(J1.nodes()[1].value, [1.0, 4.0])
    np.testing.assert_allclose(J2.nodes()[1].value, [9.0, 36.0])


# -- the manual's page ------------------------------------------------------------------------
def test_manual_autograd_page_runs_as_doctests() -> None:
    import doctest

    page = ROOT / "docs" / "guide" / "autograd.md"
    text = re.sub(r"^```\w*$", "", page.read_text(), flags=re.M)  # a fence ends an example
    parser = doctest.DocTestParser()
    test = parser.get_doctest(text, {}, "docs/guide/autograd.md", str(page), 0)
    assert len(test.examples) >= 10
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0


def test_diff_inside_a_traced_function_traces_through(backend: str) -> None:
    """A penalty on the Param gradients, differentiated with respect to the data."""
    w = Param(np.array([1.0, 2.0]))

    def penalty(x: Any) -> Any:
        J = diff(lambda x: np.sum(np.tanh(w * x)), x)
        return np.sum(grad(J, w) ** 2)

    def eager(x: Any) -> Any:  # d/dw sum tanh(w x) = (1 - tanh^2) x
        t = np.tanh(w.value * x)
        return np.sum(((1 - t * t) * x) ** 2)

    x = np.array([0.5, -1.0])
    val, g = yota.grad(penalty, x, backend=backend)
    np.testing.assert_allclose(val, eager(x), rtol=1e-12)
    fd = [(eager(x + 1e-6 * e) - eager(x - 1e-6 * e)) / 2e-6 for e in np.eye(2)]
    np.testing.assert_allclose(g[0], fd, rtol=1e-6)
    with pytest.raises(yota.YotaError, match="inside a traced function"):
        yota.grad(lambda x: np.sum(diff(lambda: np.sum(w * x)).nodes()[0].value), x)


def test_a_function_made_again_reuses_its_program() -> None:
    p = Param(np.array([1.0, 2.0]))
    traces, before = yota.stats.traces, len(_static_cache)
    for _ in range(5):
        diff(lambda: np.sum(p * p))  # a new function each time, the same code
    assert yota.stats.traces == traces + 1
    assert len(_static_cache) <= before + 1  # one entry, for the code


class Model:
    def __init__(self) -> None:
        self.W = np.array([1.0, 2.0, 3.0])

    def loss(self, x: Any) -> Any:
        return np.sum(self.W * x)

    def loss2(self, x: Any) -> Any:
        return np.sum(self.W * x * x)


def test_bound_methods_are_cached_per_object_and_function() -> None:
    """obj.method is a new object at each access: its programs are kept under obj."""
    m, x = Model(), np.ones(3)
    yota.grad(m.loss, x), grad(m.loss2)(x)
    before = yota.stats.traces
    for _ in range(3):
        np.testing.assert_allclose(yota.grad(m.loss, x)[1][0], m.W)
        np.testing.assert_allclose(grad(m.loss2)(x), 2 * m.W)  # not loss's program
    assert yota.stats.traces == before
    other = Model()
    other.W = np.array([-1.0, 0.0, 1.0])  # another object: its own programs
    np.testing.assert_allclose(yota.grad(other.loss, x)[1][0], other.W)


def test_errors_name_diff_and_the_users_function() -> None:
    p = Param(np.ones(2))

    def not_scalar(x: Any) -> Any:
        return p * x

    line = not_scalar.__code__.co_firstlineno
    with pytest.raises(yota.TraceError, match=rf"yota.autograd.diff needs not_scalar "
                                              rf"\(test_autograd.py:{line}\) to return a scalar"):
        diff(not_scalar, np.ones(2))
    with pytest.raises(yota.YotaError, match="diff"):
        diff(3.0)  # type: ignore[arg-type]


def test_param_updates_keep_the_param() -> None:
    w, b = Param(np.array([1.0, 2.0])), Param(1.0)
    arr = w.value
    w -= np.array([0.5, 0.5])
    w *= 2.0
    b += 0.5
    b /= 3.0
    assert isinstance(w, Param) and w.value is arr  # the array, updated in place
    np.testing.assert_array_equal(arr, [1.0, 3.0])
    assert b.value == 0.5
    w[0] = 7.0
    assert w.value[0] == 7.0 and w.shape == (2,) and len(w) == 2
    np.testing.assert_array_equal(np.exp(Param(np.zeros(2))), [1.0, 1.0])
    np.testing.assert_array_equal(np.concatenate([w, Param(np.ones(1))]), [7.0, 3.0, 1.0])
