"""Loop kernels (``backends.kernel.Kernel``) rendered as LLVM functions. ``build`` turns
one into

    void kernel(ptr p0, ..., ptr pk, i64 lo, i64 hi)

that runs domain axis 0 over ``[lo, hi)`` (so callers can split it across threads). The
innermost axis is vectorized explicitly: vector loads for unit strides, splats for zero
strides, gathers otherwise, and one masked iteration for the remainder (masked lanes
are never read or written, so no access leaves the arrays). Reductions over the
innermost axis accumulate in vector registers, in blocks (two-level summation keeps
float sums close to NumPy's pairwise ones); reductions over outer axes accumulate in
the output, which the caller first fills with the identity (``fill_kernel``).

Kernels are normalized first (``backends.kernel.normalize``), so an elementwise op over
a contiguous ``[128, 512]`` array is one flat loop.
"""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir
import numpy as np

from ..kernel import COMBINE_OP, Access, Kernel, identity
from . import special as _special  # noqa: F401 (registers the special functions' emitters)
from .loops import loop
from .runtime.target import Target
from .types import I1, I32, I64, PTR, VOID, const, i64, intrinsic, mem_type, vec
from .vecmath import ELEMENTWISE, TRANSCENDENTAL, VCtx

BLOCK = 1024  # elements per block of an innermost-axis reduction
UNROLL = 4  # vectors per step of an innermost-axis reduction, each with its own accumulator
COST = {name: 12.0 for name in TRANSCENDENTAL} | {"pow": 16.0, "div": 3.0, "sqrt": 3.0,
                                                  "floordiv": 12.0, "mod": 12.0}


def work(k: Kernel) -> float:
    """A rough cost in element-operations, for deciding to use threads."""
    per = 1.0 + sum(COST.get(n.name, 1.0) for n in k.nodes if n.kind != "read")
    size = int(np.prod(k.domain, dtype=np.int64)) if k.domain else 1
    return size * (per + len(k.accesses()))


