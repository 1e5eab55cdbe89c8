"""Kernels (``backends.kernel.Kernel``) rendered as CUDA C.

``render_*`` turn one into a ``__global__`` function: pointer parameters (one per storage,
already moved to the lowest element the kernel touches, so kernels that differ only in
where they start are one kernel), every shape and stride a compile-time constant, and one
of three schedules:

- elementwise: a grid-stride loop over the domain's linear index;
- row reduction (the innermost axis is reduced): blocks walk the kept indices, the
  threads of a block split the reduced ones and combine with warp shuffles and shared
  memory (``y_block_reduce``);
- column reduction (the innermost axis is kept): one thread per kept index, reading
  consecutive kept indices in consecutive threads (coalesced), looping over the reduced
  ones.

When the kept indices are too few to fill the device, ``S`` blocks share each one and a
second-stage kernel combines their partial results. Domain-shaped outputs of a kernel
that also reduces are written as its elements are visited (each exactly once).

Kernels are normalized first (``backends.kernel.normalize``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..kernel import Access, Kernel, contiguous_strides
from .cexpr import COMBINE, EXPRS, acc_type, convert, ctype, identity, literal
from .specfun import ATTR_EXPRS

INT32_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class Config:
    """What rendering and launch shapes depend on (part of every cache key)."""

    block: int = 256  # threads per block (a multiple of 32)
    target_blocks: int = 1024  # blocks that fill the device (~8 of 256 threads per SM, 132 SMs)
    max_grid: int = 4096  # blocks of a grid-stride launch
    fast_math: bool = False

    def key(self) -> str:
        return f"b{self.block}t{self.target_blocks}g{self.max_grid}f{int(self.fast_math)}"


# -- schedules ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Schedule:
    kind: str  # "elementwise" | "row" | "column"
    grid: tuple[int, int, int]
    splits: int  # S: blocks (row) or block rows (column) sharing one kept index


def schedule(k: Kernel, cfg: Config) -> Schedule:
    B = cfg.block
    if not k.reductions:
        n = k.size()
        return Schedule("elementwise", (max(1, min(-(-n // B), cfg.max_grid)), 1, 1), 1)
    nk = int(np.prod([d for d, r in zip(k.domain, k.reduce, strict=True) if not r]))
    nr = int(np.prod([d for d, r in zip(k.domain, k.reduce, strict=True) if r]))
    if k.reduce[-1]:
        s = 1 if nk >= cfg.target_blocks else max(1, min(-(-cfg.target_blocks // nk),
                                                         -(-nr // (B * 4)), 1024))
        return Schedule("row", (max(1, min(nk, cfg.max_grid)), s, 1), s)
    bx = -(-nk // B)
    s = 1 if bx >= cfg.target_blocks else max(1, min(-(-cfg.target_blocks // bx),
                                                     -(-nr // 16), 1024))
    return Schedule("column", (max(1, min(bx, cfg.max_grid)), s, 1), s)


# -- rendering --------------------------------------------------------------------------------------
@dataclass
class Params:
    """The kernel's pointer parameters: C element type and whether it is written."""

    types: dict[int, str] = field(default_factory=dict)
    written: set[int] = field(default_factory=set)

    def use(self, acc: Access, write: bool = False) -> None:
        self.types.setdefault(acc.param, ctype(acc.dtype))
        if write:
            self.written.add(acc.param)

    def ref(self, acc: Access) -> str:
        t = ctype(acc.dtype)
        return f"p{acc.param}" if self.types[acc.param] == t else f"(({t}*)p{acc.param})"

    def signature(self, extra: list[str] = ()) -> str:  # type: ignore[assignment]
        ps = []
        for p in sorted(self.types):
            const = "" if p in self.written else "const "
            ps.append(f"{const}{self.types[p]}* __restrict__ p{p}")
        return ", ".join(ps + list(extra))


