"""The per-call check of what a program read from outside its arguments (``Read``s of
``yota.captured``), as one generated Python function per program.

``Checker(reads, captured)(f)`` reads every path from ``f`` (or its read's own root) once,
sharing common prefixes, and returns the index of the first read that no longer holds,
or, when all hold, the program's captured inputs in order: the current values of the
reads it takes as inputs, and the arrays it holds for the others.

>>> import numpy as np
>>> from yota.captured import Read, seen_value
>>> g = {"scale": 2.0}
>>> f = eval("lambda: scale", g)
>>> r = Read((("global", "scale"),), "scale", None, "eq", 2.0)
>>> check = Checker([r], [])
>>> check(f)
[]
>>> g["scale"] = 3.0
>>> check(f)
0
"""

from __future__ import annotations

import dataclasses
import keyword
import math
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .captured import Path, Read, Step


class Checker:
    """The check of ``reads`` and the captured inputs (``captured``: for each captured
    entry of the tape, its ``Read`` when the value is read at call time, else the array
    the program holds)."""

    def __init__(self, reads: Sequence[Read], captured: Sequence[Any]) -> None:
        self.reads = list(reads)
        self.captured = list(captured)
        self._fn: Callable[[Any], Any] | None = None

    def __call__(self, f: Any) -> int | list[Any]:
        fn = self._fn
        if fn is None:
            fn = self._fn = self._generate()
        return fn(f)

    def _generate(self) -> Callable[[Any], Any]:
        ns: dict[str, Any] = {"ndarray": np.ndarray}
        lines = ["def check(f):", "    k = 0", "    try:"]
        names: dict[tuple[int, Path], str] = {}
        order = {id(r): i for i, r in enumerate(self.reads)}
        for i, r in enumerate(self.reads):
            lines.append(f"        k = {i}")
            v = _node(r, names, ns, lines)
            lines += [f"        {c}" for c in _test(r, v, i, ns)]
        outs = []
        for j, c in enumerate(self.captured):
            if isinstance(c, Read) and id(c) in order:
                outs.append(names[(id(c.root), c.path)] if c.path else "f")
            else:
                ns[f"h{j}"] = c
                outs.append(f"h{j}")
        lines += [f"        return [{', '.join(outs)}]",
                  "    except Exception:", "        return k"]
        exec("\n".join(lines), ns)  # noqa: S102 - code generated from the reads
        check: Callable[[Any], Any] = ns["check"]
        return check


def _node(r: Read, names: dict[tuple[int, Path], str], ns: dict[str, Any],
          lines: list[str]) -> str:
    """The variable holding the value at ``r``'s path (its prefixes computed once)."""
    if r.root is not None:
        base = f"r{len(ns)}"
        ns[base] = r.root
    else:
        base = "f"
    cur = base
    for n in range(1, len(r.path) + 1):
        key = (id(r.root), r.path[:n])
        name = names.get(key)
        if name is None:
            name = names[key] = f"v{len(names)}"
            lines.append(f"        {name} = {_step(cur, r.path[n - 1], ns)}")
        cur = name
    return cur


def _step(x: str, step: Step, ns: dict[str, Any]) -> str:
    kind = step[0]
    if kind == "attr":
        a = step[1]
        ok = a.isidentifier() and not keyword.iskeyword(a) and not a.startswith("__")
        return f"{x}.{a}" if ok else f"getattr({x}, {a!r})"
    if kind == "item":
        return f"{x}[{_const(step[1], ns)}]"
    if kind == "global":
        return f"{x}.__globals__[{step[1]!r}]"
    if kind == "cell":
        return f"{x}.__closure__[{step[1]}].cell_contents"
    if kind == "contents":
        return f"{x}.cell_contents"
    if kind == "self":
        return f"{x}.__self__"
    if kind == "default":
        return f"{x}.__defaults__[{step[1]}]"
    if kind == "kwdefault":
        return f"{x}.__kwdefaults__[{step[1]!r}]"
    if kind == "call":
        return f"type({x}).__call__"
    raise ValueError(f"unknown path step {step!r}")


