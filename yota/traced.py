"""The traced value as the tape sees it, and the traces running in this thread.

``TracedValue`` is a traced value's state: its example value, its variable on the tape
(made when first needed, derived again after a write into its memory), the storage it
shares with its views, and whether it is a constant of the trace. ``yota.tracer.Tracer``
(the traced array user code sees) adds the ndarray surface; ``yota.recording`` and
``yota.writes`` work on this state alone. ``Trace`` is what a traced value asks of the trace
that made it (``yota.trace_context.TraceContext``).
"""

from __future__ import annotations

import threading
from typing import Any, Protocol, TypeVar

import numpy as np

from yota.ir.errors import UnsupportedError
from yota.ir.types import TensorType

from .aliasing import Storage
from .numpy.generated import Made
from .tape import Tape, Var

traces = threading.local()  # .stack: the traces running in this thread, innermost last
_T = TypeVar("_T", bound="TracedValue")


def innermost(ctx: Trace) -> Trace:
    """``ctx``, or the innermost active trace when ``ctx`` is an enclosing one."""
    stack = getattr(traces, "stack", None)
    if stack and stack[-1] is not ctx and ctx in stack:
        return stack[-1]
    return ctx


class Trace(Protocol):
    """What a traced value asks of its trace (``yota.trace_context.TraceContext``)."""

    tape: Tape

    def tracer(self, var: Var | None, value: Any, path: tuple[Any, ...] = (),
               store: Storage | None = None, const: bool = False) -> TracedValue:
        """A new traced value of this trace (a ``yota.tracer.Tracer``)."""

    def leaf_var(self, t: TracedValue) -> Var: ...

    def const_var(self, value: Any, weak: bool = False, made: Made | None = None) -> Var: ...

    def foreign_var(self, t: TracedValue) -> Var: ...

    def array_var(self, arr: np.ndarray | np.generic) -> Var: ...

    def guard(self, t: TracedValue, kind: str, expected: Any,
              error: UnsupportedError | None = None) -> Any: ...


class TracedValue:
    """A traced value's state: what the tape and the writes need of it (the surface user
    code sees is ``yota.tracer.Tracer``'s)."""

    __slots__ = ("_ctx", "_var", "value", "_path", "_store", "_link", "_ver", "_cst",
                 "_made", "__weakref__")

    def __init__(self, ctx: Trace, var: Var | None, value: Any,
                 path: tuple[Any, ...] = (), store: Storage | None = None,
                 const: bool = False) -> None:
        self._ctx = ctx
        self._var = var
        self.value = value
        self._path = path
        # the memory this array shares with its views (None: an immutable scalar); by
        # default a new array the function owns (a random draw, say)
        self._store = (store or Storage(const=False)) if isinstance(value, np.ndarray) \
            else None
        self._link: Any = None  # how this view is made from its parent (recording.ViewLink)
        self._ver = 0  # the storage version _var is of
        self._cst = const  # a scalar that is a constant of the trace
        self._made: tuple[Made, int] | None = None  # how a constant was made, at a version

    @property
    def tape_var(self) -> Var:
        s = self._store
        if s is not None and self._ver != s.version:  # written since: derive it again
            self._ver = s.version
            if s.const:
                self._var = None
            elif self._link is not None:
                self._var = self._link.redo()
        if self._var is None:
            if self.is_const:
                self._var = self._ctx.const_var(self.value, self.weak, self.made)
            else:
                self._var = self._ctx.leaf_var(self)
        return self._var

    def made_by(self: _T, made: Made | None) -> _T:
        """Remember that this constant of the trace is made from shapes alone by ``made``
        (``yota.numpy.generated``), as its storage is now."""
        if made is not None and self._store is not None:
            self._made = (made, self._store.version)
        return self

    @property
    def made(self) -> Made | None:
        """How this constant was made from shapes alone, while nothing wrote into it."""
        m, s = self._made, self._store
        return m[0] if m is not None and s is not None and s.version == m[1] else None

    @property
    def is_const(self) -> bool:
        """Whether the value is a constant of the trace (made from no traced input)."""
        s = self._store
        return s.const if s is not None else self._cst

    @property
    def weak(self) -> bool:
        return isinstance(self.value, (float, int, bool)) and not isinstance(self.value,
                                                                              np.generic)

    @property
    def type(self) -> TensorType:
        if self._var is not None and self._var.type is not None:
            return self._var.type
        a = np.asarray(self.value)
        return TensorType(a.dtype, a.shape)

    shape = property(lambda self: np.shape(self.value))
    ndim = property(lambda self: np.ndim(self.value))
    size = property(lambda self: int(np.size(self.value)))
    dtype = property(lambda self: np.asarray(self.value).dtype)

    def __repr__(self) -> str:
        return f"Tracer({self.tape_var!r}::{self.type}, value={self.value!r})"
