"""Custom primitives: functions recorded as one tape entry (lowered by ``yota.lowering``
to an IR ``call`` of their traced body)."""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from yota.ir.errors import TraceError

from .tracer import Tracer, find_context, record


def primitive_key(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', repr(fn))}"


class Primitive:
    """A function traced as a unit: one tape entry, one IR ``call`` of its body.

    >>> import numpy as np, yota
    >>> @yota.primitive
    ... def logistic(x):
    ...     return 1 / (1 + np.exp(-x))
    >>> _, tape = yota.trace(lambda x: np.sum(logistic(x)), np.zeros(3))
    >>> "logistic(%1)" in str(tape)
    True
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.key = primitive_key(fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if find_context(args) is None:
            return self.fn(*args, **kwargs)
        if find_context(kwargs) is not None:
            raise TraceError(f"primitive {self.key}: keyword arguments must be static "
                             "(ints, floats, strings, tuples), not traced arrays")
        for a in args:
            if not isinstance(a, (Tracer, np.ndarray, np.generic, int, float, bool)):
                raise TraceError(f"primitive {self.key}: positional arguments must be arrays "
                                 f"or scalars, got {type(a).__name__}")
        examples = tuple(a.value if isinstance(a, Tracer) else a for a in args)
        return record(self.key, args, kwargs, self.fn, extra=(self, examples),
                      display=getattr(self.fn, "__name__", self.key))

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)

    def __repr__(self) -> str:
        return f"<yota.primitive {self.key}>"


def primitive(fn: Callable[..., Any]) -> Primitive:
    """Mark ``fn`` as a primitive: traced as one entry; its body still runs for the value.

    Give it a derivative with ``@yota.diffrule(fn, "x")``.
    """
    return fn if isinstance(fn, Primitive) else Primitive(fn)


@contextlib.contextmanager
def temporary_primitives(f: Callable[..., Any], fns: Any) -> Iterator[None]:
    """Treat ``fns`` as primitives for one trace, by rebinding the names that ``f``'s
    module and the functions' own modules use for them (restored afterwards)."""
    if not fns:
        yield
        return
    patches: list[tuple[dict[str, Any], str, Any]] = []
    scopes = [getattr(f, "__globals__", {})]
    for fn in fns:
        mod = sys.modules.get(getattr(fn, "__module__", ""), None)
        if mod is not None:
            scopes.append(vars(mod))
    for fn in fns:
        wrapped = primitive(fn)
        for scope in scopes:
            for name, v in list(scope.items()):
                if v is fn:
                    patches.append((scope, name, v))
                    scope[name] = wrapped
    try:
        yield
    finally:
        for scope, name, v in reversed(patches):
            scope[name] = v