def lanes(k: Kernel, target: Target) -> int:
    """Vector width: one register of the widest element type, fewer for short axes."""
    dts = [a.dtype for a in k.accesses()] + [n.dtype for n in k.nodes if n.kind != "read"]
    widest = max((np.dtype(d).itemsize for d in dts), default=4)
    n = max(2, target.vector_bits // (8 * max(4, widest)))
    inner = k.domain[-1] if k.domain else 1
    while n > 2 and n // 2 >= inner:
        n //= 2
    return n


# -- reductions ----------------------------------------------------------------------------
def combine(c: VCtx, kind: str, dt: np.dtype, acc: ir.Value, x: ir.Value) -> ir.Value:
    """One reduction step. Float sums and products may be reassociated (the vector lanes
    already do), max/min propagate NaN as NumPy does."""
    dt = np.dtype(dt)
    if kind == "max" and dt.kind == "f":  # keep x if x > acc or x is NaN
        keep = c.b.or_(c.b.fcmp_ordered(">", x, acc), c.b.fcmp_unordered("uno", x, x))
        return c.b.select(keep, x, acc)
    if kind == "min" and dt.kind == "f":
        keep = c.b.or_(c.b.fcmp_ordered("<", x, acc), c.b.fcmp_unordered("uno", x, x))
        return c.b.select(keep, x, acc)
    r = ELEMENTWISE[COMBINE_OP[kind]](c, [acc, x], [dt, dt], dt, {})
    if dt.kind == "f" and isinstance(r, ir.Instruction):
        r.flags.append("reassoc")
    return r


def hreduce(c: VCtx, kind: str, dt: np.dtype, v: ir.Value) -> ir.Value:
    """Combine the lanes of ``v`` pairwise into a scalar."""
    n = v.type.count
    while n > 1:
        h = n // 2
        lo = c.b.shuffle_vector(v, v, ir.Constant(vec(I32, h), list(range(h))))
        hi = c.b.shuffle_vector(v, v, ir.Constant(vec(I32, h), list(range(h, n))))
        sub = VCtx(c.b, c.module, c.target, h)
        v = combine(sub, kind, dt, lo, hi)
        n = h
    return c.b.extract_element(v, ir.Constant(I32, 0))


# -- code generation -----------------------------------------------------------------------
def build(k: Kernel, module: ir.Module, target: Target, name: str) -> ir.Function:
    """The LLVM function for kernel ``k`` (normalize it first)."""
    fty = ir.FunctionType(VOID, [PTR] * k.nparams + [I64, I64])
    fn = ir.Function(module, fty, name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    fn.attributes.add("noinline")  # shared by call sites; keeps the caller small
    for p in fn.args[:k.nparams]:
        p.add_attribute("noalias")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    if all(d > 0 for d in k.domain):
        _Gen(k, b, module, target, fn).axis(0, [i64(a.offset) for a in k.walks()])
    b.ret_void()
    return fn


class _Gen:
    def __init__(self, k: Kernel, b: ir.IRBuilder, module: ir.Module, target: Target,
                 fn: ir.Function) -> None:
        self.k, self.b = k, b
        self.params = list(fn.args[:k.nparams])
        self.lo, self.hi = fn.args[k.nparams:]
        self.n = lanes(k, target)
        self.c = VCtx(b, module, target, self.n)
        self.accs = k.accesses()
        self.walks = k.walks()  # the accesses, then the index nodes
        self.reads = k.reads
        nr, ns = len(self.reads), len(k.stores)
        self.store_at = list(range(nr, nr + ns))
        self.red_at = list(range(nr + ns, len(self.accs)))
        self.lane_ids = ir.Constant(vec(I64, self.n), list(range(self.n)))

    # -- loops ----------------------------------------------------------------------
    def axis(self, a: int, offs: list[ir.Value]) -> None:
        last = len(self.k.domain) - 1
        lo, hi = (self.lo, self.hi) if a == 0 else (i64(0), i64(self.k.domain[a]))
        if a == last:
            self.inner(offs, lo, hi)
            return

        def body(i: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
            self.axis(a + 1, [self._add(o, i, acc.strides[a])
                              for o, acc in zip(offs, self.walks, strict=True)])
            return []
        loop(self.b, lo, hi, 1, [], body, name=f"ax{a}")

    def _add(self, off: ir.Value, i: ir.Value, s: int) -> ir.Value:
        if s == 0:
            return off
        return self.b.add(off, self.b.mul(i, i64(s)) if s != 1 else i)

    def inner(self, offs: list[ir.Value], lo: ir.Value, hi: ir.Value) -> None:
        b, n = self.b, self.n
        self.offs = offs
        self.splats = {r: self._splat_read(r) for r, acc in enumerate(self.reads)
                       if acc.strides[-1] == 0}
        cnt = b.sub(hi, lo)
        full = b.sub(hi, b.and_(cnt, i64(n - 1)))
        if self.k.reduce[-1]:
            self._reduce_inner(lo, full, hi)
            return
        loop(b, lo, full, n, [], lambda j, _: (self.body(j, None), [])[1], name="vec")
        self._tail(full, hi, lambda mask: (self.body(full, mask), [])[1], [])

    def _tail(self, full: ir.Value, hi: ir.Value, fn: Any, carried: list[ir.Value]
              ) -> list[ir.Value]:
        """One masked iteration at ``full`` if elements remain; returns carried values."""
        b = self.b
        pre = b.block
        tail = b.append_basic_block("tail")
        done = b.append_basic_block("tail.end")
        b.cbranch(b.icmp_signed("<", full, hi), tail, done)
        b.position_at_end(tail)
        rem = b.sub(hi, full)
        mask = b.icmp_signed("<", self.lane_ids, self._vsplat(rem))
        new = fn(mask)
        end = b.block
        b.branch(done)
        b.position_at_end(done)
        out = []
        for v0, v1 in zip(carried, new, strict=True):
            p = b.phi(v0.type)
            p.add_incoming(v0, pre)
            p.add_incoming(v1, end)
            out.append(p)
        return out

    def _reduce_inner(self, lo: ir.Value, full: ir.Value, hi: ir.Value) -> None:
        b, c = self.b, self.c
        reds = self.k.reductions
        ident = [const(c.vt(a.dtype), identity(kd, a.dtype)) for kd, _, a in reds]

        def step(j: ir.Value, vs: list[ir.Value]) -> list[ir.Value]:
            return [combine(c, kd, a.dtype, v, x) for (kd, _, a), v, x
                    in zip(reds, vs, self.body(j, None), strict=True)]

        def block(jb: ir.Value, tot: list[ir.Value]) -> list[ir.Value]:
            end = b.add(jb, i64(BLOCK))
            end = b.select(b.icmp_signed("<", end, full), end, full)
            acc = self._unrolled(jb, end, ident)
            acc = loop(b, b.sub(end, b.and_(b.sub(end, jb), i64(self.n * UNROLL - 1))), end,
                       self.n, acc, step, name="vec")
            return [combine(c, kd, a.dtype, t, x) for (kd, _, a), t, x
                    in zip(reds, tot, acc, strict=True)]

        tot = loop(b, lo, full, BLOCK, ident, block, name="blk")

        def tail(mask: ir.Value) -> list[ir.Value]:
            xs = self.body(full, mask)
            return [combine(c, kd, a.dtype, t, b.select(mask, x, i))
                    for (kd, _, a), t, x, i in zip(reds, tot, xs, ident, strict=True)]

        tot = self._tail(full, hi, tail, tot)
        for (kd, _, acc), v, at in zip(reds, tot, self.red_at, strict=True):
            s = hreduce(c, kd, acc.dtype, v)
            ptr = self._ptr(acc, self.offs[at])
            old = self._from_mem(b.load(ptr, typ=mem_type(acc.dtype)), acc.dtype)
            one = VCtx(b, c.module, c.target, 1)
            new = combine(one, kd, acc.dtype, old, s)
            b.store(self._to_mem(new, acc.dtype), ptr)

    def _unrolled(self, jb: ir.Value, end: ir.Value, ident: list[ir.Value]) -> list[ir.Value]:
        """The reductions over ``[jb, end)`` in steps of ``UNROLL`` vectors, each into
        its own accumulators (independent chains: the next combine need not wait for
        the last), merged pairwise; the elements after the last whole step are left."""
        b, c, reds, u = self.b, self.c, self.k.reductions, UNROLL
        stop = b.sub(end, b.and_(b.sub(end, jb), i64(self.n * u - 1)))

        def step(j: ir.Value, vs: list[ir.Value]) -> list[ir.Value]:
            out = []
            for k in range(u):
                xs = self.body(b.add(j, i64(k * self.n)) if k else j, None)
                out += [combine(c, kd, a.dtype, v, x) for (kd, _, a), v, x
                        in zip(reds, vs[k * len(reds):(k + 1) * len(reds)], xs, strict=True)]
            return out
        accs = loop(b, jb, stop, self.n * u, ident * u, step, name="vec4")
        while len(accs) > len(reds):
            half = len(accs) // 2
            accs = [combine(c, kd, a.dtype, x, y) for (kd, _, a), x, y
                    in zip(reds * (half // len(reds)), accs[:half], accs[half:], strict=True)]
        return accs

    # -- one vector iteration ---------------------------------------------------------
    def body(self, j: ir.Value, mask: ir.Value | None) -> list[ir.Value]:
        """Loads, ops and stores for the ``n`` elements at inner index ``j``; returns the
        values of register reductions."""
        k, c = self.k, self.c
        vals: list[ir.Value] = []
        r, x = 0, len(self.accs)  # reads, then index nodes, are numbered in node order
        for node in k.nodes:
            if node.acc is not None:
                vals.append(self.splats[r] if r in self.splats
                            else self._load(node.acc, self.offs[r], j, mask))
                r += 1
            elif node.kind == "index":
                vals.append(self._index(self.walks[x].strides[-1], self.offs[x], j))
                x += 1
            elif node.kind == "const":
                vals.append(c.splat(node.dtype, node.value))
            else:
                vals.append(ELEMENTWISE[node.name](c, [vals[a] for a in node.args],
                                                   [k.nodes[a].dtype for a in node.args],
                                                   node.dtype, dict(node.attrs)))
        for (vid, acc), at in zip(k.stores, self.store_at, strict=True):
            self._store(acc, self.offs[at], j, mask, vals[vid])
        if k.reduce[-1]:
            return [vals[vid] for _, vid, _ in k.reductions]
        for (kd, vid, acc), at in zip(k.reductions, self.red_at, strict=True):
            old = self._load(acc, self.offs[at], j, mask)
            self._store(acc, self.offs[at], j, mask, combine(c, kd, acc.dtype, old, vals[vid]))
        return []

    def _index(self, s: int, off: ir.Value, j: ir.Value) -> ir.Value:
        """An index node's ``n`` values at inner index ``j``: ``off + (j + lane) * s``."""
        base = self._vsplat(self.b.add(off, self.b.mul(j, i64(s))) if s else off)
        if s == 0:
            return base
        return self.b.add(base, self.b.mul(self.lane_ids, const(vec(I64, self.n), s)))

    # -- memory -----------------------------------------------------------------------
    def _ptr(self, acc: Access, off: ir.Value) -> ir.Value:
        return self.b.gep(self.params[acc.param], [off], inbounds=True,
                          source_etype=mem_type(acc.dtype))

    def _vsplat(self, x: ir.Value) -> ir.Value:
        t = vec(x.type, self.n)
        v = self.b.insert_element(ir.Constant(t, None), x, ir.Constant(I32, 0))
        return self.b.shuffle_vector(v, ir.Constant(t, None),
                                     ir.Constant(vec(I32, self.n), [0] * self.n))

    def _splat_read(self, r: int) -> ir.Value:
        acc = self.reads[r]
        x = self._from_mem(self.b.load(self._ptr(acc, self.offs[r]), typ=mem_type(acc.dtype)),
                           acc.dtype)
        return self._vsplat(x)

    def _from_mem(self, x: ir.Value, dt: np.dtype) -> ir.Value:
        if np.dtype(dt).kind != "b":
            return x
        zero = ir.Constant(x.type, None) if isinstance(x.type, ir.VectorType) else \
            ir.Constant(x.type, 0)
        return self.b.icmp_unsigned("!=", x, zero)

    def _to_mem(self, x: ir.Value, dt: np.dtype) -> ir.Value:
        if np.dtype(dt).kind != "b":
            return x
        t = mem_type(dt)
        return self.b.zext(x, vec(t, x.type.count) if isinstance(x.type, ir.VectorType) else t)

    def _vptrs(self, acc: Access, off: ir.Value, j: ir.Value) -> ir.Value:
        s = acc.strides[-1]
        base = self.b.add(off, self.b.mul(j, i64(s)))
        idx = self.b.add(self._vsplat(base),
                         self.b.mul(self.lane_ids, const(vec(I64, self.n), s)))
        g = self.b.gep(self.params[acc.param], [idx], inbounds=True,
                       source_etype=mem_type(acc.dtype))
        g.type = vec(PTR, self.n)
        return g

    def _mask(self, mask: ir.Value | None) -> ir.Value:
        return mask if mask is not None else const(vec(I1, self.n), 1)

    def _load(self, acc: Access, off: ir.Value, j: ir.Value, mask: ir.Value | None) -> ir.Value:
        b, mt = self.b, mem_type(acc.dtype)
        vt = vec(mt, self.n)
        align = ir.Constant(I32, np.dtype(acc.dtype).itemsize)
        s = acc.strides[-1]
        if s == 1:
            ptr = self._ptr(acc, b.add(off, j))
            if mask is None:
                x = b.load(ptr, typ=vt, align=np.dtype(acc.dtype).itemsize)
            else:
                f = intrinsic(self.c.module, "llvm.masked.load", vt,
                              [PTR, I32, vec(I1, self.n), vt], [vt, PTR])
                x = b.call(f, [ptr, align, mask, ir.Constant(vt, None)])
        else:
            ptrs = self._vptrs(acc, off, j)
            f = intrinsic(self.c.module, "llvm.masked.gather", vt,
                          [ptrs.type, I32, vec(I1, self.n), vt], [vt, ptrs.type])
            x = b.call(f, [ptrs, align, self._mask(mask), ir.Constant(vt, None)])
        return self._from_mem(x, acc.dtype)

    def _store(self, acc: Access, off: ir.Value, j: ir.Value, mask: ir.Value | None,
               x: ir.Value) -> None:
        b = self.b
        x = self._to_mem(x, acc.dtype)
        align = ir.Constant(I32, np.dtype(acc.dtype).itemsize)
        s = acc.strides[-1]
        if s == 1:
            ptr = self._ptr(acc, b.add(off, j))
            if mask is None:
                b.store(x, ptr, align=np.dtype(acc.dtype).itemsize)
            else:
                f = intrinsic(self.c.module, "llvm.masked.store", VOID,
                              [x.type, PTR, I32, vec(I1, self.n)], [x.type, PTR])
                b.call(f, [x, ptr, align, mask])
        else:
            ptrs = self._vptrs(acc, off, j)
            f = intrinsic(self.c.module, "llvm.masked.scatter", VOID,
                          [x.type, ptrs.type, I32, vec(I1, self.n)], [x.type, ptrs.type])
            b.call(f, [x, ptrs, align, self._mask(mask)])
