"""LLVM types for Yota dtypes, constants, and the module-level helpers every emitter uses
(declaring intrinsics and external functions once)."""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir
import numpy as np

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
F64 = ir.DoubleType()
PTR = ir.PointerType()
VOID = ir.VoidType()

BOOL = np.dtype(np.bool_)


def reg_type(dt: np.dtype) -> ir.Type:
    """The type of a value of ``dt`` in registers (bool is ``i1``)."""
    dt = np.dtype(dt)
    if dt.kind == "b":
        return I1
    if dt.kind in "iu":
        return ir.IntType(8 * dt.itemsize)
    return F32 if dt.itemsize == 4 else F64


def mem_type(dt: np.dtype) -> ir.Type:
    """The type of an element of ``dt`` in memory (bool is a byte)."""
    return I8 if np.dtype(dt).kind == "b" else reg_type(dt)


def vec(t: ir.Type, n: int) -> ir.VectorType:
    return ir.VectorType(t, n)


def const(t: ir.Type, value: Any) -> ir.Constant:
    """A scalar constant of type ``t``; a vector type gives a splat."""
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, [const(t.element, value)] * t.count)
    if isinstance(t, ir.IntType):
        v = int(value)
        if t.width == 1:
            return ir.Constant(t, 1 if v else 0)
        v &= (1 << t.width) - 1
        return ir.Constant(t, v)
    return ir.Constant(t, float(value))


def i64(v: int) -> ir.Constant:
    return ir.Constant(I64, int(v))


def mangle(t: ir.Type) -> str:
    """Intrinsic name suffix of a type (``v8f32``, ``f64``, ``i32``, ``p0``, ``v8p0``)."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{mangle(t.element)}"
    if isinstance(t, ir.PointerType):
        return "p0"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    return "f32" if isinstance(t, ir.FloatType) else "f64"


def declare(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    """The function ``name`` of the module, declared on first use."""
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args), name)
    return fn


def intrinsic(module: ir.Module, base: str, ret: ir.Type, args: list[ir.Type],
              overload: list[ir.Type] | None = None) -> ir.Function:
    """An overloaded LLVM intrinsic such as ``llvm.fabs.v8f32``."""
    tys = overload if overload is not None else [ret]
    name = base + "".join("." + mangle(t) for t in tys)
    return declare(module, name, ret, args)
