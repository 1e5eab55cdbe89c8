"""Tracing then replaying equals NumPy, for every supported NumPy feature.

Each case is traced on example inputs; then ``yota.play(tape, *new)`` and
``yota.compile(f, *example)(*new)`` must equal ``f(*new)`` computed by NumPy: the same
dtype, the same shape and the same values (exactly: the reference interpreter runs the
same NumPy kernels). Inputs cover float32 and float64, 0-d arrays, size-1 broadcast axes,
empty axes, and non-contiguous (transposed, strided) views.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import yota

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)
DTYPES = [F32, F64]
LAYOUTS = ["c", "T", "s"]  # contiguous, transposed view, strided view
SETTINGS = settings(max_examples=3, deadline=None, derandomize=True)
seeds = st.integers(0, 2**32 - 1)
layouts = st.sampled_from(LAYOUTS)


# -- inputs -------------------------------------------------------------------------------
def view(a: np.ndarray, layout: str) -> np.ndarray:
    """``a``'s values in a non-contiguous layout: a transposed or a strided view."""
    if layout == "T" and a.ndim >= 2:
        return np.ascontiguousarray(a.T).T
    if layout in ("T", "s") and a.ndim >= 1:
        big = np.zeros(a.shape[:-1] + (2 * a.shape[-1] + 1,), a.dtype)
        big[..., 1::2] = a
        out = big[..., 1::2]
        assert a.size <= 1 or not out.flags.c_contiguous
        return out
    return a


def make(spec: Any, dtype: np.dtype, layout: str, rng: np.random.Generator) -> Any:
    """An input from a spec: ``(shape, domain)`` for a float array of ``dtype``,
    ``("int", shape, high)`` for int64 indices, ``"weak"`` for a Python float."""
    if spec == "weak":
        return float(rng.uniform(0.5, 2.0))
    if spec and spec[0] == "int":
        return rng.integers(0, spec[2], spec[1])
    shape, domain = spec if len(spec) == 2 and isinstance(spec[1], str) else (spec, "n")
    draw = {"n": lambda: rng.standard_normal(shape) * 2,
            "p": lambda: rng.uniform(0.1, 3.0, shape),
            "u": lambda: rng.uniform(-0.95, 0.95, shape)}[domain]
    return view(np.asarray(draw(), dtype), layout)


# -- comparison -----------------------------------------------------------------------------
def assert_same(got: Any, want: Any, ulps: int = 0, where: str = "") -> None:
    """Equal structure, Python scalar types, dtypes, shapes and values (NaN == NaN)."""
    if isinstance(want, (list, tuple, dict)):
        assert type(got) is type(want), where
        assert len(got) == len(want), where
        items = want.items() if isinstance(want, dict) else enumerate(want)
        for k, w in items:
            assert_same(got[k], w, ulps, f"{where}[{k!r}]")
        return
    if type(want) in (bool, int, float):  # a Python scalar (np.float64 is a float subclass)
        assert type(got) is type(want), f"{where}: {type(got)} != {type(want)}"
    g, w = np.asarray(got), np.asarray(want)
    assert g.dtype == w.dtype, f"{where}: dtype {g.dtype} != {w.dtype}"
    assert g.shape == w.shape, f"{where}: shape {g.shape} != {w.shape}"
    if ulps and g.dtype.kind == "f" and g.size:
        # within `ulps` units in the last place of the result's largest element (sums in
        # another order differ by rounding, relative to the terms, not to the result)
        scale = np.spacing(np.max(np.abs(w[np.isfinite(w)]), initial=np.finfo(w.dtype).tiny))
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=where)
        assert np.all(np.abs(g - w)[~np.isnan(w)] <= ulps * scale), f"{where}: {g} != {w}"
    else:
        np.testing.assert_array_equal(g, w, err_msg=where)


def check(f: Callable[..., Any], ex: tuple[Any, ...], new: tuple[Any, ...],
          ulps: int = 0) -> None:
    """trace → play and trace → compile on new inputs equal NumPy on the new inputs."""
    val, tape = yota.trace(f, *ex)
    assert_same(val, f(*ex), ulps, "traced value")
    want = f(*new)
    assert_same(yota.play(tape, *new), want, ulps, "play")
    assert_same(yota.compile(f, *ex, backend="interp")(*new), want, ulps, "compile")