def index_type(k: Kernel) -> str:
    """``int`` when every index and offset fits in 32 bits, else ``long long``."""
    big = k.size()
    for a in k.walks():
        span = abs(a.offset) + sum((d - 1) * abs(s) for d, s in zip(k.domain, a.strides,
                                                                     strict=True))
        big = max(big, span)
    return "int" if big < INT32_LIMIT // 2 else "long long"


def coords(var: str, axes: list[int], dims: tuple[int, ...], ix: str, prefix: str = "c"
           ) -> list[str]:
    """C lines computing coordinate ``c<axis>`` of every axis in ``axes`` (row-major)
    from linear index ``var``."""
    if not axes:
        return []
    if len(axes) == 1:
        return [f"const {ix} {prefix}{axes[0]} = {var};"]
    lines = [f"{ix} t_{prefix} = {var};"]
    for a in reversed(axes[1:]):
        lines.append(f"const {ix} {prefix}{a} = t_{prefix} % {dims[a]}; t_{prefix} /= {dims[a]};")
    lines.append(f"const {ix} {prefix}{axes[0]} = t_{prefix};")
    return lines


def offset(acc: Access, axes: list[int], prefix: str = "c", base: str | None = None) -> str:
    terms = [base] if base is not None else ([str(acc.offset)] if acc.offset else [])
    for a in axes:
        s = acc.strides[a]
        if s:
            terms.append(f"{prefix}{a}" if s == 1 else f"{prefix}{a} * {s}")
    return " + ".join(terms) or "0"


class Body:
    """Renders the kernel's values and stores at one domain element."""

    def __init__(self, k: Kernel, params: Params, fast: bool) -> None:
        self.k, self.params, self.fast = k, params, fast

    def lines(self, index: Any) -> list[str]:
        """``index(acc)`` is the C element index of an access at the current element."""
        out = []
        for i, n in enumerate(self.k.nodes):
            t = ctype(n.dtype)
            if n.kind == "read":
                assert n.acc is not None
                out.append(f"const {t} v{i} = {self.params.ref(n.acc)}[{index(n.acc)}];")
            elif n.kind == "const":
                out.append(f"const {t} v{i} = {literal(n.value, n.dtype)};")
            elif n.kind == "index":
                out.append(f"const {t} v{i} = ({t})({index(self.k.index_access(i))});")
            else:
                xs = [f"v{a}" for a in n.args]
                dts = [self.k.nodes[a].dtype for a in n.args]
                expr = (ATTR_EXPRS[n.name](xs, dts, n.dtype, dict(n.attrs))
                        if n.name in ATTR_EXPRS else EXPRS[n.name](xs, dts, n.dtype, self.fast))
                out.append(f"const {t} v{i} = {expr};")
        for vid, acc in self.k.stores:
            val = convert(f"v{vid}", self.k.nodes[vid].dtype, acc.dtype)
            out.append(f"{self.params.ref(acc)}[{index(acc)}] = {val};")
        return out


def _params(k: Kernel) -> Params:
    p = Params()
    for n in k.nodes:
        if n.acc is not None:
            p.use(n.acc)
    for _, a in k.stores:
        p.use(a, write=True)
    for _, _, a in k.reductions:
        p.use(a, write=True)
    return p


def _head(name: str, cfg: Config, sig: str) -> str:
    return f'extern "C" __global__ void __launch_bounds__({cfg.block}) {name}({sig}) {{'


def _indent(lines: list[str], n: int) -> list[str]:
    return [" " * n + x for x in lines]


def size_generic(k: Kernel) -> bool:
    """A flat elementwise kernel whose accesses are contiguous or splats takes its size as
    a parameter (``n_``), so one kernel serves every size."""
    return (not k.reductions and len(k.domain) == 1
            and all(a.strides[0] in (0, 1) for a in k.walks()))


