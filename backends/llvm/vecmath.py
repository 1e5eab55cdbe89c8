"""Elementwise ops on vectors: an op -> emitter table matching the NumPy reference
implementations of ``yota.ir.ops.elementwise`` (the semantics to match), plus the
transcendental calls.

Every emitter takes ``(c, xs, dts, out, attrs)``: the vector context, operand vectors of
``c.n`` lanes, operand dtypes, the result dtype and the op's attributes, and returns the
result vector. IEEE-exact ops are emitted without fast-math flags, so they round exactly
as NumPy does. Transcendentals call glibc's libmvec (``_ZGVdN8v_expf``: x86-64 vector
ABI; ISA letter ``e`` AVX-512, ``d`` AVX2, ``b`` SSE) on the widest variant the host
runs, splitting or padding vectors to its width; without libmvec they fall back to
per-lane libm calls (correct, slow).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import llvmlite.ir as ir
import numpy as np

from .runtime.target import Target, mvec_has
from .types import I32, const, declare, intrinsic, reg_type, vec

MVEC_LANES = {"e": 16, "d": 8, "b": 4}  # float32 lanes per ISA; float64 has half

# op name -> (libm name, arity)
TRANSCENDENTAL = {
    "exp": ("exp", 1), "expm1": ("expm1", 1), "log": ("log", 1), "log1p": ("log1p", 1),
    "log2": ("log2", 1), "sin": ("sin", 1), "cos": ("cos", 1), "tan": ("tan", 1),
    "tanh": ("tanh", 1), "sinh": ("sinh", 1), "cosh": ("cosh", 1), "arctan": ("atan", 1),
    "arcsin": ("asin", 1), "arccos": ("acos", 1), "arctan2": ("atan2", 2),
}


@dataclass
class VCtx:
    """Where vector code goes: the builder, its module, the target, the lane count."""

    b: ir.IRBuilder
    module: ir.Module
    target: Target
    n: int

    def vt(self, dt: np.dtype) -> ir.VectorType:
        return vec(reg_type(dt), self.n)

    def splat(self, dt: np.dtype, value: Any) -> ir.Constant:
        return const(self.vt(dt), value)

    def intr(self, base: str, *xs: ir.Value, ret: ir.Type | None = None) -> ir.Value:
        ret = ret or xs[0].type
        fn = intrinsic(self.module, base, ret, [x.type for x in xs])
        return self.b.call(fn, list(xs))


Xs = list[ir.Value]
Dts = list[np.dtype]
Attrs = dict[str, Any]
Emitter = Callable[[VCtx, Xs, Dts, np.dtype, Attrs], ir.Value]
ELEMENTWISE: dict[str, Emitter] = {}


def emitter(*names: str) -> Callable[[Emitter], Emitter]:
    def reg(f: Emitter) -> Emitter:
        for n in names:
            ELEMENTWISE[n] = f
        return f
    return reg


def _kind(dt: np.dtype) -> str:
    return np.dtype(dt).kind


# -- transcendentals --------------------------------------------------------------------
def vector_math(c: VCtx, name: str, xs: list[ir.Value], dt: np.dtype) -> ir.Value:
    """``name`` (a libm name such as ``exp``) applied lane-wise to vectors ``xs``."""
    is32 = np.dtype(dt).itemsize == 4
    found = []
    for isa in c.target.mvec_isas:  # widest first
        lanes = MVEC_LANES[isa] // (1 if is32 else 2)
        sym = f"_ZGV{isa}N{lanes}{'v' * len(xs)}_{name}{'f' if is32 else ''}"
        if mvec_has(sym):
            found.append((lanes, sym))
    fits = [f for f in found if f[0] <= c.n] or found[-1:]
    if fits:
        return _by_chunks(c, fits[0][1], fits[0][0], xs)
    return _per_lane(c, name + ("f" if is32 else ""), xs)


def _by_chunks(c: VCtx, sym: str, lanes: int, xs: list[ir.Value]) -> ir.Value:
    et = xs[0].type.element
    fn = declare(c.module, sym, vec(et, lanes), [vec(et, lanes)] * len(xs))
    if c.n == lanes:
        return c.b.call(fn, xs)
    parts = []
    for start in range(0, c.n, lanes):
        idx = [start + i if start + i < c.n else c.n for i in range(lanes)]
        pad = ir.Constant(xs[0].type, None)
        args = [c.b.shuffle_vector(x, pad, ir.Constant(vec(I32, lanes), idx)) for x in xs]
        parts.append(c.b.call(fn, args))
    return _concat(c, parts, lanes)


def _concat(c: VCtx, parts: list[ir.Value], lanes: int) -> ir.Value:
    """Join vectors of ``lanes`` lanes into one of ``c.n`` (dropping padding)."""
    while len(parts) > 1:
        w = parts[0].type.count
        joined = []
        for i in range(0, len(parts), 2):
            if i + 1 == len(parts):
                joined.append(c.b.shuffle_vector(parts[i], ir.Constant(parts[i].type, None),
                                                 ir.Constant(vec(I32, 2 * w),
                                                             list(range(2 * w)))))
            else:
                joined.append(c.b.shuffle_vector(parts[i], parts[i + 1],
                                                 ir.Constant(vec(I32, 2 * w),
                                                             list(range(2 * w)))))
        parts = joined
    v = parts[0]
    if v.type.count != c.n:
        v = c.b.shuffle_vector(v, ir.Constant(v.type, None),
                               ir.Constant(vec(I32, c.n), list(range(c.n))))
    return v


def _per_lane(c: VCtx, libm: str, xs: list[ir.Value]) -> ir.Value:
    et = xs[0].type.element
    fn = declare(c.module, libm, et, [et] * len(xs))
    out = ir.Constant(xs[0].type, None)
    for i in range(c.n):
        k = ir.Constant(I32, i)
        r = c.b.call(fn, [c.b.extract_element(x, k) for x in xs])
        out = c.b.insert_element(out, r, k)
    return out


def _transcendental(op: str) -> Emitter:
    name, _ = TRANSCENDENTAL[op]

    def emit(c: VCtx, xs: list[ir.Value], dts: list[np.dtype], out: np.dtype,
             attrs: dict[str, Any]) -> ir.Value:
        if name == "exp" and np.dtype(dts[0]) == np.float32:
            return exp_f32(c, xs[0])
        return vector_math(c, name, xs, dts[0])
    return emit


# exp for float32 inline: 2**n * exp(r), n = rint(x / ln 2), |r| <= ln(2) / 2 by a
# two-part ln 2 and fused multiply-adds; exp(r) = 1 + r + r*r * P(r), P of degree 5 (the
# coefficients of Cephes' expf: within 2 ulp of the exact value, as libmvec's expf is);
# 2**n as two exact scalings, so results that are subnormal round once.
_LN2_HI, _LN2_LO = 0.693145751953125, 1.428606765330187e-06
_EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
          1.6666665459e-1, 5.0000001201e-1)
_EXP_LO, _EXP_HI = -104.0, 89.0  # exp is 0 below (after rounding), inf above


def exp_f32(c: VCtx, x: ir.Value) -> ir.Value:
    """``exp(x)`` lane-wise for float32 vectors (or a scalar), NaN in gives NaN out."""
    b, t = c.b, x.type
    it = vec(I32, t.count) if isinstance(t, ir.VectorType) else I32

    def k(v: float) -> ir.Constant:
        return const(t, v)

    def fma(a: ir.Value, m: ir.Value, d: ir.Value) -> ir.Value:
        return c.intr("llvm.fma", a, m, d)
    xc = c.intr("llvm.maxnum", c.intr("llvm.minnum", x, k(_EXP_HI)), k(_EXP_LO))
    n = c.intr("llvm.rint", b.fmul(xc, k(1 / math.log(2))))
    r = fma(n, k(-_LN2_HI), xc)
    r = fma(n, k(-_LN2_LO), r)
    p: ir.Value = k(_EXP_P[0])
    for coef in _EXP_P[1:]:
        p = fma(p, r, k(coef))
    y = b.fadd(fma(p, b.fmul(r, r), r), k(1.0))
    if c.target.vector_bits >= 512 and isinstance(t, ir.VectorType) and t.count == 16:
        y = _scalef16(c, y, n)  # one instruction: y * 2**n, rounded once
    else:
        ni = b.fptosi(n, it)
        n1 = b.ashr(ni, const(it, 1))
        for part in (n1, b.sub(ni, n1)):  # each in [-76, 65]: a normal power of two
            y = b.fmul(y, b.bitcast(b.shl(b.add(part, const(it, 127)), const(it, 23)), t))
    return b.select(isnan(c, x), x, y)


def _scalef16(c: VCtx, y: ir.Value, n: ir.Value) -> ir.Value:
    """AVX-512 ``vscalefps``: ``y * 2**floor(n)`` for 16 float32 lanes, overflow to inf
    and subnormal results rounded once (current rounding mode)."""
    fn = declare(c.module, "llvm.x86.avx512.mask.scalef.ps.512", y.type,
                 [y.type, y.type, y.type, ir.IntType(16), I32])
    return c.b.call(fn, [y, n, ir.Constant(y.type, None), ir.Constant(ir.IntType(16), -1),
                         ir.Constant(I32, 4)])


for _op in TRANSCENDENTAL:
    ELEMENTWISE[_op] = _transcendental(_op)


# -- float helpers ----------------------------------------------------------------------
def fcmp(c: VCtx, pred: str, a: ir.Value, b: ir.Value, ordered: bool = True) -> ir.Value:
    return (c.b.fcmp_ordered if ordered else c.b.fcmp_unordered)(pred, a, b)


def isnan(c: VCtx, x: ir.Value) -> ir.Value:
    return c.b.fcmp_unordered("uno", x, x)


def copysign(c: VCtx, mag: ir.Value, sign: ir.Value) -> ir.Value:
    return c.intr("llvm.copysign", mag, sign)


# -- unary ------------------------------------------------------------------------------
@emitter("neg")
def _neg(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
    if _kind(out) == "f":
        return c.b.fneg(xs[0])
    return c.b.sub(c.splat(out, 0), xs[0])


@emitter("abs")
def _abs(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
    x = xs[0]
    if _kind(out) == "f":
        return c.intr("llvm.fabs", x)
    return c.b.select(c.b.icmp_signed("<", x, c.splat(out, 0)), c.b.sub(c.splat(out, 0), x), x)


@emitter("sign")
def _sign(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
    x = xs[0]
    z = c.splat(out, 0)
    if _kind(out) == "f":
        # NumPy: x > 0 ? 1 : x < 0 ? -1 : x == 0 ? 0 : x (NaN stays NaN, -0.0 gives 0.0)
        r = c.b.select(fcmp(c, "==", x, z), z, x)
        r = c.b.select(fcmp(c, "<", x, z), c.splat(out, -1), r)
        return c.b.select(fcmp(c, ">", x, z), c.splat(out, 1), r)
    gt = c.b.zext(c.b.icmp_signed(">", x, z), x.type)
    lt = c.b.zext(c.b.icmp_signed("<", x, z), x.type)
    return c.b.sub(gt, lt)


@emitter("square")
def _square(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
    return c.b.fmul(xs[0], xs[0]) if _kind(out) == "f" else c.b.mul(xs[0], xs[0])


@emitter("sqrt")
def _sqrt(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
    return c.intr("llvm.sqrt", xs[0])


@emitter("reciprocal")
def _reciprocal(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
    return c.b.fdiv(c.splat(out, 1.0), xs[0])


@emitter("floor")
def _floor(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
    return c.intr("llvm.floor", xs[0])


@emitter("ceil")
def _ceil(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
    return c.intr("llvm.ceil", xs[0])


@emitter("round")
def _round(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
    return c.intr("llvm.roundeven", xs[0])  # np.rint: half to even


@emitter("isnan")
def _isnan(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
    return isnan(c, xs[0])


@emitter("isinf")
def _isinf(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
    return fcmp(c, "==", c.intr("llvm.fabs", xs[0]), c.splat(dts[0], float("inf")))


@emitter("isfinite")
def _isfinite(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
    return fcmp(c, "!=", c.intr("llvm.fabs", xs[0]), c.splat(dts[0], float("inf")))


@emitter("not")
def _not(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
    return c.b.xor(xs[0], c.splat(out, 1))


# -- binary -----------------------------------------------------------------------------
def _arith(fop: str, iop: str, bop: str | None) -> Emitter:
    def emit(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
        k = _kind(out)
        name = fop if k == "f" else bop if k == "b" else iop
        assert name is not None, f"no {fop} for {out}"
        return getattr(c.b, name)(xs[0], xs[1])
    return emit


ELEMENTWISE["add"] = _arith("fadd", "add", "or_")
ELEMENTWISE["sub"] = _arith("fsub", "sub", None)
ELEMENTWISE["mul"] = _arith("fmul", "mul", "and_")
ELEMENTWISE["div"] = _arith("fdiv", "sdiv", None)
ELEMENTWISE["and"] = _arith("and_", "and_", "and_")
ELEMENTWISE["or"] = _arith("or_", "or_", "or_")
ELEMENTWISE["xor"] = _arith("xor", "xor", "xor")


def _extremum(is_max: bool) -> Emitter:
    def emit(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
        a, b = xs
        k = _kind(out)
        if k == "b":
            return c.b.or_(a, b) if is_max else c.b.and_(a, b)
        if k == "f":  # as NumPy: (a > b || isnan(a)) ? a : b (equal zeros give b)
            keep = c.b.or_(fcmp(c, ">" if is_max else "<", a, b), isnan(c, a))
            return c.b.select(keep, a, b)
        return c.b.select(c.b.icmp_signed(">=" if is_max else "<=", a, b), a, b)
    return emit


ELEMENTWISE["maximum"] = _extremum(True)
ELEMENTWISE["minimum"] = _extremum(False)

_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}


def _compare(op: str) -> Emitter:
    pred = _CMP[op]

    def emit(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
        a, b = xs
        k = _kind(dts[0])
        if k == "f":
            return fcmp(c, pred, a, b, ordered=op != "ne")
        if k == "b":
            return c.b.icmp_unsigned(pred, a, b)
        return c.b.icmp_signed(pred, a, b)
    return emit


for _op in _CMP:
    ELEMENTWISE[_op] = _compare(_op)


@emitter("select")
def _select(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
    return c.b.select(xs[0], xs[1], xs[2])


def _safe_divisor(c: VCtx, a: ir.Value, b: ir.Value, dt: np.dtype) -> tuple[ir.Value, ir.Value]:
    """(divisor with 0 and the overflowing MIN / -1 replaced by 1, b == 0 mask)."""
    zero = c.splat(dt, 0)
    bits = 8 * np.dtype(dt).itemsize
    is0 = c.b.icmp_signed("==", b, zero)
    ovf = c.b.and_(c.b.icmp_signed("==", a, c.splat(dt, -(1 << (bits - 1)))),
                   c.b.icmp_signed("==", b, c.splat(dt, -1)))
    return c.b.select(c.b.or_(is0, ovf), c.splat(dt, 1), b), is0


def _int_divmod(c: VCtx, a: ir.Value, b: ir.Value, dt: np.dtype) -> tuple[ir.Value, ir.Value]:
    """Python's floor division and modulo; 0 for a zero divisor (as NumPy gives)."""
    d, is0 = _safe_divisor(c, a, b, dt)
    zero = c.splat(dt, 0)
    q, r = c.b.sdiv(a, d), c.b.srem(a, d)
    adj = c.b.and_(c.b.icmp_signed("!=", r, zero),
                   c.b.xor(c.b.icmp_signed("<", r, zero), c.b.icmp_signed("<", b, zero)))
    q = c.b.select(adj, c.b.sub(q, c.splat(dt, 1)), q)
    r = c.b.select(adj, c.b.add(r, b), r)
    return c.b.select(is0, zero, q), c.b.select(is0, zero, r)


