"""The batching-rule table and the helpers the rules share.

A rule is ``rule(bt, op, xs, bat) -> [(value, batched) per result]``: ``bt`` is the
``Batcher`` (its builder ``bt.b``, the batch size ``bt.size``), ``xs`` the operands in the
new program and ``bat`` whether each is batched (its axis 0 holds the examples). A rule
runs only when some operand is batched; it emits ordinary ops.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..core import Builder, Op, Value
from ..errors import YotaError

Batched = list[tuple[Value, bool]]
BatchRule = Callable[[Any, Op, list[Value], list[bool]], Batched]
BATCH_RULES: dict[str, BatchRule] = {}


class VmapError(YotaError):
    """A function cannot be batched as asked (bad axes, an output with ``out_axes`` None
    that depends on the batch)."""


def batch_rule(*names: str) -> Callable[[BatchRule], BatchRule]:
    """Register the decorated function as the batching rule of ``names``."""
    def deco(rule: BatchRule) -> BatchRule:
        for n in names:
            BATCH_RULES[n] = rule
        return rule
    return deco


def to_batched(b: Builder, x: Value, batched: bool, size: int) -> Value:
    """``x`` with the batch axis in front: itself if batched, else broadcast."""
    return x if batched else b.broadcast_to(x, (size,) + x.shape)


def all_batched(bt: Any, xs: Sequence[Value], bat: Sequence[bool]) -> list[Value]:
    return [to_batched(bt.b, x, isb, bt.size) for x, isb in zip(xs, bat, strict=True)]


def move_axis(b: Builder, x: Value, src: int, dst: int) -> Value:
    """``np.moveaxis(x, src, dst)`` (nothing when equal)."""
    if src == dst:
        return x
    perm = [i for i in range(x.ndim) if i != src]
    perm.insert(dst, src)
    return permute(b, x, perm)


def permute(b: Builder, x: Value, perm: Sequence[int]) -> Value:
    """``transpose`` by ``perm``; a reshape where the axes of size > 1 keep their order
    (the elements do)."""
    if list(perm) == list(range(x.ndim)):
        return x
    big = [p for p in perm if x.shape[p] != 1]
    if big == sorted(big):
        return b.reshape_to(x, tuple(x.shape[p] for p in perm))
    return b.transpose(x, perm=tuple(perm))


def shifted(axes: Sequence[int]) -> tuple[int, ...]:
    """Axes of an example as axes of the batch (one more in front)."""
    return tuple(a + 1 for a in axes)


def elementwise(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    """Any elementwise op: the unbatched operands broadcast over the batch."""
    return [(v, True) for v in bt.emit(op, all_batched(bt, xs, bat))]


def fresh(base: str, taken: set[str]) -> str:
    """A callee name not in ``taken`` (then taken)."""
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name
