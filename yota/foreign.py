"""Functions of other libraries (SciPy) that answer traced arguments while a trace runs.

SciPy's functions are not NumPy's: a traced array reaches them through no protocol
(``__array_function__`` is NumPy's only), and inside they convert it to a plain array
and call compiled code. Yota has its own version of some of them (``yota.numpy``'s
SciPy families: ``scipy_linalg``, ``convolve``...), registered with
``yota.numpy.hooks.hook``:

    @hook("scipy.linalg", "cho_solve")
    def cho_solve(api, c_and_lower, b, overwrite_b=False, check_finite=True):
        ...  # runs on tracers: NumPy calls, or entries of the table (api.call)

While any trace runs (``answering()``, entered by every trace), each hooked function of a
library module that is loaded answers a call that has a traced value among its arguments
with Yota's version; any other call (plain arrays, another thread) runs SciPy's own code.
Nothing is imported: a library the user did not import is not looked at, and Yota's
family module for it is imported only once the library is.

How a call is answered: the function's code object is swapped for a small trampoline
while traces run (and swapped back after the last one ends). The function object stays
the one the user holds, so every way of reaching it is answered: ``scipy.linalg.solve``,
``from scipy.linalg import cho_solve`` in any module, an alias made before the trace.
(Replacing the module's attribute would miss names imported by ``from ... import``.)
The trampoline reaches ``dispatch`` through one name, ``__yota_foreign__``, set in the
function's module globals while it is installed.

NumPy's own functions are hooked the same way (``yota.numpy.sequences``): the Python
implementation behind a NumPy function, which its dispatcher calls when no argument is
traced, answers lists holding traced values. A version may decline (``NotImplemented``):
the function's own code then runs (NumPy's as it always does; a library's on plain
arrays).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

from .numpy.hooks import FAMILIES, HOOKS
from .patching import NumpyPatch
from .recording import find_context
from .tracer import Tracer, call

Replacement = Callable[..., Any]
_GLOBAL = "__yota_foreign__"


class _API:
    """The tracer's side, as the versions see it (``yota.numpy.hooks.TraceAPI``)."""

    call = staticmethod(call)

    @staticmethod
    def value(x: Any) -> Any:
        return x.value if isinstance(x, Tracer) else x

    @staticmethod
    def is_traced(x: Any) -> bool:
        return isinstance(x, Tracer)


API = _API()


class _Swap:
    """One installed hook: the function, its own code, and a function running that code."""

    __slots__ = ("fn", "code", "defaults", "kwdefaults", "original", "replacement", "numpy")

    def __init__(self, fn: types.FunctionType, replacement: Replacement, numpy: bool) -> None:
        self.fn, self.code, self.replacement = fn, fn.__code__, replacement
        self.numpy = numpy  # NumPy's own implementation: its code runs as it always did
        self.defaults, self.kwdefaults = fn.__defaults__, fn.__kwdefaults__
        self.original = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__,
                                           fn.__defaults__, fn.__closure__)
        self.original.__kwdefaults__ = fn.__kwdefaults__


_lock = threading.Lock()
_depth = [0, 0]  # traces running in any thread: all of them, those answering lists
_installed: dict[str, _Swap] = {}  # key -> swap


