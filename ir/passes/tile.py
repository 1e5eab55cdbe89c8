"""Row tiling: a run of ops that treat the rows of a leading axis independently becomes one
``call`` of a function a backend may run block by block of rows, so that the values its
ops pass to each other stay in cache instead of going through memory.

    softmax-like code, after fusion:   m = max(z, rows)  ->  e = exp(z - m), s = sum(e)
                                       ->  g = e / s ...  ->  db = sum(g, axis 0)
    becomes  %m, %g, %db = call %z {callee = "rows_0"}   with  attributes
             {row_count = 4096, row_block = 8}  on @rows_0

Which ops qualify (``op_tiling``), for a leading axis of extent ``R`` (the *rows*):

- elementwise ops whose result starts with ``R`` (their operands have its shape);
- reductions (``sum``, ``prod``, ``max``, ``min``) of a value starting with ``R``: over
  other axes the result keeps the rows; over axis 0 the result is *reduced over the
  rows* (a column sum, a total): a backend combines the blocks' partial results;
- ``reshape`` keeping the leading ``R``, ``broadcast`` to a shape starting with ``R``
  (of a value whose own axis 0 is the rows, or of one without the rows: ``b`` in
  ``X + b``, which every block reads whole);
- ``fused`` kernels whose domain starts with ``R``, by the same rules for their inputs
  and reductions;
- splat constants are free: the function gets its own copy.

A run is cut where an op does not qualify, has other rows, reads a value reduced over
the rows inside the run, or needs an input both sliced by rows and whole. It becomes a
call when it holds at least two ops that run kernels and more than one block of rows:
``row_block`` rows of all its row values take about ``BLOCK_BYTES`` (a share of a core's
L2 cache). The function is an ordinary function of full-size values, so every backend
can run it as a plain call (the reference interpreter does); ``block_function`` gives
the same function over ``n`` rows, which the llvm backend runs per block, the blocks
split over its threads. Runs whose row values take less than ``MIN_BYTES`` in all are
left alone: their values stay in the cores' caches without blocks.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..core import Function, Op, Value, make_op
from ..ops import get_opdef
from ..ops.misc import splat_scalar
from ..types import TensorType
from .base import Pass, PassContext, fresh_names, is_splat_const, toposort
from .dce import dce

ROW, WHOLE = "row", "whole"  # an operand sliced by rows, or read whole by every block
ROW_REDUCTIONS = ("sum", "prod", "max", "min")
BLOCK_BYTES = 192 * 1024  # row values of one block: fits a core's L2 with room to spare
MIN_BYTES = 4 << 20  # smaller runs stay in the cores' caches anyway: blocks only cost
KERNEL_OPS = ("fused",) + ROW_REDUCTIONS  # ops that run a kernel (and elementwise ones)

Tiling = tuple[list[str], list[str]]  # (status each operand needs, status of each result)


def _rows(t: TensorType, r: int) -> bool:
    return t.ndim >= 1 and t.shape[0] == r


def _bcast_status(src: TensorType, dst: tuple[int, ...], r: int) -> str:
    """A broadcast to ``dst`` (starting with the rows) reads ``src`` by rows if ``src``'s
    own axis 0 is the rows, else whole."""
    return ROW if src.ndim == len(dst) and _rows(src, r) else WHOLE


def op_rows(op: Op, callees: Mapping[str, Function]) -> int | None:
    """The extent of the leading axis ``op`` would be tiled along, if any."""
    if op.name == "fused":
        dom = callees[op.attrs["callee"]].attrs.get("domain", ())
        return int(dom[0]) if len(dom) else None
    t = op.operands[0].type if op.name in ROW_REDUCTIONS and op.operands else \
        op.results[0].type if op.results else None
    return t.shape[0] if t is not None and t.ndim else None


def op_tiling(op: Op, r: int, callees: Mapping[str, Function]) -> Tiling | None:
    """How ``op`` treats rows of extent ``r``: the status each operand needs (``ROW``,
    ``WHOLE``) and each result has (``ROW``, or the reduction kind for a result reduced
    over the rows); None if ``op`` mixes rows."""
    if op.name == "fused":
        return _fused_tiling(op, r, callees[op.attrs["callee"]])
    if len(op.results) != 1 or op.result.type.size == 0 or _row_index(op):
        return None
    out = op.result.type
    if op.name in ROW_REDUCTIONS:
        if not _rows(op.operands[0].type, r):
            return None
        return [ROW], [op.name if 0 in op.attrs["axes"] else ROW]
    if not _rows(out, r):
        return None
    if op.name == "broadcast":
        return [_bcast_status(op.operands[0].type, out.shape, r)], [ROW]
    if op.name == "reshape":
        return ([ROW], [ROW]) if _rows(op.operands[0].type, r) else None
    if op.name != "const" and get_opdef(op.name).elementwise and all(
            v.shape == out.shape for v in op.operands):
        return [ROW] * len(op.operands), [ROW]
    return None


def _row_index(op: Op) -> bool:
    """An ``iota`` along the rows: a block of rows would count them from 0."""
    return op.name == "iota" and op.attrs["axis"] == 0


def _fused_tiling(op: Op, r: int, body: Function) -> Tiling | None:
    dom = tuple(body.attrs.get("domain", ()))
    if not dom or dom[0] != r or any(d == 0 for d in dom) or any(map(_row_index, body.ops)):
        return None
    axes = tuple(body.attrs.get("reduce_axes") or ())
    need: dict[Value, str] = {}
    inputs = set(body.inputs)
    for bop in body.ops:
        for v in bop.operands:
            if v in inputs:
                s = _bcast_status(v.type, dom, r) if bop.name == "broadcast" else ROW
                if need.setdefault(v, s) != s:
                    return None
    kinds = {bop.result: bop.name for bop in body.ops if bop.name in ROW_REDUCTIONS}
    outs = [kinds[v] if v in kinds and 0 in axes else ROW for v in body.outputs]
    return [need.get(v, WHOLE) for v in body.inputs], outs


# -- finding runs ---------------------------------------------------------------------------
@dataclass
class Run:
    rows: int
    ops: list[Op] = field(default_factory=list)
    tilings: list[Tiling] = field(default_factory=list)
    status: dict[Value, str] = field(default_factory=dict)  # values made in the run
    inputs: dict[Value, str] = field(default_factory=dict)  # values from outside

    def admits(self, op: Op, t: Tiling, consts: set[Value]) -> bool:
        """``op`` (tiled as ``t``) can join: it reads run values by rows, outside values
        with one status each."""
        for v, s in zip(op.operands, t[0], strict=True):
            if self.free(v, s, consts):
                continue
            have = self.status.get(v, self.inputs.get(v, s))
            if have != s:
                return False
        return True

    def add(self, op: Op, t: Tiling, consts: set[Value]) -> None:
        self.ops.append(op)
        self.tilings.append(t)
        for v, s in zip(op.operands, t[0], strict=True):
            if not self.free(v, s, consts) and v not in self.status:
                self.inputs[v] = s
        self.status.update(zip(op.results, t[1], strict=True))

    def free(self, v: Value, s: str, consts: set[Value]) -> bool:
        """A splat constant read by rows: the function makes its own."""
        return v in consts and s == ROW and _rows(v.type, self.rows)

    def row_bytes(self) -> int:
        vals = [v for v, s in self.inputs.items() if s == ROW]
        vals += [v for v, s in self.status.items() if s == ROW]
        return sum(v.type.nbytes // self.rows for v in vals)

    def kernels(self) -> int:
        return sum(op.name in KERNEL_OPS or get_opdef(op.name).elementwise
                   and op.name not in ("broadcast", "const") for op in self.ops)


def block_rows(run: Run) -> int:
    return max(1, min(run.rows, BLOCK_BYTES // max(run.row_bytes(), 1)))


def find_runs(fn: Function) -> Iterator[Run]:
    """Maximal runs of consecutive tileable ops (splat constants are skipped over)."""
    consts = {op.result for op in fn.ops if is_splat_const(op)}
    run: Run | None = None
    for op in fn.ops:
        if op.results and op.results[0] in consts:
            continue
        r = op_rows(op, fn.callees)
        t = op_tiling(op, r, fn.callees) if r is not None and r > 1 else None
        if run is not None and (t is None or r != run.rows or not run.admits(op, t, consts)):
            yield run
            run = None
        if t is not None and r is not None:
            run = run or Run(r)
            run.add(op, t, consts)
    if run is not None:
        yield run


def worth_it(run: Run) -> bool:
    return (run.kernels() >= 2 and run.rows > block_rows(run)
            and run.rows * run.row_bytes() >= MIN_BYTES)


# -- building the call ---------------------------------------------------------------------

@dataclass
class Program:
    """What building each run's call reads of the function, computed once."""

    defs: dict[Value, Op]
    consts: set[Value]
    readers: dict[Value, int]  # each value's last reader
    position: dict[int, int]  # id(op) -> its index
    outputs: set[Value]

    @staticmethod
    def of(fn: Function) -> Program:
        defs = {r: op for op in fn.ops for r in op.results}
        readers = {v: i for i, op in enumerate(fn.ops) for v in op.operands}
        return Program(defs, {v for v, op in defs.items() if is_splat_const(op)}, readers,
                       {id(op): i for i, op in enumerate(fn.ops)}, set(fn.outputs))


