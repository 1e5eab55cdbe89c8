"""The kernel model every backend renders: a domain (a static index space), how each
operand maps onto it (``Access``: a kernel parameter, an element offset and one stride
per domain axis: broadcasting is a zero stride, a transposed or sliced view is its
strides), an elementwise body (``Node``s: reads, literals, elementwise ops), stores of
domain-shaped results, and reductions over some domain axes.

A ``Kernel`` is plain data: ``llvm/kernel.py`` renders one as a vectorized LLVM loop nest,
``cuda/kernel.py`` as CUDA C. The emitters that build kernels from ops live in
``backends/emit.py``; ``normalize`` (merge the axes every access walks as one) and the
small fill/copy kernels are here.

    >>> import numpy as np
    >>> k = copy_kernel((3, 4), Access(0, 0, (4, 1), np.dtype("f4")),
    ...                 Access(1, 0, (4, 1), np.dtype("f4")))
    >>> normalize(k).domain, k.nparams
    ((12,), 2)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

REDUCE_KINDS = ("sum", "prod", "max", "min")
# the elementwise op that combines two partial results of a reduction
COMBINE_OP = {"sum": "add", "prod": "mul", "max": "maximum", "min": "minimum"}


@dataclass(frozen=True)
class Access:
    """Where elements live: kernel parameter ``param``, element ``offset``, and the
    element stride along each domain axis."""

    param: int
    offset: int
    strides: tuple[int, ...]
    dtype: np.dtype


@dataclass(frozen=True)
class Node:
    """A kernel value: a read (``acc``), a literal (``value``, already of ``dtype``), an
    elementwise op ``name`` of earlier values ``args`` (with the IR op's ``attrs``), or an
    index: the int64 ``value + sum(strides[a] * i[a])`` over the domain indices ``i``
    (``attrs`` holds ``strides``; ``index_access`` gives it as an access, so a target
    computes it as it computes an element offset)."""

    kind: str  # "read" | "const" | "op" | "index"
    dtype: np.dtype
    name: str = ""
    args: tuple[int, ...] = ()
    acc: Access | None = None
    value: Any = None
    attrs: tuple[tuple[str, Any], ...] = ()


@dataclass
class Kernel:
    """Value ids are positions in ``nodes``."""

    domain: tuple[int, ...]
    reduce: tuple[bool, ...]
    nodes: list[Node] = field(default_factory=list)
    stores: list[tuple[int, Access]] = field(default_factory=list)
    reductions: list[tuple[str, int, Access]] = field(default_factory=list)

    # -- building -------------------------------------------------------------------
    def read(self, acc: Access) -> int:
        return self._add(Node("read", np.dtype(acc.dtype), acc=acc))

    def const(self, value: Any, dtype: np.dtype) -> int:
        dt = np.dtype(dtype)
        return self._add(Node("const", dt, value=np.asarray(value).astype(dt).item()))

    def op(self, name: str, args: tuple[int, ...], dtype: np.dtype,
           attrs: dict[str, Any] | None = None) -> int:
        return self._add(Node("op", np.dtype(dtype), name=name, args=tuple(args),
                              attrs=tuple(sorted((attrs or {}).items()))))

    def index(self, strides: tuple[int, ...], offset: int = 0) -> int:
        """The int64 value ``offset + sum(strides[a] * i[a])`` at domain index ``i``."""
        return self._add(Node("index", np.dtype(np.int64), value=int(offset),
                              attrs=(("strides", tuple(int(s) for s in strides)),)))

    def store(self, vid: int, acc: Access) -> None:
        self.stores.append((vid, acc))

    def reduction(self, kind: str, vid: int, acc: Access) -> None:
        self.reductions.append((kind, vid, acc))

    def _add(self, node: Node) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    # -- facts ----------------------------------------------------------------------
    @property
    def reads(self) -> list[Access]:
        """The accesses of the read nodes, in node order."""
        return [n.acc for n in self.nodes if n.acc is not None]

    @property
    def nparams(self) -> int:
        """Pointer parameters: one more than the highest one any access uses."""
        return max((a.param for a in self.accesses()), default=-1) + 1

    def accesses(self) -> list[Access]:
        return (self.reads + [a for _, a in self.stores]
                + [a for _, _, a in self.reductions])

    def index_access(self, vid: int) -> Access:
        """Index node ``vid`` as an access of no parameter (-1) whose element offset at
        each domain index is the node's value."""
        n = self.nodes[vid]
        return Access(-1, int(n.value), dict(n.attrs)["strides"], n.dtype)

    def walks(self) -> list[Access]:
        """Everything whose offset moves with the domain index: the accesses, then the
        index nodes (``index_access``), in node order."""
        return self.accesses() + [self.index_access(i) for i, n in enumerate(self.nodes)
                                  if n.kind == "index"]

    def map_accesses(self, f: Callable[[Access], Access]) -> Kernel:
        return Kernel(self.domain, self.reduce,
                      [replace(n, acc=f(n.acc)) if n.acc is not None else n for n in self.nodes],
                      [(v, f(a)) for v, a in self.stores],
                      [(k, v, f(a)) for k, v, a in self.reductions])

    def size(self) -> int:
        return int(np.prod(self.domain, dtype=np.int64))

    def kept_size(self) -> int:
        """Elements of the domain's kept (not reduced) axes."""
        return int(np.prod([d for d, r in zip(self.domain, self.reduce, strict=True) if not r]))


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major element strides of ``shape``."""
    out, s = [], 1
    for d in reversed(shape):
        out.append(s)
        s *= max(d, 1)
    return tuple(reversed(out))


def normalize(k: Kernel) -> Kernel:
    """Drop size-1 axes and merge adjacent axes (of one reduce flag) that every access
    walks as one; a 0-d domain becomes ``(1,)``."""
    keep = [a for a, d in enumerate(k.domain) if d != 1]
    dom = [k.domain[a] for a in keep]
    red = [k.reduce[a] for a in keep]
    groups: list[list[int]] = []  # positions in ``keep``
    accs = k.walks()
    for j in range(len(dom)):
        if groups and red[j] == red[groups[-1][-1]] and all(
                a.strides[keep[groups[-1][-1]]] == a.strides[keep[j]] * dom[j] for a in accs):
            groups[-1].append(j)
        else:
            groups.append([j])
    new_dom = tuple(int(np.prod([dom[j] for j in g])) for g in groups) or (1,)
    new_red = tuple(red[g[0]] for g in groups) or (False,)

    def fix(a: Access) -> Access:
        st = tuple(a.strides[keep[g[-1]]] for g in groups) or (0,)
        return replace(a, strides=st)
    out = k.map_accesses(fix)
    out.nodes = [replace(n, attrs=(("strides", fix(k.index_access(i)).strides),))
                 if n.kind == "index" else n for i, n in enumerate(out.nodes)]
    out.domain, out.reduce = new_dom, new_red
    return out


def rebase(k: Kernel) -> tuple[Kernel, dict[int, int]]:
    """Move each parameter's lowest element into its pointer: the kernel with offsets
    relative to it, and the bytes to add to each parameter's pointer (none when some
    access of a parameter is not a whole number of elements from it). Kernels that differ
    only in where they start (a step of an unrolled loop) then render alike; negative
    strides (flips) keep the lowest element touched at offset >= 0."""
    low: dict[int, int] = {}
    for a in k.accesses():
        lo = a.offset + sum((d - 1) * s for d, s in zip(k.domain, a.strides, strict=True)
                            if s < 0)
        b = lo * a.dtype.itemsize
        low[a.param] = min(low.get(a.param, b), b)
    if any((a.offset * a.dtype.itemsize - low[a.param]) % a.dtype.itemsize
           for a in k.accesses()):
        return k, {}

    def move(a: Access) -> Access:
        return replace(a, offset=(a.offset * a.dtype.itemsize - low[a.param]) // a.dtype.itemsize)
    return k.map_accesses(move), low


def identity(kind: str, dt: np.dtype) -> Any:
    """The identity a reduction starts from (NumPy's float sums start at +0.0 too, so a
    sum of -0.0 is +0.0)."""
    dt = np.dtype(dt)
    if kind == "sum":
        return 0
    if kind == "prod":
        return 1
    if dt.kind == "b":
        return kind == "min"
    if dt.kind == "f":
        return float("-inf") if kind == "max" else float("inf")
    info = np.iinfo(dt)
    return int(info.min) if kind == "max" else int(info.max)


# -- small kernels --------------------------------------------------------------------------
def fill_kernel(shape: tuple[int, ...], acc: Access, value: Any) -> Kernel:
    """Write ``value`` to every element of ``acc`` over ``shape``."""
    k = Kernel(tuple(shape), (False,) * len(shape))
    k.store(k.const(value, acc.dtype), acc)
    return k


def copy_kernel(shape: tuple[int, ...], src: Access, dst: Access) -> Kernel:
    """Copy ``src`` to ``dst`` elementwise over ``shape``."""
    k = Kernel(tuple(shape), (False,) * len(shape))
    k.store(k.read(src), dst)
    return k


def combine_kernel(shape: tuple[int, ...], kind: str, out: Access, part: Access) -> Kernel:
    """``out = combine(out, part)`` over ``shape``: merge partial results of a reduction."""
    k = Kernel(tuple(shape), (False,) * len(shape))
    x, y = k.read(out), k.read(part)
    k.store(k.op(COMBINE_OP[kind], (x, y), out.dtype), out)
    return k
