"""Values a function reads from outside its arguments are never stale (issue 29): each row
of the issue's table, changed between calls, gives eager NumPy's value and gradient on
interp and llvm; a value that keeps changing becomes a run-time input (at most 3
compiles for 12 values); a function made again with the same code reuses its program;
each retrace says why."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support import ROOT

import yota
from yota import fastpath
from yota.captured import discover

grad_mod = importlib.import_module("yota.grad")
BACKENDS = ["interp", "llvm"]

# -- what the functions of the table read ----------------------------------------------------
scale = 2.0
k = 2
cfg = {"lam": 1.0}
s64 = np.float64(2.0)


class Holder:
    def __init__(self) -> None:
        self.a = 2.0


obj = Holder()
S = np.array([1.0, 2.0, 3.0])
B = np.linspace(0.0, 1.0, 2000)


def f_scale(x: Any) -> Any:
    return np.sum(x) * scale


def f_pow(x: Any) -> Any:
    return np.sum(x ** k)


def f_cfg(x: Any) -> Any:
    return np.sum(x) * cfg["lam"]


def f_s64(x: Any) -> Any:
    return np.sum(x) * s64


def f_obj(x: Any) -> Any:
    return np.sum(x) * obj.a


def f_small(x: Any) -> Any:
    return np.sum(x) * np.sum(S)


def f_big(x: Any) -> Any:
    return np.sum(x) * np.mean(B)


def f_centered(x: Any) -> Any:
    return np.sum(x[:, None] * (B - B.mean()) ** 2)


def make_closure() -> tuple[Callable[..., Any], Callable[[], None]]:
    c = 2.0
    lst = [2.0]

    def f(x: Any) -> Any:
        return np.sum(x) * c * lst[0]

    def bump() -> None:
        nonlocal c
        c += 1.0
        lst[0] += 0.5

    return f, bump


class Model:
    def __init__(self) -> None:
        self.l2 = 2.0

    def loss(self, x: Any) -> Any:
        return np.sum(x ** 2) * self.l2


def _set(name: str, value: Any) -> None:
    globals()[name] = value


def rows() -> dict[str, tuple[Callable[..., Any], Callable[[], None]]]:
    """Each row: the function, and the change made between calls."""
    f, bump = make_closure()
    m = Model()
    return {
        "global float": (f_scale, lambda: _set("scale", scale + 1.0)),
        "closure cell and list element": (f, bump),
        "bound method self.l2": (m.loss, lambda: setattr(m, "l2", m.l2 + 1.0)),
        "global int exponent": (f_pow, lambda: _set("k", k + 1)),
        "global dict value": (f_cfg, lambda: cfg.__setitem__("lam", cfg["lam"] + 1.0)),
        "global np.float64": (f_s64, lambda: _set("s64", s64 + 1.0)),
        "attribute of a global object": (f_obj, lambda: setattr(obj, "a", obj.a + 1.0)),
        "3-element global changed in place": (f_small, lambda: S.__setitem__(0, S[0] + 1)),
        "2000-element global changed in place": (f_big, lambda: B.__setitem__(
            slice(0, 10), B[0] + 1.0)),
        "y - y.mean() of a 2000-element global": (f_centered, lambda: B.__setitem__(
            slice(0, 10), B[0] + 1.0)),
    }


def numeric_grad(f: Callable[..., Any], x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    return np.array([(f(x + eps * e) - f(x - eps * e)) / (2 * eps) for e in np.eye(x.size)])


@pytest.fixture(autouse=True)
def _reset() -> Any:
    """Each test starts from the module's values, with no program kept for its functions
    (they are found by their code) and no retrace warned yet."""
    global scale, k, s64, S, B
    grad_mod._static_cache.clear()
    fastpath.FAST.clear()
    importlib.import_module("yota.variants")._WARNED.clear()
    saved = (scale, k, s64, dict(cfg), obj.a, S.copy(), B.copy())
    yield
    scale, k, s64, cfg_saved, obj.a, S, B = saved
    cfg.clear()
    cfg.update(cfg_saved)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("row", sorted(rows()))
def test_a_changed_value_is_seen_in_value_and_gradient(row: str, backend: str) -> None:
    f, change = rows()[row]
    x = np.array([1.0, 2.0, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", yota.RetraceWarning)
        for _ in range(5):  # before the change, after one, after the promotion, after
            val, g = yota.grad(f, x, backend=backend)
            np.testing.assert_allclose(val, f(x), rtol=1e-12)
            np.testing.assert_allclose(g[0], numeric_grad(f, x), rtol=1e-6, atol=1e-8)
            change()


@pytest.mark.parametrize("backend", BACKENDS)
def test_compile_and_autograd_see_changes_too(backend: str) -> None:
    cf = yota.compile(f_scale, np.ones(3), backend=backend)
    global scale
    for v in (2.0, 3.0, 4.0, 5.0):
        scale = v
        assert float(cf(np.ones(3))) == 3 * v
    from yota import autograd as ag

    class Net:
        def __init__(self) -> None:
            self.w = ag.Param(np.array([1.0, 2.0]))
            self.l2 = 1e-3

        def loss(self, x: Any) -> Any:
            return np.sum(self.w * x) + self.l2 * np.sum(self.w * self.w)

    net = Net()
    x = np.array([1.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", yota.RetraceWarning)
        for l2 in (1e-3, 1.0, 2.0, 3.0):
            net.l2 = l2
            J = ag.diff(net.loss, x)
            np.testing.assert_allclose(ag.grad(J, net.w), x + 2 * l2 * net.w.value)


# -- promotion ------------------------------------------------------------------------------
def _compiles(f: Callable[..., Any], x: Any, change: Callable[[int], None], n: int = 12,
              backend: str | None = None) -> int:
    before = yota.stats.compiles
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", yota.RetraceWarning)
        for i in range(n):
            change(i)
            val, g = yota.grad(f, x, backend=backend)
            np.testing.assert_allclose(val, f(x), rtol=1e-12)
    return yota.stats.compiles - before


BUF = np.zeros(64)


def f_buf(w: Any) -> Any:
    return np.sum((BUF * w - 1.0) ** 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_value_that_keeps_changing_becomes_an_input(backend: str) -> None:
    assert _compiles(f_scale, np.ones(3), lambda i: _set("scale", 1.0 + i),
                     backend=backend) <= 3
    assert _compiles(f_pow, np.full(3, 1.1), lambda i: _set("k", 1 + i % 5),
                     backend=backend) <= 3
    assert _compiles(f_s64, np.ones(3), lambda i: _set("s64", np.float64(i)),
                     backend=backend) <= 3
    rng = np.random.default_rng(0)
    assert _compiles(f_buf, np.ones(64), lambda i: BUF.__setitem__(slice(None), rng.random(64)),
                     backend=backend) <= 3  # a buffer refilled in place, each step
    [program] = grad_mod.programs_of(f_buf)[:1]
    assert "captured BUF" in program.fn.input_labels  # read at each call now


def test_a_promoted_value_is_read_by_the_native_fast_path() -> None:
    _compiles(f_scale, np.ones(3), lambda i: _set("scale", 1.0 + i), n=4)
    assert type(fastpath.FAST[id(f_scale)][1]).__name__ == "builtin_function_or_method"
    hits = yota.stats.hits
    for v in (7.0, 8.0, 9.0):
        _set("scale", v)
        val, g = yota.grad(f_scale, np.ones(3))
        assert float(val) == 3 * v and np.all(g[0] == v)
    assert yota.stats.hits == hits + 3


def test_large_arrays_are_inputs_from_the_first_trace() -> None:
    _, tape = yota.trace(f_big, np.ones(3))
    assert "captured B" in yota.to_ir(tape).input_labels
    modes = {r.text: r.mode for r in tape.reads}
    assert modes["B"] == "input" and modes["np"] == "is"


# -- same code, same program -----------------------------------------------------------------
def test_a_lambda_made_again_reuses_its_program() -> None:
    x = np.array([1.0, 2.0])
    traces = yota.stats.traces
    for _ in range(5):
        val, g = yota.grad(lambda x: np.sum(x ** 3), x)  # a new function object each time
        np.testing.assert_allclose(g[0], 3 * x ** 2)
    assert yota.stats.traces == traces + 1


def _hvp_newton_cg(f: Callable[..., Any], x: np.ndarray, steps: int = 5) -> np.ndarray:
    """Newton-CG in the README's idiom: a Hessian-vector product as a lambda made anew."""
    for _ in range(steps):
        g = yota.grad(f, x)[1][0]
        p, r = np.zeros_like(x), -g
        d = r.copy()
        for _ in range(x.size):
            hd = yota.grad(lambda x, v: np.sum(yota.grad(f, x)[1][0] * v), x, d)[1][0]
            alpha = (r @ r) / (d @ hd)
            p, r_new = p + alpha * d, r - alpha * hd
            if np.linalg.norm(r_new) < 1e-12:
                break
            d, r = r_new + (r_new @ r_new) / (r @ r) * d, r_new
        x = x + p
    return x


