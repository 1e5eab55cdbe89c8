"""Arrays made from shapes alone are computed by the program, not stored in it.

``np.eye``, ``np.identity``, ``np.tri``, ``np.arange``, ``np.linspace``, ``np.full`` & co.
called in a traced function, and what exact NumPy operations make from them, become
``iota`` computations when they are larger than ``GENERATED_BYTES``. Checked here: their
values equal NumPy's bit for bit on every backend (the interpreter, llvm, the CUDA
emulator, MLIR where its tools are installed) over edge shapes, offsets, steps and dtypes;
no large constant is left in the program; writes into them and static arguments computed
from them; gradients of programs using them against finite differences; the size of the
cache entry of a program with ``np.eye(1000)``; the diagonal rewrites of ``fast_math``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bench.workloads import loss_w8, w8
from support.cuda_cases import emulator  # noqa: E402
from support.gradcheck import check_grad  # noqa: E402
from support.mlir_cases import MISSING as MLIR_MISSING  # noqa: E402
from yota.backends import cuda
from yota.backends import llvm as native
from yota.backends.cuda.emulate import emulation_available
from yota.ir import Builder, Function, TensorType, run
from yota.ir.ops import iota
from yota.ir.ops.misc import splat_scalar
from yota.ir.passes import PassContext, optimize

import yota
from yota import cache as yc
from yota import pipeline
from yota.numpy.generated import GENERATED_BYTES

F32, F64, I32, I64 = np.float32, np.float64, np.int32, np.int64

# (label, the array expression, whether it stays data: not exact, or not from shapes)
CASES: list[tuple[str, Callable[[], Any], bool]] = [
    ("eye", lambda: np.eye(40), False),
    ("eye_rect_k", lambda: np.eye(40, 55, 3), False),
    ("eye_tall_negk", lambda: np.eye(60, 40, -7, dtype=F32), False),
    ("eye_k_out", lambda: np.eye(40, 40, 45, dtype=I64), False),
    ("eye_k_last", lambda: np.eye(40, 40, -39, dtype=I32), False),
    ("eye_bool", lambda: np.eye(80, dtype=bool), False),
    ("eye_empty", lambda: np.eye(0), False),
    ("eye_one", lambda: np.eye(1), False),
    ("identity", lambda: np.identity(45, dtype=F32), False),
    ("tri", lambda: np.tri(40), False),
    ("tri_rect_k", lambda: np.tri(40, 30, -2), False),
    ("tri_int", lambda: np.tri(30, 50, 5, dtype=I32), False),
    ("arange_int", lambda: np.arange(5000), False),
    ("arange_int_step", lambda: np.arange(-3, 7000, 2), False),
    ("arange_neg_step", lambda: np.arange(7000, -3, -3), False),
    ("arange_float", lambda: np.arange(0.0, 1.0, 1e-4), False),
    ("arange_float_neg", lambda: np.arange(10.0, -10.0, -0.003), False),
    ("arange_f32", lambda: np.arange(1, 2000, dtype=F32), False),
    ("arange_f32_step", lambda: np.arange(0, 1, 0.0007, dtype=F32), False),
    ("arange_i32", lambda: np.arange(7000, dtype=I32), False),
    ("arange_big", lambda: np.arange(2**40, 2**40 + 600), False),
    ("arange_empty", lambda: np.arange(5, 5), False),
    ("linspace", lambda: np.linspace(0, 1, 1000), False),
    ("linspace_open", lambda: np.linspace(-2.5, 7, 801, endpoint=False), False),
    ("linspace_down_f32", lambda: np.linspace(3, -3, 1999, dtype=F32), False),
    ("linspace_int", lambda: np.linspace(0, 100, 1000, dtype=I64), False),
    ("linspace_tiny", lambda: np.linspace(1e-300, 2e-300, 900), False),
    ("linspace_0", lambda: np.linspace(0, 1, 0), False),
    ("linspace_1", lambda: np.linspace(2, 3, 1), False),
    ("full", lambda: np.full((60, 70), -0.0), False),
    ("ones_int", lambda: np.ones((50, 50), dtype=I32), False),
    ("zeros_like", lambda: np.zeros_like(np.empty((40, 40))), False),
    ("scaled_eye", lambda: 2.5 * np.eye(40) - 1, False),
    ("outer_compare", lambda: np.arange(600)[:, None] < np.arange(700), False),
    ("tril_ones", lambda: np.tril(np.ones((40, 40)), -1), False),
    ("eye_view", lambda: np.eye(60)[::2, 1:], False),
    ("eye_T", lambda: np.eye(50, 40).T * 3, False),
    ("where_eye", lambda: np.where(np.eye(50, dtype=bool), 1.0, -2.0), False),
    ("concat", lambda: np.concatenate([np.eye(30), np.zeros((30, 30))]), False),
    ("eye_f32_div", lambda: np.eye(40).astype(F32) / 3, False),
    ("reshaped", lambda: np.arange(6000.0).reshape(60, 100) + 0.5, False),
    ("power", lambda: np.linspace(0, 1, 1000) ** 2, True),  # pow is not exact: data
    ("mod", lambda: np.arange(6000).reshape(60, 100) % 7, True),  # neither is mod
]
IDS = [c[0] for c in CASES]


def _program(make: Callable[[], Any]) -> tuple[Function, np.ndarray]:
    """The optimized forward program of ``x -> (make(), x + 1)`` and NumPy's array."""
    def f(x: Any) -> Any:
        return make(), x + 1.0

    _, tape = pipeline.trace_forward(f, [np.zeros(3)])
    return pipeline.forward_ir(tape), make()


