"""Kernels that are not a domain with an elementwise body: integer-array indexing
(``gather``, ``scatter_add`` with ``atomicAdd``), arg-reductions, and guards.

Each ``render_*`` returns a source with the placeholder ``NAME`` (``kernel.named`` gives
it a name from its text). Failures (a guard that does not hold, an index out of range)
go to the status words: ``status[0]`` takes the failure's code if it is still 0, and
``status[1]`` the offending value; the host reads them after the call.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .cexpr import ctype, literal
from .kernel import Config, coords, offset

STATUS_HELPERS = r"""
__device__ __forceinline__ void y_fail(unsigned long long* status, unsigned long long code,
                                       unsigned long long value) {
  if (atomicCAS(status, 0ULL, code) == 0ULL) status[1] = value;
}
template <class T> __device__ __forceinline__ unsigned long long y_bits(T x) {
  unsigned long long r = 0;
  *(T*)&r = x;
  return r;
}
__device__ __forceinline__ void y_atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void y_atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void y_atomic_add(int* p, int v) { atomicAdd(p, v); }
__device__ __forceinline__ void y_atomic_add(long long* p, long long v) {
  atomicAdd((unsigned long long*)p, (unsigned long long)v);
}
__device__ __forceinline__ void y_atomic_add(bool* p, bool v) { if (v) *p = true; }
"""


@dataclass(frozen=True)
class Strided:
    """An operand of a special kernel: element offset and strides (parameter implied)."""

    offset: int
    strides: tuple[int, ...]
    dtype: np.dtype


def _ix(*spans: int) -> str:
    return "int" if max(spans, default=0) < 2**30 else "long long"


def _span(s: Strided, shape: tuple[int, ...]) -> int:
    return abs(s.offset) + sum((d - 1) * abs(st) for d, st in zip(shape, s.strides, strict=True))


def render_indexed(cfg: Config, *, scatter: bool, small_shape: tuple[int, ...],
                   big_shape: tuple[int, ...], axis: int, small: Strided, big: Strided,
                   idx: list[Strided], codes: list[int], overwrite: bool = False) -> str:
    """``gather`` (``small[i] = big[idx...]``) or ``scatter_add`` (``big[idx...] +=
    small[i]``; ``overwrite``: ``scatter``, ``big[idx...] = small[i]``), walking the gathered shape ``small_shape``. Indices count from the end
    when negative; one out of range is a failure (``code``) and its element is skipped
    (a gather writes 0 there); ``codes[m]`` is the failure of index array ``m``."""
    ni, nk = len(idx[0].strides), len(idx)
    nd = len(small_shape)
    n = int(np.prod(small_shape, dtype=np.int64))
    ix = _ix(n, _span(small, small_shape), _span(big, big_shape),
             *[_span(s, small_shape[axis:axis + ni]) for s in idx])
    t = ctype(small.dtype)
    params = [f"{'' if not scatter else 'const '}{t}* __restrict__ ps",
              f"{'const ' if not scatter else ''}{t}* __restrict__ pb"]
    params += [f"const {ctype(s.dtype)}* __restrict__ pi{m}" for m, s in enumerate(idx)]
    params.append("unsigned long long* __restrict__ status")
    axes = list(range(nd))
    lines = [f'extern "C" __global__ void __launch_bounds__({cfg.block}) NAME({", ".join(params)}) {{',
             f"  for ({ix} i = ({ix})blockIdx.x * {cfg.block} + threadIdx.x; i < {n}; "
             f"i += ({ix})gridDim.x * {cfg.block}) {{"]
    body = coords("i", axes, small_shape, ix)
    body.append("bool bad = false;")
    mid = list(range(axis, axis + ni))
    big_terms = [offset(Strided(big.offset, big.strides, big.dtype), [], "c")]  # type: ignore[arg-type]
    for m, s in enumerate(idx):
        dim = big_shape[axis + m]
        ioff = s.offset + 0
        terms = [str(ioff)] + [f"c{a} * {st}" for a, st in zip(mid, s.strides, strict=True) if st]
        body += [f"long long j{m} = (long long)pi{m}[{' + '.join(terms)}];",
                 f"const long long raw{m} = j{m};",
                 f"if (j{m} < 0) j{m} += {dim};",
                 f"if (j{m} < 0 || j{m} >= {dim}) {{ y_fail(status, {codes[m]}ULL, "
                 f"(unsigned long long)raw{m}); bad = true; }}"]
        if big.strides[axis + m]:
            big_terms.append(f"({ix})j{m} * {big.strides[axis + m]}")
    pre, post = list(range(axis)), list(range(axis + ni, nd))
    for a in pre:
        if big.strides[a]:
            big_terms.append(f"c{a} * {big.strides[a]}")
    for a in post:
        st = big.strides[a - ni + nk]
        if st:
            big_terms.append(f"c{a} * {st}")
    small_off = offset(Strided(small.offset, small.strides, small.dtype), axes)  # type: ignore[arg-type]
    big_off = " + ".join(big_terms)
    if scatter and overwrite:
        body.append(f"if (!bad) pb[{big_off}] = ps[{small_off}];")
    elif scatter:
        body.append(f"if (!bad) y_atomic_add(&pb[{big_off}], ps[{small_off}]);")
    else:
        body.append(f"ps[{small_off}] = bad ? ({t})0 : pb[{big_off}];")
    lines += ["    " + x for x in body] + ["  }", "}"]
    return "\n".join(lines)


def render_argext(cfg: Config, *, is_max: bool, shape: tuple[int, ...], axis: int,
                  x: Strided, out: Strided) -> str:
    """argmax/argmin along ``axis``: one thread per kept index; the first extreme wins,
    and a NaN beats everything (the first NaN)."""
    kept = [a for a in range(len(shape)) if a != axis]
    nk = int(np.prod([shape[a] for a in kept], dtype=np.int64))
    ix = _ix(nk, _span(x, shape))
    t = ctype(x.dtype)
    pred = ">" if is_max else "<"
    better = (f"(v {pred} best || (v != v && best == best))" if x.dtype.kind == "f"
              else f"(v {pred} best)")
    kdims = tuple(shape[a] for a in kept)
    kc = coords("kk", list(range(len(kept))), kdims, ix, "k")
    xs = Strided(x.offset, tuple(x.strides[a] for a in kept), x.dtype)
    body = kc + [f"const {ix} base = {offset(xs, list(range(len(kept))), 'k')};",  # type: ignore[arg-type]
                 f"{t} best = px[base];", "long long bi = 0;",
                 f"for ({ix} j = 1; j < {shape[axis]}; ++j) {{",
                 f"  const {t} v = px[base + j * {x.strides[axis]}];",
                 f"  if {better} {{ best = v; bi = j; }}", "}",
                 f"po[{offset(out, list(range(len(kept))), 'k')}] = bi;"]  # type: ignore[arg-type]
    lines = [f'extern "C" __global__ void __launch_bounds__({cfg.block}) NAME('
             f"const {t}* __restrict__ px, long long* __restrict__ po) {{",
             f"  for ({ix} kk = ({ix})blockIdx.x * {cfg.block} + threadIdx.x; kk < {nk}; "
             f"kk += ({ix})gridDim.x * {cfg.block}) {{",
             *["    " + b for b in body], "  }", "}"]
    return "\n".join(lines)


def guard_condition(dt: np.dtype, kind: str, expected: object) -> str:
    """``guard_holds`` of ``yota.ir.ops.misc`` on the element ``x``, in C."""
    k = np.dtype(dt).kind
    if kind == "bool":
        return f"((x != 0) == {'true' if bool(expected) else 'false'})"
    if kind == "int":
        e = int(expected)  # type: ignore[call-overload]
        if k == "f":
            return f"(trunc((double)x) == {literal(float(e), np.dtype(np.float64))})"
        return f"((long long)x == {literal(e, np.dtype(np.int64))})"
    e = float(expected)  # type: ignore[arg-type]
    if e != e:
        return "(x != x)"
    return f"((double)x == {literal(e, np.dtype(np.float64))})"


def render_guard(cfg: Config, *, dt: np.dtype, off: int, kind: str, expected: object,
                 code: int) -> str:
    t = ctype(dt)
    return "\n".join([
        f'extern "C" __global__ void NAME(const {t}* __restrict__ px, '
        "unsigned long long* __restrict__ status) {",
        f"  const {t} x = px[{off}];",
        f"  if (!{guard_condition(dt, kind, expected)}) y_fail(status, {code}ULL, y_bits(x));",
        "}"])


def _elementwise_head(cfg: Config, params: list[str], n: int, ix: str) -> list[str]:
    return [f'extern "C" __global__ void __launch_bounds__({cfg.block}) NAME({", ".join(params)}) {{',
            f"  for ({ix} i = ({ix})blockIdx.x * {cfg.block} + threadIdx.x; i < {n}; "
            f"i += ({ix})gridDim.x * {cfg.block}) {{"]


def render_concat(cfg: Config, *, shape: tuple[int, ...], axis: int, out: Strided,
                  parts: list[tuple[int, Strided]]) -> str:
    """Part of a concatenation in one kernel: ``shape`` is the region of the output the
    ``parts`` (length along ``axis``, operand) fill, in order; parameter 0 is the output
    (at the region's start), then one per part."""
    t = ctype(out.dtype)
    n = int(np.prod(shape, dtype=np.int64))
    ix = _ix(n, _span(out, shape), *[_span(s, shape) for _, s in parts])
    axes = list(range(len(shape)))
    params = [f"{t}* __restrict__ po"] + [f"const {t}* __restrict__ p{j}"
                                          for j in range(len(parts))]
    body = coords("i", axes, shape, ix) + [f"{t} v;"]
    start = 0
    for j, (length, s) in enumerate(parts):
        terms = [f"(c{axis} - {start}) * {s.strides[axis]}" if s.strides[axis] else ""]
        terms += [f"c{a} * {s.strides[a]}" for a in axes if a != axis and s.strides[a]]
        idx = " + ".join(x for x in terms if x) or "0"
        cond = f"if (c{axis} < {start + length}) " if j < len(parts) - 1 else ""
        body.append(f"{'else ' if j else ''}{cond}v = p{j}[{idx}];")
        start += length
    body.append(f"po[{offset(out, axes)}] = v;")  # type: ignore[arg-type]
    lines = _elementwise_head(cfg, params, n, ix) + ["    " + b for b in body] + ["  }", "}"]
    return "\n".join(lines)


def render_pad(cfg: Config, *, shape: tuple[int, ...], low: tuple[int, ...],
               interior: tuple[int, ...], x_shape: tuple[int, ...], x: Strided,
               out: Strided) -> str:
    """Zero padding in one kernel over the output: an element either comes from ``x``
    (its offset from ``low`` is a multiple of ``interior + 1`` inside ``x``) or is 0."""
    t = ctype(out.dtype)
    n = int(np.prod(shape, dtype=np.int64))
    ix = _ix(n, _span(out, shape), _span(x, x_shape))
    axes = list(range(len(shape)))
    body = coords("i", axes, shape, ix) + ["bool in = true;", f"{ix} src = 0;"]
    for a in axes:
        step = interior[a] + 1
        body += [f"const {ix} q{a} = c{a} - {low[a]};",
                 f"in = in && q{a} >= 0 && q{a} < {max(x_shape[a] - 1, 0) * step + 1}"
                 + (f" && q{a} % {step} == 0;" if step > 1 else ";")]
        if x.strides[a]:
            body.append(f"src += (q{a} / {step}) * {x.strides[a]};" if step > 1
                        else f"src += q{a} * {x.strides[a]};")
    if any(d == 0 for d in x_shape):
        body.append("in = false;")
    body.append(f"po[{offset(out, axes)}] = in ? px[src] : ({t})0;")  # type: ignore[arg-type]
    params = [f"{t}* __restrict__ po", f"const {t}* __restrict__ px"]
    lines = _elementwise_head(cfg, params, n, ix) + ["    " + b for b in body] + ["  }", "}"]
    return "\n".join(lines)
