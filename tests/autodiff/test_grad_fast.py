"""yota.grad's fast path for a repeated call (yota.fastpath): the same results as the
general path, and every case it cannot answer (new shapes, dtypes or constants, failed
guards, calls inside a trace, structures, floats) goes to the general path."""

from __future__ import annotations

import gc
import importlib

import numpy as np
import pytest

import yota
from yota import fastpath

grad_mod = importlib.import_module("yota.grad")


def fresh_fn():
    def f(x, w):
        return np.sum(np.tanh(x * w))
    return f


def general(f, *args):
    """The result of the general path: a new function object with f's code (it finds f's
    programs by their code, through the general path's checks)."""
    g = type(f)(f.__code__, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
    return yota.grad(g, *args)


def same(a, b):
    (va, ga), (vb, gb) = a, b
    assert type(va) is type(vb) and np.array_equal(va, vb)
    assert len(ga) == len(gb)
    for x, y in zip(ga.flat, gb.flat, strict=True):
        assert type(x) is type(y)
        if isinstance(x, dict):
            assert x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
        else:
            assert x is None and y is None or np.array_equal(x, y)


@pytest.mark.parametrize("backend", ["llvm", "interp"])
def test_repeated_calls_match_the_general_path(backend):
    f = fresh_fn()
    x, w = np.linspace(-1.0, 1.0, 5), np.linspace(0.5, 2.0, 5)
    if backend == "interp":
        yota.grad(f, x, w, backend="interp")
        assert id(f) not in fastpath.FAST  # only yota.grad's default options
        return
    first = yota.grad(f, x, w)
    assert id(f) in fastpath.FAST
    hits = yota.stats.hits
    second = yota.grad(f, x * 2, w)
    assert yota.stats.hits == hits + 1
    same(second, general(f, x * 2, w))
    same(first, general(f, x, w))


def test_other_shapes_dtypes_and_layouts_take_the_general_path():
    f = fresh_fn()
    x = np.linspace(-1.0, 1.0, 6)
    yota.grad(f, x, x)
    traces = yota.stats.traces
    same(yota.grad(f, x[:4], x[:4]), general(f, x[:4], x[:4]))  # new shape: traced
    assert yota.stats.traces == traces + 1  # (general(): the same code, the same program)
    x32 = x.astype(np.float32)
    same(yota.grad(f, x32, x32), general(f, x32, x32))
    strided = np.linspace(-1.0, 1.0, 12)[::2]  # same signature, not contiguous
    same(yota.grad(f, strided, x), general(f, strided, x))
    same(yota.grad(f, x.reshape(2, 3)[0], x[:3]), general(f, x[:3], x[:3]))


def test_constants_scalars_and_floats():
    def g(x, n, s):
        return np.sum(x ** n) * (2.0 if s == "twice" else 1.0)

    x = np.linspace(0.1, 1.0, 4)
    for n, s in [(2, "twice"), (2, "twice"), (3, "twice"), (2, "once"), (True, "once")]:
        same(yota.grad(g, x, n, s), general(g, x, n, s))
    h = lambda x, a: np.sum(x * a)  # noqa: E731
    for _ in range(2):
        same(yota.grad(h, x, 2.0), general(h, x, 2.0))  # a float argument: general path
    z = lambda x: x * x  # noqa: E731
    for _ in range(2):
        same(yota.grad(z, np.array(3.0)), general(z, np.array(3.0)))  # 0-d: NumPy scalars


def test_a_failed_guard_retraces():
    def g(x):
        return np.sum(x * x) * (2.0 if float(np.mean(x)) > 0 else 3.0)

    x = np.linspace(0.1, 1.0, 5)
    yota.grad(g, x)
    yota.grad(g, x)
    val, grads = yota.grad(g, -x)
    assert float(val) == pytest.approx(3.0 * np.sum(x * x))
    assert np.allclose(grads[0], -6.0 * x)
    val, _ = yota.grad(g, x)
    assert float(val) == pytest.approx(2.0 * np.sum(x * x))


def test_inside_a_trace_the_call_traces_through():
    def inner(w, x):
        return np.sum(np.sin(w * x))

    x, w = np.linspace(0.0, 1.0, 4), np.linspace(1.0, 2.0, 4)
    yota.grad(inner, w, x)
    yota.grad(inner, w, x)  # fast path known for inner

    def outer(w):
        _, g = yota.grad(inner, w, x)
        return np.sum(g[0] ** 2)

    val, g = yota.grad(outer, w)
    want = np.sum((x * np.cos(w * x)) ** 2)
    assert float(val) == pytest.approx(want)
    assert np.allclose(g[0], 2 * x * np.cos(w * x) * -x * x * np.sin(w * x))


def test_captured_arrays_and_structures_keep_the_general_checks():
    c = np.ones(3)
    f = lambda x: np.sum(x * c)  # noqa: E731
    x = np.arange(3.0)
    yota.grad(f, x)
    assert float(yota.grad(f, x)[0]) == 3.0
    c[:] = 2.0  # a captured array changed: the general path notices
    assert float(yota.grad(f, x)[0]) == 6.0
    s = lambda p: np.sum(p["a"] * p["b"])  # noqa: E731
    p = {"a": x, "b": x + 1}
    for _ in range(2):
        same(yota.grad(s, p), general(s, p))


def test_a_dead_function_leaves_no_entry():
    f = fresh_fn()
    x = np.ones(3)
    yota.grad(f, x, x)
    key = id(f)
    assert key in fastpath.FAST
    del f
    gc.collect()
    assert key not in fastpath.FAST


def test_hits_between_retraces_reset_the_retrace_count():
    import warnings

    def g(x):
        return np.sum(x * float(np.sum(x)))  # a guarded Python value: new sums retrace

    with warnings.catch_warnings():
        warnings.simplefilter("error", grad_mod.RetraceWarning)
        for i in range(8):
            x = np.full(3, float(i + 1))
            for _ in range(3):  # one retrace, then hits by the fast path
                val, _ = yota.grad(g, x)
                assert float(val) == pytest.approx(9.0 * (i + 1) ** 2)
    with pytest.warns(grad_mod.RetraceWarning):  # retraces on consecutive calls still warn
        for i in range(8):
            yota.grad(g, np.full(3, 10.0 + i))


def test_tuples_and_lists_of_arrays():
    def g(p, scale):
        (w, b), extra = p
        return np.sum(np.tanh(w * b) * scale[0]) + np.sum(extra[0] ** 2) * scale[1]

    w, b = np.linspace(-1.0, 1.0, 4), np.linspace(0.5, 1.5, 4)
    e = np.array(2.0)
    for _ in range(3):
        same(yota.grad(g, ((w, b), [e]), (3, 2)), general(g, ((w, b), [e]), (3, 2)))
    assert fastpath.FAST[id(g)][1] is not None
    _, grads = yota.grad(g, ((w, b), [e]), (3, 2))
    assert list(grads.flat[0]) == [(0, 0), (0, 1), (1, 0)] and grads[1] is None
    assert isinstance(grads.flat[0][(1, 0)], np.float64)  # a 0-d leaf: a NumPy scalar
    (gw, gb), (ge,) = grads[0]  # shaped like the argument: ((w, b), [e])
    assert type(grads[0]) is tuple and type(grads[0][1]) is list and ge is grads.flat[0][(1, 0)]
    # other lengths, shapes, containers and constants take the general path
    same(yota.grad(g, ((w[:3], b[:3]), [e]), (3, 2)), general(g, ((w[:3], b[:3]), [e]),
                                                                    (3, 2)))
    same(yota.grad(g, ((w, b), (e,)), (3, 2)), general(g, ((w, b), (e,)), (3, 2)))
    same(yota.grad(g, ((w, b), [e, e]), (3, 2)), general(g, ((w, b), [e, e]), (3, 2)))
    same(yota.grad(g, ((w, b), [e]), (3, 1)), general(g, ((w, b), [e]), (3, 1)))


# -- the native fast path (backends/llvm/runtime/pyentry.py) --------------------------------
pyentry = importlib.import_module("yota.backends.llvm.runtime.pyentry")
native = pytest.mark.skipif(not pyentry.available(), reason="object layout not known here")


def is_native(f):
    return type(fastpath.FAST[id(f)][1]) is type(len)  # a builtin function


@native
def test_the_llvm_fast_path_is_native_and_declines_what_does_not_fit():
    f = fresh_fn()
    x, w = np.linspace(-1.0, 1.0, 5), np.linspace(0.5, 2.0, 5)
    yota.grad(f, x, w)
    assert not is_native(f)  # made at the first repeated call, not by the first one
    yota.grad(f, x[:4], w[:4])  # (another signature: not made from these arguments)
    yota.grad(f, x, w)
    yota.grad(f, x, w)
    assert is_native(f)
    fast = fastpath.FAST[id(f)][1]
    for bad in [(x,), (x, w, w), (x[:4], w), (x.astype(np.float32), w), (x[::-1], w),
                (list(x), w), (x.reshape(5, 1), w), [x, w], x]:
        assert fast(f, bad) is None  # the general path's business
    assert fast(fresh_fn(), (x, w)) is None  # made for f only
    assert fast(f) is None and fast(f, (x, w), 1) is None
    val, grads = fast(f, (x, w))
    same((val, grads), general(f, x, w))
    assert type(grads) is grad_mod.GradientResult and grads.tape is not None


@native
def test_native_calls_leak_no_references_or_memory():
    import sys
    import tracemalloc

    def g(p, n, s):
        (a, b), c = p
        return np.sum(a * b) + np.sum(c[0] ** 2) * (n if s == "x" else 1)

    x = np.linspace(-1.0, 1.0, 5)
    e = np.array(2.0)
    cases = [(fresh_fn(), (x, x + 1)), (g, (((x, x + 1), [e]), 3, "x"))]
    for f, args in cases:
        for _ in range(3):
            yota.grad(f, *args)
        assert is_native(f)
        program = fastpath.FAST[id(f)][2]
        watched = [x, e, None, program, grad_mod.GradientResult, program.tape.argnames,
                   yota.stats]
        before = [sys.getrefcount(o) for o in watched]
        tracemalloc.start()
        for _ in range(200):
            yota.grad(f, *args)
        first = tracemalloc.get_traced_memory()[0]
        for _ in range(3000):
            r = yota.grad(f, *args)
            fastpath.FAST[id(f)][1](f, (x[:2],))  # declined calls release all they took
        del r
        grown = tracemalloc.get_traced_memory()[0] - first
        tracemalloc.stop()
        after = [sys.getrefcount(o) for o in watched]
        assert after[:2] == before[:2] and after[3:] == before[3:]
        assert abs(after[2] - before[2]) < 100  # (None: shared with everything else)
        assert grown < 20_000


@native
def test_a_failure_in_native_code_raises_at_the_users_line():
    def f(a):
        return np.sum(np.linalg.cholesky(a))

    good = np.eye(3) * 2.0
    yota.grad(f, good)
    yota.grad(f, good)
    assert is_native(f)
    with pytest.raises(np.linalg.LinAlgError) as e:
        yota.grad(f, -good)
    assert "test_grad_fast.py" in str(e.value)
    same(yota.grad(f, good), general(f, good))


@native
def test_many_threads_call_at_once():
    from concurrent.futures import ThreadPoolExecutor

    f = fresh_fn()
    xs = [np.linspace(-1.0, 1.0, 5) * (k + 1) for k in range(8)]
    w = np.linspace(0.5, 2.0, 5)
    yota.grad(f, xs[0], w)
    yota.grad(f, xs[0], w)
    want = [general(f, x, w) for x in xs]
    assert is_native(f)

    def work(k):
        for _ in range(300):
            got = yota.grad(f, xs[k], w)
            same(got, want[k])
        return k

    with ThreadPoolExecutor(8) as ex:
        assert sorted(ex.map(work, range(8))) == list(range(8))


@native
def test_large_outputs_are_recycled_and_a_held_result_is_kept():
    f = lambda x: np.sum(np.sin(x))  # noqa: E731 - 2.4 MB gradient: recycled, GIL released
    x = np.linspace(-1.0, 1.0, 300_000)
    want = general(f, x)[1][0]
    want2 = general(f, 2 * x)[1][0]
    assert np.allclose(want, np.cos(x))
    yota.grad(f, x)
    _, g1 = yota.grad(f, x)
    assert is_native(f)
    _, g2 = yota.grad(f, 2 * x)
    assert g1[0] is not g2[0]
    assert np.array_equal(g1[0], want) and np.array_equal(g2[0], want2)
    del g1, g2
    for k in range(4):  # released results are handed out again
        _, g = yota.grad(f, x * (1 + k % 2))
        assert np.array_equal(g[0], want2 if k % 2 else want)


@native
def test_a_forked_child_calls_the_native_path():
    import os

    f = fresh_fn()
    x, w = np.linspace(-1.0, 1.0, 5), np.linspace(0.5, 2.0, 5)
    yota.grad(f, x, w)
    yota.grad(f, x, w)
    want = general(f, x, w)
    assert is_native(f)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        ok = False
        try:
            for _ in range(50):
                same(yota.grad(f, x, w), want)
            ok = is_native(f)
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0


def test_a_call_with_plain_arrays_inside_a_trace_is_not_a_hit():
    def inner(a, b):
        return np.sum(np.sin(a * b))

    x = np.linspace(0.0, 1.0, 4)
    yota.grad(inner, x, x)
    yota.grad(inner, x, x)  # the fast path is known for these very arguments

    def outer(w):
        _, g = yota.grad(inner, x, x)  # traced through, not answered by the fast path
        return np.sum(g[0] * w)

    hits = yota.stats.hits
    val, g = yota.grad(outer, np.ones(4))
    assert yota.stats.hits == hits
    assert np.allclose(g[0], x * np.cos(x * x)) and float(val) == pytest.approx(
        np.sum(x * np.cos(x * x)))


@native
@pytest.mark.parametrize("dt", [np.float64, np.float32])
def test_dicts_and_python_floats_on_the_native_path(dt):
    def f(p, x, s):
        return np.sum(np.tanh(p["w"] * x) * p["b"]) * s

    p = {"w": np.linspace(0.1, 1.0, 4).astype(dt), "b": np.ones(4, dt)}
    x = np.linspace(-1.0, 1.0, 4).astype(dt)
    for s in (2.0, 2.0, 3.0):
        same(yota.grad(f, p, x, s), general(f, p, x, s))
    assert is_native(f)
    _, g = yota.grad(f, p, x, 2.0)
    assert list(g[0]) == ["w", "b"] and type(g[2]) is float
    assert list(g.flat[0]) == [("w",), ("b",)]
    fast = fastpath.FAST[id(f)][1]
    for bad in [({"b": p["b"], "w": p["w"]}, x, 2.0), ({"w": p["w"]}, x, 2.0),
                ({**p, "c": x}, x, 2.0), ({"w": p["w"], 1: p["b"]}, x, 2.0), (p, x, 2),
                (p, x, np.float64(2.0)), (dict(enumerate(p.values())), x, 2.0)]:
        assert fast(f, bad) is None
    q = {"b": p["b"], "w": p["w"]}  # another key order: another signature
    for _ in range(2):
        same(yota.grad(f, q, x, 2.0), general(f, q, x, 2.0))


@native
@pytest.mark.parametrize("k", [7, 20, 40])  # 16, 42 (a padded call) and 82 (> MAX_ARGS) slots
def test_many_arguments(k):
    def f(*xs):
        s = xs[0]
        for i, x in enumerate(xs[1:]):
            s = s + x * (i + 2)
        return np.sum(s * s)

    xs = [np.linspace(-1.0, 1.0, 3) + i for i in range(k)]
    for _ in range(3):
        same(yota.grad(f, *xs), general(f, *xs))
    assert is_native(f) == (2 * k + 2 <= pyentry.MAX_ARGS)


def test_an_explicit_llvm_backend_has_its_own_fast_path():
    f = fresh_fn()
    x, w = np.linspace(-1.0, 1.0, 5), np.linspace(0.5, 2.0, 5)
    for _ in range(3):
        same(yota.grad(f, x, w, backend="llvm"), general(f, x, w))
    assert id(f) not in fastpath.FAST and id(f) in fastpath.FAST_BY_NAME["llvm"]
    hits = yota.stats.hits
    yota.grad(f, x, w, backend="llvm")
    assert yota.stats.hits == hits + 1
    if pyentry.available():
        assert type(fastpath.FAST_BY_NAME["llvm"][id(f)][1]) is type(len)
    yota.grad(f, x, w)
    yota.grad(f, x, w)
    assert fastpath.FAST[id(f)][2] is not fastpath.FAST_BY_NAME["llvm"][id(f)][2]
