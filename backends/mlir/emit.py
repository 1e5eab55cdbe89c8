"""The op -> emitter table of the MLIR renderer: each emitter renders one IR op as
upstream-dialect ops (``linalg``, ``tensor``, ``arith``, ``math``, ``func``, and ``scf``
loops for ``scatter_add``) and names its results (``ctx.bind``). Elementwise ops and
fused kernels become ``linalg.generic`` (scalar bodies from ``scalar.py``), reductions
``linalg.generic`` with reduction iterators, matrix products ``linalg.matmul`` /
``linalg.batch_matmul``, transposes and broadcasts ``linalg.transpose`` /
``linalg.broadcast``, slices and gathers ``tensor`` ops."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from yota.ir.core import Function, Op, Value
from yota.ir.ops import OPS
from yota.ir.ops.shape import broadcastable
from yota.ir.types import TensorType

from ..failures import guard_record
from . import specfun as _specfun  # noqa: F401 (registers the special functions)
from .context import FnCtx, broadcast_map
from .scalar import ATTR_SCALAR, SCALAR, convert, emit_scalar
from .text import (
    Lines,
    affine_map,
    dense,
    elem,
    identity_map,
    location,
    memref,
    scalar,
    symbol,
    tensor,
)

Emitter = Callable[[FnCtx, Op], None]
EMITTERS: dict[str, Emitter] = {}


def emitter(*names: str) -> Callable[[Emitter], Emitter]:
    def deco(f: Emitter) -> Emitter:
        for n in names:
            EMITTERS[n] = f
        return f
    return deco


def _in(c: FnCtx, op: Op, k: int = 0) -> tuple[str, TensorType]:
    v = op.operands[k]
    return c.name(v), v.type


# -- elementwise -----------------------------------------------------------------------
def _elementwise(c: FnCtx, op: Op) -> None:
    xs = [_in(c, op, k) for k in range(len(op.operands))]
    dts = [v.dtype for v in op.operands]
    r = op.result

    def body(L: Lines, args: list[str]) -> list[str]:
        return [emit_scalar(L, op.name, args[:len(xs)], dts, r.dtype, op.attrs)]
    c.bind(r, c.elementwise(xs, r.type, body))


for _name in [*SCALAR, *ATTR_SCALAR]:
    if OPS.get(_name) is not None and OPS[_name].elementwise:
        EMITTERS[_name] = _elementwise


def iota_scalar(L: Lines, axis: int, dt: np.dtype) -> str:
    """In a ``linalg.generic`` body: the index along loop ``axis``, as ``dt``."""
    i = L.op(f"arith.index_cast {L.op(f'linalg.index {axis} : index')} : index to i64")
    return convert(L, i, np.dtype(np.int64), dt)


@emitter("iota")
def _iota(c: FnCtx, op: Op) -> None:
    r = op.result
    c.bind(r, c.elementwise([], r.type, lambda L, args: [
        iota_scalar(L, op.attrs["axis"], r.dtype)]))


@emitter("const")
def _const(c: FnCtx, op: Op) -> None:
    r = op.result
    if r.type.size == 0:  # no elements: nothing to spell
        c.bind(r, c.empty(r.type))
        return
    c.bind(r, c.L.op(f"arith.constant {dense(op.attrs['value'])} : {tensor(r.type)}", "cst"))


# -- reductions -------------------------------------------------------------------------
IDENTITY = {"sum": (0, 0, False), "prod": (1, 1, True), "max": (-np.inf, "min", False),
            "min": (np.inf, "max", True)}
COMBINE = {"sum": "add", "prod": "mul", "max": "maximum", "min": "minimum"}


def identity(kind: str, dt: np.dtype) -> object:
    """The starting value of a ``kind`` reduction in dtype ``dt``."""
    f, i, b = IDENTITY[kind]
    if dt.kind == "b":
        return b
    if dt.kind == "f":
        return f
    if isinstance(i, str):
        info = np.iinfo(dt)
        return int(info.min if i == "min" else info.max)
    return i


def combine(L: Lines, kind: str, acc: str, x: str, dt: np.dtype) -> str:
    """One reduction step. Float sums and products may be reassociated (``reassoc``, as
    the llvm backend's kernels do), so LLVM vectorizes them; max/min propagate NaN."""
    if dt.kind == "f" and kind in ("sum", "prod"):
        op = "arith.addf" if kind == "sum" else "arith.mulf"
        return L.op(f"{op} {acc}, {x} fastmath<reassoc> : {elem(dt)}")
    return emit_scalar(L, COMBINE[kind], [acc, x], [dt, dt], dt)


def reduce(c: FnCtx, x: str, t: TensorType, kind: str, axes: tuple[int, ...]) -> str:
    """``kind`` (sum, prod, max, min) of ``x`` over ``axes``."""
    kept = [a for a in range(t.ndim) if a not in axes]
    rt = t.with_shape(tuple(t.shape[a] for a in kept))
    init = c.fill(rt, identity(kind, t.dtype))

    def body(L: Lines, args: list[str]) -> list[str]:  # NumPy's acc = maximum(acc, x)
        return [combine(L, kind, args[1], args[0], t.dtype)]
    iters = ["reduction" if a in axes else "parallel" for a in range(t.ndim)]
    return c.generic([(x, t, identity_map(t.ndim))],
                     [(init, rt, affine_map(t.ndim, [f"d{a}" for a in kept]))], iters,
                     body)[0]


@emitter("sum", "prod", "max", "min")
def _reduction(c: FnCtx, op: Op) -> None:
    x, t = _in(c, op)
    c.bind(op.result, reduce(c, x, t, op.name, op.attrs["axes"]))


@emitter("sum_to")
def _sum_to(c: FnCtx, op: Op) -> None:
    x, t = _in(c, op)
    shape = op.attrs["shape"]
    lead = t.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, s in enumerate(shape)
                                      if s == 1 and t.shape[lead + i] != 1)
    r = reduce(c, x, t, "sum", axes)
    rt = t.with_shape(tuple(d for a, d in enumerate(t.shape) if a not in axes))
    c.bind(op.result, c.reshape(r, rt, shape))