def big_constants(fn: Function) -> list[int]:
    """The byte sizes of the constants of ``fn`` (and its callees) over GENERATED_BYTES
    that are not splats."""
    ops = list(fn.ops) + [o for c in fn.all_callees().values() for o in c.ops]
    return [o.result.type.nbytes for o in ops if o.name == "const"
            and o.result.type.nbytes > GENERATED_BYTES
            and splat_scalar(o.attrs["value"]) is None]


def assert_same(got: Any, want: np.ndarray) -> None:
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
    assert got.tobytes() == want.tobytes()  # bit for bit: -0.0 too


PROGRAMS = {label: _program(make) for label, make, _ in CASES}


@pytest.mark.parametrize("label, make, data", CASES, ids=IDS)
def test_values_equal_numpy_and_are_not_stored(label: str, make: Callable[[], Any],
                                               data: bool) -> None:
    fn, want = PROGRAMS[label]
    assert bool(big_constants(fn)) == (data and want.nbytes > GENERATED_BYTES), fn
    x = np.zeros(3)
    assert_same(run(fn, x)[0], want)
    assert_same(native.compile(fn)(x)[0], want)
    assert_same(yota.compile(lambda v: (make(), v), x, cache=False)(x)[0], want)


@pytest.mark.skipif(emulation_available() is not None, reason="no CUDA emulation")
def test_values_on_the_cuda_emulator() -> None:
    fns = [PROGRAMS[label][0] for label in IDS]
    emu = emulator(fns)
    for label in IDS:
        fn, want = PROGRAMS[label]
        assert_same(cuda.compile(fn, device=emu)(np.zeros(3))[0], want)


@pytest.mark.skipif(MLIR_MISSING is not None, reason=f"MLIR tools: {MLIR_MISSING}")
def test_values_on_mlir() -> None:
    from yota.backends import mlir

    for label in IDS:
        fn, want = PROGRAMS[label]
        assert_same(mlir.compile(fn)(np.zeros(3))[0], want)


def test_recorded_as_the_call_up_to_the_size_limit() -> None:
    """eye(22) in float64 (3872 bytes) stays a constant; eye(23) (4232) is the call."""
    for n, kind in ((22, "const"), (23, "call")):
        _, tape = pipeline.trace_forward(lambda x, n=n: x + np.eye(n), [np.zeros((n, n))])
        made = [e for e in tape.entries if e.fn == "eye" or e.kind == "const"]
        assert [e.kind for e in made] == [kind]


