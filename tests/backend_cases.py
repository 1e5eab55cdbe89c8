"""What the differential tests of the llvm and CUDA backends share: the op lists, shapes
and special values of the op-by-op tests, input sampling, the comparison of a backend's
results with the reference interpreter's, and the comparison used on random programs.

Results must be bit for bit equal (NaN equals NaN, signs of zeros count) except:

- ``"ulp"``: transcendentals, within ``ULPS`` units in the last place of NumPy's result;
- ``"sum"``: float sums, products and matrix products (reassociated), within a relative
  tolerance of ``RTOL[dtype]`` times the sum of magnitudes.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from yota.ir import Builder, Function, TensorType, run
from yota.ir.types import dtype_name

sys.path.insert(0, str(Path(__file__).parent))
import irgen  # noqa: E402

SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 1, 9), (37,)]
FLOATS = ["f32", "f64"]
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-310, 1.0, -1.0, 0.5, 2.5, -2.5,
           1e30, -1e30, 88.7, -104.0]
TRANSCENDENTAL = ["exp", "expm1", "log", "log1p", "log2", "sin", "cos", "tan", "tanh", "sinh",
                  "cosh", "arctan", "arcsin", "arccos"]
FLOAT_UNARY = ["sqrt", "reciprocal", "floor", "ceil", "round", "neg", "abs", "sign", "square",
               "isnan", "isinf", "isfinite"]
INT_UNARY = ["neg", "abs", "sign", "square"]
FLOAT_BINARY = ["add", "sub", "mul", "div", "maximum", "minimum", "floordiv", "mod", "lt",
                "le", "gt", "ge", "eq", "ne"]
INT_BINARY = ["add", "sub", "mul", "floordiv", "mod", "maximum", "minimum", "lt", "le", "gt",
              "ge", "eq", "ne", "pow"]
BOOL_BINARY = ["and", "or", "xor", "add", "mul", "maximum", "minimum", "lt", "le", "gt", "ge",
               "eq", "ne"]
# ulps allowed for transcendentals (libmvec and CUDA are not NumPy's implementation;
# CUDA's documented bounds are 1-4 ulps, float32 pow 8)
ULPS = {np.dtype(np.float32): 8, np.dtype(np.float64): 8}
RTOL = {np.dtype(np.float32): 2e-6, np.dtype(np.float64): 1e-13}


# -- programs and inputs -----------------------------------------------------------------
def sample(rng: np.random.Generator, shape: tuple[int, ...], dt: str,
           special: bool = True) -> np.ndarray:
    dtype = np.dtype(TensorType(dt, ()).dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        x = rng.integers(-20, 21, shape).astype(dtype)
        if special and x.size > 3:
            info = np.iinfo(dtype)
            x.reshape(-1)[:3] = [info.min, info.max, 0]
        return x
    with np.errstate(all="ignore"):
        x = (rng.standard_normal(shape) * 3).astype(dtype)
    if special and x.size:
        flat = x.reshape(-1)
        k = min(len(SPECIAL), flat.size // 2 + 1)
        flat[rng.choice(flat.size, k, replace=False)] = np.array(SPECIAL[:k]).astype(dtype)
    return x


def inputs(rng: np.random.Generator, fn: Function, special: bool = True) -> list[np.ndarray]:
    return [sample(rng, v.shape, dtype_name(v.dtype), special) for v in fn.inputs]


def unary_program(op: str, dt: str, shapes: list[tuple[int, ...]] = SHAPES,
                  **attrs: object) -> Function:
    b = Builder(f"{op}_{dt}")
    xs = [b.input(TensorType(dt, s)) for s in shapes]
    return b.build([b.emit(op, x, **attrs) for x in xs])


def binary_program(op: str, dt: str, shapes: list[tuple[int, ...]] = SHAPES) -> Function:
    b = Builder(f"{op}_{dt}")
    outs = []
    for s in shapes:
        x, y = b.input(TensorType(dt, s)), b.input(TensorType(dt, s))
        outs.append(b.emit(op, x, y))
    return b.build(outs)


# -- comparison, op by op ----------------------------------------------------------------
def ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance in units in the last place between finite-or-inf arrays."""
    it = np.int32 if a.dtype == np.float32 else np.int64
    mask = np.iinfo(it).max
    ia, ib = a.view(it).astype(np.int64), b.view(it).astype(np.int64)
    ia = np.where(ia < 0, -(ia & mask), ia)
    ib = np.where(ib < 0, -(ib & mask), ib)
    return np.abs(ia - ib)


