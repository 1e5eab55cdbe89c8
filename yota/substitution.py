"""Captured values as traced inputs, while a trace runs.

``yota.captured.discover`` finds what a function reads from outside its arguments; a read
it marks ``"input"`` (a large array, or a value that changed twice) is read by the compiled
program at every call, so the trace must see a traced value there. ``substituted`` puts
one in its place (a global, a closure cell, an attribute, an item of a list or dict, a
default of a parameter) for the duration of the trace, and puts the value back after; a
place that cannot be assigned makes the read a guarded constant instead.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .captured import Found, Read, Step, current_policy, step_value, value_at


@contextlib.contextmanager
def substituted(found: Found, f: Any, make: Callable[[Read, Any], Any]) -> Iterator[None]:
    """While the block runs, each ``"input"`` read holds ``make(read, value)`` (a traced
    value) in place of its value; put back after. A read whose place cannot be assigned
    (an item of a tuple, a property) is guarded instead (``"array"``/``"eq"``)."""
    undo: list[Callable[[], None]] = []
    try:
        for r in found.reads.values():
            if r.mode != "input":
                continue
            try:
                parent = value_at(f, r.path[:-1])
                value = step_value(parent, r.path[-1])
            except Exception:  # noqa: BLE001 - gone: nothing to substitute
                continue
            setter = _setter(parent, r.path[-1])
            if setter is None:
                r.mode = "array" if isinstance(value, np.ndarray) else "eq"
                if isinstance(value, np.ndarray):
                    found.arrays[id(value)] = r
                continue
            undo.append(setter(make(r, value)))
        current_policy().used += len(undo)
        yield
    finally:
        for u in reversed(undo):
            u()


def _setter(parent: Any, step: Step) -> Callable[[Any], Callable[[], None]] | None:
    """How to put a value at ``step`` of ``parent``: a function that puts it there and
    returns how to put the old one back; None where it cannot be done."""
    kind = step[0]
    if kind == "global":
        return _item_setter(parent.__globals__, step[1])
    if kind == "cell":
        cell = parent.__closure__[step[1]]
        return lambda v: _swap_cell(cell, v)
    if kind == "item" and isinstance(parent, (list, dict)):
        return _item_setter(parent, step[1])
    if kind == "attr":
        d = getattr(parent, "__dict__", None)
        if isinstance(d, dict) and step[1] in d:
            return _item_setter(d, step[1])
        if isinstance(parent, (type, types.ModuleType)) or hasattr(parent, "__slots__"):
            return lambda v: _swap_attr(parent, step[1], v)
        return None
    if kind in ("default", "kwdefault") and isinstance(parent, types.FunctionType):
        return lambda v: _swap_default(parent, step, v)
    return None


def _item_setter(d: Any, key: Any) -> Callable[[Any], Callable[[], None]]:
    def put(v: Any) -> Callable[[], None]:
        old = d[key]
        d[key] = v

        def back() -> None:
            d[key] = old
        return back
    return put


def _swap_cell(cell: Any, v: Any) -> Callable[[], None]:
    old = cell.cell_contents
    cell.cell_contents = v

    def back() -> None:
        cell.cell_contents = old
    return back


def _swap_attr(obj: Any, name: str, v: Any) -> Callable[[], None]:
    old = getattr(obj, name)
    setattr(obj, name, v)
    return lambda: setattr(obj, name, old)


def _swap_default(fn: types.FunctionType, step: Step, v: Any) -> Callable[[], None]:
    if step[0] == "default":
        old = fn.__defaults__ or ()
        fn.__defaults__ = old[:step[1]] + (v,) + old[step[1] + 1:]

        def back() -> None:
            fn.__defaults__ = old
        return back
    kw = fn.__kwdefaults__ or {}
    fn.__kwdefaults__ = {**kw, step[1]: v}

    def restore() -> None:
        fn.__kwdefaults__ = kw
    return restore
