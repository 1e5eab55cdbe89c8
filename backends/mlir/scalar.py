"""The scalar half of the op -> emitter table: each elementwise op on scalars, as
``arith``/``math`` ops in a ``linalg.generic`` body, with NumPy's semantics (the llvm
backend's ``vecmath`` defines the same ones: NaN-propagating extrema, Python-signed
floor division and modulo, 0 for an integer division by zero, half-to-even rounding).

An emitter is ``emit(lines, operands, operand dtypes, result dtype) -> SSA name``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from yota.ir.errors import UnsupportedError

from .text import Lines, elem

Scalar = Callable[[Lines, list[str], list[np.dtype], np.dtype], str]
SCALAR: dict[str, Scalar] = {}
# ops whose scalar form depends on their attributes: emit(lines, xs, dts, out, attrs)
ATTR_SCALAR: dict[str, Callable[..., str]] = {}


def scalar_op(name: str) -> Callable[[Scalar], Scalar]:
    def deco(f: Scalar) -> Scalar:
        SCALAR[name] = f
        return f
    return deco


def emit_scalar(L: Lines, name: str, xs: list[str], dts: list[np.dtype], out: np.dtype,
                attrs: dict[str, object] | None = None) -> str:
    if name in ATTR_SCALAR:
        return ATTR_SCALAR[name](L, xs, [np.dtype(d) for d in dts], np.dtype(out), attrs or {})
    if name not in SCALAR:
        raise UnsupportedError(f"the MLIR export has no scalar form of op '{name}'")
    return SCALAR[name](L, xs, [np.dtype(d) for d in dts], np.dtype(out))


def _k(dt: np.dtype) -> str:
    return np.dtype(dt).kind


def _bin(L: Lines, op: str, a: str, b: str, dt: np.dtype) -> str:
    return L.op(f"{op} {a}, {b} : {elem(dt)}")


def _un(L: Lines, op: str, a: str, dt: np.dtype) -> str:
    return L.op(f"{op} {a} : {elem(dt)}")


def select(L: Lines, c: str, a: str, b: str, dt: np.dtype) -> str:
    return L.op(f"arith.select {c}, {a}, {b} : {elem(dt)}")


def fcmp(L: Lines, pred: str, a: str, b: str, dt: np.dtype) -> str:
    return L.op(f"arith.cmpf {pred}, {a}, {b} : {elem(dt)}")


def icmp(L: Lines, pred: str, a: str, b: str, dt: np.dtype) -> str:
    return L.op(f"arith.cmpi {pred}, {a}, {b} : {elem(dt)}")


# -- math functions ------------------------------------------------------------------
_MATH = {"exp": "math.exp", "expm1": "math.expm1", "log": "math.log", "log1p": "math.log1p",
         "log2": "math.log2", "sqrt": "math.sqrt", "sin": "math.sin", "cos": "math.cos",
         "tan": "math.tan", "tanh": "math.tanh", "sinh": "math.sinh", "cosh": "math.cosh",
         "arctan": "math.atan", "arcsin": "math.asin", "arccos": "math.acos",
         "floor": "math.floor", "ceil": "math.ceil", "round": "math.roundeven"}


def _math(fn: str) -> Scalar:
    return lambda L, xs, dts, out: _un(L, fn, xs[0], out)


for _name, _fn in _MATH.items():
    SCALAR[_name] = _math(_fn)


@scalar_op("reciprocal")
def _reciprocal(L: Lines, xs: list[str], dts: list[np.dtype], out: np.dtype) -> str:
    return _bin(L, "arith.divf", L.const(1.0, out), xs[0], out)


@scalar_op("neg")
def _neg(L: Lines, xs: list[str], dts: list[np.dtype], out: np.dtype) -> str:
    if _k(out) == "f":
        return _un(L, "arith.negf", xs[0], out)
    return _bin(L, "arith.subi", L.const(0, out), xs[0], out)


@scalar_op("abs")
def _abs(L: Lines, xs: list[str], dts: list[np.dtype], out: np.dtype) -> str:
    if _k(out) == "f":
        return _un(L, "math.absf", xs[0], out)
    zero = L.const(0, out)  # x < 0 ? 0 - x : x (math.absi has no LLVM lowering)
    neg = _bin(L, "arith.subi", zero, xs[0], out)
    return select(L, icmp(L, "slt", xs[0], zero, out), neg, xs[0], out)


@scalar_op("sign")
def _sign(L: Lines, xs: list[str], dts: list[np.dtype], out: np.dtype) -> str:
    x, z = xs[0], L.const(0, out)
    if _k(out) == "f":  # x > 0 ? 1 : x < 0 ? -1 : x == 0 ? 0 : x (NaN stays NaN)
        r = select(L, fcmp(L, "oeq", x, z, out), z, x, out)
        r = select(L, fcmp(L, "olt", x, z, out), L.const(-1.0, out), r, out)
        return select(L, fcmp(L, "ogt", x, z, out), L.const(1.0, out), r, out)
    gt = L.op(f"arith.extui {icmp(L, 'sgt', x, z, out)} : i1 to {elem(out)}")
    lt = L.op(f"arith.extui {icmp(L, 'slt', x, z, out)} : i1 to {elem(out)}")
    return _bin(L, "arith.subi", gt, lt, out)


@scalar_op("square")
def _square(L: Lines, xs: list[str], dts: list[np.dtype], out: np.dtype) -> str:
    return _bin(L, "arith.mulf" if _k(out) == "f" else "arith.muli", xs[0], xs[0], out)


@scalar_op("isnan")
def _isnan(L: Lines, xs: list[str], dts: list[np.dtype], out: np.dtype) -> str:
    return fcmp(L, "uno", xs[0], xs[0], dts[0])


@scalar_op("isinf")
def _isinf(L: Lines, xs: list[str], dts: list[np.dtype], out: np.dtype) -> str:
    a = _un(L, "math.absf", xs[0], dts[0])
    return fcmp(L, "oeq", a, L.const(np.inf, dts[0]), dts[0])


@scalar_op("isfinite")
def _isfinite(L: Lines, xs: list[str], dts: list[np.dtype], out: np.dtype) -> str:
    a = _un(L, "math.absf", xs[0], dts[0])
    return fcmp(L, "olt", a, L.const(np.inf, dts[0]), dts[0])


@scalar_op("not")
def _not(L: Lines, xs: list[str], dts: list[np.dtype], out: np.dtype) -> str:
    return _bin(L, "arith.xori", xs[0], L.const(True, out), out)


# -- binary ----------------------------------------------------------------------------
def _arith(fop: str, iop: str, bop: str | None) -> Scalar:
    def emit(L: Lines, xs: list[str], dts: list[np.dtype], out: np.dtype) -> str:
        k = _k(out)
        name = fop if k == "f" else bop if k == "b" else iop
        if name is None:
            raise UnsupportedError(f"no MLIR form of {fop} on {out}")
        return _bin(L, name, xs[0], xs[1], out)
    return emit


SCALAR["add"] = _arith("arith.addf", "arith.addi", "arith.ori")
SCALAR["sub"] = _arith("arith.subf", "arith.subi", None)
SCALAR["mul"] = _arith("arith.mulf", "arith.muli", "arith.andi")
SCALAR["div"] = _arith("arith.divf", "arith.divsi", None)
SCALAR["and"] = _arith("arith.andi", "arith.andi", "arith.andi")
SCALAR["or"] = _arith("arith.ori", "arith.ori", "arith.ori")
SCALAR["xor"] = _arith("arith.xori", "arith.xori", "arith.xori")
SCALAR["arctan2"] = lambda L, xs, dts, out: _bin(L, "math.atan2", xs[0], xs[1], out)


def _extremum(is_max: bool) -> Scalar:
    def emit(L: Lines, xs: list[str], dts: list[np.dtype], out: np.dtype) -> str:
        a, b = xs
        k = _k(out)
        if k == "b":
            return _bin(L, "arith.ori" if is_max else "arith.andi", a, b, out)
        if k == "f":  # as NumPy: (a > b || isnan(a)) ? a : b (equal zeros give b)
            gt = fcmp(L, "ogt" if is_max else "olt", a, b, out)
            keep = _bin(L, "arith.ori", gt, fcmp(L, "uno", a, a, out), np.dtype(bool))
            return select(L, keep, a, b, out)
        return _bin(L, "arith.maxsi" if is_max else "arith.minsi", a, b, out)
    return emit


SCALAR["maximum"] = _extremum(True)
SCALAR["minimum"] = _extremum(False)

_FPRED = {"lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge", "eq": "oeq", "ne": "une"}
_IPRED = {"lt": "slt", "le": "sle", "gt": "sgt", "ge": "sge", "eq": "eq", "ne": "ne"}
_UPRED = {"lt": "ult", "le": "ule", "gt": "ugt", "ge": "uge", "eq": "eq", "ne": "ne"}


def _compare(op: str) -> Scalar:
    def emit(L: Lines, xs: list[str], dts: list[np.dtype], out: np.dtype) -> str:
        k = _k(dts[0])
        if k == "f":
            return fcmp(L, _FPRED[op], xs[0], xs[1], dts[0])
        return icmp(L, (_UPRED if k == "b" else _IPRED)[op], xs[0], xs[1], dts[0])
    return emit


for _op in _FPRED:
    SCALAR[_op] = _compare(_op)


@scalar_op("select")
def _select(L: Lines, xs: list[str], dts: list[np.dtype], out: np.dtype) -> str:
    return select(L, xs[0], xs[1], xs[2], out)


def _int_divmod(L: Lines, a: str, b: str, dt: np.dtype) -> tuple[str, str]:
    """Python's floor division and modulo; 0 for a zero divisor (as NumPy gives); the
    divisor of MIN // -1 is replaced by 1 so no division traps."""
    bool_ = np.dtype(bool)
    zero, one = L.const(0, dt), L.const(1, dt)
    bits = 8 * dt.itemsize
    is0 = icmp(L, "eq", b, zero, dt)
    ovf = _bin(L, "arith.andi", icmp(L, "eq", a, L.const(-(1 << (bits - 1)), dt), dt),
               icmp(L, "eq", b, L.const(-1, dt), dt), bool_)
    d = select(L, _bin(L, "arith.ori", is0, ovf, bool_), one, b, dt)
    q, r = _bin(L, "arith.divsi", a, d, dt), _bin(L, "arith.remsi", a, d, dt)
    differ = _bin(L, "arith.xori", icmp(L, "slt", r, zero, dt), icmp(L, "slt", b, zero, dt),
                  bool_)
    adj = _bin(L, "arith.andi", icmp(L, "ne", r, zero, dt), differ, bool_)
    q = select(L, adj, _bin(L, "arith.subi", q, one, dt), q, dt)
    r = select(L, adj, _bin(L, "arith.addi", r, b, dt), r, dt)
    return select(L, is0, zero, q, dt), select(L, is0, zero, r, dt)


