"""The reference interpreter: runs an ``ir.Function`` on NumPy arrays, op by op.

It is the oracle every backend is tested against, so it favours clarity over speed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .core import Function, Op, Value
from .errors import GuardFailed, IRTypeError, LinAlgError, SignatureError
from .ops import get_opdef
from .ops.callback import CallbackError
from .ops.lapack import FAILURES as LINALG_FAILURES
from .ops.lapack import linalg_error
from .ops.misc import guard_holds


def check_inputs(fn: Function, args: Sequence[Any]) -> list[np.ndarray]:
    """Convert ``args`` to arrays of ``fn``'s input types, with a clear error on mismatch."""
    if len(args) != len(fn.inputs):
        raise SignatureError(f"@{fn.name} takes {len(fn.inputs)} inputs, got {len(args)}")
    out = []
    for i, (a, v, lab) in enumerate(zip(args, fn.inputs, fn.input_labels, strict=True)):
        arr = a if type(a) is np.ndarray else np.asarray(a)
        if arr.shape != v.type.shape:
            name = lab or f"input {i}"
            raise SignatureError(f"@{fn.name}: {name} should have shape {list(v.type.shape)} "
                                 f"({v.type}), got {list(arr.shape)}")
        if arr.dtype != v.type.dtype:
            if not np.can_cast(arr.dtype, v.type.dtype, casting="same_kind"):
                name = lab or f"input {i}"
                raise SignatureError(f"@{fn.name}: {name} should be {v.type}, got {arr.dtype}")
            arr = arr.astype(v.type.dtype)
        out.append(arr)
    return out


def run(fn: Function, *args: Any) -> list[np.ndarray]:
    """Run ``fn`` on ``args``; returns its outputs as a list of arrays (NumPy's
    floating-point warnings off: a program computes what it computes, inf and nan too)."""
    env: dict[Value, np.ndarray] = dict(zip(fn.inputs, check_inputs(fn, args), strict=True))
    with np.errstate(all="ignore"):  # once per run, not per op: a loop's body runs often
        for i in range(len(fn.ops)):
            run_op(fn, i, env)
    return [env[v] for v in fn.outputs]


def run_op(fn: Function, i: int, env: dict[Value, np.ndarray]) -> None:
    """Run op ``i`` of ``fn`` on the values in ``env`` and add its results to ``env`` (a
    failing guard raises ``GuardFailed``); ``run`` turns NumPy's warnings off around it."""
    op = fn.ops[i]
    xs = [env[v] for v in op.operands]
    if op.name == "guard":
        if not guard_holds(xs[0], **op.attrs):
            raise GuardFailed(_guard_message(op.attrs, xs[0], op.loc), guard_index=i,
                              value=np.asarray(xs[0]).reshape(())[()])
        return
    opdef = get_opdef(op.name)
    if opdef.calls:
        body = fn.callees[op.attrs["callee"]]
        results: Any = (opdef.run_callee(op.attrs, body, xs, run) if opdef.run_callee
                        else run(body, *xs))
    else:
        results = _apply(opdef.impl, op, xs)
        if len(op.results) == 1:
            results = [results]
    for r, val in zip(op.results, results, strict=True):
        env[r] = _as_type(val, r, op.name)


def _apply(impl: Any, op: Op, xs: list[np.ndarray]) -> Any:
    """``op``'s NumPy reference on ``xs``; NumPy's ``LinAlgError`` (a singular matrix...)
    becomes Yota's, with the op and the user's line."""
    try:
        return impl(*xs, **op.attrs)
    except np.linalg.LinAlgError as e:
        if op.name not in LINALG_FAILURES or isinstance(e, LinAlgError):
            raise
        raise linalg_error(op.name, op.loc) from e
    except CallbackError as e:  # an opaque primitive failed: at the user's line
        if not op.loc:
            raise
        raise CallbackError(f"{e} (at {op.loc})") from (e.__cause__ or e)
    except IndexError as e:  # an index array out of range at run time: at the user's line
        if not op.loc or op.loc in str(e):
            raise
        raise IndexError(f"{e} (at {op.loc})") from e


def _as_type(val: Any, r: Value, opname: str) -> np.ndarray:
    arr = val if type(val) is np.ndarray else np.asarray(val)
    if arr.shape != r.type.shape:
        raise IRTypeError(f"interpreter: '{opname}' produced shape {arr.shape}, "
                          f"expected {r.type}")
    if arr.dtype != r.type.dtype:
        arr = arr.astype(r.type.dtype)
    return arr


def _guard_message(attrs: dict[str, Any], value: np.ndarray, loc: str | None) -> str:
    where = f" at {loc}" if loc else ""
    got = np.asarray(value).reshape(()).item()
    return (f"guard failed{where}: while tracing, {attrs['kind']}(...) of this value was "
            f"{attrs['expected']!r}, now the value is {got!r}; "
            "the program takes another branch and must be retraced")