def dispatch(key: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What a trampoline calls: Yota's version when a traced value is among the
    arguments, the library's own code otherwise."""
    swap = _installed[key]
    if find_context(args, kwargs) is not None:
        out = swap.replacement(API, *args, **kwargs)
        if out is not NotImplemented:
            return out
    if swap.numpy:
        return swap.original(*args, **kwargs)
    with NumpyPatch.suspended():  # the library's own NumPy calls make plain arrays
        return swap.original(*args, **kwargs)


@contextlib.contextmanager
def answering(lists: bool = False) -> Iterator[None]:
    """While the block runs (and any other trace's), hooked functions answer tracers;
    with ``lists``, NumPy's own functions and ufuncs answer lists holding traced values
    too (``yota.numpy.sequences``: a trace that met one is traced again so; the hooks cost
    every trace's start ~0.2 ms, so only those traces install them)."""
    modes = (False, True) if lists else (False,)
    with _lock:
        for numpy in modes:
            _depth[numpy] += 1
            if _depth[numpy] == 1:
                _install(numpy)
    try:
        if lists:
            from .numpy.sequences import ufuncs

            with ufuncs(_Holds()):
                yield
        else:
            yield
    finally:
        with _lock:
            for numpy in modes:
                _depth[numpy] -= 1
                if _depth[numpy] == 0:
                    _uninstall(numpy)


class _Holds:
    """What the ufunc stand-ins ask: does an argument hold a traced value?"""

    @staticmethod
    def holds(x: Any) -> bool:
        return find_context(x) is not None


def _numpy(lib: str) -> bool:
    return lib == "numpy" or lib.startswith("numpy.")


_GROUPS: dict[bool, list[tuple[tuple[str, str], Replacement]]] = {}
_GROUPED = -1  # len(HOOKS) when _GROUPS was made


def _hooks(numpy: bool) -> list[tuple[tuple[str, str], Replacement]]:
    """The hooks of NumPy's functions, or of the other libraries' (grouped once)."""
    global _GROUPED
    if _GROUPED != len(HOOKS):
        _GROUPS.clear()
        for key, replacement in HOOKS.items():
            _GROUPS.setdefault(_numpy(key[0]), []).append((key, replacement))
        _GROUPED = len(HOOKS)
    return _GROUPS.get(numpy, [])


def _install(numpy: bool) -> None:
    for lib, family in FAMILIES.items():
        if _numpy(lib) == numpy and lib in sys.modules:
            importlib.import_module(family)
    swapped = {id(s.fn) for s in _installed.values()}
    for (lib, name), replacement in _hooks(numpy):
        fn = getattr(sys.modules.get(lib), name, None)
        fn = getattr(fn, "_implementation", fn)  # a NumPy function: its Python code
        if not isinstance(fn, types.FunctionType) or id(fn) in swapped:
            continue  # one swap per function object
        swapped.add(id(fn))
        key = f"{lib}.{name}"
        swap = _Swap(fn, replacement, numpy)
        fn.__globals__[_GLOBAL] = dispatch
        fn.__defaults__, fn.__kwdefaults__ = None, None
        fn.__code__ = _trampoline(key, len(fn.__code__.co_freevars), fn.__name__)
        _installed[key] = swap


def _uninstall(numpy: bool) -> None:
    for key, swap in list(_installed.items()):
        if swap.numpy == numpy:
            swap.fn.__code__ = swap.code
            swap.fn.__defaults__, swap.fn.__kwdefaults__ = swap.defaults, swap.kwdefaults
            swap.fn.__globals__.pop(_GLOBAL, None)
            del _installed[key]


_CODES: dict[tuple[str, int], types.CodeType] = {}


def _trampoline(key: str, nfree: int, name: str) -> types.CodeType:
    """The code of ``def name(*args, **kwargs): return __yota_foreign__(key, args,
    kwargs)`` with ``nfree`` free variables (never read: a function's code must have as
    many as its closure has cells)."""
    code = _CODES.get((key, nfree))
    if code is None:
        free = [f"_yota_cell{i}" for i in range(nfree)]
        lines = ["def _outer():", *[f"    {v} = None" for v in free],
                 f"    def {name}(*args, **kwargs):",
                 *([f"        nonlocal {', '.join(free)}"] if free else []),
                 f"        return {_GLOBAL}({key!r}, args, kwargs)",
                 f"    return {name}"]
        scope: dict[str, Any] = {}
        # named as this file: Yota's own frame, never taken for the user's line (userloc)
        exec(compile("\n".join(lines), __file__, "exec"), scope)  # noqa: S102
        code = _CODES[(key, nfree)] = scope["_outer"]().__code__
    return code