def render_elementwise(k: Kernel, name: str, cfg: Config) -> str:
    params, ix = _params(k), index_type(k)
    n, axes = k.size(), list(range(len(k.domain)))
    dense = contiguous_strides(k.domain)
    generic = size_generic(k)
    if generic:
        n = "n"  # type: ignore[assignment]

    def index(acc: Access) -> str:
        if acc.strides == dense or len(axes) == 1 and acc.strides[0] == 1:
            return f"{acc.offset} + i" if acc.offset else "i"
        return offset(acc, axes)
    body = Body(k, params, cfg.fast_math).lines(index)
    need_coords = any(a.strides != dense for a in k.walks())
    lines = [_head(name, cfg, params.signature(["const long long n_"] if generic else [])),
             *([f"  const {ix} n = ({ix})n_;"] if generic else []),
             f"  for ({ix} i = ({ix})blockIdx.x * {cfg.block} + threadIdx.x; i < {n}; "
             f"i += ({ix})gridDim.x * {cfg.block}) {{",
             *_indent(coords("i", axes, k.domain, ix) if need_coords else [], 4),
             *_indent(body, 4), "  }", "}"]
    return "\n".join(lines)


def _split_axes(k: Kernel) -> tuple[list[int], list[int], int, int]:
    kept = [a for a, r in enumerate(k.reduce) if not r]
    red = [a for a, r in enumerate(k.reduce) if r]
    nk = int(np.prod([k.domain[a] for a in kept]))
    nr = int(np.prod([k.domain[a] for a in red]))
    return kept, red, nk, nr


def _reduction_setup(k: Kernel, params: Params, kept: list[int], ix: str
                     ) -> tuple[list[str], dict[Access, str]]:
    """Kept coordinates' bases: one per distinct access."""
    bases: dict[Access, str] = {}
    lines = []
    for acc in k.walks():
        if acc not in bases:
            bases[acc] = f"b{len(bases)}"
            lines.append(f"const {ix} {bases[acc]} = {offset(acc, kept, 'k')};")
    return lines, bases


@dataclass(frozen=True)
class _Acc:
    """One reduction's accumulator: C variable, C type, kind, value id, output access."""

    var: str
    ctype: str
    kind: str
    vid: int
    acc: Access
    vdt: np.dtype

    def ident(self) -> str:
        return identity(self.kind, self.vdt)


def _accumulators(k: Kernel) -> list[_Acc]:
    return [_Acc(f"a{j}", acc_type(k.nodes[vid].dtype), kind, vid, acc, k.nodes[vid].dtype)
            for j, (kind, vid, acc) in enumerate(k.reductions)]


def _kept_loop(row: bool, ix: str, nk: int, B: int) -> str:
    """Row: one block per kept index; column: one thread per kept index."""
    if row:
        return f"  for ({ix} kk = blockIdx.x; kk < {nk}; kk += gridDim.x) {{"
    return (f"  for ({ix} kk = ({ix})blockIdx.x * {B} + threadIdx.x; kk < {nk}; "
            f"kk += ({ix})gridDim.x * {B}) {{")


def _finish(accs: list[_Acc], row: bool, B: int, write: Any) -> list[str]:
    """Combine across the block (row schedules), then thread 0 (row) or every thread
    (column) writes: ``write(acc)`` is the C statement."""
    out = []
    if row:
        out += [f"{a.var} = y_block_reduce<{B}>({a.var}, ({a.ctype}){a.ident()}, "
                f"{COMBINE[a.kind]}(), s{j});" for j, a in enumerate(accs)]
    guard = "if (threadIdx.x == 0) " if row else ""
    return out + [guard + write(j, a) for j, a in enumerate(accs)]


