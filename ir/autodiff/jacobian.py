"""Whole Jacobians and Hessians as one program each: basis vectors pushed forward (jvp) or
pulled back (vjp), all of them at once through ``vmap`` (never a loop over rows).

``jacfwd(fn, wrt, outs)`` and ``jacrev(fn, wrt, outs)`` return a function of ``fn``'s
inputs whose outputs are the Jacobian blocks ``d outs[j] / d inputs[wrt[k]]``, one per
pair in the order ``(j, k)`` (``j`` outer), each of shape ``out.shape + input.shape``.
The basis (the rows of an identity matrix) is made inside the program from ``iota``s:
nothing but the inputs is read. ``jacfwd`` costs one batched jvp over the inputs'
elements, ``jacrev`` one batched vjp over the outputs'. ``hessian(fn, wrt)`` is
``jacfwd`` of the gradient (forward over reverse); ``hvp(fn, wrt)`` is one jvp of it.

>>> import numpy as np
>>> from yota.ir import Builder, TensorType, run
>>> b = Builder("f")
>>> x = b.input(TensorType("f64", (2,)), "x")
>>> f = b.build([b.mul(x, x)])
>>> [j.tolist() for j in run(jacfwd(f, [0], [0]), np.array([1.0, 3.0]))]
[[[2.0, 0.0], [0.0, 6.0]]]
>>> [j.tolist() for j in run(jacrev(f, [0], [0]), np.array([1.0, 3.0]))]
[[[2.0, 0.0], [0.0, 6.0]]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..core import Builder, Function, Op, Value
from ..ops import iota
from ..types import is_float
from ..verifier import maybe_verify
from ..vmap import vmap
from .helpers import add
from .jvp import jvp
from .registry import AutodiffError
from .sweep import vjp


def jacfwd(fn: Function, wrt: Sequence[int], outs: Sequence[int]) -> Function:
    """The Jacobian blocks of outputs ``outs`` by inputs ``wrt``, by batched jvps."""
    _check(fn, wrt, outs)
    j = jvp(fn, wrt)
    n = len(fn.inputs)
    sizes = [fn.inputs[i].type.size for i in wrt]
    total = sum(sizes)
    tangent_of = {o: len(fn.outputs) + k for k, o in enumerate(j.attrs["tangent_outputs"])}
    picked = j.replace(outputs=[j.outputs[tangent_of[o]] for o in outs],
                       output_labels=[j.output_labels[tangent_of[o]] for o in outs])
    batched = vmap(picked, [None] * n + [0] * len(wrt), max(total, 1))
    b = _wrapper(fn, "jacfwd")
    basis = [_basis(b, total, off, fn.inputs[i]) for i, off in zip(wrt, _offsets(sizes),
                                                                   strict=True)]
    ident = {basis[0]} if len(wrt) == 1 else set()  # then the whole identity
    ts = _inline(b, batched, list(b.inputs) + basis, ident)
    blocks, labels = [], []
    for t, o in zip(ts, outs, strict=True):
        out = fn.outputs[o]
        for i, off, size in zip(wrt, _offsets(sizes), sizes, strict=True):
            x = fn.inputs[i]
            rows = _rows(b, t, off, size, total)  # [size, *out.shape]
            blk = b.reshape_to(rows, x.shape + out.shape)
            perm = tuple(range(x.ndim, x.ndim + out.ndim)) + tuple(range(x.ndim))
            blocks.append(_permute(b, blk, perm))
            labels.append(_label(fn, o, i))
    return maybe_verify(b.build(blocks, labels))


def jacrev(fn: Function, wrt: Sequence[int], outs: Sequence[int]) -> Function:
    """The Jacobian blocks of outputs ``outs`` by inputs ``wrt``, by batched vjps."""
    _check(fn, wrt, outs)
    sb = Builder(f"{fn.name}_pairing")
    sb.inputs, sb.input_labels = list(fn.inputs), list(fn.input_labels)
    sb.ops, sb.callees = list(fn.ops), dict(fn.callees)
    total: Value | None = None
    for o in outs:
        y = fn.outputs[o]
        ct = sb.input(y.type, f"cotangent {_label(fn, o, None)}")
        term = sb.convert_to(sb.sum(sb.mul(y, ct), axes=tuple(range(y.ndim))), "f64")
        total = term if total is None else add(sb, total, term)
    assert total is not None
    g = vjp(sb.build([total]), list(wrt))
    grads = dict(zip(g.attrs["grads"], g.outputs[1:], strict=True))
    n = len(fn.inputs)
    sizes = [fn.outputs[o].type.size for o in outs]
    m = sum(sizes)
    picked = g.replace(outputs=[grads[i] for i in wrt if i in grads],
                       output_labels=[f"grad {i}" for i in wrt if i in grads])
    batched = vmap(picked, [None] * n + [0] * len(outs), max(m, 1))
    b = _wrapper(fn, "jacrev")
    basis = [_basis(b, m, off, fn.outputs[o]) for o, off in zip(outs, _offsets(sizes),
                                                                strict=True)]
    gs = dict(zip([i for i in wrt if i in grads], _inline(b, batched, list(b.inputs) + basis),
                  strict=True))
    blocks, labels = [], []
    for o, off, size in zip(outs, _offsets(sizes), sizes, strict=True):
        out = fn.outputs[o]
        for i in wrt:
            x = fn.inputs[i]
            if i not in gs:
                blocks.append(b.const(0.0, x.dtype, out.shape + x.shape))
            else:
                blocks.append(b.reshape_to(_rows(b, gs[i], off, size, m), out.shape + x.shape))
            labels.append(_label(fn, o, i))
    return maybe_verify(b.build(blocks, labels))


def hessian(fn: Function, wrt: Sequence[int]) -> Function:
    """The Hessian blocks ``d² fn / d inputs[wrt[j]] d inputs[wrt[k]]`` of a scalar ``fn``
    (forward over reverse), in the order ``(j, k)``, shapes ``x_j.shape + x_k.shape``."""
    g = _grads(fn, wrt)
    out = jacfwd(g, wrt, list(range(len(wrt))))
    return out.replace(name=f"{fn.name}_hessian")


def hvp(fn: Function, wrt: Sequence[int]) -> Function:
    """``H v``: a function of ``fn``'s inputs and one ``v`` per input in ``wrt`` returning
    the Hessian-vector product for each input in ``wrt``."""
    g = _grads(fn, wrt)
    j = jvp(g, wrt)
    k = len(g.outputs)
    return j.replace(name=f"{fn.name}_hvp", outputs=j.outputs[k:],
                     output_labels=[f"hvp {_label(fn, None, i)}" for i in wrt])


def _grads(fn: Function, wrt: Sequence[int]) -> Function:
    """``vjp(fn, wrt)`` with one gradient output per ``wrt`` input (zeros where none)."""
    _check(fn, wrt, [0])
    g = vjp(fn, list(wrt))
    have = dict(zip(g.attrs["grads"], g.outputs[1:], strict=True))
    b = Builder(g.name)
    b.inputs, b.input_labels = list(g.inputs), list(g.input_labels)
    b.ops, b.callees = list(g.ops), dict(g.callees)
    outs = [have[i] if i in have else b.const(0.0, fn.inputs[i].dtype, fn.inputs[i].shape)
            for i in wrt]
    return b.build(outs, [f"grad {_label(fn, None, i)}" for i in wrt])


def _check(fn: Function, wrt: Sequence[int], outs: Sequence[int]) -> None:
    for i in wrt:
        if not 0 <= i < len(fn.inputs) or not is_float(fn.inputs[i].dtype):
            raise AutodiffError(f"a Jacobian by input {i} of @{fn.name}: it is not a float "
                                "input")
    for o in outs:
        if not 0 <= o < len(fn.outputs) or not is_float(fn.outputs[o].dtype):
            raise AutodiffError(f"a Jacobian of output {o} of @{fn.name}: it is not a float "
                                "output")
    if not wrt or not outs:
        raise AutodiffError(f"a Jacobian of @{fn.name} needs an input and an output")


def _offsets(sizes: Sequence[int]) -> list[int]:
    out, at = [], 0
    for s in sizes:
        out.append(at)
        at += s
    return out


def _wrapper(fn: Function, what: str) -> Builder:
    b = Builder(f"{fn.name}_{what}")
    for v, lab in zip(fn.inputs, fn.input_labels, strict=True):
        b.input(v.type, lab)
    return b


def _basis(b: Builder, total: int, off: int, like: Value) -> Value:
    """Rows ``off .. off + size`` of the ``total x total`` identity, as a batch of
    ``like``-shaped arrays: ``[total, *like.shape]``."""
    size = like.type.size
    e = iota.eye(b, (total, size), -off, like.dtype)
    return b.reshape_to(e, (total,) + like.shape)


def _rows(b: Builder, t: Value, off: int, size: int, total: int) -> Value:
    """Rows ``off .. off + size`` of the batch ``t`` (batch axis 0)."""
    if off == 0 and size == total:
        return t
    return b.slice(t, start=(off,) + (0,) * (t.ndim - 1), stop=(off + size,) + t.shape[1:],
                   step=(1,) * t.ndim)


def _permute(b: Builder, x: Value, perm: tuple[int, ...]) -> Value:
    if perm == tuple(range(x.ndim)):
        return x
    big = [p for p in perm if x.shape[p] != 1]
    if big == sorted(big):
        return b.reshape_to(x, tuple(x.shape[p] for p in perm))
    return b.transpose(x, perm=perm)


def _inline(b: Builder, fn: Function, operands: Sequence[Value],
            ident: set[Value] | None = None) -> list[Value]:
    """Copy ``fn``'s ops into ``b`` reading ``operands`` (fresh results); its outputs.
    ``ident``: operands that hold an identity matrix ``[N, ...]`` (the basis of a
    forward Jacobian): a product by one of them, seen through reshapes, is its other
    factor (a first linear layer ``W x`` pushes ``W Iᵀ``: no GEMM by the identity)."""
    env: dict[Value, Value] = dict(zip(fn.inputs, operands, strict=True))
    ident = set(ident or ())
    for op in fn.ops:
        xs = [env[v] for v in op.operands]
        same = _identity_product(op, xs, ident)
        if same is not None:
            env[op.results[0]] = same
            continue
        new = op.replace(operands=xs, results=[Value(r.type) for r in op.results])
        env.update(zip(op.results, new.results, strict=True))
        b.ops.append(new)
        if op.name in ("reshape", "transpose") and xs[0] in ident and _square(new.result):
            ident.add(new.result)
    b.callees.update(fn.callees)
    return [env[v] for v in fn.outputs]


def _square(v: Value) -> bool:
    """``[N, ...]`` with N elements after the first axis (an identity can be so shaped)."""
    return v.ndim >= 1 and math.prod(v.shape[1:]) == v.shape[0]


def _identity_product(op: Op, xs: list[Value], ident: set[Value]) -> Value | None:
    if op.name != "matmul" or xs[0].ndim != 2:
        return None
    x, y = xs
    if x in ident and y.type == op.results[0].type:
        return y
    if y in ident and x.type == op.results[0].type:
        return x
    return None


def _label(fn: Function, o: int | None, i: int | None) -> str:
    out = (fn.output_labels[o] or f"output {o}") if o is not None else ""
    inp = (fn.input_labels[i] or f"%{i}") if i is not None else ""
    return f"d {out} / d {inp}" if o is not None and i is not None else out or inp