def copysign(L: Lines, mag: str, sign: str, dt: np.dtype) -> str:
    """``mag`` with the sign bit of ``sign``, on the bits (math.copysign has no LLVM
    lowering in MLIR 22)."""
    it = f"i{8 * dt.itemsize}"
    top = -(1 << (8 * dt.itemsize - 1))
    m = L.op(f"arith.bitcast {mag} : {elem(dt)} to {it}")
    s = L.op(f"arith.bitcast {sign} : {elem(dt)} to {it}")
    s = L.op(f"arith.andi {s}, {L.op(f'arith.constant {top} : {it}', 'c')} : {it}")
    m = L.op(f"arith.andi {m}, {L.op(f'arith.constant {-top - 1} : {it}', 'c')} : {it}")
    return L.op(f"arith.bitcast {L.op(f'arith.ori {m}, {s} : {it}')} : {it} to {elem(dt)}")


def _float_divmod(L: Lines, a: str, b: str, dt: np.dtype) -> tuple[str, str]:
    """NumPy's ``npy_floor_divide`` and ``npy_remainder`` (fmod-based, Python signs)."""
    bool_ = np.dtype(bool)
    z, one = L.const(0.0, dt), L.const(1.0, dt)
    mod = _bin(L, "arith.remf", a, b, dt)
    div = _bin(L, "arith.divf", _bin(L, "arith.subf", a, mod, dt), b, dt)
    mod_nz = fcmp(L, "une", mod, z, dt)
    differ = _bin(L, "arith.xori", fcmp(L, "olt", b, z, dt), fcmp(L, "olt", mod, z, dt), bool_)
    adj = _bin(L, "arith.andi", mod_nz, differ, bool_)
    m = select(L, adj, _bin(L, "arith.addf", mod, b, dt), mod, dt)
    m = select(L, mod_nz, m, copysign(L, z, b, dt), dt)
    div = select(L, adj, _bin(L, "arith.subf", div, one, dt), div, dt)
    fl = _un(L, "math.floor", div, dt)
    half = fcmp(L, "ogt", _bin(L, "arith.subf", div, fl, dt), L.const(0.5, dt), dt)
    fl = select(L, half, _bin(L, "arith.addf", fl, one, dt), fl, dt)
    q = _bin(L, "arith.divf", a, b, dt)
    fl = select(L, fcmp(L, "une", div, z, dt), fl, copysign(L, z, q, dt), dt)
    b0 = fcmp(L, "oeq", b, z, dt)
    return select(L, b0, q, fl, dt), select(L, b0, mod, m, dt)


