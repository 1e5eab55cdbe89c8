"""``callback``: a Python function called on NumPy arrays at run time (JAX's
``pure_callback``): the body of an opaque primitive (``yota.primitive(opaque=True)``).

``%y = callback %a, %b {fn = "mod.solve#1f2e...", static = "...", results = [["f64",
[3]]]} : f64[3]`` calls the function registered as ``fn`` (``CALLBACKS``: the front end
registers each opaque primitive under its qualified name and a digest of its code, so a
changed function is another op, another program, another cache entry) on the operands as
arrays. ``static`` holds the call's constant arguments (a Python literal: ``spec``), and
``results`` the result types the function gave while tracing: a result of another shape
or kind at run time is an error (``CallbackError``), a float of another width is
converted. The op has no derivative rule: its primitive's ``diffrule`` gives one.

Every backend runs it by calling ``invoke``: the interpreter directly, compiled code
through an entry point the loader binds (``backends/callback.py``).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import IRTypeError, YotaError
from ..types import TensorType
from .table import OpDef, a_str, anything, register

# fn key -> the function: f(static, arrays) -> a sequence of results (arrays or numbers)
CALLBACKS: dict[str, Callable[[Any, list[np.ndarray]], Sequence[Any]]] = {}


class CallbackError(YotaError):
    """An opaque primitive failed at run time: it raised, it is not defined in this
    process, or it returned results of another shape than when it was traced."""


def result_types(results: Any) -> tuple[TensorType, ...]:
    """The ``results`` attribute as types: ``[["f64", [3, 2]], ...]``."""
    try:
        return tuple(TensorType(np.dtype(str(dt)), tuple(int(n) for n in shape))
                     for dt, shape in results)
    except (TypeError, ValueError) as e:
        raise IRTypeError(f"'callback' results must be [dtype, shape] pairs; got "
                          f"{results!r}") from e


def results_attr(types: Sequence[TensorType]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple((t.dtype.name, tuple(t.shape)) for t in types)


def _infer(types: list[TensorType], attrs: dict[str, Any]) -> tuple[TensorType, ...]:
    out = result_types(attrs["results"])
    if not out:
        raise IRTypeError("'callback' needs at least one result")
    return out


@lru_cache(maxsize=256)
def spec(static: str) -> Any:
    """The ``static`` attribute's value (a Python literal), parsed once."""
    return ast.literal_eval(static) if static else None


def name_of(fn: str) -> str:
    return fn.split("#", 1)[0]


def invoke(fn: str, static: str, arrays: Sequence[np.ndarray],
           results: Sequence[TensorType]) -> list[np.ndarray]:
    """Call the function registered as ``fn`` on ``arrays``; its results checked against
    ``results`` and converted to their dtypes (C-contiguous arrays)."""
    f = CALLBACKS.get(fn)
    if f is None:
        raise CallbackError(
            f"the opaque primitive {name_of(fn)} (code digest {fn.partition('#')[2]}) is "
            "not defined in this process: import the module that defines it (with the same "
            "code) before calling the compiled program")
    try:
        got = f(spec(static), list(arrays))
    except Exception as e:  # the user's function: any exception, reported with its name
        raise CallbackError(f"the opaque primitive {name_of(fn)} raised "
                            f"{type(e).__name__}: {e}") from e
    if len(got) != len(results):
        raise CallbackError(f"the opaque primitive {name_of(fn)} returned {len(got)} "
                            f"results at run time, {len(results)} when traced")
    return [_checked(fn, i, r, t) for i, (r, t) in enumerate(zip(got, results, strict=True))]


def _checked(fn: str, i: int, r: Any, t: TensorType) -> np.ndarray:
    a = np.asarray(r)
    if a.shape != t.shape or a.dtype.kind not in ("fiub" if t.dtype.kind != "f" else "fiu"):
        raise CallbackError(f"the opaque primitive {name_of(fn)} returned {a.dtype}"
                            f"{list(a.shape)} as result {i} at run time, {t} when traced")
    return np.asarray(a, dtype=t.dtype, order="C")


def callback(*arrays: np.ndarray, fn: str, static: str, results: Any) -> Any:
    """The interpreter's implementation: ``invoke``."""
    out = invoke(fn, static, arrays, result_types(results))
    return out[0] if len(out) == 1 else tuple(out)


register(OpDef("callback", None, _infer, callback,
               attrs={"fn": a_str, "static": a_str, "results": anything}, min_in=0))