@emitter("argmax", "argmin")
def _arg(c: FnCtx, op: Op) -> None:
    x, t = _in(c, op)
    axis, dt, r = op.attrs["axis"], t.dtype, op.result
    kept = [a for a in range(t.ndim) if a != axis]
    vt = t.with_shape(r.shape)
    is_max = op.name == "argmax"
    start = identity("max" if is_max else "min", dt)
    out_map = affine_map(t.ndim, [f"d{a}" for a in kept])

    def body(L: Lines, args: list[str]) -> list[str]:
        v, acc, idx = args
        e = elem(dt)
        if dt.kind == "f":  # strictly better, or the first NaN
            better = L.op(f"arith.cmpf {'ogt' if is_max else 'olt'}, {v}, {acc} : {e}")
            nan = L.op(f"arith.andi {L.op(f'arith.cmpf uno, {v}, {v} : {e}')}, "
                       f"{L.op(f'arith.cmpf ord, {acc}, {acc} : {e}')} : i1")
            better = L.op(f"arith.ori {better}, {nan} : i1")
        else:
            pred = ("ugt" if is_max else "ult") if dt.kind == "b" else ("sgt" if is_max else "slt")
            better = L.op(f"arith.cmpi {pred}, {v}, {acc} : {e}")
        pos = L.op(f"arith.index_cast {L.op(f'linalg.index {axis} : index')} : index to i64")
        return [L.op(f"arith.select {better}, {v}, {acc} : {e}"),
                L.op(f"arith.select {better}, {pos}, {idx} : i64")]
    iters = ["reduction" if a == axis else "parallel" for a in range(t.ndim)]
    res = c.generic([(x, t, identity_map(t.ndim))],
                    [(c.fill(vt, start), vt, out_map), (c.fill(r.type, 0), r.type, out_map)],
                    iters, body)
    c.bind(r, res[1])


# -- shape ops --------------------------------------------------------------------------
@emitter("reshape")
def _reshape(c: FnCtx, op: Op) -> None:
    x, t = _in(c, op)
    c.bind(op.result, c.reshape(x, t, op.attrs["shape"]))


@emitter("transpose")
def _transpose(c: FnCtx, op: Op) -> None:
    x, t = _in(c, op)
    r = op.result
    perm = op.attrs["perm"]
    if list(perm) == sorted(perm):
        c.bind(r, x)
        return
    c.bind(r, c.L.op(f"linalg.transpose ins({x} : {tensor(t)}) outs({c.empty(r.type)} : "
                     f"{tensor(r.type)}) permutation = {list(perm)}"))