def test_small_index_arrays_stay_plain_numpy() -> None:
    """A small arange, linspace or tri is a plain array (index arithmetic at NumPy's
    speed while tracing); a large one is a traced constant, eye and zeros at any size."""
    seen = {}

    def f(x: Any) -> Any:
        for name, a in [("arange", np.arange(10)), ("linspace", np.linspace(0, 1, 512)),
                        ("tri", np.tri(8)), ("arange_big", np.arange(513)),
                        ("eye", np.eye(2))]:
            seen[name] = type(a) is np.ndarray
        return x

    pipeline.trace_forward(f, [np.zeros(3)])
    assert seen == {"arange": True, "linspace": True, "tri": True, "arange_big": False,
                    "eye": False}


def test_a_recipe_that_does_not_reproduce_numpy_stays_data(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """An arange or linspace is compared with NumPy's array when recorded; one that the
    lowering would not reproduce bit for bit is NumPy's array, as any array met in user
    code (over 1024 elements: an input read at call time)."""
    from yota.numpy import generated

    monkeypatch.setattr(generated, "_reproduces", lambda made: False)
    f = lambda x: x + np.arange(0.0, 2.0, 1e-3)  # noqa: E731
    x = np.ones(2000)
    _, tape = pipeline.trace_forward(f, [x])
    assert not any(e.fn == "arange" for e in tape.entries)
    assert [e.kind for e in tape.entries if e.kind in ("const", "captured")] == ["captured"]
    assert_same(yota.compile(f, x, cache=False)(x), f(x))


def test_writes_make_it_data_again() -> None:
    n = 40

    def const_write(x: Any) -> Any:
        eye = np.eye(n)
        eye[0, 1] = 7.0
        view = eye[:5]
        eye[4, 4] = -1.0  # through the base: the view sees it
        return x + eye, view * 2

    def traced_write(x: Any) -> Any:
        eye = np.eye(n)
        eye[2] = x[0]
        return eye * 3

    x = np.random.default_rng(0).standard_normal((n, n))
    for f in (const_write, traced_write):
        want = f(x.copy())
        got = yota.compile(f, x, cache=False)(x)
        for g, w in zip(got if isinstance(want, tuple) else [got],
                        want if isinstance(want, tuple) else [want], strict=True):
            assert_same(g, w)


def test_static_argument_computed_from_shapes() -> None:
    """np.repeat reads its counts at compile time: computed counts are evaluated."""
    def f(x: Any) -> Any:
        return np.repeat(x, (np.arange(600) > 300) + 1)

    x = np.linspace(0, 1, 600)
    _, tape = pipeline.trace_forward(f, [x])
    assert any(e.fn == "arange" for e in tape.entries)
    assert_same(yota.compile(f, x, cache=False)(x), f(x))


gp_loss = loss_w8(np)  # tools/bench.py's W8: a GP's negative log marginal likelihood


def gp_args(n: int) -> list[Any]:
    """ell, variance, noise, X (n points in 2-D), y."""
    return list(w8(n, 2).make(np.random.default_rng(1)).values())


def test_gradients_match_finite_differences() -> None:
    def f(x: Any, c: Any) -> Any:
        m = np.eye(40) * c + np.tri(40, 40, -1) * 0.01
        w = np.linspace(-1, 1, 1200).reshape(30, 40)
        return np.sum(np.tanh(x @ m) * w) + np.sum(np.arange(40.0) * x[0])

    args = [np.random.default_rng(2).standard_normal((30, 40)), np.asarray(0.7)]
    _, g = yota.grad(f, *args, cache=False)
    assert check_grad(f, args, g) == 2
    args = gp_args(30)  # eye(30): 7.2 KB, computed
    _, g = yota.grad(gp_loss, *args, cache=False)
    assert check_grad(gp_loss, args, g, rtol=1e-5) == 5


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("YOTA_CACHE_DIR", str(d))
    monkeypatch.delenv("YOTA_CACHE", raising=False)
    yc.stats.reset()
    return d


def test_cache_entry_of_a_program_with_eye_1000_is_small(cache_dir: Path) -> None:
    """Its code, not an 8 MB identity (the entry took 26 MB before eye was computed)."""
    args = gp_args(1000)
    val, _ = yota.grad(gp_loss, *args)
    assert yc.stats.stores == 1
    entry = next((cache_dir / "entries").iterdir())
    sizes = {p.name: p.stat().st_size for p in entry.iterdir()}
    assert sum(sizes.values()) < 200_000, sizes
    assert sizes["program.yir"] < 40_000, sizes
    assert np.isfinite(val)


# -- the iota op in passes --------------------------------------------------------------------
def test_fold_keeps_iota_and_tile_keeps_rows_counted() -> None:
    """fold never makes an iota data; row tiling does not cut a kernel whose index runs
    along the rows (each block would count its rows from 0)."""
    b = Builder("rows")
    x = b.input(TensorType("f32", (4096, 512)))
    r = iota.index_along(b, (4096, 512), 0, "f32")
    y = b.exp(b.mul(b.add(x, r), b.const(1e-3, "f32", (4096, 512))))
    fn = b.build([b.sum(y, axes=(1,)), b.sum(b.mul(y, y), axes=(0,))])
    g = optimize(fn)
    assert any(o.name == "iota" for c in g.callees.values() for o in c.ops)
    xv = np.random.default_rng(3).standard_normal((4096, 512)).astype(F32)
    want = run(fn, xv)
    for got, w in zip(native.compile(g)(xv), want, strict=True):
        np.testing.assert_allclose(got, w, rtol=2e-5)  # float32 sums of 512..4096 terms


def _eye_program(k: int, small: bool, batch: tuple[int, ...] = ()) -> Function:
    b = Builder("diag")
    shape = batch + (40, 50)
    a, c = b.input(TensorType("f64", shape)), b.input(TensorType("f64", ()))
    e = iota.eye(b, shape, k, "f64", small=small)
    s = b.add(a, b.mul(b.broadcast(c, shape=shape), e))
    t = b.sum(b.mul(a, e), axes=tuple(range(len(shape))))
    return b.build([s, t, b.add(e, a)])


@pytest.mark.parametrize("k, small, batch", [(0, False, ()), (3, False, ()), (-6, False, (2,)),
                                             (1, True, ())])
def test_fast_math_diagonal_update_and_trace(k: int, small: bool, batch: tuple[int, ...]) -> None:
    """A + c * eye(k) -> a scatter into A's diagonal; sum(X * eye(k)) -> a sum of X's
    diagonal (fast_math only: off the diagonal NumPy adds c * 0.0)."""
    fn = _eye_program(k, small and not batch, batch)
    exact = optimize(fn, ["simplify", "dce"])
    assert not any(o.name == "scatter" for o in exact.ops)
    fast = optimize(fn, ["simplify", "dce"], ctx=PassContext(fast_math=True))
    names = [o.name for o in fast.ops]
    assert names.count("scatter") == 2 and names.count("gather") == 3
    assert not {"eq", "mul"} & set(names)  # no mask is left, computed or stored
    assert all(splat_scalar(o.attrs["value"]) is not None for o in fast.ops if o.name == "const")
    r = np.random.default_rng(4)
    a, c = r.standard_normal(batch + (40, 50)), np.asarray(0.3)
    want = run(fn, a, c)
    for prog in (fast, optimize(fn, ctx=PassContext(fast_math=True))):
        for got, w in zip(native.compile(prog)(a, c), want, strict=True):
            np.testing.assert_allclose(got, w, rtol=1e-14, atol=0)  # a diagonal sum: ulps