def make_call(fn: Function, run: Run, name: str, prog: Program
              ) -> tuple[Function, Op, list[Value]]:
    """The function of ``run`` (its own copies of splat constants), the ``call`` of it,
    and the run values it returns (read after the run, or returned by ``fn``)."""
    defs, consts = prog.defs, prog.consts
    env: dict[Value, Value] = {v: Value(v.type) for v in run.inputs}
    copies: dict[Value, Value] = {}
    body: list[Op] = []
    for op, (need, _) in zip(run.ops, run.tilings, strict=True):
        operands = []
        for v, s in zip(op.operands, need, strict=True):
            if run.free(v, s, consts) and v not in copies:
                body.append(defs[v].replace(results=[Value(v.type)]))
                copies[v] = body[-1].result
            operands.append(copies[v] if run.free(v, s, consts) else env[v])
        new = op.replace(operands=operands, results=[Value(r.type) for r in op.results])
        env.update(zip(op.results, new.results, strict=True))
        body.append(new)
    last = prog.position[id(run.ops[-1])]
    outs = [r for op in run.ops for r in op.results
            if prog.readers.get(r, -1) > last or r in prog.outputs]
    callees = {op.attrs["callee"]: fn.callees[op.attrs["callee"]]
               for op in run.ops if op.name == "fused"}
    f = Function(name, [env[v] for v in run.inputs], body, [env[v] for v in outs],
                 callees=callees, attrs={"row_count": run.rows, "row_block": block_rows(run)})
    f = dce(f, PassContext())
    call = make_op("call", list(run.inputs), {"callee": name}, _loc(run.ops),
                   result_types=[v.type for v in outs])
    return f, call, outs