@emitter("broadcast")
def _broadcast(c: FnCtx, op: Op) -> None:
    """Stretched size-1 axes are collapsed away, then ``linalg.broadcast`` adds them."""
    x, t = _in(c, op)
    r = op.result
    shape = r.shape
    lead = len(shape) - t.ndim
    kept = [i for i, s in enumerate(t.shape) if s == shape[lead + i]]
    if len(kept) == t.ndim and lead == 0:
        c.bind(r, x)
        return
    groups: list[list[int]] = []
    pending: list[int] = []
    for i in range(t.ndim):
        if i in kept:
            groups.append(pending + [i])
            pending = []
        else:
            pending.append(i)
    if pending and groups:
        groups[-1] += pending
    small = t.with_shape(tuple(t.shape[i] for i in kept))
    if len(kept) != t.ndim:
        x = c.L.op(f"tensor.collapse_shape {x} {groups} : {tensor(t)} into {tensor(small)}")
    added = [d for d in range(len(shape)) if d - lead not in kept]
    c.bind(r, c.L.op(f"linalg.broadcast ins({x} : {tensor(small)}) outs({c.empty(r.type)} : "
                     f"{tensor(r.type)}) dimensions = {added}"))
    assert broadcastable(t.shape, shape)


@emitter("slice")
def _slice(c: FnCtx, op: Op) -> None:
    x, t = _in(c, op)
    r = op.result
    if not t.shape:
        c.bind(r, x)
        return
    if r.type.size == 0:  # offsets into an empty tensor do not verify
        c.bind(r, c.empty(r.type))
        return
    a = op.attrs
    c.bind(r, c.L.op(f"tensor.extract_slice {x}{list(a['start'])} {list(r.shape)} "
                     f"{list(a['step'])} : {tensor(t)} to {tensor(r.type)}"))


@emitter("flip")
def _flip(c: FnCtx, op: Op) -> None:
    x, t = _in(c, op)
    axes = op.attrs["axes"]
    n = t.ndim
    m = affine_map(n, [f"-d{i} + {t.shape[i] - 1}" if i in axes else f"d{i}" for i in range(n)])
    c.bind(op.result, c.generic([(x, t, m)], [(c.empty(t), t, identity_map(n))],
                                ["parallel"] * n, lambda L, args: [args[0]])[0])


def _insert(c: FnCtx, x: str, t: TensorType, into: str, rt: TensorType, offsets: list[int],
            strides: list[int]) -> str:
    if t.size == 0:
        return into
    return c.L.op(f"tensor.insert_slice {x} into {into}{offsets} {list(t.shape)} {strides} : "
                  f"{tensor(t)} into {tensor(rt)}")


@emitter("pad")
def _pad(c: FnCtx, op: Op) -> None:
    x, t = _in(c, op)
    r = op.result
    if not t.shape:
        c.bind(r, x)
        return
    z = c.fill(r.type, 0)
    c.bind(r, _insert(c, x, t, z, r.type, list(op.attrs["low"]),
                      [i + 1 for i in op.attrs["interior"]]))


@emitter("concatenate")
def _concatenate(c: FnCtx, op: Op) -> None:
    r, axis = op.result, op.attrs["axis"]
    out = c.empty(r.type)
    start = 0
    for v in op.operands:
        offsets = [start if a == axis else 0 for a in range(r.ndim)]
        out = _insert(c, c.name(v), v.type, out, r.type, offsets, [1] * r.ndim)
        start += v.shape[axis]
    c.bind(r, out)


# -- matrix products ----------------------------------------------------------------------
@emitter("matmul")
def _matmul(c: FnCtx, op: Op) -> None:
    (a, ta), (b, tb) = _in(c, op, 0), _in(c, op, 1)
    r = op.result
    nb = r.ndim - 2
    if nb > 1:  # batch dimensions collapsed into one
        batch = int(np.prod(r.shape[:nb]))
        groups = [list(range(nb)), [nb], [nb + 1]]
        ta3, tb3 = ta.with_shape((batch,) + ta.shape[nb:]), tb.with_shape((batch,) + tb.shape[nb:])
        a = c.L.op(f"tensor.collapse_shape {a} {groups} : {tensor(ta)} into {tensor(ta3)}")
        b = c.L.op(f"tensor.collapse_shape {b} {groups} : {tensor(tb)} into {tensor(tb3)}")
        rt = r.type.with_shape((batch,) + r.shape[nb:])
        p = _product(c, "linalg.batch_matmul", a, ta3, b, tb3, rt)
        c.bind(r, c.L.op(f"tensor.expand_shape {p} {groups} output_shape {list(r.shape)} : "
                         f"{tensor(rt)} into {tensor(r.type)}"))
        return
    c.bind(r, _product(c, "linalg.batch_matmul" if nb else "linalg.matmul", a, ta, b, tb, r.type))


