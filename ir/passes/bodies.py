"""Passes inside loops: a pass applied to a function is applied to the bodies of its
``loop`` ops too (and to theirs), each body seen as a function of its own.

The functions a pass makes inside a body (fused kernels...) are named after the body
(``loop_0.fused_0``), so names stay unique across the whole program.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core import Function, Op

Transform = Callable[[Function], Function]


def apply_nested(f: Transform, fn: Function) -> Function:
    """``f(fn)``, with ``f`` applied to every loop body inside it first."""
    return f(in_bodies(f, fn))


def in_bodies(f: Transform, fn: Function) -> Function:
    """``fn`` with ``apply_nested(f, body)`` for each body of its loops."""
    names = list(dict.fromkeys(op.attrs["callee"] for op in fn.ops if op.name == "loop"))
    if not names:
        return fn
    callees = dict(fn.callees)
    changed = False
    for name in names:
        body = fn.callees[name]
        new = apply_nested(f, body)
        if new is not body:
            callees[name] = _prefixed(body, new)
            changed = True
    return fn.replace(callees=callees) if changed else fn


def _prefixed(old: Function, new: Function) -> Function:
    """``new`` (a transformed ``old``) with the callees that ``old`` did not have renamed
    ``<old's name>.<name>``."""
    have = set(old.callees)
    taken = set(new.all_callees()) | {new.name}
    mapping: dict[str, str] = {}
    for name in new.callees:
        if name in have or name.startswith(f"{old.name}."):
            continue
        to = f"{old.name}.{name}"
        k = 0
        while to in taken:
            k += 1
            to = f"{old.name}.{name}_{k}"
        taken.add(to)
        mapping[name] = to
    return rename_callees(new, mapping) if mapping else new


def rename_callees(fn: Function, mapping: dict[str, str]) -> Function:
    """``fn`` with callees renamed by ``mapping`` (in its ops and its callees' ops)."""
    def op_renamed(op: Op) -> Op:
        name = op.attrs.get("callee")
        if name in mapping:
            return op.replace(attrs={**op.attrs, "callee": mapping[name]})
        return op

    callees = {}
    for name, c in fn.callees.items():
        c = rename_callees(c, mapping)
        to = mapping.get(name, name)
        callees[to] = c.replace(name=to) if to != c.name else c
    return fn.replace(ops=[op_renamed(op) for op in fn.ops], callees=callees)
