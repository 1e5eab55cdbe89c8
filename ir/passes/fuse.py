"""Fusion: elementwise ops over one index space, and the reductions that end them, become
one ``fused`` op whose body is a kernel (see ``yota.ir.ops.fused`` for the contract).

Grouping, in program order:

- a *member* is an elementwise op (unary, binary, ``select``, ``convert``) or a reduction
  (``sum``, ``max``, ``min``); its domain is its result shape (for a reduction, its
  operand's shape);
- a member joins the groups of the members that produce its operands when they have the
  same domain, all the group's reductions reduce the same axes, the merged group would
  not depend on itself through an op outside it (checked on the graph of groups,
  ``dynorder``) and would hold at most ``MAX_MEMBERS`` ops;
- groups of one domain that read the same input are then merged too, so that each
  input is read once.

A member's value that anything outside its group reads (or the function returns) is a
kernel output, written to memory once. ``broadcast`` ops (index arithmetic, free in a
kernel) and splat constants (a literal) are copied into every kernel that reads them.
Expensive ops (transcendentals, division...) are never computed twice; a value made by at
most ``MAX_RECOMPUTE`` cheap ops (``CHEAP``: add, mul, square...) from one value that is
in memory anyway (and smaller values broadcast to it) is recomputed by the kernels that
read it instead of being written and read back (``1 - h*h`` from ``h``, ``x + b`` from
``x`` and a bias ``b``). A kernel whose body would hold a single op is left as
that op. ``matmul``, ``gather``, shape ops and calls stay outside kernels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..core import Function, Op, Value, make_op
from ..ops import get_opdef
from ..ops.fused import REDUCTIONS
from .base import Pass, PassContext, const_splat, fresh_names, rebuild, toposort
from .dce import dce
from .dynorder import DynamicOrder


def member_domain(op: Op) -> tuple[tuple[int, ...], tuple[int, ...] | None] | None:
    """(domain, reduced axes or None) if ``op`` can be a kernel member, else None."""
    if op.name in REDUCTIONS:
        return op.operands[0].shape, op.attrs["axes"]
    if op.name in ("broadcast", "const") or len(op.results) != 1:
        return None
    return (op.result.shape, None) if get_opdef(op.name).elementwise else None


SIBLING_TRIES = 4  # groups reading one value: each tries to join the 4 formed last
# ops of one kernel at most: LLVM's code generator takes more than linear time in the
# size of one function (a kernel of 3000 ops: 0.9 s of object code, 0.4 s as 128-op
# kernels; of 1500 ops: 0.36 s against 0.25)
MAX_MEMBERS = 512


@dataclass
class Group:
    members: list[int]  # op indices (sorted once a phase of merging is over)
    domain: tuple[int, ...]
    axes: tuple[int, ...] | None

    def accepts(self, other: Group) -> bool:
        return self.domain == other.domain and (
            self.axes is None or other.axes is None or self.axes == other.axes)


@dataclass
class Grouping:
    """Which group each op is in (ops that are not members are groups of their own), and
    the graph of groups with a maintained topological order (``DynamicOrder``), which
    answers whether two groups may merge by looking only between them."""

    ops: list[Op]
    producer: dict[Value, int] = field(default_factory=dict)
    defs: dict[Value, Op] = field(default_factory=dict)
    users: list[list[int]] = field(default_factory=list)
    group_of: list[int] = field(default_factory=list)
    groups: dict[int, Group] = field(default_factory=dict)
    order: DynamicOrder = field(default_factory=lambda: DynamicOrder(0, []))
    scanned: int = 0  # sibling heads looked at (work the complexity tests count)

    def __post_init__(self) -> None:
        self.producer = {r: i for i, op in enumerate(self.ops) for r in op.results}
        self.defs = {r: op for op in self.ops for r in op.results}
        self.users = [[] for _ in self.ops]
        for i, op in enumerate(self.ops):
            for p in {self.producer[v] for v in op.operands if v in self.producer}:
                self.users[p].append(i)
        self.group_of = list(range(len(self.ops)))
        self.order = DynamicOrder(len(self.ops), (
            (p, u) for p, us in enumerate(self.users) for u in us))

    def members(self, g: int) -> list[int]:
        return self.groups[g].members if g in self.groups else [g]

    def try_merge(self, a: int, b: int) -> int | None:
        """Merge groups ``a`` and ``b`` if allowed (same domain and axes, and no path
        of the group graph from one to the other through a third group: the merged
        group would depend on itself); returns the merged group or None."""
        ga, gb = self.groups[a], self.groups[b]
        if a == b or not ga.accepts(gb) or len(ga.members) + len(gb.members) > MAX_MEMBERS:
            return None
        keep, drop = (a, b) if len(ga.members) >= len(gb.members) else (b, a)
        if not self.order.merge(keep, drop):
            return None
        gk, gd = self.groups[keep], self.groups.pop(drop)
        gk.members += gd.members
        gk.axes = gk.axes if gk.axes is not None else gd.axes
        for m in gd.members:
            self.group_of[m] = keep
        return keep

    def sort_members(self) -> None:
        for group in self.groups.values():
            group.members.sort()

    def grow(self) -> None:
        """Producer-consumer merging, in program order."""
        for i, op in enumerate(self.ops):
            dom = member_domain(op)
            if dom is None:
                continue
            self.groups[i] = Group([i], *dom)
            for v in op.operands:
                p = self.producer.get(v)
                if p is not None and self.group_of[p] in self.groups:
                    self.try_merge(self.group_of[i], self.group_of[p])
        self.sort_members()

    def merge_siblings(self) -> None:
        """Merge groups that read the same value (directly or through a broadcast)."""
        readers: dict[Value, list[int]] = {}
        for g, group in list(self.groups.items()):
            for m in group.members:
                for v in self.ops[m].operands:
                    readers.setdefault(self.root(v), []).append(g)
        for gs in readers.values():
            heads: list[int] = []  # a member of each group formed so far, latest last
            for m in dict.fromkeys(gs):
                near = self._near(heads, self.group_of[m])
                if not any(self.try_merge(self.group_of[h], self.group_of[m]) is not None
                           for h in near):
                    heads.append(m)
        self.sort_members()

    def _near(self, heads: list[int], g: int) -> list[int]:
        """The last ``SIBLING_TRIES`` of ``heads`` that are not in group ``g``, oldest
        first."""
        near: list[int] = []
        for h in reversed(heads):
            self.scanned += 1
            if self.group_of[h] != g:
                near.append(h)
                if len(near) == SIBLING_TRIES:
                    break
        return near[::-1]

    def root(self, v: Value) -> Value:
        """``v`` seen through broadcasts."""
        while v in self.producer and self.ops[self.producer[v]].name == "broadcast":
            v = self.ops[self.producer[v]].operands[0]
        return v


# Ops cheap enough to compute again in a second kernel rather than write their result to
# memory and read it back (no transcendentals, no division).
CHEAP = frozenset({"add", "sub", "mul", "neg", "abs", "square", "sign", "maximum", "minimum",
                   "select", "convert", "not", "and", "or", "xor", "eq", "ne", "lt", "le",
                   "gt", "ge"})
MAX_RECOMPUTE = 4  # ops a kernel may recompute for one value


def recomputed(grouping: Grouping, kernels: set[int], outputs: set[Value]) -> dict[Value, Op]:
    """Values that kernels recompute from one value materialized anyway, instead of
    reading them (saving a write and a read), with the ops that compute them.

    A member's result qualifies when every op outside its group that reads it is in
    a kernel of the same domain (``kernels`` holds their group ids), and at most
    ``MAX_RECOMPUTE`` cheap ops of its group compute it from a single value that is
    materialized anyway (an input of the group, or a member result that something other
    than a kernel reads); constants and broadcasts of them are free, and so are smaller
    values broadcast to the domain (``z - m`` with ``m`` a row maximum reads ``z``'s
    memory once more, and a row of ``m``).
    """
    must = _materialized(grouping, kernels, outputs)
    out: dict[Value, Op] = {}
    for g, group in grouping.groups.items():
        for m in group.members:
            r = grouping.ops[m].results[0]
            readers = {grouping.group_of[u] for u in grouping.users[m]} - {g}
            if r in must or not readers or any(
                    h not in kernels or grouping.groups[h].domain != group.domain
                    for h in readers):
                continue
            cone = _cheap_cone(grouping, g, r, must)
            if cone is not None:
                out.update(cone)
    return out


def _materialized(grouping: Grouping, kernels: set[int], outputs: set[Value]) -> set[Value]:
    """Member results that must be in memory whatever kernels recompute."""
    must = set(outputs)
    for g, group in grouping.groups.items():
        for m in group.members:
            if any(grouping.group_of[u] != g and grouping.group_of[u] not in kernels
                   for u in grouping.users[m]):
                must.update(grouping.ops[m].results)
    return must


def _cheap_cone(grouping: Grouping, g: int, r: Value,
                must: set[Value]) -> dict[Value, Op] | None:
    """The cheap member ops computing ``r`` from one materialized value of the domain's
    shape (and any smaller ones it broadcasts: a row maximum, a bias), or None."""
    cone: dict[Value, Op] = {}
    leaves: set[Value] = set()
    stack = [r]
    while stack:
        v = stack.pop()
        p = grouping.producer.get(v)
        if v in cone or const_splat(v, grouping.defs) is not None:
            continue
        if p is None or grouping.group_of[p] != g or (v is not r and v in must):
            leaves.add(grouping.root(v))
            continue
        op = grouping.ops[p]
        if op.name not in CHEAP or len(cone) == MAX_RECOMPUTE:
            return None
        cone[v] = op
        stack.extend(op.operands)
    domain = grouping.groups[g].domain
    return cone if sum(v.shape == domain for v in leaves) <= 1 else None


class KernelBuilder:
    """Builds one kernel body from a group's members, and the ``fused`` op calling it."""

    def __init__(self, grouping: Grouping, group: Group,
                 recompute: dict[Value, Op] | None = None) -> None:
        self.g, self.group = grouping, group
        self.recompute = recompute or {}
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
        elif v in self.recompute and op is not None:
            new = op.replace(operands=[self.operand(w) for w in op.operands],
                             results=[Value(v.type)])
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
        """Member results read outside the kernel (unless the readers recompute them)."""
        members = set(self.group.members)
        return [r for m in self.group.members for r in self.g.ops[m].results
                if r in fn_outputs or r not in self.recompute
                and any(u not in members for u in self.g.users[m])]

    def fill(self) -> KernelBuilder:
        """Copy the members (and what they read) into the body."""
        for op in self.member_ops:
            operands = [self.operand(v) for v in op.operands]
            new = op.replace(operands=operands, results=[Value(r.type) for r in op.results])
            self.env.update(zip(op.results, new.results, strict=True))
            self.body.append(new)
        return self

    def finish(self, fn_outputs: set[Value]) -> tuple[Function, list[Value]]:
        """The kernel body (unnamed; members nothing reads dropped) and the member values
        it outputs."""
        outs = self.outputs(fn_outputs)
        attrs: dict[str, object] = {"domain": self.group.domain}
        if self.group.axes is not None:
            attrs["reduce_axes"] = self.group.axes
        body = Function("", list(self.inputs.values()), self.body,
                        [self.env[v] for v in outs], attrs=attrs)
        return dce(body, PassContext()), outs

    def call(self, body: Function, outs: list[Value]) -> Op:
        return make_op("fused", list(self.inputs), {"callee": body.name},
                       _loc(self.member_ops), result_types=[v.type for v in outs])