def _product(c: FnCtx, name: str, a: str, ta: TensorType, b: str, tb: TensorType,
             rt: TensorType) -> str:
    if c.executable and c.mod.blas and rt.dtype.kind == "f":
        return _gemm_call(c, a, ta, b, tb, rt)
    z = c.fill(rt, 0)
    return c.L.op(f"{name} ins({a}, {b} : {tensor(ta)}, {tensor(tb)}) outs({z} : {tensor(rt)}) "
                  f"-> {tensor(rt)}")


def _gemm_call(c: FnCtx, a: str, ta: TensorType, b: str, tb: TensorType, rt: TensorType) -> str:
    """Executable modules: the product as a call of ``yota_mlir_gemm_N(A, B, C)`` on
    contiguous buffers (``bufferization.to_buffer`` copies strided operands), which the
    runtime defines as calls of the llvm backend's BLAS GEMMs (``yota_sgemm``/``dgemm``)."""
    batch = int(np.prod(rt.shape[:-2], dtype=np.int64))
    m, n, k = rt.shape[-2], rt.shape[-1], ta.shape[-1]
    if batch * m * n == 0 or k == 0:
        return c.fill(rt, 0)
    L = c.L
    name = f"yota_mlir_gemm_{len(c.mod.gemms)}"
    c.mod.gemms.append((name, rt.dtype, batch, m, n, k))
    c.mod.decls.append(f"  func.func private @{name}({memref(ta)}, {memref(tb)}, {memref(rt)})")
    ma = L.op(f"bufferization.to_buffer {a} read_only : {tensor(ta)} to {memref(ta)}")
    mb = L.op(f"bufferization.to_buffer {b} read_only : {tensor(tb)} to {memref(tb)}")
    out = L.op(f"memref.alloc() {{alignment = 64 : i64}} : {memref(rt)}")
    L.line(f"func.call @{name}({ma}, {mb}, {out}) : ({memref(ta)}, {memref(tb)}, "
           f"{memref(rt)}) -> ()")
    return L.op(f"bufferization.to_tensor {out} restrict writable : {memref(rt)} to "
                f"{tensor(rt)}")


# -- fused kernels ----------------------------------------------------------------------------
@emitter("fused")
def _fused(c: FnCtx, op: Op) -> None:
    """The kernel body as one ``linalg.generic`` over its domain: inputs read through
    their broadcast maps, elementwise ops on scalars, reductions into outputs indexed by
    the kept axes (each body op keeps its own location)."""
    from yota.ir.ops.fused import kernel_domain

    body = c.fn.callees[op.attrs["callee"]]
    domain, axes = kernel_domain(body)
    red = set(axes or ())
    n = len(domain)
    ins = [(c.name(v), v.type, broadcast_map(b.shape, domain))
           for v, b in zip(op.operands, body.inputs, strict=True)]
    kept = [a for a in range(n) if a not in red]
    out_specs = []
    reductions = {o.result: o.name for o in body.ops if o.name in ("sum", "max", "min")}
    for v in body.outputs:
        if v in reductions:
            t = v.type
            out_specs.append((c.fill(t, identity(reductions[v], t.dtype)), t,
                              affine_map(n, [f"d{a}" for a in kept])))
        else:
            out_specs.append((c.empty(v.type), v.type, identity_map(n)))
    iters = ["reduction" if a in red else "parallel" for a in range(n)]

    def kernel(L: Lines, args: list[str]) -> list[str]:
        return _kernel_body(L, body, args, reductions)
    outer_loc = c.L.loc
    res = c.generic(ins, out_specs, iters, kernel, domain)
    c.L.loc = outer_loc
    for v, name in zip(op.results, res, strict=True):
        c.bind(v, name)


