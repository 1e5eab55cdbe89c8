"""SciPy's Python-level functions and distributions, intercepted while a trace runs.

SciPy's special functions that are ufuncs reach the tracer by themselves
(``__array_ufunc__``). The others are Python code that would convert a traced value to a
plain array (``np.asarray``) or call NumPy functions the tracer refuses: while a trace
runs in any thread (``active``, entered with the tracer's hooks at every trace), they
are replaced, and a call holding a traced value in the tracing thread is recorded
instead (any other call goes to SciPy unchanged):

- ``scipy.special.logsumexp``, ``softmax``, ``log_softmax``, ``polygamma``,
  ``multigammaln``: their code object is swapped for a two-line trampoline, so every
  reference reaches it, ``from scipy.special import logsumexp`` bound before the trace
  included; the trampoline records the entry ``scipy.special.<name>``
  (``special_funcs``).
- ``scipy.stats``: the public methods of ``rv_continuous``, ``rv_discrete`` (so of every
  distribution object and its frozen form, ``norm(loc, scale).logpdf(x)``),
  ``multivariate_normal`` and ``dirichlet`` are wrapped on their classes; a traced call
  runs the NumPy composition of ``scipy_stats`` on the tracers.

Nothing here imports SciPy: only modules the user's code imported are patched. SciPy's
own files count as library code for the user's line in errors (``userloc``).
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

from ..userloc import skip_files

SPECIAL_FUNCTIONS = ("logsumexp", "softmax", "log_softmax", "polygamma", "multigammaln")


class _Hook:
    """The tracer's hooks for this thread's innermost trace."""

    def __init__(self, is_traced: Callable[[Any], bool], call: Callable[..., Any]) -> None:
        self.is_traced, self.call = is_traced, call

    def holds(self, obj: Any) -> bool:
        if self.is_traced(obj):
            return True
        if isinstance(obj, (list, tuple)):
            return any(self.holds(v) for v in obj)
        return isinstance(obj, dict) and any(self.holds(v) for v in obj.values())


_local = threading.local()
_lock = threading.Lock()
_installed = 0
_swaps: list[_Swap] = []


def top() -> _Hook | None:
    stack = getattr(_local, "hooks", None)
    return stack[-1] if stack else None


def traced_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> _Hook | None:
    """This thread's hook when ``args``/``kwargs`` hold a traced value, else None."""
    hook = top()
    if hook is not None and (hook.holds(args) or hook.holds(kwargs)):
        return hook
    return None


@contextlib.contextmanager
def active(is_traced: Callable[[Any], bool], call: Callable[..., Any]) -> Iterator[None]:
    """While the block runs (a trace), SciPy's functions are intercepted (when SciPy is
    imported at all; otherwise this costs one dictionary lookup)."""
    if "scipy" not in sys.modules:
        yield
        return
    stack = getattr(_local, "hooks", None)
    if stack is None:
        stack = _local.hooks = []
    stack.append(_Hook(is_traced, call))
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
class _Swap:
    def apply(self) -> None:
        raise NotImplementedError

    def undo(self) -> None:
        raise NotImplementedError


class CodeSwap(_Swap):
    """A function whose code is replaced by a trampoline to ``handler(original, args,
    kwargs)`` (the function object stays the same, so early-bound names see it)."""

    _KEY = "__yota_scipy_dispatch__"

    def __init__(self, fn: types.FunctionType, handler: Callable[..., Any]) -> None:
        self.fn, self.code = fn, fn.__code__
        self.original = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__,
                                           fn.__defaults__, fn.__closure__)
        self.original.__kwdefaults__ = fn.__kwdefaults__
        self.handler = handler
        self.trampoline = _trampoline(fn.__name__, f"{fn.__module__}.{fn.__qualname__}")

    def apply(self) -> None:
        table = self.fn.__globals__.setdefault(self._KEY, {})
        table[f"{self.fn.__module__}.{self.fn.__qualname__}"] = self
        self.fn.__code__ = self.trampoline

    def undo(self) -> None:
        self.fn.__code__ = self.code
        self.fn.__globals__.pop(self._KEY, None)

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return self.handler(self.original, args, kwargs)


@functools.cache
def _trampoline(name: str, key: str) -> types.CodeType:
    src = (f"def {name}(*args, **kwargs):\n"
           f"    return {CodeSwap._KEY}[{key!r}](args, kwargs)\n")
    ns: dict[str, Any] = {}
    exec(compile(src, __file__, "exec"), ns)  # this file: not the user's line
    code: types.CodeType = ns[name].__code__
    return code


class AttrSwap(_Swap):
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


def _collect() -> list[_Swap]:
    """The swaps for the SciPy modules imported now."""
    import os

    scipy_file = getattr(sys.modules["scipy"], "__file__", None)
    if scipy_file:
        skip_files(os.path.dirname(os.path.abspath(scipy_file)))
    out: list[_Swap] = []
    special = sys.modules.get("scipy.special")
    if special is not None:
        for name in SPECIAL_FUNCTIONS:
            fn = getattr(special, name, None)
            if isinstance(fn, types.FunctionType) and not fn.__code__.co_freevars:
                out.append(CodeSwap(fn, _special_handler(name)))
    if "scipy.stats" in sys.modules:
        from . import scipy_stats

        out += scipy_stats.swaps(AttrSwap, traced_call)
    return out


def _special_handler(name: str) -> Callable[..., Any]:
    entry = f"scipy.special.{name}"

    def handler(original: Callable[..., Any], args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
        hook = traced_call(args, kwargs)
        if hook is None:
            return original(*args, **kwargs)
        return hook.call(entry, *args, **kwargs)

    return handler
