"""Fusion: elementwise ops over one index space, and the reductions that end them, become
one ``fused`` op whose body is a kernel (see ``yota.ir.ops.fused`` for the contract).

Grouping, in program order:

- a *member* is an elementwise op (unary, binary, ``select``, ``convert``) or a reduction
  (``sum``, ``max``, ``min``); its domain is its result shape (for a reduction, its
  operand's shape);
- a member joins the groups of the members that produce its operands when they have the
  same domain, all the group's reductions reduce the same axes, and the merged group
  would not depend on itself through an op outside it (checked on the graph of groups);
- groups of one domain that read the same input are then merged too, so that each
  input is read once.

Nothing is computed twice: ``broadcast`` ops (index arithmetic, free in a kernel) and
splat constants (a literal) are copied into every kernel that reads them; every other op
belongs to exactly one group. A member's value that anything outside its group reads (or
the function returns) is a kernel output, written to memory once. A group whose body
would hold a single op is left as it is. ``matmul``, ``gather``, shape ops and calls stay
outside kernels.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from ..core import Function, Op, Value, make_op
from ..ops import get_opdef
from ..ops.fused import REDUCTIONS
from .base import Pass, PassContext, const_splat, rebuild, toposort
from .dce import dce


def member_domain(op: Op) -> tuple[tuple[int, ...], tuple[int, ...] | None] | None:
    """(domain, reduced axes or None) if ``op`` can be a kernel member, else None."""
    if op.name in REDUCTIONS:
        return op.operands[0].shape, op.attrs["axes"]
    if op.name in ("broadcast", "const") or len(op.results) != 1:
        return None
    return (op.result.shape, None) if get_opdef(op.name).elementwise else None


@dataclass
class Group:
    members: list[int]
    domain: tuple[int, ...]
    axes: tuple[int, ...] | None

    def accepts(self, other: Group) -> bool:
        return self.domain == other.domain and (
            self.axes is None or other.axes is None or self.axes == other.axes)


@dataclass
class Grouping:
    """Which group each op is in (ops that are not members are groups of their own)."""

    ops: list[Op]
    producer: dict[Value, int] = field(default_factory=dict)
    defs: dict[Value, Op] = field(default_factory=dict)
    users: list[list[int]] = field(default_factory=list)
    group_of: list[int] = field(default_factory=list)
    groups: dict[int, Group] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.producer = {r: i for i, op in enumerate(self.ops) for r in op.results}
        self.defs = {r: op for op in self.ops for r in op.results}
        self.users = [[] for _ in self.ops]
        for i, op in enumerate(self.ops):
            for p in {self.producer[v] for v in op.operands if v in self.producer}:
                self.users[p].append(i)
        self.group_of = list(range(len(self.ops)))

    def members(self, g: int) -> list[int]:
        return self.groups[g].members if g in self.groups else [g]

    def successors(self, g: int) -> set[int]:
        return {self.group_of[u] for m in self.members(g) for u in self.users[m]} - {g}

    def creates_cycle(self, gs: set[int]) -> bool:
        """True if merging groups ``gs`` makes a group that depends on itself through
        an op or group outside it."""
        last = max(m for g in gs for m in self.members(g))
        stack = [s for g in gs for s in self.successors(g) if s not in gs]
        seen: set[int] = set()
        while stack:
            g = stack.pop()
            if g in seen or min(self.members(g)) > last:
                continue
            seen.add(g)
            for s in self.successors(g):
                if s in gs:
                    return True
                stack.append(s)
        return False

    def try_merge(self, a: int, b: int) -> int:
        """Merge groups ``a`` and ``b`` if allowed; returns the group ``a`` is now in."""
        ga, gb = self.groups[a], self.groups[b]
        if a == b or not ga.accepts(gb) or self.creates_cycle({a, b}):
            return a
        keep, drop = (a, b) if len(ga.members) >= len(gb.members) else (b, a)
        gk, gd = self.groups[keep], self.groups.pop(drop)
        gk.members = sorted(gk.members + gd.members)
        gk.axes = gk.axes if gk.axes is not None else gd.axes
        for m in gd.members:
            self.group_of[m] = keep
        return keep

    def grow(self) -> None:
        """Producer-consumer merging, in program order."""
        for i, op in enumerate(self.ops):
            dom = member_domain(op)
            if dom is None:
                continue
            self.groups[i] = Group([i], *dom)
            g = i
            for v in op.operands:
                p = self.producer.get(v)
                if p is not None and self.group_of[p] in self.groups:
                    g = self.try_merge(g, self.group_of[p])

    def merge_siblings(self) -> None:
        """Merge groups that read the same value (directly or through a broadcast)."""
        readers: dict[Value, list[int]] = {}
        for g, group in list(self.groups.items()):
            for m in group.members:
                for v in self.ops[m].operands:
                    readers.setdefault(self.root(v), []).append(g)
        for gs in readers.values():
            for other in gs[1:]:
                self.try_merge(self.group_of[gs[0]], self.group_of[other])

    def root(self, v: Value) -> Value:
        """``v`` seen through broadcasts."""
        while v in self.producer and self.ops[self.producer[v]].name == "broadcast":
            v = self.ops[self.producer[v]].operands[0]
        return v


class KernelBuilder:
    """Builds one kernel body from a group's members, and the ``fused`` op calling it."""

    def __init__(self, grouping: Grouping, group: Group) -> None:
        self.g, self.group = grouping, group
        self.member_ops = [grouping.ops[m] for m in group.members]
        self.env: dict[Value, Value] = {}
        self.inputs: dict[Value, Value] = {}
        self.body: list[Op] = []

    def operand(self, v: Value) -> Value:
        """The body value for main-function value ``v``: broadcasts and splat constants
        are copied in; any other value from outside becomes a kernel input."""
        if v in self.env:
            return self.env[v]
        op = self.g.defs.get(v)
        splat = const_splat(v, self.g.defs)
        if op is not None and splat is not None:
            new = make_op("const", [], {"value": np.broadcast_to(splat, v.shape)}, op.loc)
        elif op is not None and op.name == "broadcast":
            new = make_op("broadcast", [self.input(self.g.root(v))], {"shape": v.shape},
                          op.loc)
        else:
            return self.input(v)
        self.body.append(new)
        self.env[v] = new.result
        return new.result

    def input(self, v: Value) -> Value:
        if v not in self.inputs:
            self.inputs[v] = Value(v.type)
        return self.inputs[v]

    def outputs(self, fn_outputs: set[Value]) -> list[Value]:
        members = set(self.group.members)
        return [r for m in self.group.members for r in self.g.ops[m].results
                if r in fn_outputs or any(u not in members for u in self.g.users[m])]

    def fill(self) -> KernelBuilder:
        """Copy the members (and what they read) into the body."""
        for op in self.member_ops:
            operands = [self.operand(v) for v in op.operands]
            new = op.replace(operands=operands, results=[Value(r.type) for r in op.results])
            self.env.update(zip(op.results, new.results, strict=True))
            self.body.append(new)
        return self

    def finish(self, name: str, fn_outputs: set[Value]) -> tuple[Op, Function, list[Value]]:
        """The ``fused`` op, its kernel body, and the member values it outputs."""
        outs = self.outputs(fn_outputs)
        attrs: dict[str, object] = {"domain": self.group.domain}
        if self.group.axes is not None:
            attrs["reduce_axes"] = self.group.axes
        body = Function(name, list(self.inputs.values()), self.body,
                        [self.env[v] for v in outs], attrs=attrs)
        call = make_op("fused", list(self.inputs), {"callee": name}, _loc(self.member_ops),
                       result_types=[v.type for v in outs])
        return call, body, outs

    def worth_it(self) -> bool:
        return len([op for op in self.body if op.name != "const"]) >= 2