def run_case(f: Callable[..., Any], specs: tuple[Any, ...], dtype: np.dtype, layout: str,
             seed: int, ulps: int = 0) -> None:
    run_cases([(f, specs)], dtype, layout, seed, ulps)


def run_cases(cases: list[tuple[Callable[..., Any], tuple[Any, ...]]], dtype: np.dtype,
              layout: str, seed: int, ulps: int = 0) -> None:
    """Check several ``(f, input specs)`` cases at once: one program computes them all
    (so a single trace covers many shapes) and returns their results as a tuple."""
    rng = np.random.default_rng(seed)
    ex = [tuple(make(s, dtype, layout, rng) for s in specs) for _, specs in cases]
    new = [tuple(make(s, dtype, layout, rng) for s in specs) for _, specs in cases]
    bounds = np.cumsum([0] + [len(specs) for _, specs in cases])

    def program(*flat: Any) -> tuple[Any, ...]:
        spans = zip(cases, bounds[:-1], bounds[1:], strict=True)
        return tuple(f(*flat[a:b]) for (f, _), a, b in spans)

    with np.errstate(all="ignore"):
        check(program, sum(ex, ()), sum(new, ()), ulps)


# -- elementwise, one operand -----------------------------------------------------------------
SHAPES = [(), (1,), (5,), (0,), (2, 3), (3, 1), (0, 3), (1, 4, 2)]