def worth_it(body: Function) -> bool:
    """A kernel of one op (and constants) is no better than the op."""
    return sum(op.name != "const" for op in body.ops) >= 2


def _loc(ops: list[Op]) -> str | None:
    locs = list(dict.fromkeys(op.loc for op in ops if op.loc))
    if not locs:
        return None
    return "; ".join(locs[:3]) + ("; ..." if len(locs) > 3 else "")



def fuse(fn: Function, ctx: PassContext) -> Function:
    grouping = Grouping(list(fn.ops))
    grouping.grow()
    grouping.merge_siblings()
    names = fresh_names("fused", set(fn.all_callees()))
    kernels = {g for g, group in grouping.groups.items() if len(group.members) >= 2}
    outputs = set(fn.outputs)
    recompute = recomputed(grouping, kernels, outputs)
    placed: list[tuple[int, Op]] = []  # (position of the group's first member, op)
    fused: set[int] = set()
    subst: dict[Value, Value] = {}
    callees = dict(fn.callees)
    for group in sorted(grouping.groups.values(), key=lambda g: g.members[0]):
        kb = KernelBuilder(grouping, group, recompute).fill()
        body, outs = kb.finish(outputs)
        if not worth_it(body):
            continue
        body = body.replace(name=next(names))
        call = kb.call(body, outs)
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