@scalar_op("floordiv")
def _floordiv(L: Lines, xs: list[str], dts: list[np.dtype], out: np.dtype) -> str:
    f = _float_divmod if _k(out) == "f" else _int_divmod
    return f(L, xs[0], xs[1], out)[0]


@scalar_op("mod")
def _mod(L: Lines, xs: list[str], dts: list[np.dtype], out: np.dtype) -> str:
    f = _float_divmod if _k(out) == "f" else _int_divmod
    return f(L, xs[0], xs[1], out)[1]


@scalar_op("pow")
def _pow(L: Lines, xs: list[str], dts: list[np.dtype], out: np.dtype) -> str:
    if _k(out) == "f":
        return _bin(L, "math.powf", xs[0], xs[1], out)
    # math.ipowi gives 0 for a negative exponent of |x| > 1; NumPy refuses those (an
    # error), the llvm backend gives 1: so does this
    r = _bin(L, "math.ipowi", xs[0], xs[1], out)
    neg = icmp(L, "slt", xs[1], L.const(0, out), out)
    return select(L, neg, L.const(1, out), r, out)


# -- conversion -------------------------------------------------------------------------
@scalar_op("convert")
def _convert(L: Lines, xs: list[str], dts: list[np.dtype], out: np.dtype) -> str:
    return convert(L, xs[0], dts[0], out)