def _const(v: Any, ns: dict[str, Any]) -> str:
    if type(v) in (int, str, bool, bytes):
        return repr(v)
    name = f"c{len(ns)}"
    ns[name] = v
    return name


def _test(r: Read, v: str, i: int, ns: dict[str, Any]) -> list[str]:
    """Lines that return ``i`` unless the value in ``v`` passes ``r``'s check."""
    c = _const(r.value, ns) if r.mode in ("is", "eq") else None
    if r.mode == "is":
        return [f"if {v} is not {c}: return {i}"]
    if r.mode == "eq":
        t = _const(type(r.value), ns)
        if isinstance(r.value, (float, np.floating)) and math.isnan(float(r.value)):
            return [f"if type({v}) is not {t} or {v} == {v}: return {i}"]
        return [f"if type({v}) is not {t} or {v} != {c}: return {i}"]
    if r.mode == "array":
        a = r.value
        ns[f"s{i}"], ns[f"d{i}"], ns[f"b{i}"] = a.shape, a.dtype, a.tobytes()
        return [f"if not isinstance({v}, ndarray) or {v}.shape != s{i} or {v}.dtype != d{i}"
                f" or {v}.tobytes() != b{i}: return {i}"]
    if r.mode == "shape":
        typ, n, keys = r.value
        t = _const(typ, ns)
        test = f"type({v}) is not {t} or len({v}) != {n}"
        if keys is not None:
            test += f" or list({v}) != {_const(list(keys), ns)}"
        return [f"if {test}: return {i}"]
    if r.mode == "type":
        return [f"if type({v}) is not {_const(r.value, ns)}: return {i}"]
    if r.mode == "code":
        ns["FunctionType"] = types.FunctionType
        return [f"if type({v}) is not FunctionType or {v}.__code__ is not "
                f"{_const(r.value, ns)}: return {i}"]
    if r.mode == "input":
        typ, dtype, shape = r.value
        t = _const(typ, ns)
        if dtype is None:
            return [f"if type({v}) is not {t}: return {i}"]
        ns[f"s{i}"], ns[f"d{i}"] = shape, dtype
        return [f"if type({v}) is not {t} or {v}.shape != s{i} or {v}.dtype != d{i}: "
                f"return {i}"]
    raise ValueError(f"unknown read mode {r.mode!r}")


def anchored(reads: Sequence[Read]) -> list[Read]:
    """The reads as checked without the function (from their anchors), same order."""
    return [dataclasses.replace(r, root=r.anchor[0], path=r.anchor[1])
            if r.anchor is not None else r for r in reads]


def changed(r: Read, f: Any) -> str:
    """What changed about read ``r`` (for a message): ``2.0 -> 3.0``, ``changed in
    place``, ``rebound``, ``no longer there``."""
    try:
        from .captured import value_at

        now = value_at(r.root if r.root is not None else f, r.path)
    except Exception:  # noqa: BLE001
        return "is no longer there"
    if r.mode == "eq":
        return f"changed ({_short(r.value)} -> {_short(now)})"
    if r.mode == "array":
        if isinstance(now, np.ndarray) and now.shape == r.value.shape:
            return "changed (its contents)"
        return f"changed (now {_short(now)})"
    if r.mode == "input":
        return f"changed type or shape (now {_short(now)})"
    if r.mode in ("is", "code"):
        return f"was rebound (now {_short(now)})"
    return f"changed structure (now {_short(now)})"


def _short(v: Any) -> str:
    if isinstance(v, np.ndarray):
        return f"array {v.dtype}{list(v.shape)}"
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "..."