def _loc(ops: list[Op]) -> str | None:
    locs = list(dict.fromkeys(op.loc for op in ops if op.loc))
    return "; ".join(locs[:3]) + ("; ..." if len(locs) > 3 else "") if locs else None


def tile(fn: Function, ctx: PassContext) -> Function:
    runs = [run for run in find_runs(fn) if worth_it(run)]
    if not runs:
        return fn
    prog = Program.of(fn)
    names = fresh_names("rows", set(fn.all_callees()))
    callees = dict(fn.callees)
    drop: set[int] = set()
    subst: dict[Value, Value] = {}
    placed: dict[int, Op] = {}  # the call takes the place of the run's last op
    for run in runs:
        body, call, outs = make_call(fn, run, next(names), prog)
        callees[body.name] = body
        subst.update(zip(outs, call.results, strict=True))
        where = [prog.position[id(op)] for op in run.ops]
        drop.update(where)
        placed[where[-1]] = call
    ops = [placed.get(i, op) for i, op in enumerate(fn.ops) if i not in drop or i in placed]
    ops = [op.replace(operands=[subst.get(v, v) for v in op.operands]) for op in ops]
    out = fn.replace(ops=ops, outputs=[subst.get(v, v) for v in fn.outputs], callees=callees)
    return dce(out.replace(ops=toposort(out.ops, out.inputs)), ctx)


