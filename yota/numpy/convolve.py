"""Convolutions: ``np.convolve``, ``np.correlate``,
``np.lib.stride_tricks.sliding_window_view``, and the lowerings of ``scipy.signal``'s
``convolve``/``correlate`` (N-d) and ``convolve2d``/``correlate2d`` (``scipy_signal``
registers those).

Every mode is a centered slice of the *full* correlation ``c[i] = Σ_j x[i + j - (K-1)]
k[j]`` (``x`` zero outside, or extended by ``convolve2d``'s boundary rule); a convolution
correlates with the flipped kernel. The full correlation is the *valid* correlation of
``x`` padded by ``K - 1`` on each side (``valid_correlation``): a ``call`` of a body that
computes it, with its own derivative rule (``dx``: the full correlation of ``dy`` with
the flipped kernel; ``dk``: the valid correlation of ``x`` with ``dy``), so gradients are
correlations again, to any order. The body is one of (``_strategy``):

- ``"shifts"`` (a kernel of up to ``SHIFT_TERMS`` elements): ``Σ_j k[j] · x[j : j + O]``,
  one strided slice and one multiply-add per kernel element, which the fuse pass makes
  one kernel reading ``x`` in place: a direct loop, no intermediate array;
- ``"sums"`` (a result of up to ``SHIFT_TERMS`` elements, as a kernel's gradient): one
  reduction ``Σ x[j : j + K] · k`` per result element, fused into few kernels;
- ``"gemm"`` (both larger): im2col, the windows ``W[O, K]`` gathered (one ``gather`` per
  axis) and one matrix product ``W @ k`` (BLAS): memory ``O·K``.

Measured (``tools/bench_convolve.py``, README): shifts beat im2col at every size tried
(3 to 101 taps in 1-D, 3x3 to 15x15 in 2-D, 3x3x3), by 2-30x, and keep beating it as the
kernel grows, but compile time grows with the kernel (a 64x64 image's gradient: 3.6 s at
9x9, 27 s at 15x15 against 2.5 s with im2col), hence ``SHIFT_TERMS = 128``. A call's body
is not rolled into a loop (``roll`` sees loop bodies only): a sum of shifted slices
rolled was 10-100x slower than the same sum fused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from yota.ir.autodiff import register_call_rule
from yota.ir.core import Builder, Function, Op, Value
from yota.ir.errors import UnsupportedError
from yota.ir.types import TensorType

from ..userloc import where
from .registry import LoweringContext, register
from .static import normalize_axis, static_value

SHIFT_TERMS = 128  # kernels (or results) of at most this many elements: see _strategy
STRATEGY: str | None = None  # "shifts" or "gemm" forces one (benchmarks, tests)
RULED = True  # a call with its own derivative rule (False: the ops' rules; benchmarks)


# -- the core: valid correlation, padding, centered slices ---------------------------------------
def valid_correlation(b: Builder, x: Value, k: Value) -> Value:
    """``Σ_j x[i + j] k[j]`` for every ``i`` with the window inside ``x`` (same ndim): a
    ``call`` of a body computing it (``_strategy``), whose derivative rule is two
    correlations again (``_rule``): no ``scatter_add`` of windows, and a rule for any
    order."""
    out = tuple(n - m + 1 for n, m in zip(x.shape, k.shape, strict=True))
    if min(out, default=1) <= 0 or not k.type.size or not x.type.size:
        return b.const(0.0, x.dtype, tuple(max(o, 0) for o in out))
    kind = _strategy(k.type.size, math.prod(out))
    if not RULED:
        return _computed(b, x, k, out, kind)
    dims = "_".join("x".join(map(str, s)) or "0d" for s in (x.shape, k.shape))
    name = f"yota_correlate_{kind}_{x.dtype.name}_{dims}"
    callee = b.callees.get(name)
    if callee is None:
        sub = Builder(name)
        xi, ki = sub.input(x.type, "x"), sub.input(k.type, "k")
        callee = sub.build([_computed(sub, xi, ki, out, kind)])
        register_call_rule(name, _rule)
    return b.call(callee, x, k)[0]


def _strategy(k_size: int, out_size: int) -> str:
    """``shifts`` for a small kernel, ``sums`` (one reduction per result) for a small
    result (a kernel's gradient), ``gemm`` otherwise."""
    if STRATEGY is not None and k_size <= out_size:  # forced for the kernel side only
        return STRATEGY
    if k_size <= SHIFT_TERMS:
        return "shifts"
    return "sums" if out_size <= SHIFT_TERMS else "gemm"


def _computed(b: Builder, x: Value, k: Value, out: tuple[int, ...], kind: str) -> Value:
    if kind == "shifts":
        return _by_shifts(b, x, k, out)
    return _by_sums(b, x, k, out) if kind == "sums" else _by_gemm(b, x, k, out)


def _rule(b: Builder, op: Op, callee: Function, dys: Sequence[Value]) -> list[Value | None]:
    """``dx`` is the full correlation of ``dy`` with the flipped kernel, ``dk`` the valid
    correlation of ``x`` with ``dy``."""
    x, k = op.operands
    dy = dys[0]
    return [valid_correlation(b, pad_zeros(b, dy, k.shape), flipped(b, k)),
            valid_correlation(b, x, dy)]


def _by_shifts(b: Builder, x: Value, k: Value, out: tuple[int, ...]) -> Value:
    acc: Value | None = None
    one = (1,) * x.ndim
    for j in np.ndindex(*k.shape):
        w = b.reshape_to(b.slice(k, start=j, stop=tuple(i + 1 for i in j), step=one), ())
        xs = b.slice(x, start=j, stop=tuple(i + o for i, o in zip(j, out, strict=True)),
                     step=one)
        term = b.mul(xs, b.broadcast_to(w, out))
        acc = term if acc is None else b.add(acc, term)
    assert acc is not None
    return acc


def _by_sums(b: Builder, x: Value, k: Value, out: tuple[int, ...]) -> Value:
    one, axes = (1,) * x.ndim, tuple(range(x.ndim))
    parts = [b.reshape_to(b.sum(b.mul(b.slice(x, start=j, stop=tuple(
        i + n for i, n in zip(j, k.shape, strict=True)), step=one), k), axes=axes), (1,))
        for j in np.ndindex(*out)]
    flat = parts[0] if len(parts) == 1 else b.concatenate(*parts, axis=0)
    return b.reshape_to(flat, out)


def windows(b: Builder, x: Value, window: tuple[int, ...], axes: tuple[int, ...]) -> Value:
    """``x``'s windows of ``window`` along ``axes``: each axis ``a`` becomes
    ``x.shape[a] - w + 1`` positions, the window's axes appended last (in ``axes``'
    order): NumPy's ``sliding_window_view``."""
    for w, a in zip(window, axes, strict=True):
        n = x.shape[a] - w + 1
        idx = np.arange(n, dtype=np.int64)[:, None] + np.arange(w, dtype=np.int64)[None, :]
        g = b.gather(x, b.const(idx), axis=a)  # [..., n, w, ...] at a
        perm = [i for i in range(g.ndim) if i != a + 1] + [a + 1]
        x = b.transpose(g, perm=tuple(perm))
    return x


def _by_gemm(b: Builder, x: Value, k: Value, out: tuple[int, ...]) -> Value:
    win = windows(b, x, k.shape, tuple(range(x.ndim)))  # [out..., k...]
    p, q = math.prod(out), k.type.size
    prod = b.matmul(b.reshape_to(win, (p, q)), b.reshape_to(k, (q, 1)))
    return b.reshape_to(prod, out)


def pad_zeros(b: Builder, x: Value, k_shape: tuple[int, ...]) -> Value:
    """``x`` with ``K - 1`` zeros on each side of every axis (for the full correlation)."""
    w = tuple(m - 1 for m in k_shape)
    return b.pad(x, low=w, high=w, interior=(0,) * x.ndim) if any(w) else x


def centered(b: Builder, full: Value, shape: tuple[int, ...], late: bool = False) -> Value:
    """The ``shape`` part of ``full`` centered in it (SciPy's ``_centered``); ``late``: an
    odd leftover goes before, not after (NumPy's correlate of a longer kernel)."""
    start = tuple((n - s + 1) // 2 if late else (n - s) // 2
                  for n, s in zip(full.shape, shape, strict=True))
    if shape == full.shape:
        return full
    return b.slice(full, start=start, stop=tuple(a + s for a, s in zip(start, shape,
                                                                         strict=True)),
                   step=(1,) * full.ndim)


def full_correlation(b: Builder, x: Value, k: Value) -> Value:
    return valid_correlation(b, pad_zeros(b, x, k.shape), k)


def flipped(b: Builder, k: Value) -> Value:
    return b.flip(k, axes=tuple(range(k.ndim))) if k.ndim else k


def _float(L: LoweringContext, a: Any, o: TensorType) -> Value:
    """Argument ``a`` in the dtype the correlation is computed in (integers: float64,
    exact below 2**53; converted back at the end)."""
    return L.operand(a, o.dtype if o.dtype.kind == "f" else np.float64, None)


# -- np.convolve, np.correlate ------------------------------------------------------------------
def _mode(mode: Any, what: str) -> str:
    if isinstance(mode, (int, np.integer)) and 0 <= int(mode) <= 2:
        return ("valid", "same", "full")[int(mode)]
    if mode in ("full", "same", "valid"):
        return str(mode)
    raise UnsupportedError(f"{what}(..., mode={mode!r}) at {where()}: Yota supports the "
                           "modes 'full', 'same' and 'valid'")


def _numpy_1d(L: LoweringContext, o: TensorType, a: Any, v: Any, mode: Any,
              convolve: bool) -> Value:
    b = L.b
    x, k = (b.reshape_to(_float(L, t, o), (_size(L, t),)) for t in (a, v))  # ndmin=1
    n, m = x.shape[0], k.shape[0]
    swap = m > n
    if convolve:
        x, k = (k, x) if swap else (x, k)
        k = flipped(b, k)
    full = full_correlation(b, x, k)
    mode = _mode(mode, "np.convolve" if convolve else "np.correlate")
    size = {"full": n + m - 1, "same": max(n, m), "valid": max(n, m) - min(n, m) + 1}[mode]
    r = centered(b, full, (size,), late=swap and not convolve)
    return b.convert_to(r, o.dtype)


def _size(L: LoweringContext, a: Any) -> int:
    t = L.type_of(a)
    return 1 if t is None else t.size


@register("convolve", np.convolve, np.convolve)
def _convolve(L: LoweringContext, outs: list[TensorType], a: Any, v: Any,
              mode: Any = "full") -> Value:
    return _numpy_1d(L, outs[0], a, v, static_value(L, mode, "np.convolve's mode"), True)


@register("correlate", np.correlate, np.correlate)
def _correlate(L: LoweringContext, outs: list[TensorType], a: Any, v: Any,
               mode: Any = "valid") -> Value:
    return _numpy_1d(L, outs[0], a, v, static_value(L, mode, "np.correlate's mode"), False)


# -- sliding_window_view ------------------------------------------------------------------------
_swv = np.lib.stride_tricks.sliding_window_view


@register("sliding_window_view", _swv, _swv)
def _sliding_window_view(L: LoweringContext, outs: list[TensorType], x: Any,
                         window_shape: Any, axis: Any = None, *, subok: bool = False,
                         writeable: bool = False) -> Value:
    o = outs[0]
    v = L.operand(x, o.dtype, None)
    shape = static_value(L, window_shape, "sliding_window_view's window_shape")
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
    ax = static_value(L, axis, "sliding_window_view's axis")
    if ax is None:
        axes = tuple(range(v.ndim))
    else:
        raw = (ax,) if np.ndim(ax) == 0 else tuple(ax)
        axes = tuple(normalize_axis(int(a), v.ndim, "sliding_window_view") for a in raw)
    if not o.size:
        return L.b.const(0, o.dtype, o.shape)
    return windows(L.b, v, shape, axes)


# -- scipy.signal: N-d and 2-d (registered by scipy_signal) --------------------------------------
def nd_correlation(L: LoweringContext, o: TensorType, in1: Any, in2: Any, mode: Any,
                   convolve: bool, what: str) -> Value:
    """``scipy.signal.convolve``/``correlate``: the centered part of the full result of
    the mode's size (``same``: ``in1``'s shape; ``valid``: the larger less the smaller)."""
    b = L.b
    x, k = _float(L, in1, o), _float(L, in2, o)
    if not o.size:
        return b.const(0, o.dtype, o.shape)
    if x.ndim == 0:
        return b.convert_to(b.mul(x, k), o.dtype)
    full = full_correlation(b, x, flipped(b, k) if convolve else k)
    _mode(mode, what)
    return b.convert_to(centered(b, full, o.shape), o.dtype)


def _wrapped(n: int, p: int, boundary: str) -> int:
    """The index of ``x`` that padded position ``p`` (may be outside ``0..n-1``) reads."""
    if boundary == "wrap":
        return p % n
    q = p % (2 * n)
    return q if q < n else 2 * n - 1 - q


def boundary_pad(b: Builder, x: Value, k_shape: tuple[int, ...], boundary: str,
                 fill: Value | None) -> Value:
    """``x`` extended by ``K - 1`` on each side: with ``fill`` (``'fill'``), periodically
    (``'wrap'``) or mirrored with the edge repeated (``'symm'``)."""
    if boundary == "fill":
        padded = pad_zeros(b, x, k_shape)
        if fill is None:
            return padded
        ones = pad_zeros(b, b.const(1.0, x.dtype, x.shape), k_shape)
        rest = b.sub(b.const(1.0, x.dtype, padded.shape), ones)
        return b.add(padded, b.mul(rest, b.broadcast_to(fill, padded.shape)))
    for ax, m in enumerate(k_shape):
        n = x.shape[ax]
        idx = np.array([_wrapped(n, p, boundary) for p in range(-(m - 1), n + m - 1)],
                       np.int64)
        x = b.gather(x, b.const(idx), axis=ax)
    return x


def correlation_2d(L: LoweringContext, o: TensorType, in1: Any, in2: Any, mode: Any,
                   boundary: Any, fillvalue: Any, convolve: bool, what: str) -> Value:
    """``scipy.signal.convolve2d``/``correlate2d``: the full result over ``x`` extended by
    ``boundary``, centered (``correlate2d``'s 'same' puts an odd leftover first)."""
    b = L.b
    x, k = _float(L, in1, o), _float(L, in2, o)
    if not o.size:
        return b.const(0, o.dtype, o.shape)
    mode = _mode(mode, what)
    bound = {"fill": "fill", "pad": "fill", "wrap": "wrap", "circular": "wrap",
             "symm": "symm", "symmetric": "symm"}.get(str(boundary))
    if bound is None:
        raise UnsupportedError(f"{what}(..., boundary={boundary!r}) at {where()}")
    if convolve:
        k = flipped(b, k)
    if mode == "valid":
        return b.convert_to(centered(b, full_correlation(b, x, k), o.shape), o.dtype)
    fill = None
    if L.is_traced(fillvalue) or float(np.asarray(fillvalue)) != 0.0:
        fill = b.reshape_to(L.operand(fillvalue, x.dtype, None), ())
    full = valid_correlation(b, boundary_pad(b, x, k.shape, bound, fill), k)
    return b.convert_to(centered(b, full, o.shape, late=not convolve), o.dtype)
