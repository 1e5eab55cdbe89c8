"""SciPy's distributions on traced arrays: their classes' methods, wrapped while a trace
runs.

A distribution's method (``norm.logpdf``, ``norm(mu, s).logpdf``, ``multivariate_normal
.logpdf``) is Python code that converts a traced value to a plain array. While a trace
runs in any thread (``active``, entered with the tracer's hooks at every trace), the
public methods of ``rv_generic``, ``rv_continuous``, ``rv_discrete``,
``multivariate_normal_gen`` and ``dirichlet_gen`` are wrapped on their classes (so every
distribution object and its frozen form reaches them); a call holding a traced value in
the tracing thread runs the NumPy composition of ``scipy_stats`` on the tracers, any
other call SciPy's own method. (SciPy's module-level functions, ``logsumexp`` & co., are
answered by ``yota.foreign``'s hooks; methods are reached through their class, so
wrapping the class attribute reaches every call.)

Nothing here imports SciPy: only ``scipy.stats`` once the user's code imported it.
SciPy's own files count as library code for the user's line in errors (``userloc``).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from ..userloc import skip_files


class _Hook:
    """The tracer's test of traced values, for this thread's innermost trace."""

    def __init__(self, is_traced: Callable[[Any], bool]) -> None:
        self.is_traced = is_traced

    def holds(self, obj: Any) -> bool:
        if self.is_traced(obj):
            return True
        if isinstance(obj, (list, tuple)):
            return any(self.holds(v) for v in obj)
        return isinstance(obj, dict) and any(self.holds(v) for v in obj.values())


_local = threading.local()
_lock = threading.Lock()
_installed = 0
_swaps: list[AttrSwap] = []


def top() -> _Hook | None:
    stack = getattr(_local, "hooks", None)
    return stack[-1] if stack else None


def tracing() -> bool:
    """Whether this thread runs a trace."""
    return top() is not None


def traced_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Hook | None:
    """This thread's hook when ``args``/``kwargs`` hold a traced value, else None."""
    hook = top()
    if hook is not None and (hook.holds(args) or hook.holds(kwargs)):
        return hook
    return None


@contextlib.contextmanager
def active(is_traced: Callable[[Any], bool]) -> Iterator[None]:
    """While the block runs (a trace), SciPy's distributions answer traced values (when
    ``scipy.stats`` is imported at all; otherwise this costs one dictionary lookup)."""
    if "scipy.stats" not in sys.modules:
        yield
        return
    stack = getattr(_local, "hooks", None)
    if stack is None:
        stack = _local.hooks = []
    stack.append(_Hook(is_traced))
    _install(+1)
    try:
        yield
    finally:
        stack.pop()
        _install(-1)


def _install(step: int) -> None:
    global _installed
    with _lock:
        _installed += step
        if step > 0 and _installed == 1:
            _swaps[:] = _collect()
            for s in _swaps:
                s.apply()
        elif step < 0 and _installed == 0:
            for s in reversed(_swaps):
                s.undo()
            _swaps.clear()


# -- what is swapped ------------------------------------------------------------------------------
class AttrSwap:
    """An attribute of a class (a method) replaced by a wrapper."""

    def __init__(self, owner: type, name: str, make: Callable[[Any], Any]) -> None:
        self.owner, self.name = owner, name
        self.had = name in owner.__dict__
        self.original = owner.__dict__.get(name)
        self.wrapper = make(getattr(owner, name))

    def apply(self) -> None:
        setattr(self.owner, self.name, self.wrapper)

    def undo(self) -> None:
        if self.had:
            setattr(self.owner, self.name, self.original)
        else:
            delattr(self.owner, self.name)


def _collect() -> list[AttrSwap]:
    """The wrapped methods of ``scipy.stats`` (imported by the user's code)."""
    import os

    from . import scipy_stats

    scipy_file = getattr(sys.modules["scipy"], "__file__", None)
    if scipy_file:
        skip_files(os.path.dirname(os.path.abspath(scipy_file)))
    swaps: list[AttrSwap] = scipy_stats.swaps(AttrSwap, traced_call, tracing)
    return swaps