def ulp_mismatch(g: np.ndarray, w: np.ndarray) -> str | None:
    if not np.array_equal(np.isnan(g), np.isnan(w)):
        return f"NaN positions differ\n{g}\n{w}"
    ok = ~np.isnan(w)
    d = ulps(g[ok], w[ok])
    if d.size and d.max() > ULPS[g.dtype]:
        k = int(np.argmax(d))
        return f"{int(d.max())} ulps apart: {g[ok][k]!r} vs {w[ok][k]!r}"
    return None


def sum_mismatch(g: np.ndarray, w: np.ndarray, args: list[np.ndarray]) -> str | None:
    scale = max([float(np.max(np.abs(a[np.isfinite(a)]), initial=0)) for a in args
                 if a.dtype.kind == "f"] + [1.0])
    tol = RTOL[g.dtype] * scale * max(1, max((a.size for a in args), default=1))
    if np.allclose(g, w, rtol=RTOL[g.dtype] * 10, atol=tol, equal_nan=True):
        return None
    return f"not close (atol {tol})\n{g}\n{w}"


def mismatch(got: list[np.ndarray], want: list[np.ndarray], args: list[np.ndarray],
             mode: str) -> str | None:
    """None if ``got`` matches ``want`` under ``mode`` ("exact" | "ulp" | "sum"), else a
    description."""
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.shape != w.shape or g.dtype != w.dtype:
            return f"output {i}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        if mode == "exact" or g.dtype.kind != "f":
            msg = irgen.same_results([g], [w])
        elif mode == "ulp":
            msg = ulp_mismatch(g, w)
        else:
            msg = sum_mismatch(g, w, args)
        if msg:
            return f"output {i}: {msg}"
    return None


# -- comparison, random programs ---------------------------------------------------------
def has_f32(fn: Function) -> bool:
    fns = [fn, *fn.all_callees().values()]
    return any(v.dtype == np.float32 for f in fns for op in f.ops for v in op.results)


def compare(fn: Function, args: list[np.ndarray], exe: Callable[..., list[Any]],
            to_host: Callable[[Any], np.ndarray] = np.asarray,
            backend: str = "backend") -> str | None:
    """None if ``exe`` (``fn`` compiled by ``backend``) agrees with the interpreter on
    ``args``: exactly for integer outputs; for floats, ``irgen.close_results``'s tolerance,
    or a float32 one when ``fn`` computes anything in float32. Errors must be the same
    error with the same message."""
    try:
        want, werr = run(fn, *args), None
    except Exception as e:  # noqa: BLE001 - the backend must raise the same
        want, werr = None, e
    try:
        got, gerr = [to_host(x) for x in exe(*args)], None
    except Exception as e:  # noqa: BLE001
        got, gerr = None, e
    if werr is not None or gerr is not None:
        if type(werr) is type(gerr) and str(werr) == str(gerr):
            return None
        return f"interpreter raised {werr!r}, {backend} raised {gerr!r}"
    assert got is not None and want is not None
    if not has_f32(fn):
        return irgen.close_results(got, want)
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        if g.dtype != w.dtype or g.shape != w.shape:
            return f"output {i}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}"
        if g.dtype.kind != "f":
            if not np.array_equal(g, w):
                return f"output {i} differs\n{g}\n{w}"
            continue
        scale = max(1.0, float(np.max(np.abs(w[np.isfinite(w)]), initial=0)))
        if not np.allclose(g, w, rtol=1e-4, atol=1e-4 * scale, equal_nan=True):
            return f"output {i} not close\n{g}\n{w}"
    return None
