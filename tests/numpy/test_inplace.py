"""In-place writes on arrays the traced function creates: every form NumPy offers
(``y[key] = v``, augmented assignment, boolean masks, ``np.add.at``, ``out=``, ``fill``,
``copyto``, ``put_along_axis``, ``put``), the aliasing of views exactly as NumPy's, and
writes into the caller's arrays refused. Each function runs once as plain NumPy and once
through Yota (the value while tracing, the compiled value on new inputs, on the interp and
llvm backends), and its gradient is compared with finite differences."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support.gradcheck import check_grad

import yota

BACKENDS = ("interp", "llvm")
Case = tuple[str, Callable[..., Any], tuple[tuple[int, ...], ...]]


def _set_basic(x: Any) -> Any:
    y = np.zeros((3, 4))
    y[1] = x[:4]
    y[:, 2] = x[4:7] * 2.0
    y[0, 0] = x[7]
    y[2, ::-2] = x[8:10]  # a negative step
    y[..., 3] = y[..., 3] + 1.0
    return np.sum(y * y * np.arange(12.0).reshape(3, 4))


def _set_advanced(x: Any) -> Any:
    y = np.ones((4, 3))
    y[[0, 2, 0]] = x[:9].reshape(3, 3)  # a repeated row: the last write wins
    y[1:3, [2, 0]] = x[9:13].reshape(2, 2)  # a slice and an array
    y[np.array([3, 1]), 1] = x[13:15]
    y[:, [True, False, True]] = x[15] * 3.0  # a constant mask: the integer positions
    return np.sum(y ** 3)


def _set_traced_index(x: Any) -> Any:
    y = np.zeros(8)
    y[np.argsort(x[:8])] = x[:8] * x[8:16]  # integer indices computed from the input
    y[np.argmax(x[:8])] = 2.0  # a traced integer
    return np.sum(y * np.arange(8.0))


def _augmented(x: Any) -> Any:
    y = np.full((2, 5), 2.0)
    y[0] += x[:5]
    y[1, 1:4] -= x[5:8] * x[:3]
    y[:, 0] *= x[8:10]
    y[0, 2:] /= x[10:13] + 3.0
    y[1] **= 2
    y[[0, 0, 1], [4, 4, 4]] += x[13]  # repeated indices: added once (fancy get, set)
    return np.sum(y * np.arange(10.0).reshape(2, 5))


def _whole(x: Any) -> Any:
    y = x * 1.0
    y += x[::-1]
    y *= 0.5
    y -= 1.0
    y /= x + 3.0
    y **= 2
    z = y  # z is y: the writes below show through z
    y += 1.0
    return np.sum(z * y)


def _masks(x: Any) -> Any:
    y = x.copy()
    y[y < 0] = 0.0  # a traced mask: a select
    y[x > 0.5] *= 3.0  # masked augmented assignment
    y[x < -0.5] += 1.0
    z = np.zeros((3, 4))
    z[x[:3] > 0] = x[3:7]  # one row for every selected row
    return np.sum(y * y) + np.sum(z * np.arange(4.0))


def _add_at(x: Any) -> Any:
    y = np.zeros(5)
    np.add.at(y, [0, 1, 0, 4, 0], x[:5])  # repeats accumulate
    np.subtract.at(y, np.array([2, 2]), x[5:7] * x[5:7])
    z = np.ones((3, 4))
    np.add.at(z, (slice(None), [1, 1, 3]), x[7:10])
    return np.sum(y * np.arange(5.0)) + np.sum(z * z)


def _out_fill_copyto(x: Any) -> Any:
    y = np.empty(6)
    np.multiply(x[:6], 2.0, out=y)
    np.add(y, x[6:12], out=y, where=x[:6] > 0)
    z = np.zeros((2, 3))
    z.fill(x[0])
    np.copyto(z, x[1:4])
    w = np.ones(6)
    np.copyto(w, x[6:12], where=x[:6] < 0)
    v = np.zeros((3, 4))
    np.put_along_axis(v, np.array([[1], [3], [0]]), x[12:15].reshape(3, 1), axis=1)
    u = np.zeros(5)
    np.put(u, [4, 0], x[15:17])
    np.put(u, [1, 2, 3], x[15:17])  # values repeated, as NumPy does
    return np.sum(y * y) + np.sum(z * np.arange(6.0).reshape(2, 3)) + np.sum(w * w) + \
        np.sum(v * np.arange(12.0).reshape(3, 4)) + np.sum(u * np.arange(5.0))


def _fill_diagonal_and_out(x: Any) -> Any:
    y = np.zeros((3, 3))
    np.fill_diagonal(y, x[:3])
    z = np.ones((4, 4))
    np.fill_diagonal(z, x[3])
    np.fill_diagonal(z[1:, :3], x[1:3])  # through a view; values repeated
    s = np.zeros(3)
    np.sum(y * y, axis=0, out=s)  # out= of a NumPy function and of a method
    m = np.zeros(())
    y.sum(out=m)
    w = np.zeros(3)
    np.clip(x[:3], 0.2, 0.8, out=w)
    return np.sum(s * x[:3]) + np.sum(z) * m + np.sum(w)


def _views(x: Any) -> Any:
    y = np.zeros((4, 6))
    row, col = y[1], y[:, 2]  # basic slices: views
    flat = y.reshape(-1)  # a view of contiguous data
    t = y.T
    sub = y[1:3, ::2]
    c = y.copy()  # copies: never see later writes
    fancy = y[[0, 1]]
    y[1, :] = x[:6]  # row and sub see this
    t[2, :] = x[6:10]  # through the transpose: column 2 of y; col and row see it
    flat[0:6] = x[10:16] * 2.0  # through the reshape: row 0 of y
    sub[0, 1] = x[16]  # through a view of a view: y[1, 2]
    sq = y[None, 3, :]  # a view with an inserted axis
    sq[0, 5] = x[17]
    return (np.sum(row * np.arange(6.0)) + np.sum(col ** 2) + np.sum(y * y)
            + np.sum(c) + np.sum(fancy) + np.sum(sub * sub))


def _view_chains(x: Any) -> Any:
    y = np.zeros((2, 3, 4))
    s = np.swapaxes(y, 0, 2)  # (4, 3, 2)
    m = np.moveaxis(y, 0, -1)
    e = np.expand_dims(y, 0)
    q = np.squeeze(y[:, 1:2, :])
    r = y[...]
    s[1, :, 0] = x[:3]  # y[0, :, 1]
    m[:, 3, 1] = x[3:6]  # y[1, :, 3]
    e[0, 1, 0] = x[6:10]  # y[1, 0, :]
    q[0, ::3] += x[10:12]  # y[0, 1, ::3]
    r[1, 2, 0] = x[12] * x[13]
    return np.sum(y * np.arange(24.0).reshape(2, 3, 4)) + np.sum(s * s) + np.sum(q)


def _rnn(x: Any) -> Any:
    T, B, H = 4, 2, 3
    W = x[:9].reshape(3, 3)
    xs = x[9:33].reshape(T, B, H)
    states = np.zeros((B, T + 1, H))
    for t in range(T):
        states[:, t + 1] = np.tanh(xs[t] @ W + states[:, t] @ W.T)
    return np.sum(states ** 2)


def _int_buffers(x: Any) -> Any:
    counts = np.zeros(4, dtype=np.int64)
    counts[np.argmax(x[:4])] += 1
    np.add.at(counts, [0, 0, 3], 2)
    y = x[:4].copy()
    y[counts > 1] = 0.0
    return np.sum(y * y) + np.sum(counts * x[4:8])


def _scalars(x: Any) -> Any:
    s = np.sum(x)  # a NumPy scalar: += rebinds, as in NumPy
    t = s
    s += 1.0
    a = x[0]
    a *= 3.0
    return s * t + a


CASES: list[Case] = [
    ("set_basic", _set_basic, ((10,),)),
    ("set_advanced", _set_advanced, ((16,),)),
    ("set_traced_index", _set_traced_index, ((16,),)),
    ("augmented", _augmented, ((14,),)),
    ("whole", _whole, ((6,),)),
    ("masks", _masks, ((8,),)),
    ("add_at", _add_at, ((10,),)),
    ("out_fill_copyto", _out_fill_copyto, ((17,),)),
    ("fill_diagonal_and_out", _fill_diagonal_and_out, ((4,),)),
    ("views", _views, ((18,),)),
    ("view_chains", _view_chains, ((14,),)),
    ("rnn", _rnn, ((33,),)),
    ("int_buffers", _int_buffers, ((8,),)),
    ("scalars", _scalars, ((5,),)),
]


def _inputs(rng: np.random.Generator, shapes: tuple[tuple[int, ...], ...]) -> list[np.ndarray]:
    return [rng.uniform(-1.0, 1.0, s) for s in shapes]


@pytest.mark.parametrize("name, f, shapes", CASES, ids=[c[0] for c in CASES])
def test_values_equal_numpys(name: str, f: Callable[..., Any],
                             shapes: tuple[tuple[int, ...], ...]) -> None:
    rng = np.random.default_rng(len(name))
    ex, new = _inputs(rng, shapes), _inputs(rng, shapes)
    val, _ = yota.trace(f, *ex)
    np.testing.assert_allclose(val, f(*ex), rtol=1e-13)  # the values seen while tracing
    want = f(*new)
    for backend in BACKENDS:
        got = yota.compile(f, *ex, backend=backend)(*new)
        np.testing.assert_allclose(got, want, rtol=1e-12, err_msg=backend)


@pytest.mark.parametrize("name, f, shapes", CASES, ids=[c[0] for c in CASES])
def test_gradients_match_finite_differences(name: str, f: Callable[..., Any],
                                            shapes: tuple[tuple[int, ...], ...]) -> None:
    rng = np.random.default_rng(len(name) + 1)
    args = _inputs(rng, shapes)
    grads = []
    for backend in BACKENDS:
        val, g = yota.grad(f, *args, backend=backend)
        np.testing.assert_allclose(val, f(*args), rtol=1e-12)
        check_grad(f, args, g)
        grads.append(g[0])
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-12, atol=1e-14)


def test_the_traced_program_uses_the_written_values_of_new_inputs() -> None:
    """A compiled program re-runs the writes on new inputs (nothing is frozen)."""
    f = _set_traced_index
    rng = np.random.default_rng(5)
    ex = _inputs(rng, ((16,),))
    exe = yota.compile(f, *ex)
    for _ in range(3):
        new = _inputs(rng, ((16,),))
        assert float(exe(*new)) == pytest.approx(float(f(*new)), rel=1e-12)


def test_repeated_scatter_gradient_goes_to_the_last_write_only() -> None:
    def f(x: Any) -> Any:
        y = np.zeros(3)
        y[[1, 1, 2]] = x
        return np.sum(y * np.array([1.0, 2.0, 3.0]))

    _, g = yota.grad(f, np.array([0.5, 0.25, 1.0]))
    np.testing.assert_array_equal(g[0], [0.0, 2.0, 3.0])


# -- the caller's arrays ------------------------------------------------------------------------
GLOBAL = np.arange(3.0)


def _arg_setitem(x: Any) -> Any:
    x[0] = 1.0
    return np.sum(x)


def _arg_view(x: Any) -> Any:
    v = x.T[1:]
    v[0] = 2.0
    return np.sum(x)


def _arg_iadd(x: Any) -> Any:
    x += 1.0
    return np.sum(x)


def _arg_out(x: Any) -> Any:
    np.exp(x, out=x)
    return np.sum(x)


def _arg_add_at(x: Any) -> Any:
    np.add.at(x, [0, 0], 1.0)
    return np.sum(x)


def _arg_fill(x: Any) -> Any:
    x.fill(0.0)
    return np.sum(x)


def _arg_copyto(x: Any) -> Any:
    np.copyto(x, x * 2.0)
    return np.sum(x)


def _global_out(x: Any) -> Any:
    np.multiply(x[:3], 2.0, out=GLOBAL)
    return np.sum(x)


def _global_add_at(x: Any) -> Any:
    np.add.at(GLOBAL, [0], x[0])
    return np.sum(x)


REFUSED = [(_arg_setitem, "x[0] = 1.0", "argument 'x'"),
           (_arg_view, "v[0] = 2.0", "argument 'x'"),
           (_arg_iadd, "x += 1.0", "argument 'x'"),
           (_arg_out, "np.exp(x, out=x)", "argument 'x'"),
           (_arg_add_at, "np.add.at", "argument 'x'"),
           (_arg_fill, "x.fill", "argument 'x'"),
           (_arg_copyto, "np.copyto", "argument 'x'"),
           (_global_out, "out=GLOBAL", "plain NumPy array"),
           (_global_add_at, "np.add.at(GLOBAL", "plain NumPy array")]


@pytest.mark.parametrize("f, line, part", REFUSED, ids=[r[0].__name__ for r in REFUSED])
def test_writes_into_the_callers_arrays_are_refused(f: Callable[..., Any], line: str,
                                                     part: str) -> None:
    x = np.array([[1.0, 2.0], [3.0, 4.0]]).ravel()[:3].copy()
    before, glob = x.copy(), GLOBAL.copy()
    with pytest.raises(yota.UnsupportedError) as err:
        yota.grad(f, x)
    msg = str(err.value)
    assert part in msg and "test_inplace.py:" in msg and f.__name__ in msg, msg
    assert line.split("(")[0] in msg, msg
    np.testing.assert_array_equal(x, before)  # the caller's data is unchanged
    np.testing.assert_array_equal(GLOBAL, glob)


def test_a_read_only_view_refuses_writes_as_numpy_does() -> None:
    def f(x: Any) -> Any:
        y = np.broadcast_to(x[:1] * 2.0, (3,))
        y[0] = 1.0
        return np.sum(y)

    with pytest.raises(ValueError, match="read-only"):
        yota.grad(f, np.ones(3))


def test_masked_write_of_one_value_per_selected_element_is_a_clear_error() -> None:
    def f(x: Any) -> Any:
        y = np.zeros(4)
        y[x > 0] = x[:2]
        return np.sum(y)

    with pytest.raises(yota.UnsupportedError, match="np.where"):
        yota.grad(f, np.array([1.0, -1.0, 2.0, -2.0]))


def test_constant_writes_stay_constants() -> None:
    """Writes of plain values into a fresh array record nothing: one constant."""
    def f(x: Any) -> Any:
        w = np.zeros(5)
        for i in range(5):
            w[i] = i * i
        return np.sum(x * w)

    _, tape = yota.trace(f, np.ones(5))
    assert not any(e.kind == "call" and e.fn == "setitem" for e in tape.entries)
    _, g = yota.grad(f, np.ones(5))
    np.testing.assert_array_equal(g[0], [0.0, 1.0, 4.0, 9.0, 16.0])


def test_buffer_fill_is_updated_in_place() -> None:
    """The state-buffer RNN compiles to updates in place: besides the first write into
    the zeros, no write copies the buffer."""
    from yota.ir.passes import MemoryPlan

    from yota import pipeline

    rng = np.random.default_rng(0)
    x = rng.normal(size=33)
    fn, _ = pipeline.program_ir(_rnn, (x,), kind="grad", optimized=True)
    plan = MemoryPlan.of(fn)
    assert plan is not None
    where = plan.buffer_of(fn)
    ups = [op for op in fn.ops if op.name == "update_slice"]
    copied = [op for op in ups if where.get(op.operands[0], -2) != where[op.result]]
    assert len(ups) >= 8 and len(copied) <= 1, [str(op) for op in copied]


# -- random programs (tests/support/writegen.py) ----------------------------------------------------------
def _same(src: str, want: tuple[np.ndarray, ...], got: Any, what: str) -> None:
    """Exactly NumPy's values: writes move values and the arithmetic is op for op the
    same. ``np.add.at`` with repeated indices is the exception: NumPy adds the updates into
    the array one by one, Yota sums them first (``scatter_add``) and adds the sum, so the
    rounding may differ in the last bits (a reassociated sum, precision class SUM)."""
    assert len(want) == len(got), what
    for i, (w, g) in enumerate(zip(want, got, strict=True)):
        g = np.asarray(g)
        assert w.shape == g.shape, (what, i, src)
        if ".at(" in src:
            np.testing.assert_allclose(g, w, rtol=1e-14, atol=1e-15, err_msg=f"{what} {i}\n{src}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what} {i}\n{src}")


def _check_program(seed: int, grad: bool) -> None:
    from support.writegen import N, random_program

    src, f = random_program(seed)
    rng = np.random.default_rng(seed + 1000)
    x, new = rng.uniform(-1, 1, N), rng.uniform(-1, 1, N)
    want = f(x.copy())
    val, _ = yota.trace(f, x)
    _same(src, want, val, "trace")
    want = f(new.copy())
    for backend in BACKENDS:
        _same(src, want, yota.compile(f, x, backend=backend)(new), backend)
    if grad:
        weights = [np.linspace(-1.0, 1.0, w.size).reshape(w.shape) for w in f(x.copy())]

        def loss(x: Any) -> Any:
            return sum(np.sum(a * c) for a, c in zip(f(x), weights, strict=True))

        val, g = yota.grad(loss, x, backend="llvm")
        np.testing.assert_allclose(val, loss(x.copy()), rtol=1e-12, atol=1e-12, err_msg=src)
        check_grad(loss, [x], g)


@pytest.mark.parametrize("seed", range(100))
def test_random_programs_match_numpy(seed: int) -> None:
    _check_program(seed, grad=seed % 5 == 0)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(100, 600))
def test_more_random_programs_match_numpy(seed: int) -> None:
    _check_program(seed, grad=seed % 3 == 0)


def test_a_random_draw_is_an_array_the_function_owns() -> None:
    def f(x: Any) -> Any:
        noise = np.random.normal(size=3)
        noise[0] = x[0]
        noise *= x
        return np.sum(noise)

    np.random.seed(3)
    want = f(np.array([1.0, 2.0, 3.0]))
    np.random.seed(3)
    val, g = yota.grad(f, np.array([1.0, 2.0, 3.0]))
    assert float(val) == pytest.approx(float(want), rel=1e-12)
    np.random.seed(3)
    n = np.random.normal(size=3)
    np.testing.assert_allclose(g[0], [2.0, n[1], n[2]], rtol=1e-12)


def test_second_order_through_writes() -> None:
    """The rules of update_slice, scatter and select are differentiable again."""
    def f(x: Any) -> Any:
        y = np.zeros((2, 3))
        y[0] = x[:3] ** 2
        y[[1, 1], [0, 2]] = x[3:5] * x[0]
        y[y > 0.5] *= 3.0
        return np.sum(y ** 2)

    def g(x: Any) -> Any:
        return np.sum(yota.grad(f, x)[1][0] * np.arange(1.0, 6.0))

    x = np.array([0.3, 0.6, 0.9, 0.4, 0.7])
    _, h = yota.grad(g, x)
    check_grad(g, [x], h)


_EMULATED = ("rnn",)  # region copies in place (the rest, scatters included: -m slow)


@pytest.mark.parametrize("name, f, shapes", [
    c if c[0] in _EMULATED else pytest.param(*c, marks=pytest.mark.slow) for c in CASES],
    ids=[c[0] for c in CASES])
def test_cuda_emulation_runs_the_writes(name: str, f: Callable[..., Any],
                                        shapes: tuple[tuple[int, ...], ...]) -> None:
    """The CUDA backend's kernels for the writes (copies into regions, scatters), run by
    its CPU emulation, give the gradients of the llvm backend."""
    from yota.backends import cuda
    from yota.backends.cuda.emulate import EmuDevice, emulation_available

    why = emulation_available()
    if why:
        pytest.skip(why)
    rng = np.random.default_rng(11)
    args = _inputs(rng, shapes)
    v0, g0 = yota.grad(f, *args, backend="llvm")
    cuda.use_device(EmuDevice())
    try:
        v1, g1 = yota.grad(f, *args, backend="cuda")
    finally:
        cuda.use_device(None)
    np.testing.assert_allclose(float(v1), float(v0), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(g1[0]), g0[0], rtol=1e-10, atol=1e-12)
