"""Elementwise ops as CUDA C expressions: an op -> emitter table matching the NumPy
reference implementations of ``yota.ir.ops.elementwise``, plus the prelude of device
helpers the expressions call (``y_maximum``, ``y_floordiv``...).

Every emitter takes ``(xs, dts, out, fast)``: operand expressions (C variable names),
operand dtypes, the result dtype and whether fast-math intrinsics are allowed (only when
the function was optimized with ``fast_math``), and returns a C expression. Integer
arithmetic goes through unsigned types, so overflow wraps as in NumPy instead of being
undefined behaviour. Kernels are compiled with ``-fmad=false`` (unless fast-math), so
``a*b + c`` rounds twice, as NumPy does.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable

import numpy as np

from ..kernel import identity as kernel_identity

CTYPE = {"b": "bool", "i4": "int", "i8": "long long", "f4": "float", "f8": "double"}
UTYPE = {"i4": "unsigned int", "i8": "unsigned long long"}


def _key(dt: np.dtype) -> str:
    dt = np.dtype(dt)
    return "b" if dt.kind == "b" else f"{dt.kind}{dt.itemsize}"


def ctype(dt: np.dtype) -> str:
    """The C type of an element of ``dt`` (in memory and in registers)."""
    return CTYPE[_key(dt)]


def acc_type(dt: np.dtype) -> str:
    """The C type reductions accumulate ``dt`` in (bool as int: shuffles need it)."""
    return "int" if np.dtype(dt).kind == "b" else ctype(dt)


def literal(value: object, dt: np.dtype) -> str:
    """An exact C literal of ``value`` as ``dt`` (non-finite floats by their bits)."""
    dt = np.dtype(dt)
    v = np.asarray(value).astype(dt)[()]
    if dt.kind == "b":
        return "true" if v else "false"
    if dt.kind in "iu":
        n, bits = int(v), 8 * dt.itemsize
        if n == -(1 << (bits - 1)):
            return f"(-{(1 << (bits - 1)) - 1}{'LL' if bits == 64 else ''} - 1)"
        return f"{n}{'LL' if bits == 64 else ''}"
    f = float(v)
    if dt.itemsize == 4:
        if not math.isfinite(f):
            (bits,) = struct.unpack("<I", np.float32(v).tobytes())
            return f"__int_as_float(0x{bits:08x})"
        return f"{_plain_float(str(np.float32(f)))}f"
    if not math.isfinite(f):
        (bits,) = struct.unpack("<Q", np.float64(v).tobytes())
        return f"__longlong_as_double(0x{bits:016x}LL)"
    return _plain_float(repr(f))


def _plain_float(text: str) -> str:
    """A float's shortest round-trip text as a C literal (always with '.' or 'e')."""
    return text if any(c in text for c in ".e") else text + ".0"


Emitter = Callable[[list[str], list[np.dtype], np.dtype, bool], str]
EXPRS: dict[str, Emitter] = {}


def emitter(*names: str) -> Callable[[Emitter], Emitter]:
    def reg(f: Emitter) -> Emitter:
        for n in names:
            EXPRS[n] = f
        return f
    return reg


def _is_f(dt: np.dtype) -> bool:
    return np.dtype(dt).kind == "f"


def _f32(dt: np.dtype) -> bool:
    return np.dtype(dt) == np.float32


# -- transcendentals ---------------------------------------------------------------------------
MATH = {"exp": "exp", "expm1": "expm1", "log": "log", "log1p": "log1p", "log2": "log2",
        "sin": "sin", "cos": "cos", "tan": "tan", "tanh": "tanh", "sinh": "sinh",
        "cosh": "cosh", "arctan": "atan", "arcsin": "asin", "arccos": "acos",
        "arctan2": "atan2", "sqrt": "sqrt", "floor": "floor", "ceil": "ceil", "round": "rint"}
# float32 intrinsics used only with fast-math (faster, a few ulps less accurate)
FAST = {"exp": "__expf", "log": "__logf", "log2": "__log2f", "sin": "__sinf", "cos": "__cosf",
        "tan": "__tanf", "pow": "__powf"}


