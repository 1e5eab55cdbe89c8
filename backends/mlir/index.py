"""``gather``, ``scatter_add``, ``scatter`` and ``update_slice``: a ``linalg.generic`` whose body reads with
``tensor.extract`` at the gathered position, and ``scf.for`` loops that add each update
into (or write it to) the result with ``tensor.extract`` / ``tensor.insert``;
``tensor.insert_slice`` for a slice's update.

Negative indices count from the end. Positions are clamped into the axis so no access
is ever out of bounds; in an executable module each index array is first checked (the
first index outside its axis becomes the status, as the llvm backend reports it); the
export assumes indices in range, as NumPy's own callers must."""

from __future__ import annotations

import numpy as np
from yota.ir.core import Op
from yota.ir.types import BOOL, TensorType

from ..failures import index_record
from .context import FnCtx
from .emit import emitter
from .scalar import emit_scalar
from .text import Lines, affine_map, elem, identity_map, tensor

I64 = np.dtype(np.int64)


def _position(L: Lines, i: str, dt: np.dtype, size: int) -> str:
    """The index value ``i`` (a negative one from the end), clamped into [0, size)."""
    if dt != I64:
        i = L.op(f"arith.extsi {i} : {elem(dt)} to i64")
    n = L.const(size, I64)
    neg = L.op(f"arith.cmpi slt, {i}, {L.const(0, I64)} : i64")
    j = L.op(f"arith.select {neg}, {L.op(f'arith.addi {i}, {n} : i64')}, {i} : i64")
    j = L.op(f"arith.maxsi {j}, {L.const(0, I64)} : i64")
    j = L.op(f"arith.minsi {j}, {L.const(max(size - 1, 0), I64)} : i64")
    return L.op(f"arith.index_cast {j} : i64 to index")


def _check(c: FnCtx, op: Op, m: int, size: int, first: int = 1) -> None:
    """Executable modules: the first index of array ``m`` (operand ``first + m``) outside
    an axis of ``size``."""
    v = op.operands[first + m]
    t = v.type
    f = TensorType(BOOL, ())
    z = TensorType(I64, ())
    n = t.ndim

    def body(L: Lines, args: list[str]) -> list[str]:
        i, flag, val = args
        if v.dtype != I64:
            i = L.op(f"arith.extsi {i} : {elem(v.dtype)} to i64")
        lo = L.op(f"arith.cmpi slt, {i}, {L.const(-size, I64)} : i64")
        hi = L.op(f"arith.cmpi sge, {i}, {L.const(size, I64)} : i64")
        bad = L.op(f"arith.ori {lo}, {hi} : i1")
        fresh = L.op(f"arith.xori {flag}, {L.const(True, np.dtype(bool))} : i1")
        take = L.op(f"arith.andi {bad}, {fresh} : i1")
        return [L.op(f"arith.ori {flag}, {bad} : i1"),
                L.op(f"arith.select {take}, {i}, {val} : i64")]
    scal = affine_map(n, [])
    flag, val = c.generic([(c.name(v), t, identity_map(n))],
                          [(c.fill(f, False), f, scal), (c.fill(z, 0), z, scal)],
                          ["reduction"] * n, body)
    L = c.L
    c.record_failure(L.op(f"tensor.extract {flag}[] : tensor<i1>"),
                     index_record(op, c.op_index, m), L.op(f"tensor.extract {val}[] : "
                                                           "tensor<i64>"))