UNARY: dict[str, tuple[Callable[..., Any], str]] = {
    "neg": (lambda x: -x, "n"), "negative": (np.negative, "n"), "pos": (lambda x: +x, "n"),
    "abs": (np.abs, "n"), "builtin_abs": (abs, "n"), "sign": (np.sign, "n"),
    "exp": (np.exp, "n"), "expm1": (np.expm1, "n"), "log": (np.log, "p"),
    "log1p": (np.log1p, "p"), "log2": (np.log2, "p"), "sqrt": (np.sqrt, "p"),
    "square": (np.square, "n"), "reciprocal": (np.reciprocal, "n"), "sin": (np.sin, "n"),
    "cos": (np.cos, "n"), "tan": (np.tan, "n"), "tanh": (np.tanh, "n"),
    "sinh": (np.sinh, "n"), "cosh": (np.cosh, "n"), "arctan": (np.arctan, "n"),
    "arcsin": (np.arcsin, "u"), "arccos": (np.arccos, "u"), "floor": (np.floor, "n"),
    "ceil": (np.ceil, "n"), "round": (np.round, "n"), "around": (np.around, "n"),
    "rint": (np.rint, "n"), "round_2": (lambda x: np.round(x, 2), "n"),
    "round_method": (lambda x: x.round(1), "n"),
    "pow2": (lambda x: x**2, "n"), "pow3": (lambda x: x**3, "n"),
    "pow_half": (lambda x: np.power(x, 0.5), "p"), "pow_neg": (lambda x: x**-2, "p"),
    "rpow_int": (lambda x: 2**x, "n"), "rpow_float": (lambda x: 2.5**x, "n"),
    "pow_self": (lambda x: x**x, "p"),
    "mul_float": (lambda x: x * 1.5, "n"), "rmul_float": (lambda x: 1.5 * x, "n"),
    "mul_int": (lambda x: 3 * x, "n"), "div_int": (lambda x: x / 2, "n"),
    "rdiv": (lambda x: 2.0 / x, "p"), "sub": (lambda x: x - 1, "n"),
    "rsub": (lambda x: 1 - x, "n"), "add": (lambda x: x + 0.25, "n"),
    "floordiv": (lambda x: x // 1.5, "n"), "mod": (lambda x: x % 1.5, "n"),
    "clip": (lambda x: np.clip(x, -0.5, 0.5), "n"),
    "clip_lo": (lambda x: np.clip(x, 0.1, None), "n"),
    "clip_method": (lambda x: x.clip(-1, 1), "n"),
    "clip_min_kw": (lambda x: np.clip(x, min=0.0), "n"),
    "clip_max_kw": (lambda x: np.clip(x, max=0.5), "n"),
    "clip_method_lower": (lambda x: x.clip(-0.5), "n"),
    "clip_method_upper": (lambda x: x.clip(max=0.5), "n"),
    "divmod": (lambda x: divmod(x, 1.5), "n"), "rdivmod": (lambda x: divmod(2.0, x), "p"),
    "np_divmod": (lambda x: np.divmod(x, 0.75), "n"),
    "maximum0": (lambda x: np.maximum(x, 0), "n"), "minimum0": (lambda x: np.minimum(0.0, x), "n"),
    "where": (lambda x: np.where(x > 0, x, 0.0), "n"),
    "where_scalars": (lambda x: np.where(x > 0, 1.0, -1.0), "n"),
    "gt": (lambda x: x > 0, "n"), "ge": (lambda x: x >= 0.5, "n"), "lt": (lambda x: 0 < x, "n"),
    "le": (lambda x: x <= 0, "n"), "eq": (lambda x: x == x, "n"), "ne": (lambda x: x != 1, "n"),
    "not": (lambda x: np.logical_not(x > 0), "n"), "invert": (lambda x: ~(x > 0), "n"),
    "and": (lambda x: (x > -1) & (x < 1), "n"), "or": (lambda x: np.logical_or(x < -1, x > 1), "n"),
    "xor": (lambda x: np.logical_xor(x > 0, x > 1), "n"),
    "isnan": (lambda x: np.isnan(np.log(x)), "n"), "isfinite": (lambda x: np.isfinite(1 / x), "n"),
    "zeros_like": (np.zeros_like, "n"), "ones_like": (lambda x: np.ones_like(x) * x, "n"),
    "full_like": (lambda x: np.full_like(x, 2.5), "n"),
    "full_like_traced": (lambda x: np.full_like(x, np.sum(x)), "n"),
    "zeros_like_int": (lambda x: np.zeros_like(x, dtype=np.int32), "n"),
    "astype_f32": (lambda x: x.astype(np.float32), "n"),
    "astype_f64": (lambda x: x.astype("float64") * 2, "n"),
    "astype_i64": (lambda x: x.astype(np.int64), "n"),
    "astype_bool": (lambda x: x.astype(bool), "n"),
    "mask_mul": (lambda x: (x > 0).astype(x.dtype) * x, "n"),
    "copy": (lambda x: np.copy(x) + 1, "n"),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@SETTINGS
@given(seed=seeds, layout=layouts)
def test_unary(name: str, seed: int, layout: str) -> None:
    f, domain = UNARY[name]
    for dtype in DTYPES:
        run_cases([(f, ((shape, domain),)) for shape in SHAPES], dtype, layout, seed)


@SETTINGS
@given(seed=seeds, layout=layouts)
def test_log10(seed: int, layout: str) -> None:
    """log10 is lowered as log(x) / log(10) (the IR has no log10 op): within two ulps."""
    for dtype in DTYPES:
        run_cases([(np.log10, ((shape, "p"),)) for shape in SHAPES], dtype, layout, seed, ulps=2)


# -- elementwise, two operands (broadcasting) --------------------------------------------------
PAIRS = [((), ()), ((3,), ()), ((), (2, 3)), ((2, 3), (3,)), ((3, 1), (1, 4)),
         ((0, 3), (1, 3)), ((2, 1, 3), (4, 1)), ((1,), (0,))]

BINARY: dict[str, tuple[Callable[..., Any], str]] = {
    "add": (lambda x, y: x + y, "n"), "sub": (lambda x, y: x - y, "n"),
    "mul": (lambda x, y: x * y, "n"), "div": (lambda x, y: x / y, "n"),
    "pow": (lambda x, y: x**y, "p"), "np_power": (np.power, "p"),
    "maximum": (np.maximum, "n"), "minimum": (np.minimum, "n"), "arctan2": (np.arctan2, "n"),
    "floordiv": (lambda x, y: x // y, "p"), "mod": (np.mod, "p"),
    "lt": (lambda x, y: x < y, "n"), "le": (np.less_equal, "n"), "gt": (lambda x, y: x > y, "n"),
    "ge": (np.greater_equal, "n"), "eq": (lambda x, y: x == y, "n"), "ne": (np.not_equal, "n"),
    "and": (lambda x, y: (x > 0) & (y > 0), "n"), "or": (lambda x, y: (x > 0) | (y > 0), "n"),
    "xor": (lambda x, y: (x > 0) ^ (y > 0), "n"),
    "logical_and": (lambda x, y: np.logical_and(x > 0, y > 0), "n"),
    "where": (lambda x, y: np.where(x > y, x, y), "n"),
    "where_cond_bcast": (lambda x, y: np.where(y > 0, x, -1.0), "n"),
    "clip_arrays": (lambda x, y: np.clip(x, -np.abs(y), np.abs(y)), "n"),
    "mixed_dtypes": (lambda x, y: x.astype(np.float32) * y.astype(np.float64), "n"),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@SETTINGS
@given(seed=seeds, layout=layouts)
def test_binary(name: str, seed: int, layout: str) -> None:
    f, domain = BINARY[name]
    for dtype in DTYPES:
        run_cases([(f, ((sx, domain), (sy, domain))) for sx, sy in PAIRS], dtype, layout, seed)


# -- reductions ------------------------------------------------------------------------------
REDUCTIONS: dict[str, Callable[..., Any]] = {
    "sum": np.sum, "mean": np.mean, "prod": np.prod, "max": np.max, "min": np.min,
    "var": np.var, "std": np.std, "var_ddof": lambda x, **kw: np.var(x, ddof=1, **kw),
}
METHODS_AND_ALIASES: dict[str, Callable[..., Any]] = {
    "amax": np.amax, "std_ddof": lambda x, **kw: x.std(ddof=1, **kw),
    "sum_method": lambda x, **kw: x.sum(**kw), "mean_method": lambda x, **kw: x.mean(**kw),
    "max_method": lambda x, **kw: x.max(**kw), "min_method": lambda x, **kw: x.min(**kw),
    "prod_method": lambda x, **kw: x.prod(**kw), "var_method": lambda x, **kw: x.var(**kw),
    "add_reduce": lambda x, **kw: np.add.reduce(x, **kw),
    "maximum_reduce": lambda x, **kw: np.maximum.reduce(x, **kw),
}
NEEDS_NONEMPTY = {"max", "min", "amax", "max_method", "min_method", "maximum_reduce"}
FULL_GRID = [((2, 3, 4), [None, 0, -1, (0, 2), (2, 0), (), (0, 1, 2)]),
             ((1, 3, 1), [None, 0, (0, 2)]), ((2, 0, 3), [None, 1, (0, 2)])]
SMALL_GRID = [((2, 3, 4), [None, 1, (0, -1)]), ((2, 0, 3), [0])]


def _reduction_cases(f: Callable[..., Any], nonempty: bool, grid: Any) -> list[Any]:
    cases: list[Any] = [(lambda x: f(x), ((),)), (lambda x: f(x), ((3, 2),))]
    for shape, axes in grid:
        for axis in axes:
            reduced = range(3) if axis is None else np.atleast_1d(axis)
            if nonempty and any(shape[a] == 0 for a in reduced):
                continue
            for k in (False, True):
                cases.append((lambda x, axis=axis, k=k: f(x, axis=axis, keepdims=k), (shape,)))
    return cases


@pytest.mark.filterwarnings("ignore:Mean of empty slice", "ignore:Degrees of freedom")
@pytest.mark.parametrize("name", sorted(REDUCTIONS) + sorted(METHODS_AND_ALIASES))
@SETTINGS
@given(seed=seeds, layout=layouts)
def test_reductions(name: str, seed: int, layout: str) -> None:
    f = REDUCTIONS.get(name) or METHODS_AND_ALIASES[name]
    grid = FULL_GRID if name in REDUCTIONS else SMALL_GRID
    cases = _reduction_cases(f, name in NEEDS_NONEMPTY, grid)
    for dtype in DTYPES:
        run_cases(cases, dtype, layout, seed)


@pytest.mark.parametrize("fn", [np.argmax, np.argmin, lambda x, **kw: x.argmax(**kw)])
@SETTINGS
@given(seed=seeds, layout=layouts)
def test_argreductions(fn: Callable[..., Any], seed: int, layout: str) -> None:
    cases: list[Any] = [(lambda x: fn(x), ((),))]
    for shape in [(5,), (2, 3, 4), (1, 4, 1)]:
        for axis in [None, 0, -1]:
            for k in (False, True):
                cases.append((lambda x, axis=axis, k=k: fn(x, axis=axis, keepdims=k), (shape,)))
    for dtype in DTYPES:
        run_cases(cases, dtype, layout, seed)


# -- linear algebra ----------------------------------------------------------------------------
# NumPy's matmul, dot and inner choose kernels (BLAS or their own loops) by layout, so a
# product lowered to `matmul` may sum in another order: allow rounding at the result's scale.
LINALG_ULPS = 4
MATMUL_SHAPES = [((4,), (4,)), ((4,), (4, 3)), ((2, 4), (4,)), ((2, 4), (4, 3)),
                 ((2, 1, 3, 4), (5, 4, 2)), ((3, 4), (2, 4, 5)), ((4,), (2, 4, 3)),
                 ((2, 3, 4), (4,)), ((1, 4), (4, 1)), ((3, 0), (0, 2)), ((0, 4), (4, 2))]


@pytest.mark.parametrize("op", ["@", "matmul", "dot_2d"])
@SETTINGS
@given(seed=seeds, layout=layouts)
def test_matmul(op: str, seed: int, layout: str) -> None:
    f = {"@": lambda a, b: a @ b, "matmul": np.matmul, "dot_2d": np.dot}[op]
    cases = [(f, (sa, sb)) for sa, sb in MATMUL_SHAPES
             if op != "dot_2d" or (len(sa) <= 2 and len(sb) <= 2)]
    for dtype in DTYPES:
        run_cases(cases, dtype, layout, seed, ulps=LINALG_ULPS)


@SETTINGS
@given(seed=seeds, layout=layouts)
def test_dot_outer_inner(seed: int, layout: str) -> None:
    cases = [
        (np.dot, ((), (3,))), (np.dot, ((2, 3), ())), (np.dot, ((3,), (3,))),
        (lambda a, b: a.dot(b), ((2, 3), (3, 4))),
        (np.outer, ((3,), (4,))), (np.outer, ((2, 2), (3,))), (np.outer, ((0,), (2,))),
        (np.inner, ((3,), (3,))), (np.inner, ((2, 3), (4, 3))), (np.inner, ((2, 3), (3,))),
        (np.inner, ((), (2, 3))),
        (lambda a, b: np.outer(a, b) @ b, ((3,), (4,))),
    ]
    for dtype in DTYPES:
        run_cases(cases, dtype, layout, seed, ulps=LINALG_ULPS)


# -- shape ops -------------------------------------------------------------------------------
SHAPE_OPS: list[tuple[str, Callable[..., Any], tuple[int, ...]]] = [
    ("reshape_neg", lambda x: x.reshape(-1, 2), (2, 3, 2)),
    ("reshape_tuple", lambda x: x.reshape((3, -1)), (2, 3, 2)),
    ("np_reshape", lambda x: np.reshape(x, (2, 6)), (2, 3, 2)),
    ("reshape_kw", lambda x: np.reshape(x, shape=(-1,)), (2, 3, 2)),
    ("reshape_0d", lambda x: x.reshape(()), (1, 1)),
    ("reshape_empty", lambda x: x.reshape(3, 0, 2), (0, 6)),
    ("transpose", np.transpose, (2, 3, 4)), ("T", lambda x: x.T, (2, 3, 4)),
    ("T_0d", lambda x: x.T, ()), ("T_1d", lambda x: x.T, (3,)),
    ("transpose_axes", lambda x: np.transpose(x, (1, 2, 0)), (2, 3, 4)),
    ("transpose_neg_axes", lambda x: np.transpose(x, (-1, 0, 1)), (2, 3, 4)),
    ("transpose_method", lambda x: x.transpose(2, 0, 1), (2, 3, 4)),
    ("transpose_method_tuple", lambda x: x.transpose((0, 2, 1)), (2, 3, 4)),
    ("swapaxes", lambda x: np.swapaxes(x, 0, -1), (2, 3, 4)),
    ("swapaxes_method", lambda x: x.swapaxes(1, 2), (2, 3, 4)),
    ("moveaxis", lambda x: np.moveaxis(x, 0, -1), (2, 3, 4)),
    ("moveaxis_multi", lambda x: np.moveaxis(x, [0, 1], [-1, 0]), (2, 3, 4)),
    ("expand_dims", lambda x: np.expand_dims(x, 1), (2, 3)),
    ("expand_dims_tuple", lambda x: np.expand_dims(x, (0, -1)), (2, 3)),
    ("squeeze", np.squeeze, (1, 3, 1)),
    ("squeeze_axis", lambda x: np.squeeze(x, axis=2), (1, 3, 1)),
    ("squeeze_method", lambda x: x.squeeze(), (1, 3, 1)),
    ("broadcast_to", lambda x: np.broadcast_to(x, (4, 2, 3)), (2, 3)),
    ("broadcast_to_size1", lambda x: np.broadcast_to(x, (2, 5)), (2, 1)),
    ("broadcast_to_0d", lambda x: np.broadcast_to(x, (3,)), ()),
    ("ravel", np.ravel, (2, 3, 4)), ("ravel_method", lambda x: x.ravel(), (2, 3)),
    ("flatten", lambda x: x.flatten(), (2, 3)),
    ("concatenate", lambda x: np.concatenate([x, 2 * x], axis=1), (2, 3)),
    ("concatenate_neg", lambda x: np.concatenate((x, x[:, :1]), axis=-1), (2, 3)),
    ("concatenate_none", lambda x: np.concatenate([x, x], axis=None), (2, 3)),
    ("concatenate_empty", lambda x: np.concatenate([x[:0], x, x[:0]]), (2, 3)),
    ("concatenate_const", lambda x: np.concatenate([x, np.ones((1, 3))]), (2, 3)),
    ("stack", lambda x: np.stack([x, x + 1]), (2, 3)),
    ("stack_axis", lambda x: np.stack([x, x, x], axis=-1), (2, 3)),
    ("stack_0d", lambda x: np.stack([x, x * 2]), ()),
    ("split_sections", lambda x: np.split(x, 3, axis=1), (2, 6)),
    ("split_indices", lambda x: np.split(x, [1, 1, 4]), (5, 2)),
    ("split_neg_axis", lambda x: np.split(x, 2, axis=-1), (3, 4)),
    ("atleast_2d", np.atleast_2d, (3,)),
]


@pytest.mark.parametrize("name, f, shape", SHAPE_OPS, ids=[c[0] for c in SHAPE_OPS])
@SETTINGS
@given(seed=seeds, layout=layouts)
def test_shape_ops(name: str, f: Callable[..., Any], shape: tuple[int, ...], seed: int,
                   layout: str) -> None:
    for dtype in DTYPES:
        run_case(f, (shape,), dtype, layout, seed)


# -- indexing ---------------------------------------------------------------------------------
INDEXING: list[tuple[str, Callable[..., Any]]] = [
    ("int", lambda x: x[1]), ("neg_int", lambda x: x[-1]), ("ints", lambda x: x[1, 2, 3]),
    ("numpy_int", lambda x: x[np.int64(2)]),
    ("slice", lambda x: x[1:3]), ("slice_step", lambda x: x[::2, 1::3]),
    ("slice_neg_step", lambda x: x[::-1]), ("slice_neg_step2", lambda x: x[3:0:-2, ::-3]),
    ("slice_neg_bounds", lambda x: x[-3:-1, :-2]), ("slice_empty", lambda x: x[3:1]),
    ("slice_clamped", lambda x: x[-10:10]), ("none", lambda x: x[None]),
    ("none_mid", lambda x: x[:, None, 1]), ("ellipsis", lambda x: x[..., 1]),
    ("ellipsis_none", lambda x: x[..., None, ::2]), ("ellipsis_front", lambda x: x[1, ...]),
    ("ellipsis_all", lambda x: x[...]),
    ("int_array", lambda x: x[np.array([0, 2, 2])]), ("int_list", lambda x: x[[3, 0]]),
    ("neg_int_array", lambda x: x[np.array([-1, 0])]),
    ("int_array_2d", lambda x: x[np.array([[0, 1], [2, 3]])]),
    ("int_array_axis1", lambda x: x[:, [0, 4, 1]]),
    ("int_arrays_adjacent", lambda x: x[:, [0, 1], [2, 3]]),
    ("int_arrays_bcast", lambda x: x[np.arange(4)[:, None], np.array([0, 2])]),
    ("int_arrays_nonadjacent", lambda x: x[[0, 1], :, [2, 3]]),
    ("int_and_int_array", lambda x: x[1, :, [0, 3]]),
    ("int_array_and_slice_steps", lambda x: x[::-1, [4, 0], ::2]),
    ("none_splits_advanced", lambda x: x[[0, 1], None, [1, 2]]),
    ("traced_index", lambda x: x[np.argmax(x[:, 0, 0])]),
    ("traced_index_list", lambda x: x[[np.argmin(x[:, 0, 0]), 0]]),
    ("getitem_then_math", lambda x: np.sum(x[1:, 1::2] * x[:-1, 3::-2], axis=0)),
]


@pytest.mark.parametrize("name, f", INDEXING, ids=[c[0] for c in INDEXING])
@SETTINGS
@given(seed=seeds, layout=layouts)
def test_indexing(name: str, f: Callable[..., Any], seed: int, layout: str) -> None:
    for dtype in DTYPES:
        run_case(f, ((4, 5, 6),), dtype, layout, seed)


@SETTINGS
@given(seed=seeds, layout=layouts, b=st.integers(1, 6), c=st.integers(1, 4))
def test_gather_labels(seed: int, layout: str, b: int, c: int) -> None:
    """The cross-entropy pattern ``logp[np.arange(B), labels]`` with labels as an input."""
    def nll(logits: Any, labels: Any) -> Any:
        logp = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
        return -np.mean(logp[np.arange(logits.shape[0]), labels])

    for dtype in DTYPES:
        run_case(nll, ((b, c), ("int", (b,), c)), dtype, layout, seed)
        run_case(lambda x, i: x[i], ((c, 3), ("int", (2, b), c)), dtype, layout, seed)
        run_case(lambda x, i: x[:, i], ((3, c), ("int", (b,), c)), dtype, layout, seed)


# -- constants made inside the function --------------------------------------------------------
CONSTANTS: list[tuple[str, Callable[..., Any]]] = [
    ("zeros", lambda x: x + np.zeros((3, 4))),
    ("zeros_f32", lambda x: x + np.zeros(4, dtype=np.float32)),
    ("ones", lambda x: x * np.ones((1, 4))), ("full", lambda x: x - np.full((3, 1), 2.5)),
    ("full_int", lambda x: x * np.full(4, 2)), ("arange", lambda x: x * np.arange(4)),
    ("arange_float", lambda x: x + np.arange(0.0, 2.0, 0.5)),
    ("arange_f32", lambda x: x + np.arange(4, dtype=np.float32)),
    ("eye", lambda x: np.eye(3) @ x), ("eye_rect", lambda x: x @ np.eye(4, 2)),
    ("eye_dtype", lambda x: x[:, :3] * np.eye(3, dtype=x.dtype)),
    ("linspace", lambda x: x * np.linspace(0, 1, 4)),
    ("const_0d", lambda x: x * np.float64(0.5)), ("const_f32_0d", lambda x: x + np.float32(1)),
]


@pytest.mark.parametrize("name, f", CONSTANTS, ids=[c[0] for c in CONSTANTS])
@SETTINGS
@given(seed=seeds, layout=layouts)
def test_constants(name: str, f: Callable[..., Any], seed: int, layout: str) -> None:
    for dtype in DTYPES:
        run_case(f, ((3, 4),), dtype, layout, seed)


# -- methods, len, iteration, Python control over shapes --------------------------------------
def _rows(x: Any) -> Any:
    return [np.sum(r * i) for i, r in enumerate(x)]


def _loop_len(x: Any) -> Any:
    acc = x[0]
    for i in range(1, len(x)):
        acc = acc * 0.5 + x[i]
    return acc


METHODS: list[tuple[str, Callable[..., Any]]] = [
    ("sum", lambda x: x.sum()), ("mean_axis", lambda x: x.mean(axis=1)),
    ("mean_keepdims", lambda x: x.mean(axis=(0, 1), keepdims=True)),
    ("reshape", lambda x: x.reshape(4, 3)), ("reshape_list", lambda x: x.reshape([2, -1])),
    ("astype", lambda x: x.astype(np.float32) + 1), ("max", lambda x: x.max(axis=0)),
    ("T", lambda x: x.T @ x), ("len", lambda x: x * len(x)), ("iter", _rows),
    ("iter_sum", lambda x: sum(x)), ("loop", _loop_len),
    ("shape_attrs", lambda x: x.reshape(x.shape[1], x.shape[0]) * (x.ndim + x.size)),
    ("dtype_attr", lambda x: np.zeros(x.shape, dtype=x.dtype) + x),
    ("numpy_int_args", lambda x: np.sum(x.reshape(np.int64(2), -1), axis=np.int64(1))),
    ("numpy_int_reshape", lambda x: x.reshape(np.int64(12)).transpose(np.int64(0))),
    ("numpy_int_moveaxis", lambda x: np.moveaxis(x, np.int64(0), np.int32(1))),
    ("tuple_out", lambda x: (x.sum(), x.T)), ("dict_out", lambda x: {"a": x.min(), "b": [x]}),
]


@pytest.mark.parametrize("name, f", METHODS, ids=[c[0] for c in METHODS])
@SETTINGS
@given(seed=seeds, layout=layouts)
def test_methods(name: str, f: Callable[..., Any], seed: int, layout: str) -> None:
    for dtype in DTYPES:
        run_case(f, ((3, 4),), dtype, layout, seed)


# -- NEP 50 promotion --------------------------------------------------------------------------
PROMOTION: list[tuple[str, Callable[..., Any], tuple[Any, ...]]] = [
    ("f32_times_python_float", lambda x: x * 2.5, ((3,),)),
    ("python_float_plus_f32", lambda x: 0.1 + x, ((3,),)),
    ("f32_pow_python_int", lambda x: x**3, ((3,),)),
    ("f32_times_weak_arg", lambda x, a: x * a, ((3,), "weak")),
    ("weak_arg_minus_f32", lambda x, a: a - x, ((3,), "weak")),
    ("weak_arg_math", lambda x, a: np.exp(a) * x + a * a, ((2, 2), "weak")),
    ("weak_arg_where", lambda x, a: np.where(x > 0, a, x), ((3,), "weak")),
    ("weak_arg_maximum", lambda x, a: np.maximum(x, a), ((3,), "weak")),
    ("weak_result", lambda x, a: a * 2.0 + 1, ((3,), "weak")),
    ("weak_compare", lambda x, a: a > 1.0, ((3,), "weak")),
    ("weak_result_in_tuple", lambda x, a: (a * a, x * a), ((3,), "weak")),
    ("f32_times_f64_0d", lambda x: x * np.float64(2.5), ((3,),)),
]


@pytest.mark.parametrize("name, f, specs", PROMOTION, ids=[c[0] for c in PROMOTION])
@SETTINGS
@given(seed=seeds)
def test_nep50(name: str, f: Callable[..., Any], specs: tuple[Any, ...], seed: int) -> None:
    for dtype in DTYPES:
        run_case(f, specs, dtype, "c", seed)


def test_nep50_float32_stays_float32() -> None:
    x = np.ones(3, np.float32)
    val, tape = yota.trace(lambda x, a: x * a + 1.5, x, 2.0)
    assert val.dtype == F32
    assert yota.play(tape, x, 3.0).dtype == F32
    assert "f32[3]" in str(tape) and "f64[]{weak}" in str(tape)
    assert "f64[3]" not in str(yota.to_ir(tape))


def test_integer_and_bool_inputs() -> None:
    i32, i64 = np.arange(6, dtype=np.int32).reshape(2, 3), np.arange(3)
    b = np.array([True, False, True])
    cases = [
        (lambda i: i * 2 + 1, (i32,)), (lambda i: i / 2, (i32,)), (lambda i: i * 1.5, (i32,)),
        (lambda i: np.sum(i), (i32,)), (lambda i: np.mean(i, axis=0), (i32,)),
        (lambda i, j: i + j, (i32, i64)), (lambda i: i.astype(np.float32) * 0.5, (i32,)),
        (lambda i: i > 2, (i32,)), (lambda b: np.sum(b), (b,)), (lambda b: b & ~b, (b,)),
        (lambda i, b: np.where(b, i, -i), (i64, b)), (lambda i: np.maximum(i, 2), (i64,)),
        (lambda i: -i // 2 + i % 2, (i64,)), (lambda i: np.abs(i - 3), (i64,)),
        (lambda b: abs(b), (b,)), (lambda i: np.floor(i) + np.ceil(i), (i32,)),
        (lambda b: np.ceil(b), (b,)), (lambda i: i**2 + 2**i, (i32,)),
        (lambda i: np.sqrt(np.abs(i)) + np.mean(i), (i32,)), (lambda i: i @ i, (i64,)),
        (lambda i, j: np.maximum(i, j.astype(np.float32)), (i32, i64)),
        (lambda i: np.isnan(i) | np.logical_not(i), (i32,)), (lambda b: b + b * b, (b,)),
        (lambda b: np.where(b, 1, 0) + b / 2, (b,)), (lambda i: np.full_like(i, 2.7), (i32,)),
    ]
    for f, args in cases:
        new = tuple(a[::-1].copy() for a in args)
        check(f, args, new)
