"""Custom primitives: functions recorded as one tape entry and lowered to an IR call."""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from yota.ir.core import Function, Value
from yota.ir.errors import TraceError

from .tape import Entry, Tape
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


def _is_static(a: Any) -> bool:
    return isinstance(a, (int, bool)) and not isinstance(a, np.generic)


def lower_primitive(L: Any, e: Entry, tape: Tape) -> tuple[Value, ...]:
    """Lower a primitive's entry: trace its body into a callee ``Function`` and call it.

    Array and float arguments become the callee's inputs; int/bool arguments and keyword
    arguments are constants of the body (and part of the callee's identity)."""
    prim, examples = e.extra
    dyn = [i for i, a in enumerate(e.args) if not _is_static(a)]
    operands = [L.operand(e.args[i], None, None) for i in dyn]
    callee = _body(prim, e, examples, dyn, [v.type for v in operands])
    existing = L.b.callees.get(callee.name)
    if existing is not None and str(existing) != str(callee):
        callee = callee.replace(name=f"{callee.name}_{len(L.b.callees)}")
    return L.b.call(callee, *operands)


def _body(prim: Primitive, e: Entry, examples: tuple[Any, ...] | None, dyn: list[int],
          operands_types: list[Any]) -> Function:
    from .tracer import trace

    def body(*dyn_args: Any) -> Any:
        full = list(e.args)
        for i, a in zip(dyn, dyn_args, strict=True):
            full[i] = a
        return prim.fn(*full, **e.kwargs)

    if examples is None:  # released after compilation: only the types matter now
        examples = tuple(a if _is_static(a) else None for a in e.args)
        for i, v in zip(dyn, operands_types, strict=True):
            examples = examples[:i] + (np.zeros(v.shape, v.dtype),) + examples[i + 1:]
    _, sub = trace(body, *[examples[i] for i in dyn])
    names = _param_names(prim.fn, len(e.args))
    sub.argnames = [names[i] for i in dyn]
    fn = sub.to_ir(getattr(prim.fn, "__name__", "primitive"))
    attrs: dict[str, Any] = {"primitive": prim.key, "argnames": tuple(sub.argnames)}
    static = {names[i]: e.args[i] for i in range(len(e.args)) if i not in dyn}
    if e.kwargs or static:
        attrs["kwargs"] = tuple((k, _static(v)) for k, v in {**static, **e.kwargs}.items())
    return fn.replace(attrs=attrs)


def _param_names(fn: Callable[..., Any], n: int) -> list[str]:
    import inspect

    try:
        names = [p.name for p in inspect.signature(fn).parameters.values()]
    except (TypeError, ValueError):
        names = []
    return (names + [f"arg{i}" for i in range(len(names), n)])[:n]


def _static(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(_static(x) for x in v)
    if isinstance(v, (int, float, bool, str)):
        return v
    return repr(v)