TILE = Pass("tile", "runs of ops that treat rows independently become one call a backend "
            "can run block by block, its intermediate values staying in cache", tile)


# -- the same function over fewer rows --------------------------------------------------------
def row_statuses(fn: Function) -> dict[Value, str]:
    """The status of every input and op result of a tiled function (``tile``'s output)."""
    r = fn.attrs["row_count"]
    st: dict[Value, str] = {}
    inputs = set(fn.inputs)
    for op in fn.ops:
        if is_splat_const(op):
            st[op.result] = ROW if _rows(op.result.type, r) else WHOLE
            continue
        t = op_tiling(op, r, fn.callees)
        if t is None:
            raise ValueError(f"@{fn.name}: op '{op.name}' does not treat its rows apart")
        for v, s in zip(op.operands, t[0], strict=True):
            if v in inputs:
                st.setdefault(v, s)
        st.update(zip(op.results, t[1], strict=True))
    return st


def _resize(t: TensorType, n: int) -> TensorType:
    return t.with_shape((n,) + t.shape[1:])


def block_function(fn: Function, n: int, name: str | None = None) -> Function:
    """Tiled function ``fn`` over ``n`` of its rows: inputs and results by rows have ``n``
    rows, the rest (read whole, or reduced over the rows) keep their types."""
    st = row_statuses(fn)
    return _Resizer(fn.attrs["row_count"], n).function(fn, st, name or f"{fn.name}.{n}")


class _Resizer:
    def __init__(self, rows: int, n: int) -> None:
        self.rows, self.n = rows, n

    def function(self, fn: Function, st: Mapping[Value, str], name: str) -> Function:
        env: dict[Value, Value] = {
            v: Value(_resize(v.type, self.n) if st.get(v) == ROW else v.type)
            for v in fn.inputs}
        callees: dict[str, Function] = {}
        ops = []
        for op in fn.ops:
            new = self.op(op, [env[v] for v in op.operands], fn.callees, callees)
            env.update(zip(op.results, new.results, strict=True))
            ops.append(new)
        attrs = {k: v for k, v in fn.attrs.items() if k not in ("row_count", "row_block")}
        if "domain" in attrs:
            attrs["domain"] = (self.n,) + tuple(attrs["domain"])[1:]
        return Function(name, [env[v] for v in fn.inputs], ops, [env[v] for v in fn.outputs],
                        callees=callees, attrs=attrs)

    def op(self, op: Op, operands: list[Value], old: Mapping[str, Function],
           callees: dict[str, Function]) -> Op:
        attrs: dict[str, Any] = dict(op.attrs)
        if op.name == "const":
            shape = op.result.shape
            if _rows(op.result.type, self.rows):
                shape = (self.n,) + shape[1:]
            scalar = splat_scalar(op.attrs["value"])
            assert scalar is not None  # tile copies only splat constants in
            attrs["value"] = np.broadcast_to(scalar, shape)
        elif op.name in ("broadcast", "reshape") and _rows(op.result.type, self.rows):
            attrs["shape"] = (self.n,) + tuple(attrs["shape"])[1:]
        elif op.name == "fused":
            body = old[attrs["callee"]]
            st = {v: ROW if a.type != v.type else WHOLE
                  for v, a in zip(body.inputs, operands, strict=True)}
            nb = self.function(body, st, body.name)
            callees[nb.name] = nb
            return make_op("fused", operands, attrs, op.loc, result_types=nb.output_types)
        return make_op(op.name, operands, attrs, op.loc)
