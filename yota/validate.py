"""Checks of what users pass to the public API, with messages that name the argument.

    >>> import numpy as np, yota
    >>> yota.grad(np.ones(3), np.ones(3))
    Traceback (most recent call last):
    ...
    yota.ir.errors.YotaError: yota.grad: the first argument must be the function to differentiate (a callable), got a ndarray; call yota.grad(f, *args)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from yota.ir.errors import TraceError, YotaError

from . import structs

_WHAT = {"grad": "the function to differentiate", "trace": "the function to trace",
         "compile": "the function to compile", "simplegrad": "the function to differentiate",
         "aot": "the function to compile ahead of time"}


def check_callable(f: Any, api: str) -> None:
    """Raise ``YotaError`` unless ``f`` can be called (the usual slip: arguments swapped)."""
    if callable(f):
        return
    raise YotaError(f"yota.{api}: the first argument must be {_WHAT.get(api, 'a function')} "
                    f"(a callable), got a {type(f).__name__}; call yota.{api}(f, *args)")


def check_arity(f: Callable[..., Any], args: Sequence[Any]) -> None:
    """Raise ``TraceError`` when ``f`` cannot be called with ``len(args)`` positional
    arguments (before tracing, so the message is not a TypeError from inside Yota)."""
    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):  # a builtin without a signature: let the call decide
        return
    try:
        sig.bind(*args)
    except TypeError as e:
        name = getattr(f, "__name__", type(f).__name__)
        raise TraceError(f"{name}{sig} cannot be called with {len(args)} argument"
                         f"{'s' if len(args) != 1 else ''}: {e}") from None


def argnames(f: Callable[..., Any], n: int) -> list[str]:
    """Names for ``f``'s first ``n`` positional parameters (``argI`` where unknown)."""
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in params) or len(names) < n:
        names += [f"arg{i}" for i in range(len(names), n)]
    return names[:n]


def argument_error(f: Callable[..., Any], args: Sequence[Any], e: TraceError) -> TraceError:
    """``e`` (raised while walking ``args``) with the argument that caused it named."""
    names = argnames(f, len(args))
    fname = getattr(f, "__name__", type(f).__name__)
    for i, a in enumerate(args):
        try:
            structs.flatten(a)
        except TraceError as inner:
            msg = str(inner)
            if msg.startswith("the argument "):  # the argument itself, not a field of it
                return TraceError(f"argument {names[i]!r} of {fname} "
                                  f"{msg[len('the argument '):]}")
            return TraceError(f"argument {names[i]!r} of {fname}: {msg}")
    return e


def argnums_tuple(argnums: Any, nargs: int, what: str) -> tuple[int, ...]:
    """JAX's ``argnums`` (an index or a sequence of indices, negative ones from the end)
    as a tuple of argument indices, checked (``yota.transforms`` reads it the same way).

    >>> argnums_tuple(-1, 3, "grad")
    (2,)
    """
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums) if isinstance(
        argnums, (tuple, list)) else None
    if nums is None or not nums or any(
            not isinstance(a, int) or isinstance(a, bool) or not -nargs <= a < nargs
            for a in nums):
        raise YotaError(f"yota.{what}: argnums {argnums!r} does not name arguments of the "
                        f"call ({nargs} given): pass an index or a tuple of indices, e.g. "
                        f"argnums=0 or argnums=(0, 1)")
    return tuple(a % nargs for a in nums)
