"""Batching of small matrix products into large ones (small GEMMs run far below BLAS's
peak; see TOOLCHAIN.md). Two rewrites, on 2-D ``matmul``s:

- *shared operand*: independent products ``a_t @ W`` (no one's result reaches another's
  operand) become ``concatenate(a_t, axis=0) @ W`` and row slices of it; likewise
  ``W @ b_t`` with column slices. In an unrolled RNN the per-step input projections
  ``x_t @ U.T`` become one GEMM over T*B rows.
- *sum of products*: ``a_1 @ b_1 + ... + a_T @ b_T`` (an add tree whose inner adds and
  products nothing else reads) becomes ``concatenate(a_t, axis=1) @ concatenate(b_t,
  axis=0)``: the per-step weight gradients of an RNN, summed over t, become one GEMM
  over T*B. When every ``a_t`` (or ``b_t``) is a transpose, the transpose is taken of
  the concatenation instead, so a backend can pass it to BLAS as a flag.

Each element of a product is still a sum of the same terms, but BLAS (and the merged
sum) add them in another order, so results may change in the last bits: the pass runs
only with ``ctx.reorder_matmul`` (on by default).
"""

from __future__ import annotations

from ..core import Function, Op, Value, make_op
from .base import Pass, PassContext, rebuild, toposort
from .dce import dce

SMALL_ROWS = 512  # only products whose stacked dimension is at most this are batched


def _ancestors(ops: list[Op]) -> list[int]:
    """For each op, a bit mask of the ops it (transitively) depends on."""
    producer = {r: i for i, op in enumerate(ops) for r in op.results}
    anc = [0] * len(ops)
    for i, op in enumerate(ops):
        for v in op.operands:
            p = producer.get(v)
            if p is not None:
                anc[i] |= anc[p] | (1 << p)
    return anc


def _is_2d_matmul(op: Op) -> bool:
    return op.name == "matmul" and op.operands[0].ndim == 2


def _independent_set(ops: list[Op]) -> tuple[int, list[int]] | None:
    """The largest group of mutually independent small products sharing operand ``side``
    (0: the left one, 1: the right one), as (side, op indices); None if none has two."""
    anc = _ancestors(ops)
    by_shared: dict[tuple[int, Value], list[int]] = {}
    for i, op in enumerate(ops):
        if _is_2d_matmul(op):
            for side in (0, 1):
                if op.result.shape[1 - side] <= SMALL_ROWS:
                    by_shared.setdefault((side, op.operands[side]), []).append(i)
    best: tuple[int, list[int]] | None = None
    for (side, _), idx in by_shared.items():
        chosen, mask, reach = [], 0, 0
        for i in idx:
            if not (anc[i] & mask or reach >> i & 1):
                chosen.append(i)
                mask |= 1 << i
                reach |= anc[i]
        if len(chosen) >= 2 and (best is None or len(chosen) > len(best[1])):
            best = (side, chosen)
    return best


def _stack(ops: list[Op], side: int, members: list[int]) -> tuple[list[Op], dict[Value,
                                                                                Value]]:
    """The batched product of ``members`` (sharing operand ``side``) and its slices."""
    first = ops[members[0]]
    shared, loc = first.operands[side], first.loc
    axis = 0 if side == 1 else 1
    cat = make_op("concatenate", [ops[i].operands[1 - side] for i in members],
                  {"axis": axis}, loc)
    prod = make_op("matmul", [cat.result, shared] if side == 1 else [shared, cat.result],
                   {}, loc)
    new: list[Op] = [cat, prod]
    subst: dict[Value, Value] = {}
    start = 0
    for i in members:
        r = ops[i].result
        lo, hi = [0, 0], list(prod.result.shape)
        lo[axis], hi[axis] = start, start + r.shape[axis]
        sl = make_op("slice", [prod.result], {"start": lo, "stop": hi, "step": [1, 1]},
                     ops[i].loc)
        new.append(sl)
        subst[r] = sl.result
        start += r.shape[axis]
    return new, subst