def _math(op: str) -> Emitter:
    def emit(xs: list[str], dts: list[np.dtype], out: np.dtype, fast: bool) -> str:
        if fast and _f32(out) and op in FAST:
            return f"{FAST[op]}({', '.join(xs)})"
        return f"{MATH[op]}{'f' if _f32(out) else ''}({', '.join(xs)})"
    return emit


for _op in MATH:
    EXPRS[_op] = _math(_op)


# -- arithmetic ------------------------------------------------------------------------------------
def _wrap(op: str, a: str, b: str, dt: np.dtype) -> str:
    """Integer ``a op b`` wrapping around (through the unsigned type)."""
    u, t = UTYPE[_key(dt)], ctype(dt)
    return f"(({t})(({u}){a} {op} ({u}){b}))"


def _arith(op: str, bool_op: str | None) -> Emitter:
    def emit(xs: list[str], dts: list[np.dtype], out: np.dtype, fast: bool) -> str:
        a, b = xs
        k = np.dtype(out).kind
        if k == "f":
            return f"({a} {op} {b})"
        if k == "b":
            return f"({a} {bool_op} {b})"
        return _wrap(op, a, b, out)
    return emit


EXPRS["add"] = _arith("+", "||")
EXPRS["sub"] = _arith("-", None)
EXPRS["mul"] = _arith("*", "&&")


@emitter("div")
def _div(xs, dts, out, fast):
    return f"({xs[0]} / {xs[1]})"


@emitter("neg")
def _neg(xs, dts, out, fast):
    return f"(-{xs[0]})" if _is_f(out) else _wrap("-", "0", xs[0], out)


@emitter("abs")
def _abs(xs, dts, out, fast):
    if _is_f(out):
        return f"fabs{'f' if _f32(out) else ''}({xs[0]})"
    return f"({xs[0]} < 0 ? {_wrap('-', '0', xs[0], out)} : {xs[0]})"


@emitter("square")
def _square(xs, dts, out, fast):
    return f"({xs[0]} * {xs[0]})" if _is_f(out) else _wrap("*", xs[0], xs[0], out)


@emitter("reciprocal")
def _reciprocal(xs, dts, out, fast):
    return f"({literal(1.0, out)} / {xs[0]})"


@emitter("sign")
def _sign(xs, dts, out, fast):
    return f"y_sign({xs[0]})"


for _op in ("isnan", "isinf", "isfinite"):
    EXPRS[_op] = (lambda name: lambda xs, dts, out, fast: f"y_{name}({xs[0]})")(_op)


@emitter("not")
def _not(xs, dts, out, fast):
    return f"(!{xs[0]})"


EXPRS["maximum"] = lambda xs, dts, out, fast: f"y_maximum({xs[0]}, {xs[1]})"
EXPRS["minimum"] = lambda xs, dts, out, fast: f"y_minimum({xs[0]}, {xs[1]})"
EXPRS["floordiv"] = lambda xs, dts, out, fast: f"y_floordiv({xs[0]}, {xs[1]})"
EXPRS["mod"] = lambda xs, dts, out, fast: f"y_mod({xs[0]}, {xs[1]})"

for _op, _c in [("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="), ("eq", "=="),
                ("ne", "!=")]:
    EXPRS[_op] = (lambda c: lambda xs, dts, out, fast: f"({xs[0]} {c} {xs[1]})")(_c)
EXPRS["and"] = lambda xs, dts, out, fast: f"({xs[0]} && {xs[1]})"
EXPRS["or"] = lambda xs, dts, out, fast: f"({xs[0]} || {xs[1]})"
EXPRS["xor"] = lambda xs, dts, out, fast: f"({xs[0]} != {xs[1]})"
EXPRS["select"] = lambda xs, dts, out, fast: f"({xs[0]} ? {xs[1]} : {xs[2]})"