def test_newton_cg_with_lambdas_made_per_step_compiles_a_few_programs() -> None:
    def f(x: Any) -> Any:
        return np.sum((x - 1.0) ** 4) + np.sum(x ** 2)

    before = (yota.stats.traces, yota.stats.compiles)
    x = _hvp_newton_cg(f, np.array([3.0, -2.0, 0.5]), steps=10)
    np.testing.assert_allclose(4 * (x - 1) ** 3 + 2 * x, 0.0, atol=1e-9)
    # 10 Newton steps, 30 Hessian-vector products, each by a lambda made anew: the same
    # programs (the gradient of f, the gradient of the product: traced at most twice each)
    assert yota.stats.traces - before[0] <= 4 and yota.stats.compiles - before[1] <= 4


def test_closures_with_other_values_are_other_variants() -> None:
    def make(c: float) -> Callable[..., Any]:
        return lambda x: np.sum(x) * c

    x = np.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", yota.RetraceWarning)
        for c in (1.0, 2.0, 1.0, 2.0):
            assert float(yota.grad(make(c), x)[0]) == 2 * c


def test_a_called_closures_cells_read_only_by_builtins_are_guarded() -> None:
    """A function reached through a closure (``outer(inner)``) is guarded by its code and
    its cells: a cell passed only to a builtin (``range(n)``, ``getattr(np, name)``) is
    read too (its program was silently reused when only the cell differed)."""
    def inner(n: int, name: str) -> Callable[..., Any]:
        def f(x: Any) -> Any:
            s = getattr(np, name)(x[0])
            for i in range(n):
                s = s + x[i]
            return s
        return f

    def outer(f: Callable[..., Any]) -> Callable[..., Any]:
        return lambda x: f(x) * 2.0

    x = np.arange(1.0, 5.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", yota.RetraceWarning)
        for n, name in ((1, "sin"), (3, "sin"), (3, "cos"), (2, "exp")):
            f = outer(inner(n, name))
            assert float(yota.grad(f, x)[0]) == pytest.approx(f(x), rel=1e-12), (n, name)


def test_a_function_holding_arrays_it_does_not_reread_is_not_shared() -> None:
    def make(w: np.ndarray) -> Callable[..., Any]:
        return lambda x: np.sum(x * w[np.array([0, 1])])  # w reached through the cell

    x = np.ones(2)
    for w in (np.array([1.0, 2.0, 3.0]), np.array([5.0, 6.0, 7.0])):
        np.testing.assert_allclose(yota.grad(make(w), x)[1][0], w[:2])


# -- every retrace says why --------------------------------------------------------------------
def test_each_retrace_warns_once_per_cause_with_the_line() -> None:
    x = np.ones(3)
    yota.grad(f_scale, x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for v in (3.0, 4.0, 5.0, 6.0):
            _set("scale", v)
            yota.grad(f_scale, x)
        yota.grad(f_scale, np.ones(4))  # new shapes
        yota.grad(f_scale, np.ones(5))
    msgs = [str(w.message) for w in caught if issubclass(w.category, yota.RetraceWarning)]
    assert len(msgs) == 3, msgs
    assert "global scale read at test_captured.py:" in msgs[0] and "(3.0 -> 4.0)" not in msgs[0]
    assert "changed (2.0 -> 3.0)" in msgs[0]
    assert "run-time input" in msgs[1]
    assert "x is f64[4] (was f64[3])" in msgs[2]
    assert all(w.filename == __file__ for w in caught)  # the user's line, not Yota's


def test_explain_lists_the_variants_and_why() -> None:
    x = np.ones(3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", yota.RetraceWarning)
        for v in (2.0, 3.0, 4.0):
            _set("scale", v)
            yota.grad(f_scale, x)
        yota.grad(f_scale, np.ones(2))
    text = str(yota.explain(f_scale))
    assert "f_scale" in text and "3 variant" in text and "first trace" in text
    assert "global scale read at" in text and "run-time input" in text
    assert "inputs read at each call: scale" in text
    assert "x is f64[2] (was f64[3])" in text


# -- discovery --------------------------------------------------------------------------------
class Layer:
    def __init__(self, alpha: float) -> None:
        self.alpha = alpha
        self.W = np.ones((2, 2))

    def __call__(self, x: Any) -> Any:
        return np.tanh(self.W @ x) * self.alpha


class Net:
    def __init__(self) -> None:
        self.layers = [Layer(1.0), Layer(2.0)]
        self.last: Any = None
        self.calls = 0

    def loss(self, x: Any) -> Any:
        self.calls += 1  # the function's own writes are not changes from outside
        for layer in self.layers:
            x = layer(x)
        self.last = x
        return np.sum(helper(self, x))


def helper(net: Net, x: Any) -> Any:
    return x * net.layers[0].alpha


def test_discovery_follows_methods_items_loops_and_arguments() -> None:
    net = Net()
    found = discover(net.loss, 1).reads
    texts = {r.text: r.mode for r in found.values()}
    assert texts["self.layers"] == "shape"
    assert texts["self.layers[0].alpha"] == "eq" and texts["self.layers[1].alpha"] == "eq"
    assert texts["self.layers[0].W"] == "array"
    assert "self.last" not in texts  # only written
    assert texts["helper"] == "code"
    x = np.ones(2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", yota.RetraceWarning)
        for a in (1.0, 3.0, 5.0):
            net.layers[1].alpha = a
            net.layers[0].W[0, 0] = a
            val, g = yota.grad(net.loss, x)
            np.testing.assert_allclose(val, net.loss(x), rtol=1e-12)
        net.layers.append(Layer(0.5))  # a longer list: retraced
        np.testing.assert_allclose(yota.grad(net.loss, x)[0], net.loss(x), rtol=1e-12)
    assert net.last is not None and not yota.tracing.has_tracers(net.last)


def test_functions_modules_and_classes_are_guarded_by_identity() -> None:
    found = discover(f_scale, 1).reads
    assert {r.text: r.mode for r in found.values()}["np"] == "is"


def test_readme_sharp_bits_run_as_doctests() -> None:
    import doctest
    import re

    readme = (ROOT / "README.md").read_text()
    m = re.search(r"^## Sharp bits\n(.*?)(?=^## )", readme, re.S | re.M)
    assert m, "README.md has no '## Sharp bits' section"
    text = re.sub(r"^> ?", "", m.group(1), flags=re.M)  # the box is a quote
    text = re.sub(r"^```\w*$", "", text, flags=re.M)
    test = doctest.DocTestParser().get_doctest(text, {}, "README sharp bits", "README.md", 0)
    assert len(test.examples) >= 8
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", yota.RetraceWarning)
        runner.run(test)
    assert runner.failures == 0


def test_module_doctests() -> None:
    import doctest

    for name in ("reads", "captured", "guards", "gradients", "explain", "validate",
                 "variants", "update"):
        mod = importlib.import_module(f"yota.{name}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", yota.RetraceWarning)
            assert doctest.testmod(mod, optionflags=doctest.ELLIPSIS).failed == 0, name


PRIM_SCALE = 2.0


@yota.primitive
def _scaled(x: Any) -> Any:
    return x * PRIM_SCALE


@yota.diffrule(_scaled, "x")
def _(x: Any, *, y: Any, dy: Any) -> Any:
    return dy * PRIM_SCALE


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_primitives_body_reading_a_global_is_guarded(backend: str) -> None:
    f = lambda x: np.sum(_scaled(x))  # noqa: E731
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", yota.RetraceWarning)
        for v in (2.0, 3.0, 4.0, 5.0):  # traced apart: guarded, never promoted
            _set("PRIM_SCALE", v)
            val, g = yota.grad(f, np.ones(2), backend=backend)
            assert float(val) == 2 * v and np.all(g[0] == v)
    _set("PRIM_SCALE", 2.0)
