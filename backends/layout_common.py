"""What the llvm and CUDA layouts share: storages and locations (element offset and
strides), the view arithmetic of the shape ops, and rendering the memory plan's buffers
as storages. Each backend's ``layout`` module decides which shape ops become views."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from yota.ir.core import Function, Op, Value
from yota.ir.passes.plan_memory import MemoryPlan


@dataclass(frozen=True)
class Storage:
    kind: str  # "in" | "out" | "ws" | "const"
    index: int  # input/output number, workspace byte offset, or constant number
    nbytes: int


@dataclass(frozen=True)
class Loc:
    storage: int  # index into Layout.storages (-1: the value has no elements)
    offset: int  # elements
    strides: tuple[int, ...]  # elements


class Storages(Protocol):
    out_storage: dict[int, int]

    def add_storage(self, kind: str, index: int, nbytes: int) -> int: ...

    def workspace(self, nbytes: int) -> int: ...


def buffer_storages(lay: Storages, fn: Function, plan: MemoryPlan,
                    plan_view: Callable[[Op, Value], bool]) -> dict[int, int]:
    """Plan buffers as storages (buffer -> storage); an output's buffer that holds nothing
    bigger (and that the plan did not make a view, ``plan_view``) is the caller's output
    array itself. Every output gets its storage in ``lay.out_storage``."""
    buf = plan.buffer_of(fn)
    index = {r: i for i, op in enumerate(fn.ops) for r in op.results}
    claimed: dict[int, int] = {}
    for j, v in enumerate(fn.outputs):
        b = buf.get(v, -1)
        op = fn.ops[index[v]] if v in index else None
        if (b >= 0 and b not in claimed and v.type.nbytes and op is not None
                and not plan_view(op, v) and plan.buffers[b] == v.type.nbytes):
            claimed[b] = j
    storages = {}
    for b, size in enumerate(plan.buffers):
        if b in claimed:
            storages[b] = lay.add_storage("out", claimed[b], size)
            lay.out_storage[claimed[b]] = storages[b]
        else:
            storages[b] = lay.workspace(size)
    for j, v in enumerate(fn.outputs):
        if j not in lay.out_storage:
            lay.out_storage[j] = lay.add_storage("out", j, v.type.nbytes)
    return storages


def strided_view(op: Op, loc: Loc, shape: tuple[int, ...]) -> Loc | None:
    """The location of a ``transpose``, ``broadcast``, ``slice`` or ``flip`` of the
    ``shape``-shaped value at ``loc``, as a view; None for any other op."""
    s, a = loc.strides, op.attrs
    if op.name == "transpose":
        return Loc(loc.storage, loc.offset, tuple(s[p] for p in a["perm"]))
    if op.name == "broadcast":
        out = a["shape"]
        lead = len(out) - len(shape)
        st = [0] * lead + [0 if d == 1 and o != 1 else x
                           for d, o, x in zip(shape, out[lead:], s, strict=True)]
        return Loc(loc.storage, loc.offset, tuple(st))
    if op.name == "slice":
        off = loc.offset + sum(b * x for b, x in zip(a["start"], s, strict=True))
        return Loc(loc.storage, off, tuple(x * c for x, c in zip(s, a["step"], strict=True)))
    if op.name == "flip":
        off, st = loc.offset, list(s)
        for ax in set(a["axes"]):
            if shape[ax] > 0:
                off += (shape[ax] - 1) * s[ax]
            st[ax] = -s[ax]
        return Loc(loc.storage, off, tuple(st))
    return None


def is_contiguous(loc: Loc, shape: tuple[int, ...]) -> bool:
    """Row-major without gaps (axes of length 1 may have any stride)."""
    if int(np.prod(shape, dtype=np.int64)) == 0:
        return True
    s, ok = 1, True
    for d, x in zip(reversed(shape), reversed(loc.strides), strict=True):
        ok = ok and (d == 1 or x == s)
        s *= d
    return ok
