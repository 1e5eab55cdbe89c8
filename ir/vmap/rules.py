"""Batching rules of reductions and shape ops: the op on the batch, its axes shifted past
the batch axis (elementwise ops need none: ``base.elementwise`` broadcasts)."""

from __future__ import annotations

from typing import Any

from ..core import Op, Value
from .base import Batched, all_batched, batch_rule, permute, shifted


@batch_rule("sum", "prod", "max", "min")
def _reduce(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    return [(bt.emit(op, xs, axes=shifted(op.attrs["axes"]))[0], True)]


@batch_rule("argmax", "argmin")
def _arg(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    return [(bt.emit(op, xs, axis=op.attrs["axis"] + 1)[0], True)]


@batch_rule("reshape")
def _reshape(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    return [(bt.b.reshape_to(xs[0], (bt.size,) + tuple(op.attrs["shape"])), True)]


@batch_rule("transpose")
def _transpose(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    return [(permute(bt.b, xs[0], (0,) + shifted(op.attrs["perm"])), True)]


@batch_rule("broadcast")
def _broadcast(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    """``x [n, s...]`` to ``[n, S...]``: ones between the batch axis and ``s`` first
    (NumPy aligns trailing axes)."""
    x, shape = xs[0], tuple(op.attrs["shape"])
    lead = (1,) * (len(shape) - (x.ndim - 1))
    x = bt.b.reshape_to(x, (bt.size,) + lead + x.shape[1:])
    return [(bt.b.broadcast_to(x, (bt.size,) + shape), True)]


@batch_rule("sum_to")
def _sum_to(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    """``x [n, S...]`` summed to ``[n, s...]``: the leading axes of ``S`` beyond ``s`` are
    summed as axes of size 1 in the target, then dropped."""
    x, shape = xs[0], tuple(op.attrs["shape"])
    lead = (1,) * ((x.ndim - 1) - len(shape))
    y = bt.b.sum_to_shape(x, (bt.size,) + lead + shape)
    return [(bt.b.reshape_to(y, (bt.size,) + shape), True)]


@batch_rule("slice")
def _slice(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    a = op.attrs
    return [(bt.emit(op, xs, start=(0,) + a["start"], stop=(bt.size,) + a["stop"],
                     step=(1,) + a["step"])[0], True)]


@batch_rule("flip")
def _flip(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    return [(bt.emit(op, xs, axes=shifted(op.attrs["axes"]))[0], True)]


@batch_rule("pad")
def _pad(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    a = op.attrs
    return [(bt.emit(op, xs, low=(0,) + a["low"], high=(0,) + a["high"],
                     interior=(0,) + a["interior"])[0], True)]


@batch_rule("concatenate")
def _concatenate(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    return [(bt.emit(op, all_batched(bt, xs, bat), axis=op.attrs["axis"] + 1)[0], True)]


@batch_rule("update_slice")
def _update_slice(bt: Any, op: Op, xs: list[Value], bat: list[bool]) -> Batched:
    a = op.attrs
    return [(bt.emit(op, all_batched(bt, xs, bat), start=(0,) + a["start"],
                     stop=(bt.size,) + a["stop"], step=(1,) + a["step"])[0], True)]
