"""Loop helpers over llvmlite's ``IRBuilder``: counted loops with loop-carried values,
and loop nests over static shapes."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import llvmlite.ir as ir

from .types import I64, i64

Body = Callable[[ir.Value, list[ir.Value]], Sequence[ir.Value]]


def loop(b: ir.IRBuilder, lo: ir.Value | int, hi: ir.Value | int, step: int,
         carried: Sequence[ir.Value], body: Body, name: str = "loop") -> list[ir.Value]:
    """``for i in range(lo, hi, step)`` (step > 0); ``body(i, vals)`` returns the next
    loop-carried values. Returns the carried values after the loop."""
    lo = i64(lo) if isinstance(lo, int) else lo
    hi = i64(hi) if isinstance(hi, int) else hi
    pre = b.block
    head = b.append_basic_block(name)
    exit_ = b.append_basic_block(name + ".end")
    b.cbranch(b.icmp_signed("<", lo, hi), head, exit_)
    b.position_at_end(head)
    i = b.phi(I64, name="i")
    i.add_incoming(lo, pre)
    phis = []
    for v in carried:
        p = b.phi(v.type)
        p.add_incoming(v, pre)
        phis.append(p)
    new = list(body(i, phis))
    nxt = b.add(i, i64(step))
    latch = b.block
    i.add_incoming(nxt, latch)
    for p, v in zip(phis, new, strict=True):
        p.add_incoming(v, latch)
    b.cbranch(b.icmp_signed("<", nxt, hi), head, exit_)
    b.position_at_end(exit_)
    out = []
    for v0, v1 in zip(carried, new, strict=True):
        p = b.phi(v0.type)
        p.add_incoming(v0, pre)
        p.add_incoming(v1, latch)
        out.append(p)
    return out


def nest(b: ir.IRBuilder, shape: Sequence[int],
         body: Callable[[list[ir.Value]], None], name: str = "n") -> None:
    """Run ``body(indices)`` for every index of the static ``shape`` (row-major)."""
    def level(k: int, idx: list[ir.Value]) -> None:
        if k == len(shape):
            body(idx)
            return
        if shape[k] == 1:
            level(k + 1, idx + [i64(0)])
            return
        def step(i: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
            level(k + 1, idx + [i])
            return []
        loop(b, 0, shape[k], 1, [], step, name=f"{name}{k}")
    if all(s > 0 for s in shape):
        level(0, [])


def linear(b: ir.IRBuilder, idx: Sequence[ir.Value], strides: Sequence[int],
           offset: int = 0) -> ir.Value:
    """``offset + sum(idx[k] * strides[k])`` as an i64 (terms with stride 0 dropped)."""
    acc: ir.Value = i64(offset)
    for i, s in zip(idx, strides, strict=True):
        if s:
            acc = b.add(acc, b.mul(i, i64(s)) if s != 1 else i)
    return acc