@emitter("pow")
def _pow(xs, dts, out, fast):
    if _is_f(out):
        if fast and _f32(out):
            return f"__powf({xs[0]}, {xs[1]})"
        return f"pow{'f' if _f32(out) else ''}({xs[0]}, {xs[1]})"
    return f"y_ipow({xs[0]}, {xs[1]})"


@emitter("convert")
def _convert(xs, dts, out, fast):
    return convert(xs[0], dts[0], out)


def convert(x: str, src: np.dtype, dst: np.dtype) -> str:
    """NumPy's ``astype`` (a float out of an integer type's range, or NaN, gives its
    minimum, as on x86)."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src == dst:
        return x
    if dst.kind == "b":
        return f"({x} != 0)"
    if src.kind == "f" and dst.kind in "iu":
        return f"y_f2i<{ctype(dst)}>({x})"
    return f"(({ctype(dst)}){x})"


# -- reductions ----------------------------------------------------------------------------------
COMBINE = {"sum": "y_op_sum", "prod": "y_op_prod", "max": "y_op_max", "min": "y_op_min"}


def identity(kind: str, dt: np.dtype) -> str:
    """The identity of reduction ``kind`` as a literal of the accumulator type."""
    dt = np.dtype(dt)
    return literal(kernel_identity(kind, dt), np.dtype(np.int32) if dt.kind == "b" else dt)


PRELUDE = r"""// Yota CUDA kernels: helpers (NumPy semantics for every dtype)
typedef long long y_i64;
__device__ __forceinline__ bool y_isnan(float x) { return x != x; }
__device__ __forceinline__ bool y_isnan(double x) { return x != x; }
__device__ __forceinline__ bool y_isinf(float x) { return fabsf(x) == __int_as_float(0x7f800000); }
__device__ __forceinline__ bool y_isinf(double x) { return fabs(x) == __longlong_as_double(0x7ff0000000000000LL); }
__device__ __forceinline__ bool y_isfinite(float x) { return fabsf(x) < __int_as_float(0x7f800000); }
__device__ __forceinline__ bool y_isfinite(double x) { return fabs(x) < __longlong_as_double(0x7ff0000000000000LL); }
template <class T> __device__ __forceinline__ T y_maximum(T a, T b) { return a >= b ? a : b; }
template <class T> __device__ __forceinline__ T y_minimum(T a, T b) { return a <= b ? a : b; }
__device__ __forceinline__ float y_maximum(float a, float b) { return (a > b || a != a) ? a : b; }
__device__ __forceinline__ double y_maximum(double a, double b) { return (a > b || a != a) ? a : b; }
__device__ __forceinline__ float y_minimum(float a, float b) { return (a < b || a != a) ? a : b; }
__device__ __forceinline__ double y_minimum(double a, double b) { return (a < b || a != a) ? a : b; }
__device__ __forceinline__ bool y_maximum(bool a, bool b) { return a || b; }
__device__ __forceinline__ bool y_minimum(bool a, bool b) { return a && b; }
template <class T> __device__ __forceinline__ T y_sign(T x) { return (T)((x > 0) - (x < 0)); }
template <class T> __device__ __forceinline__ T y_fsign(T x) { return x > 0 ? (T)1 : x < 0 ? (T)-1 : x == 0 ? (T)0 : x; }
__device__ __forceinline__ float y_sign(float x) { return y_fsign(x); }
__device__ __forceinline__ double y_sign(double x) { return y_fsign(x); }
template <class T, class U> __device__ __forceinline__ T y_idivmod(T a, T b, T* rem) {
  const T lo = (T)((U)1 << (sizeof(T) * 8 - 1));
  if (b == 0) { *rem = 0; return 0; }
  T d = (a == lo && b == (T)-1) ? (T)1 : b;
  T q = a / d, r = a % d;
  if (r != 0 && ((r < 0) != (b < 0))) { q = q - 1; r = r + b; }
  *rem = r;
  return q;
}
template <class T> __device__ __forceinline__ T y_fdivmod(T a, T b, T* rem) {
  T mod = fmod(a, b);
  T q = a / b;
  if (b == 0) { *rem = mod; return q; }
  T div = (a - mod) / b;
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) { mod = mod + b; div = div - 1; }
  } else {
    mod = copysign((T)0, b);
  }
  T fl;
  if (div != 0) {
    fl = floor(div);
    if (div - fl > (T)0.5) fl = fl + 1;
  } else {
    fl = copysign((T)0, q);
  }
  *rem = mod;
  return fl;
}
__device__ __forceinline__ int y_floordiv(int a, int b) { int r; return y_idivmod<int, unsigned int>(a, b, &r); }
__device__ __forceinline__ y_i64 y_floordiv(y_i64 a, y_i64 b) { y_i64 r; return y_idivmod<y_i64, unsigned long long>(a, b, &r); }
__device__ __forceinline__ float y_floordiv(float a, float b) { float r; return y_fdivmod(a, b, &r); }
__device__ __forceinline__ double y_floordiv(double a, double b) { double r; return y_fdivmod(a, b, &r); }
__device__ __forceinline__ int y_mod(int a, int b) { int r; y_idivmod<int, unsigned int>(a, b, &r); return r; }
__device__ __forceinline__ y_i64 y_mod(y_i64 a, y_i64 b) { y_i64 r; y_idivmod<y_i64, unsigned long long>(a, b, &r); return r; }
__device__ __forceinline__ float y_mod(float a, float b) { float r; y_fdivmod(a, b, &r); return r; }
__device__ __forceinline__ double y_mod(double a, double b) { double r; y_fdivmod(a, b, &r); return r; }
template <class T> __device__ __forceinline__ T y_ipow(T x, T e) {
  unsigned long long r = 1, b = (unsigned long long)x;
  while (e > 0) { if (e & 1) r *= b; b *= b; e >>= 1; }
  return (T)r;
}
template <class T, class F> __device__ __forceinline__ T y_f2i(F x) {
  const F hi = (F)((unsigned long long)1 << (sizeof(T) * 8 - 1));
  const T lo = (T)((unsigned long long)1 << (sizeof(T) * 8 - 1));
  return (x >= -hi && x < hi) ? (T)x : lo;
}
template <class T> __device__ __forceinline__ T y_wadd(T a, T b) { return a + b; }
__device__ __forceinline__ int y_wadd(int a, int b) { return (int)((unsigned int)a + (unsigned int)b); }
__device__ __forceinline__ y_i64 y_wadd(y_i64 a, y_i64 b) { return (y_i64)((unsigned long long)a + (unsigned long long)b); }
template <class T> __device__ __forceinline__ T y_wmul(T a, T b) { return a * b; }
__device__ __forceinline__ int y_wmul(int a, int b) { return (int)((unsigned int)a * (unsigned int)b); }
__device__ __forceinline__ y_i64 y_wmul(y_i64 a, y_i64 b) { return (y_i64)((unsigned long long)a * (unsigned long long)b); }
struct y_op_sum { template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return y_wadd(a, b); } };
struct y_op_prod { template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return y_wmul(a, b); } };
struct y_op_max { template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return y_maximum(a, b); } };
struct y_op_min { template <class T> __device__ __forceinline__ T operator()(T a, T b) const { return y_minimum(a, b); } };
template <class T, class F> __device__ __forceinline__ T y_warp_reduce(T v, F f) {
  for (int o = 16; o > 0; o >>= 1) v = f(v, __shfl_down_sync(0xffffffffu, v, o));
  return v;
}
// The reduction of v over the block's B threads, valid in thread 0 (smem: B/32 slots).
template <int B, class T, class F> __device__ __forceinline__ T y_block_reduce(T v, T id, F f, T* smem) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = y_warp_reduce(v, f);
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  v = ((int)threadIdx.x < B / 32) ? smem[lane] : id;
  if (warp == 0) v = y_warp_reduce(v, f);
  __syncthreads();
  return v;
}
"""