# -- the same checks in a native plan (backends/llvm/runtime/pyentry.py) -------------------
def native_reads(plan: Any, reads: Sequence[Read], captured: Sequence[Any], f: Any,
                 ins: Sequence[tuple[tuple[int, ...], Any]], first: int) -> bool:
    """Add to ``plan`` (a ``pyentry.Plan`` whose register 0 holds function ``f``, checked
    first) the checks of ``reads`` and the captured inputs (``captured``, as ``Checker``
    takes them) into slots ``first``, ``first + 1``...; False where one cannot be
    expressed there (then the Python fast path runs)."""
    regs: dict[tuple[int, Path], int] = {}
    for r in reads:
        reg = _native_path(plan, r, f, regs)
        if reg is None or not _native_test(plan, r, reg):
            return False
    for j, c in enumerate(captured):
        if not isinstance(c, Read) or c.mode != "input":
            return False  # an array held by the program, not re-read: the general path
        reg = regs[(id(c.root), c.path)]
        typ, dtype, shape = c.value
        slot = first + j
        if typ is np.ndarray and ins[slot] == (shape, dtype):
            plan.array(reg, ins[slot][1], shape, slot)
        elif typ is float and ins[slot][0] == () and ins[slot][1] in (np.float32, np.float64):
            plan.float_input(reg, slot, ins[slot][1])
        else:
            return False
    return True


def _native_path(plan: Any, r: Read, f: Any, regs: dict[tuple[int, Path], int]
                 ) -> int | None:
    """The register holding the value at ``r``'s path (prefixes loaded once)."""
    root = r.root if r.root is not None else f
    reg = 0 if r.root is None else plan.const(r.root)
    obj: Any = root  # the value, while it is a constant of the plan (f's own parts)
    for n in range(1, len(r.path) + 1):
        step = r.path[n - 1]
        key = (id(r.root), r.path[:n])
        known = regs.get(key)
        if known is not None:
            reg, obj = known, None
            continue
        reg, obj = _native_step(plan, reg, obj, step)
        if reg < 0:
            return None
        regs[key] = reg
    return reg


def _native_step(plan: Any, reg: int, obj: Any, step: Step) -> tuple[int, Any]:
    """One path step in the plan: (register, its constant value or None); -1 where the
    step cannot be expressed."""
    kind = step[0]
    if kind == "global":
        d = plan.const(obj.__globals__) if obj is not None else \
            plan.get(reg, "__globals__", "attr")
        return plan.get(d, step[1], "item"), None
    if kind == "cell":
        if obj is not None:
            return plan.get(plan.const(obj.__closure__[step[1]]), None, "cell"), None
        cells = plan.get(plan.get(reg, "__closure__", "attr"), step[1], "item")
        return plan.get(cells, None, "cell"), None
    if kind in ("attr", "item"):
        return plan.get(reg, step[1], kind), None
    if kind == "contents":
        return plan.get(reg, None, "cell"), None
    if kind == "self":
        return plan.get(reg, "__self__", "attr"), None
    if kind in ("default", "kwdefault"):
        holder = plan.get(reg, "__defaults__" if kind == "default" else "__kwdefaults__",
                          "attr")
        return plan.get(holder, step[1], "item"), None
    return -1, None


def _native_test(plan: Any, r: Read, reg: int) -> bool:
    if r.mode == "input":
        return True  # (its type, dtype and shape: checked where it is passed)
    if r.mode == "is":
        plan.is_(reg, r.value)
        return True
    if r.mode == "code":
        plan.is_(plan.get(reg, "__code__", "attr"), r.value)
        return True
    if r.mode == "eq":
        v = r.value
        if isinstance(v, (float, np.floating)) and math.isnan(float(v)):
            return False
        plan.equal(reg, v)
        return True
    if r.mode == "shape":
        typ, n, keys = r.value
        if keys is not None:
            plan.dict_items(reg, list(keys))
        elif typ in (list, tuple):
            plan.seq(reg, typ, n)
        else:
            return False
        return True
    return False
