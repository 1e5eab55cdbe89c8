"""Functions of the ``numpy`` module replaced by wrappers while a trace runs.

A ``NumpyPatch`` owns a set of names: their original functions, the wrappers that stand in
for them, and one stack of hooks per thread (innermost trace last). The wrappers stay in
``numpy``'s namespace while any trace runs in any thread; a wrapper called from a thread
that is not tracing (``top()`` is None) calls the original at once.

>>> p = NumpyPatch(("zeros",))
>>> def zeros(*args):
...     return ("hooked", p.top()) if p.top() else p.original["zeros"](*args)
>>> p.wrap({"zeros": zeros})
>>> with p.active("h"):
...     np.zeros(2)
('hooked', 'h')
>>> np.zeros(2).tolist()
[0.0, 0.0]
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np


class NumpyPatch:
    _all: list[NumpyPatch] = []  # every patch, for ``suspended``

    def __init__(self, names: Iterable[str]) -> None:
        NumpyPatch._all.append(self)
        self.original: dict[str, Any] = {name: getattr(np, name) for name in names}
        self.wrappers: dict[str, Any] = {}
        self._local = threading.local()  # .hooks: this thread's stack
        self._lock = threading.Lock()
        self._installed = 0  # traces running in any thread

    def wrap(self, wrappers: dict[str, Any]) -> None:
        """The wrappers, one per name (given once, after they are built from ``original``)."""
        assert set(wrappers) == set(self.original), "a wrapper for each patched name"
        self.wrappers = wrappers

    def top(self) -> Any:
        """This thread's innermost hook while it traces, else None."""
        stack = getattr(self._local, "hooks", None)
        return stack[-1] if stack else None

    @contextlib.contextmanager
    def active(self, hook: Any) -> Iterator[None]:
        """While the block runs, the wrappers are in place and ``hook`` is this thread's
        innermost hook."""
        stack = getattr(self._local, "hooks", None)
        if stack is None:
            stack = self._local.hooks = []
        stack.append(hook)
        self._install(+1, self.wrappers)
        try:
            yield
        finally:
            stack.pop()
            self._install(-1, self.original)

    @classmethod
    @contextlib.contextmanager
    def suspended(cls) -> Iterator[None]:
        """While the block runs, no patch has a hook in this thread: every wrapper calls its
        original (plain NumPy for code run inside a trace, such as a nested compile)."""
        saved = [getattr(p._local, "hooks", None) for p in cls._all]
        for p in cls._all:
            p._local.hooks = []
        try:
            yield
        finally:
            for p, hooks in zip(cls._all, saved, strict=True):
                p._local.hooks = hooks

    def _install(self, step: int, funcs: dict[str, Callable[..., Any]]) -> None:
        with self._lock:
            self._installed += step
            if self._installed == (1 if step > 0 else 0):
                for name, f in funcs.items():
                    setattr(np, name, f)