def convert(L: Lines, x: str, src: np.dtype, dst: np.dtype) -> str:
    """NumPy's ``astype`` (float to int out of range or NaN gives INT_MIN, as on x86)."""
    src, dst = np.dtype(src), np.dtype(dst)
    ks, kd = src.kind, dst.kind
    s, d = elem(src), elem(dst)
    if src == dst:
        return x
    if kd == "b":
        if ks == "f":
            return fcmp(L, "une", x, L.const(0.0, src), src)
        return icmp(L, "ne", x, L.const(0, src), src)
    if ks == "b":
        return L.op(f"arith.{'uitofp' if kd == 'f' else 'extui'} {x} : i1 to {d}")
    if ks == "f" and kd == "f":
        return L.op(f"arith.{'extf' if dst.itemsize > src.itemsize else 'truncf'} {x} : "
                    f"{s} to {d}")
    if ks == "f":
        bits = 8 * dst.itemsize
        lo, hi = -float(2 ** (bits - 1)), float(2 ** (bits - 1))
        ok = _bin(L, "arith.andi", fcmp(L, "oge", x, L.const(lo, src), src),
                  fcmp(L, "olt", x, L.const(hi, src), src), np.dtype(bool))
        safe = select(L, ok, x, L.const(0.0, src), src)
        return select(L, ok, L.op(f"arith.fptosi {safe} : {s} to {d}"),
                      L.const(-(1 << (bits - 1)), dst), dst)
    if kd == "f":
        return L.op(f"arith.sitofp {x} : {s} to {d}")
    op = "extsi" if dst.itemsize > src.itemsize else "trunci"
    return L.op(f"arith.{op} {x} : {s} to {d}")
