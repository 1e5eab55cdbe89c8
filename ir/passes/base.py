"""What every pass shares: the ``Pass`` object, the options it reads, and small helpers
for rebuilding a function (substituting values, ordering ops, reading constants)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core import Function, Op, Value, make_op
from ..ops import get_opdef
from ..ops.misc import splat_scalar


@dataclass(frozen=True)
class PassContext:
    """Options the passes read.

    - ``fast_math``: allow rewrites that are not exact in IEEE arithmetic
      (reassociation, ``x*0 -> 0``, ``log(exp x) -> x``...).
    - ``reorder_matmul``: allow ``batch_matmul`` to change the shapes BLAS sees; a GEMM
      sums in an order of its own choosing, so results may change in the last bits.
    - ``fold_limit``: ``fold`` materializes no constant with more elements than this
      (splat constants, all elements equal, are kept lazily at any size).
    - ``fold_work_limit``: ``fold`` evaluates no op that reads or writes more elements.
    - ``fold_grow_bytes``: ``fold`` makes no constant larger than this and than every
      constant it is computed from (data would grow where code computes it).
    - ``max_sweeps``: bound on the sweeps of a fixed-point rewrite.
    - ``roll_min_saved``: ``roll`` makes a loop only where it saves this many ops.
    """

    fast_math: bool = False
    reorder_matmul: bool = True
    fold_limit: int = 4096
    fold_work_limit: int = 1 << 20
    fold_grow_bytes: int = 4096
    max_sweeps: int = 16
    roll_min_saved: int = 32


@dataclass(frozen=True)
class Pass:
    """One named transformation ``apply(fn, ctx) -> fn`` with a one-line reason.

    ``apply`` never mutates its input; it returns ``fn`` itself when nothing changed.
    """

    name: str
    reason: str
    apply: Callable[[Function, PassContext], Function]

    def __call__(self, fn: Function, ctx: PassContext | None = None) -> Function:
        return self.apply(fn, ctx or PassContext())


# -- rebuilding -----------------------------------------------------------------------
def resolve(v: Value, subst: Mapping[Value, Value]) -> Value:
    """Follow ``subst`` (old value -> replacement) to the final replacement of ``v``."""
    while v in subst:
        v = subst[v]
    return v


def remap(op: Op, subst: Mapping[Value, Value]) -> Op:
    """``op`` with its operands replaced through ``subst`` (the same op if none changes)."""
    if not subst:
        return op
    operands = tuple(resolve(v, subst) for v in op.operands)
    if operands == op.operands:
        return op
    return op.replace(operands=operands)


def rebuild(fn: Function, ops: Sequence[Op], subst: Mapping[Value, Value],
            **changes: Any) -> Function:
    """``fn`` with new ``ops`` (operands remapped) and outputs remapped through ``subst``."""
    outputs = tuple(resolve(v, subst) for v in fn.outputs)
    return fn.replace(ops=[remap(op, subst) for op in ops], outputs=outputs, **changes)


def toposort(ops: Sequence[Op], inputs: Iterable[Value],
             key: Callable[[int], Any] | None = None) -> list[Op]:
    """Ops in an order where every operand is defined first; among the ready ops the one
    with the smallest ``key(index)`` (default: its index) goes first, so an order that is
    already valid is kept."""
    key = key or (lambda i: i)
    producer = {r: i for i, op in enumerate(ops) for r in op.results}
    waiting = [0] * len(ops)
    users: list[list[int]] = [[] for _ in ops]
    for i, op in enumerate(ops):
        for p in {producer[v] for v in op.operands if v in producer}:
            waiting[i] += 1
            users[p].append(i)
    ready = [(key(i), i) for i in range(len(ops)) if waiting[i] == 0]
    heapq.heapify(ready)
    out: list[Op] = []
    while ready:
        _, i = heapq.heappop(ready)
        out.append(ops[i])
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, (key(u), u))
    if len(out) != len(ops):
        raise ValueError("toposort: the ops have a cycle")
    return out


# -- reading the program ----------------------------------------------------------------
def has_effect(op: Op, callees: Mapping[str, Function]) -> bool:
    """True if ``op`` must run even when nothing reads it (a guard, or a call of a body
    that contains one)."""
    opdef = get_opdef(op.name)
    if opdef.effect:
        return True
    if opdef.calls:
        body = callees.get(op.attrs["callee"])
        return body is not None and any(has_effect(o, body.callees) for o in body.ops)
    return False


def is_splat_const(op: Op) -> bool:
    """A non-empty ``const`` op whose elements all have the same value."""
    return op.name == "const" and op.result.type.size > 0 and \
        splat_scalar(op.attrs["value"]) is not None


def const_splat(v: Value, producers: Mapping[Value, Op]) -> np.ndarray | None:
    """The scalar (0-d array) every element of ``v`` equals, if ``v`` is a constant or a
    broadcast of one with that property; else None."""
    op = producers.get(v)
    while op is not None and op.name == "broadcast":
        op = producers.get(op.operands[0])
    if op is None or op.name != "const":
        return None
    return splat_scalar(op.attrs["value"])


def splat_const(value: Any, dtype: np.dtype, shape: tuple[int, ...],
                loc: str | None = None) -> Op:
    """A ``const`` op of ``shape`` with every element ``value`` (kept lazily)."""
    scalar = np.asarray(value).astype(dtype)
    return make_op("const", [], {"value": np.broadcast_to(scalar, shape)}, loc)


def fresh_names(prefix: str, taken: set[str]) -> Iterator[str]:
    """``prefix_0``, ``prefix_1``, ... skipping the names in ``taken`` (new callees)."""
    i = 0
    while True:
        if f"{prefix}_{i}" not in taken:
            yield f"{prefix}_{i}"
        i += 1