@emitter("gather")
def _gather(c: FnCtx, op: Op) -> None:
    x, idx, r = op.operands[0], op.operands[1:], op.result
    a, k = op.attrs["axis"], len(op.operands) - 1
    sizes = [x.shape[a + m] for m in range(k)]
    if c.executable:
        for m, s in enumerate(sizes):
            _check(c, op, m, s)
    if 0 in sizes:  # nothing to read: every index fails (or there is none)
        c.bind(r, c.fill(r.type, 0))
        return
    n, ni = r.ndim, idx[0].ndim
    imap = affine_map(n, [f"d{a + j}" for j in range(ni)])
    ins = [(c.name(v), v.type, imap) for v in idx]
    xt, xs = x.type, c.name(x)

    def body(L: Lines, args: list[str]) -> list[str]:
        pos = [L.op(f"linalg.index {d} : index") for d in range(a)]
        pos += [_position(L, args[m], idx[m].dtype, sizes[m]) for m in range(k)]
        pos += [L.op(f"linalg.index {a + ni + t} : index") for t in range(xt.ndim - a - k)]
        return [L.op(f"tensor.extract {xs}[{', '.join(pos)}] : {tensor(xt)}")]
    c.bind(r, c.generic(ins, [(c.empty(r.type), r.type, identity_map(n))],
                        ["parallel"] * n, body)[0])


@emitter("scatter_add", "scatter")
def _scatter(c: FnCtx, op: Op) -> None:
    """``scatter_add(u, i...)``: zeros plus each update at its position (repeats add up);
    ``scatter(x, u, i...)``: ``x`` with each update written (the last repeat wins)."""
    first = 1 if op.name == "scatter_add" else 2
    u, r = op.operands[first - 1], op.result
    a, k = op.attrs["axis"], len(op.operands) - first
    sizes = [r.shape[a + m] for m in range(k)]
    if c.executable:
        for m, s in enumerate(sizes):
            _check(c, op, m, s, first)
    out = c.fill(r.type, 0) if op.name == "scatter_add" else c.name(op.operands[0])
    if 0 in sizes or u.type.size == 0:
        c.bind(r, out)
        return
    c.bind(r, _loops(c, op, out, sizes, first))


@emitter("update_slice")
def _update_slice(c: FnCtx, op: Op) -> None:
    """``x`` with ``x[start:stop:step] = u``: ``tensor.insert_slice``."""
    (x, u), r = op.operands, op.result
    if not r.shape:
        c.bind(r, c.name(u))
        return
    if u.type.size == 0:
        c.bind(r, c.name(x))
        return
    a = op.attrs
    c.bind(r, c.L.op(f"tensor.insert_slice {c.name(u)} into {c.name(x)}{list(a['start'])} "
                     f"{list(u.shape)} {list(a['step'])} : {tensor(u.type)} into "
                     f"{tensor(r.type)}"))


def _loops(c: FnCtx, op: Op, init: str, sizes: list[int], first: int) -> str:
    """``scf.for`` over every update element, carrying the result tensor."""
    u, idx, r = op.operands[first - 1], op.operands[first:], op.result
    a, k, ni = op.attrs["axis"], len(sizes), op.operands[first].ndim
    L, rt = c.L, tensor(r.type)
    zero, one = L.index(0), L.index(1)
    ivs, carried, results = [], init, []
    for d in u.shape:
        iv, acc, res = L.fresh("i"), L.fresh("acc"), L.fresh("s")
        L.line(f"{res} = scf.for {iv} = {zero} to {L.index(d)} step {one} "
               f"iter_args({acc} = {carried}) -> ({rt}) {{")
        L.indent += "  "
        ivs.append(iv)
        results.append(res)
        carried = acc
    upd = L.op(f"tensor.extract {c.name(u)}[{', '.join(ivs)}] : {tensor(u.type)}")
    pos = ivs[:a]
    for m in range(k):
        i = L.op(f"tensor.extract {c.name(idx[m])}[{', '.join(ivs[a:a + ni])}] : "
                 f"{tensor(idx[m].type)}")
        pos.append(_position(L, i, idx[m].dtype, sizes[m]))
    pos += ivs[a + ni:]
    where = ", ".join(pos)
    new = upd
    if op.name == "scatter_add":
        old = L.op(f"tensor.extract {carried}[{where}] : {rt}")
        new = emit_scalar(L, "add", [old, upd], [r.dtype] * 2, r.dtype)
    val = L.op(f"tensor.insert {new} into {carried}[{where}] : {rt}")
    for res in reversed(results):
        L.line(f"scf.yield {val} : {rt}")
        L.indent = L.indent[:-2]
        L.line("}")
        val = res
    return val