def _float_divmod(c: VCtx, a: ir.Value, b: ir.Value, dt: np.dtype) -> tuple[ir.Value, ir.Value]:
    """NumPy's ``npy_floor_divide`` and ``npy_remainder`` (fmod-based, Python signs)."""
    z = c.splat(dt, 0.0)
    mod = c.b.frem(a, b)
    div = c.b.fdiv(c.b.fsub(a, mod), b)
    mod_nz = fcmp(c, "!=", mod, z, ordered=False)
    adj = c.b.and_(mod_nz, c.b.xor(fcmp(c, "<", b, z), fcmp(c, "<", mod, z)))
    m = c.b.select(adj, c.b.fadd(mod, b), mod)
    m = c.b.select(mod_nz, m, copysign(c, z, b))
    div = c.b.select(adj, c.b.fsub(div, c.splat(dt, 1.0)), div)
    fl = c.intr("llvm.floor", div)
    fl = c.b.select(fcmp(c, ">", c.b.fsub(div, fl), c.splat(dt, 0.5)),
                    c.b.fadd(fl, c.splat(dt, 1.0)), fl)
    q_ = c.b.fdiv(a, b)
    fl = c.b.select(fcmp(c, "!=", div, z, ordered=False), fl, copysign(c, z, q_))
    b0 = fcmp(c, "==", b, z)
    return c.b.select(b0, q_, fl), c.b.select(b0, mod, m)