def render_reduction(k: Kernel, name: str, cfg: Config, sch: Schedule) -> str:
    """A row or column reduction; with ``sch.splits > 1`` each reduction writes partial
    results to an extra parameter ``q<j>`` (``S`` per kept index) instead."""
    params, ix = _params(k), index_type(k)
    B, S = cfg.block, sch.splits
    kept, red, nk, nr = _split_axes(k)
    row = sch.kind == "row"
    setup, bases = _reduction_setup(k, params, kept, ix)
    body = Body(k, params, cfg.fast_math).lines(lambda acc: offset(acc, red, "r", bases[acc]))
    accs = _accumulators(k)
    extra = [f"{a.ctype}* __restrict__ q{j}" for j, a in enumerate(accs)] if S > 1 else []
    lines = [_head(name, cfg, params.signature(extra))]
    if row:
        lines += [f"  __shared__ {a.ctype} s{j}[{B // 32}];" for j, a in enumerate(accs)]
        loop = (f"for ({ix} rr = ({ix})blockIdx.y * {B} + threadIdx.x; rr < {nr}; "
                f"rr += {S * B}) {{")
    else:
        loop = f"for ({ix} rr = blockIdx.y; rr < {nr}; rr += {S}) {{"
    lines.append(_kept_loop(row, ix, nk, B))
    inner = coords("kk", kept, k.domain, ix, "k") + setup
    inner += [f"{a.ctype} {a.var} = {a.ident()};" for a in accs]
    inner += [loop, *_indent(coords("rr", red, k.domain, ix, "r") + body, 2)]
    inner += [f"  {a.var} = {COMBINE[a.kind]}()({a.var}, ({a.ctype})v{a.vid});" for a in accs]
    inner.append("}")

    def write(j: int, a: _Acc) -> str:
        if S > 1:
            slot = f"kk * {S} + blockIdx.y" if row else f"({ix})blockIdx.y * {nk} + kk"
            return f"q{j}[{slot}] = {a.var};"
        return f"{params.ref(a.acc)}[{bases[a.acc]}] = {_store_acc(a.var, a.vdt, a.acc.dtype)};"
    inner += _finish(accs, row, B, write)
    lines += _indent(inner, 4) + ["  }", "}"]
    return "\n".join(lines)


def _store_acc(a: str, vdt: np.dtype, out: np.dtype) -> str:
    if np.dtype(vdt).kind == "b":
        return convert(f"({a} != 0)", np.dtype(bool), out)
    return convert(a, vdt, out)


def render_stage2(k: Kernel, name: str, cfg: Config, sch: Schedule) -> str:
    """Combine the ``S`` partial results of each kept index into the outputs."""
    params = Params()
    for _, _, a in k.reductions:
        params.use(a, write=True)
    ix = index_type(k)
    B, S = cfg.block, sch.splits
    kept, _, nk, _ = _split_axes(k)
    row = sch.kind == "row"
    accs = _accumulators(k)
    extra = [f"const {a.ctype}* __restrict__ q{j}" for j, a in enumerate(accs)]
    lines = [_head(name, cfg, params.signature(extra))]
    if row:
        lines += [f"  __shared__ {a.ctype} s{j}[{B // 32}];" for j, a in enumerate(accs)]
        loop, slot = f"for (int s = threadIdx.x; s < {S}; s += {B}) {{", f"kk * {S} + s"
    else:
        loop, slot = f"for (int s = 0; s < {S}; ++s) {{", f"({ix})s * {nk} + kk"
    lines.append(_kept_loop(row, ix, nk, B))
    inner = coords("kk", kept, k.domain, ix, "k")
    inner += [f"{a.ctype} {a.var} = {a.ident()};" for a in accs]
    inner.append(loop)
    inner += [f"  {a.var} = {COMBINE[a.kind]}()({a.var}, q{j}[{slot}]);"
              for j, a in enumerate(accs)]
    inner.append("}")
    inner += _finish(accs, row, B, lambda j, a: (
        f"{params.ref(a.acc)}[{offset(a.acc, kept, 'k')}] = "
        f"{_store_acc(a.var, a.vdt, a.acc.dtype)};"))
    lines += _indent(inner, 4) + ["  }", "}"]
    return "\n".join(lines)


def kernel_name(source: str, prefix: str = "y") -> str:
    """A name from the kernel's text (equal kernels get one name, and one compilation)."""
    return f"{prefix}_{hashlib.sha1(source.encode()).hexdigest()[:16]}"


def named(template: str, prefix: str) -> tuple[str, str]:
    """``template`` contains ``NAME``; returns (name, source)."""
    name = kernel_name(template, prefix)
    return name, template.replace("NAME", name, 1)
