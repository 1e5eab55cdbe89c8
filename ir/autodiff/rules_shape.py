"""Derivative rules of shape ops: each is the transpose of a linear map."""

from __future__ import annotations

from collections.abc import Sequence

from ..core import Builder, Op, Value
from .registry import Grads, Rule


def _inverse(perm: Sequence[int]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)


def _slice(b: Builder, op: Op, dy: Value) -> Grads:
    start, stop, step = (op.attrs[k] for k in ("start", "stop", "step"))
    shape = op.operands[0].shape
    spans = [n + max(n - 1, 0) * (s - 1) for n, s in zip(dy.shape, step, strict=True)]
    high = tuple(d - lo - w for d, lo, w in zip(shape, start, spans, strict=True))
    return [b.pad(dy, low=start, high=high, interior=tuple(s - 1 for s in step))]


def _pad(b: Builder, op: Op, dy: Value) -> Grads:
    low, interior = op.attrs["low"], op.attrs["interior"]
    shape = op.operands[0].shape
    step = tuple(i + 1 for i in interior)
    stop = tuple(lo + (d - 1) * s + 1 if d else lo
                 for lo, d, s in zip(low, shape, step, strict=True))
    return [b.slice(dy, start=low, stop=stop, step=step)]


def _concatenate(b: Builder, op: Op, dy: Value) -> Grads:
    axis, out, at = op.attrs["axis"], [], 0
    for x in op.operands:
        start = tuple(at if i == axis else 0 for i in range(dy.ndim))
        stop = tuple(at + x.shape[axis] if i == axis else d for i, d in enumerate(dy.shape))
        out.append(b.slice(dy, start=start, stop=stop, step=(1,) * dy.ndim))
        at += x.shape[axis]
    return out


RULES_SHAPE: dict[str, Rule] = {
    "reshape": lambda b, op, dy: [b.reshape_to(dy, op.operands[0].shape)],
    "transpose": lambda b, op, dy: [b.transpose(dy, perm=_inverse(op.attrs["perm"]))],
    "broadcast": lambda b, op, dy: [b.sum_to_shape(dy, op.operands[0].shape)],
    "sum_to": lambda b, op, dy: [b.broadcast_to(dy, op.operands[0].shape)],
    "flip": lambda b, op, dy: [b.flip(dy, axes=op.attrs["axes"])],
    "slice": _slice,
    "pad": _pad,
    "concatenate": _concatenate,
}