@emitter("floordiv")
def _floordiv(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
    f = _float_divmod if _kind(out) == "f" else _int_divmod
    return f(c, xs[0], xs[1], out)[0]


@emitter("mod")
def _mod(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
    f = _float_divmod if _kind(out) == "f" else _int_divmod
    return f(c, xs[0], xs[1], out)[1]


MUL_POW_MAX = 8  # x**n for constant integer n in [-1, MUL_POW_MAX] as multiplications


@emitter("pow")
def _pow(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
    if _kind(out) == "f":
        n = _const_int_exponent(xs[1])
        if n is not None:
            return _mul_pow(c, xs[0], n, out)
        return vector_math(c, "pow", xs, out)
    return _int_pow(c, xs[0], xs[1], out)


def _const_int_exponent(e: ir.Value) -> int | None:
    """The exponent when it is one constant integer in [-1, MUL_POW_MAX], else None."""
    if not isinstance(e, ir.Constant):
        return None
    vals = e.constant if isinstance(e.constant, list) else [e]
    firsts = {float(v.constant) if isinstance(v, ir.Constant) else None for v in vals}
    if len(firsts) != 1:
        return None
    (v,) = firsts
    if v is None or not math.isfinite(v) or v != int(v) or not -1 <= v <= MUL_POW_MAX:
        return None
    return int(v)


def _mul_pow(c: VCtx, x: ir.Value, n: int, dt: np.dtype) -> ir.Value:
    """``x**n`` for a constant integer n as multiplications (square-and-multiply; n = -1
    is ``1/x``, n = 0 is 1 as ``pow`` gives even for NaN). n = 2 and -1 round once, like
    a correctly rounded pow; n >= 3 rounds n-1 times at most 3 (within pow's ulp rule).
    libmvec's vector powf falls back to scalar code lane by lane for negative bases, so
    ``z**3`` on signed data cost about 40 ns an element."""
    b = c.b
    if n == 0:
        return c.splat(dt, 1.0)
    if n == -1:
        return b.fdiv(c.splat(dt, 1.0), x)
    result: ir.Value | None = None
    base = x
    while n:
        if n & 1:
            result = base if result is None else b.fmul(result, base)
        n >>= 1
        if n:
            base = b.fmul(base, base)
    assert result is not None
    return result


def _int_pow(c: VCtx, x: ir.Value, e: ir.Value, dt: np.dtype) -> ir.Value:
    """Square-and-multiply, lane-wise, until every exponent is used up (a negative
    exponent, an error in NumPy, gives 1)."""
    b = c.b
    one, zero = c.splat(dt, 1), c.splat(dt, 0)
    pre = b.block
    loop = b.append_basic_block("ipow")
    done = b.append_basic_block("ipow.done")
    start = b.icmp_signed(">", e, zero)
    b.cbranch(_any(c, start), loop, done)
    b.position_at_end(loop)
    r_phi, x_phi, e_phi = b.phi(x.type), b.phi(x.type), b.phi(x.type)
    r_phi.add_incoming(one, pre)
    x_phi.add_incoming(x, pre)
    e_phi.add_incoming(e, pre)
    odd = b.icmp_signed("!=", b.and_(e_phi, one), zero)
    pos = b.icmp_signed(">", e_phi, zero)
    r2 = b.select(b.and_(odd, pos), b.mul(r_phi, x_phi), r_phi)
    x2 = b.mul(x_phi, x_phi)
    e2 = b.ashr(e_phi, one)
    r_phi.add_incoming(r2, loop)
    x_phi.add_incoming(x2, loop)
    e_phi.add_incoming(e2, loop)
    b.cbranch(_any(c, b.icmp_signed(">", e2, zero)), loop, done)
    b.position_at_end(done)
    res = b.phi(x.type)
    res.add_incoming(one, pre)
    res.add_incoming(r2, loop)
    return res


def _any(c: VCtx, mask: ir.Value) -> ir.Value:
    return c.b.icmp_unsigned("!=", c.b.bitcast(mask, ir.IntType(c.n)), ir.Constant(ir.IntType(c.n), 0))


# -- conversion -------------------------------------------------------------------------
@emitter("convert")
def _convert(c: VCtx, xs: Xs, dts: Dts, out: np.dtype, attrs: Attrs) -> ir.Value:
    return convert(c, xs[0], dts[0], out)


def convert(c: VCtx, x: ir.Value, src: np.dtype, dst: np.dtype) -> ir.Value:
    """NumPy's ``astype`` (float to int out of range or NaN gives INT_MIN, as on x86)."""
    src, dst = np.dtype(src), np.dtype(dst)
    ks, kd = src.kind, dst.kind
    t = c.vt(dst)
    if src == dst:
        return x
    if kd == "b":
        if ks == "f":
            return fcmp(c, "!=", x, c.splat(src, 0.0), ordered=False)
        return c.b.icmp_signed("!=", x, c.splat(src, 0))
    if ks == "b":
        if kd == "f":  # one masked move (uitofp of i1 lanes: widen, shift, convert)
            return c.b.select(x, c.splat(dst, 1.0), c.splat(dst, 0.0))
        return c.b.zext(x, t)
    if ks == "f" and kd == "f":
        return c.b.fpext(x, t) if dst.itemsize > src.itemsize else c.b.fptrunc(x, t)
    if ks == "f":
        bits = 8 * dst.itemsize
        lo, hi = -float(2 ** (bits - 1)), float(2 ** (bits - 1))
        ok = c.b.and_(fcmp(c, ">=", x, c.splat(src, lo)), fcmp(c, "<", x, c.splat(src, hi)))
        safe = c.b.select(ok, x, c.splat(src, 0.0))
        return c.b.select(ok, c.b.fptosi(safe, t), c.splat(dst, -(1 << (bits - 1))))
    if kd == "f":
        return c.b.sitofp(x, t)
    return c.b.sext(x, t) if dst.itemsize > src.itemsize else c.b.trunc(x, t)