def _stack_shared(fn: Function) -> Function:
    """Batch one group of products sharing an operand at a time (ancestry changes)."""
    while (found := _independent_set(fn.ops)) is not None:
        side, members = found
        new, subst = _stack(fn.ops, side, members)
        fn = _place(fn, {members[0]: new}, subst)
    return fn


def _concat(parts: list[Value], axis: int, loc: str | None,
            defs: dict[Value, Op]) -> list[Op]:
    """Ops concatenating ``parts`` (2-D) along ``axis``; if every part is a transpose,
    the transpose of the concatenation of their sources along the other axis."""
    srcs = [defs[v] for v in parts if v in defs and defs[v].name == "transpose"]
    if len(srcs) == len(parts):
        inner = make_op("concatenate", [s.operands[0] for s in srcs], {"axis": 1 - axis}, loc)
        return [inner, make_op("transpose", [inner.result], {"perm": (1, 0)}, loc)]
    return [make_op("concatenate", parts, {"axis": axis}, loc)]


def _sum_tree(root: Op, defs: dict[Value, Op],
              uses: dict[Value, int]) -> tuple[list[Op], list[Op]] | None:
    """(the 2-D products, the inner adds) of the add tree rooted at ``root``, whose inner
    values nothing else reads; None unless it sums at least two products."""
    terms: list[Op] = []
    adds: list[Op] = []
    stack = list(root.operands)
    while stack:
        v = stack.pop()
        op = defs.get(v)
        if op is None or uses.get(v, 0) != 1:
            return None
        if op.name == "add":
            adds.append(op)
            stack.extend(op.operands)
        elif _is_2d_matmul(op):
            terms.append(op)
        else:
            return None
    return (terms, adds) if len(terms) >= 2 else None


def _use_counts(fn: Function) -> dict[Value, int]:
    uses: dict[Value, int] = {}
    for v in [v for op in fn.ops for v in op.operands] + list(fn.outputs):
        uses[v] = uses.get(v, 0) + 1
    return uses


def _merge_sums(fn: Function) -> Function:
    defs = {r: op for op in fn.ops for r in op.results}
    uses = _use_counts(fn)
    inner: set[Op] = set()
    inserts: dict[int, list[Op]] = {}
    subst: dict[Value, Value] = {}
    for i in reversed(range(len(fn.ops))):
        op = fn.ops[i]
        tree = None if op in inner or op.name != "add" else _sum_tree(op, defs, uses)
        if tree is None:
            continue
        terms, adds = tree
        inner.update(adds)
        a = _concat([t.operands[0] for t in terms], 1, op.loc, defs)
        b = _concat([t.operands[1] for t in terms], 0, op.loc, defs)
        prod = make_op("matmul", [a[-1].result, b[-1].result], {}, op.loc)
        inserts[i] = a + b + [prod]
        subst[op.result] = prod.result
    return _place(fn, inserts, subst) if inserts else fn


def _place(fn: Function, inserts: dict[int, list[Op]], subst: dict[Value, Value]) -> Function:
    """Insert ``inserts[i]`` before op ``i``, replace values through ``subst``, restore a
    valid order and drop what became dead."""
    ops: list[Op] = []
    for i, op in enumerate(fn.ops):
        ops += inserts.get(i, [])
        ops.append(op)
    out = rebuild(fn, ops, subst)
    return dce(out.replace(ops=toposort(out.ops, out.inputs)), PassContext())


def batch_matmul(fn: Function, ctx: PassContext) -> Function:
    if not ctx.reorder_matmul:
        return fn
    return _stack_shared(_merge_sums(fn))


BATCH_MATMUL = Pass("batch_matmul", "merge independent small matrix products that share an "
                    "operand, or are summed, into one large product", batch_matmul)