def _loc(ops: list[Op]) -> str | None:
    locs = list(dict.fromkeys(op.loc for op in ops if op.loc))
    if not locs:
        return None
    return "; ".join(locs[:3]) + ("; ..." if len(locs) > 3 else "")


def _fresh_names(taken: set[str]) -> Iterator[str]:
    i = 0
    while True:
        if f"fused_{i}" not in taken:
            yield f"fused_{i}"
        i += 1


def fuse(fn: Function, ctx: PassContext) -> Function:
    grouping = Grouping(list(fn.ops))
    grouping.grow()
    grouping.merge_siblings()
    names = _fresh_names(set(fn.all_callees()))
    placed: list[tuple[int, Op]] = []  # (position of the group's first member, op)
    fused: set[int] = set()
    subst: dict[Value, Value] = {}
    callees = dict(fn.callees)
    for group in sorted(grouping.groups.values(), key=lambda g: g.members[0]):
        kb = KernelBuilder(grouping, group).fill()
        if not kb.worth_it():
            continue
        call, body, outs = kb.finish(next(names), set(fn.outputs))
        callees[body.name] = body
        subst.update(zip(outs, call.results, strict=True))
        placed.append((group.members[0], call))
        fused.update(group.members)
    if not placed:
        return fn
    placed += [(i, op) for i, op in enumerate(fn.ops) if i not in fused]
    placed.sort(key=lambda p: p[0])
    out = rebuild(fn, [op for _, op in placed], subst, callees=callees)
    return dce(out.replace(ops=toposort(out.ops, out.inputs)), ctx)


FUSE = Pass("fuse", "turn each elementwise chain and its reduction into one kernel that "
            "reads its inputs once", fuse)