def _kernel_body(L: Lines, fn: Function, args: list[str], reductions: dict[Value, str]
                 ) -> list[str]:
    names = dict(zip(fn.inputs, args, strict=False))
    nin = len(fn.inputs)
    acc = {v: args[nin + j] for j, v in enumerate(fn.outputs)}
    saved = L.loc
    for o in fn.ops:
        L.loc = location(o.loc)
        if o.name == "broadcast":
            names[o.result] = names[o.operands[0]]
        elif o.name == "const":
            flat = np.asarray(o.attrs["value"]).reshape(-1)  # a splat (empty: never read)
            names[o.result] = L.const(flat[0] if flat.size else 0, o.result.dtype)
        elif o.name == "iota":
            names[o.result] = iota_scalar(L, o.attrs["axis"], o.result.dtype)
        elif o.name in reductions.values() and o.result in reductions:
            x = names[o.operands[0]]
            names[o.result] = combine(L, o.name, acc[o.result], x, o.result.dtype)
        else:
            names[o.result] = emit_scalar(L, o.name, [names[v] for v in o.operands],
                                          [v.dtype for v in o.operands], o.result.dtype,
                                          o.attrs)
    L.loc = saved
    return [names[v] for v in fn.outputs]


# -- guards and calls ---------------------------------------------------------------------------
def guard_ok(c: FnCtx, op: Op) -> tuple[str, str]:
    """(i1: the guard holds, i64: the guarded value's bits)."""
    x, t = _in(c, op)
    L, dt = c.L, t.dtype
    v = c.extract(x, t)
    kind, expected = op.attrs["kind"], op.attrs["expected"]
    f64, i64 = np.dtype(np.float64), np.dtype(np.int64)
    if kind == "bool":
        b = convert(L, v, dt, np.dtype(bool))
        ok = L.op(f"arith.cmpi eq, {b}, {L.const(bool(expected), np.dtype(bool))} : i1")
    elif kind == "int" and dt.kind == "f":
        tr = L.op(f"math.trunc {v} : {elem(dt)}")
        ok = L.op(f"arith.cmpf oeq, {tr}, {L.const(float(int(expected)), dt)} : {elem(dt)}")
    elif kind == "int":
        w = convert(L, v, dt, i64)
        ok = L.op(f"arith.cmpi eq, {w}, {L.const(int(expected), i64)} : i64")
    else:
        w = convert(L, v, dt, f64) if dt.kind != "f" else \
            (L.op(f"arith.extf {v} : f32 to f64") if dt.itemsize == 4 else v)
        if float(expected) != float(expected):
            ok = L.op(f"arith.cmpf uno, {w}, {w} : f64")
        else:
            ok = L.op(f"arith.cmpf oeq, {w}, {L.const(float(expected), f64)} : f64")
    return ok, _bits(L, v, dt)


def _bits(L: Lines, v: str, dt: np.dtype) -> str:
    if dt.kind == "f":
        ib = f"i{8 * dt.itemsize}"
        v = L.op(f"arith.bitcast {v} : {elem(dt)} to {ib}")
        return v if dt.itemsize == 8 else L.op(f"arith.extui {v} : {ib} to i64")
    if dt.itemsize == 8:
        return v
    return L.op(f"arith.extui {v} : {elem(dt)} to i64")


@emitter("guard")
def _guard(c: FnCtx, op: Op) -> None:
    ok, bits = guard_ok(c, op)
    if c.executable:
        failed = c.L.op(f"arith.xori {ok}, {c.L.const(True, np.dtype(bool))} : i1")
        c.record_failure(failed, guard_record(op, c.op_index), bits)
        return
    msg = f"guard: {op.attrs['kind']}(value) == {op.attrs['expected']!r} (else retrace)"
    c.L.line(f'cf.assert {ok}, "{msg}"')


@emitter("call")
def _call(c: FnCtx, op: Op) -> None:
    callee = c.fn.callees[op.attrs["callee"]]
    c.mod.render(callee)
    args = [c.name(v) for v in op.operands]
    rtypes = [tensor(v.type) for v in op.results] + (["i32", "i64"] if c.executable else [])
    n = len(rtypes)
    res = c.L.fresh("r")
    lhs = f"{res}:{n}" if n > 1 else res
    if n:
        c.L.line(f"{lhs} = func.call {symbol(callee.name)}({', '.join(args)}) : "
                 f"({', '.join(tensor(v.type) for v in op.operands)}) -> ({', '.join(rtypes)})")
    else:
        c.L.line(f"func.call {symbol(callee.name)}({', '.join(args)}) : "
                 f"({', '.join(tensor(v.type) for v in op.operands)}) -> ()")
    names = [res] if n == 1 else [f"{res}#{i}" for i in range(n)]
    for v, name in zip(op.results, names, strict=False):
        c.bind(v, name)
    if c.executable:
        c.merge_status(names[-2], names[-1])


__all__ = ["EMITTERS", "emitter", "identity", "reduce", "scalar"]
