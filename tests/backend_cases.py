"""What the differential tests of the llvm and CUDA backends share: the op lists, shapes
and special values of the op-by-op tests, input sampling, and the comparison of a
backend's results with the reference interpreter's, op by op and on random programs.

How exactly results must agree is decided per op in ``precision.py`` (bit for bit for
IEEE arithmetic and data movement; ulps for transcendentals; a bound scaled by the
reduction length and dtype for sums and matrix products).
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
import precision  # noqa: E402

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


# -- comparison ----------------------------------------------------------------------------
def mismatch(fn: Function, args: list[np.ndarray], got: list[Any],
             want: list[Any]) -> str | None:
    """None if ``got`` (a backend's run of ``fn``) agrees with ``want`` (the
    interpreter's) as ``precision`` says it must for each op, else a description."""
    return precision.mismatch(fn, args, got, want)


def compare(fn: Function, args: list[np.ndarray], exe: Callable[..., list[Any]],
            to_host: Callable[[Any], np.ndarray] = np.asarray,
            backend: str = "backend") -> str | None:
    """None if ``exe`` (``fn`` compiled by ``backend``) agrees with the interpreter on
    ``args`` (``precision.mismatch``). Errors must be the same error with the same
    message."""
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
    return mismatch(fn, args, got, want)
