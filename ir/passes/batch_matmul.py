"""Batching of small matrix products into large ones (small GEMMs run far below BLAS's
peak; see TOOLCHAIN.md). Two rewrites, on 2-D ``matmul``s:

- *shared operand*: independent products ``a_t @ W`` (no one's result reaches another's
  operand) become ``concatenate(a_t, axis=0) @ W`` and row slices of it; likewise
  ``W @ b_t`` with column slices. In an unrolled RNN the per-step input projections
  ``x_t @ U.T`` become one GEMM over T*B rows.
- *sum of products*: ``a_1 @ b_1 + ... + a_T @ b_T`` (an add tree whose inner adds and
  products nothing else reads) becomes ``concatenate(a_t, axis=1) @ concatenate(b_t,
  axis=0)``: the per-step weight gradients of an RNN, summed over t, become one GEMM
  over T*B. When every ``a_t`` (or ``b_t``) is a transpose (or a splat constant, such as
  an RNN's zero first state), the transpose is taken of the concatenation instead, so a
  backend can pass it to BLAS as a flag. Terms are ordered by where their operands are
  defined, constants first, so sums over the same per-step values concatenate them
  alike and CSE shares the concatenation.

Each element of a product is still a sum of the same terms, but BLAS (and the merged
sum) add them in another order, so results may change in the last bits: the pass runs
only with ``ctx.reorder_matmul`` (on by default).
"""

from __future__ import annotations

from ..core import Function, Op, Value, make_op
from .base import Pass, PassContext, is_splat_const, rebuild, splat_const, toposort
from .dce import dce
from .dynorder import Spine

SMALL_ROWS = 512  # only products whose stacked dimension is at most this are batched


def _is_2d_matmul(op: Op) -> bool:
    return op.name == "matmul" and op.operands[0].ndim == 2


def _independent_set(ops: list[Op]) -> tuple[int, list[int]] | None:
    """The largest group of mutually independent small products sharing operand ``side``
    (0: the left one, 1: the right one), as (side, op indices); None if none has two.
    Each group is chosen greedily in program order: a product joins unless it depends
    on one chosen before it."""
    by_shared: dict[tuple[int, Value], list[int]] = {}
    for i, op in enumerate(ops):
        if _is_2d_matmul(op):
            for side in (0, 1):
                if op.result.shape[1 - side] <= SMALL_ROWS:
                    by_shared.setdefault((side, op.operands[side]), []).append(i)
    graph = _Graph(ops) if any(len(idx) >= 2 for idx in by_shared.values()) else None
    best: tuple[int, list[int]] | None = None
    for (side, _), idx in by_shared.items():
        chosen = graph.independent(idx) if graph is not None and len(idx) >= 2 else idx
        if len(chosen) >= 2 and (best is None or len(chosen) > len(best[1])):
            best = (side, chosen)
    return best


class _Graph:
    """The ops' dependencies, for ``independent``: users of each op, and a longest path
    (``dynorder.Spine``) that shows most dependencies between far-apart ops at once."""

    def __init__(self, ops: list[Op]) -> None:
        producer = {r: i for i, op in enumerate(ops) for r in op.results}
        self.pred = [{producer[v] for v in op.operands if v in producer} for op in ops]
        self.users: list[list[int]] = [[] for _ in ops]
        for i, ps in enumerate(self.pred):
            for p in ps:
                self.users[p].append(i)
        self.spine = Spine(self.users, self.pred)

    def independent(self, idx: list[int]) -> list[int]:
        """The ops of ``idx`` (ascending) that depend on none chosen before them. A
        dependency the spine shows (a chosen op reaches it before a position that reaches
        the op) needs no search; else the ops the chosen ones reach are marked (up to the
        last of ``idx``, each op once), only when first needed."""
        first, last = self.spine.first, self.spine.last
        marked: set[int] = set()
        chosen: list[int] = []
        unmarked: list[int] = []  # chosen ops whose reach is not marked yet
        reach = len(first)  # the first spine position a chosen op reaches
        for i in idx:
            if reach <= last[i]:
                continue
            if unmarked:
                self._mark(unmarked, idx[-1], marked)
                unmarked = []
            if i in marked:
                continue
            chosen.append(i)
            unmarked.append(i)
            reach = min(reach, first[i])
        return chosen

    def _mark(self, starts: list[int], last: int, marked: set[int]) -> None:
        stack = list(starts)
        while stack:
            for u in self.users[stack.pop()]:
                if u <= last and u not in marked:
                    marked.add(u)
                    stack.append(u)


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


def _concat(parts: list[Value], axis: int, loc: str | None,
            defs: dict[Value, Op]) -> list[Op]:
    """Ops concatenating ``parts`` (2-D) along ``axis``; if every part is a transpose or
    a splat constant (its own transpose, with the shape swapped: the zero state of an
    RNN's first step), the transpose of the concatenation of their sources along the
    other axis, which a backend passes to BLAS as a flag instead of copying transposes."""
    ops = [defs.get(v) for v in parts]
    if all(o is not None and (o.name == "transpose" or is_splat_const(o)) for o in ops):
        made: list[Op] = []
        srcs: list[Value] = []
        for o in ops:
            assert o is not None
            if o.name == "transpose":
                srcs.append(o.operands[0])
            else:
                t = o.result.type
                made.append(splat_const(o.attrs["value"].flat[0], t.dtype, t.shape[::-1], loc))
                srcs.append(made[-1].result)
        if len(made) < len(ops):  # at least one real transpose
            inner = make_op("concatenate", srcs, {"axis": 1 - axis}, loc)
            return made + [inner, make_op("transpose", [inner.result], {"perm": (1, 0)}, loc)]
    return [make_op("concatenate", parts, {"axis": axis}, loc)]


Term = tuple[Op, bool]  # a 2-D product, and whether the sum adds its transpose


def _term(v: Value, defs: dict[Value, Op], uses: dict[Value, int]) -> Term | None:
    op = defs.get(v)
    if op is not None and op.name == "transpose" and uses.get(op.operands[0], 0) == 1:
        inner = defs.get(op.operands[0])
        if inner is not None and _is_2d_matmul(inner):
            return inner, True
    return (op, False) if op is not None and _is_2d_matmul(op) else None


def _sum_tree(root: Op, defs: dict[Value, Op], uses: dict[Value, int]) -> list[Term] | None:
    """The products (or transposed products) the add tree rooted at ``root`` sums, if
    nothing else reads its inner values and it has at least two."""
    terms: list[Term] = []
    stack = list(root.operands)
    while stack:
        v = stack.pop()
        op = defs.get(v)
        if op is None or uses.get(v, 0) != 1:
            return None
        term = _term(v, defs, uses)
        if term is not None:
            terms.append(term)
        elif op.name == "add":
            stack.extend(op.operands)
        else:
            return None
    return terms if len(terms) >= 2 else None


def _merged_sum(root: Op, terms: list[Term], defs: dict[Value, Op]) -> list[Op]:
    """Ops computing the sum of ``terms`` as one product; the last op's result is it.
    Terms added transposed use (a @ b).T = b.T @ a.T when they are the minority."""
    flip = sum(t for _, t in terms) * 2 > len(terms)
    pairs: list[tuple[Value, Value]] = []
    ops: list[Op] = []
    for op, transposed in terms:
        a, b = op.operands
        if transposed != flip:
            ta = make_op("transpose", [b], {"perm": (1, 0)}, root.loc)
            tb = make_op("transpose", [a], {"perm": (1, 0)}, root.loc)
            ops += [ta, tb]
            a, b = ta.result, tb.result
        pairs.append((a, b))
    defs = {**defs, **{r: o for o in ops for r in o.results}}
    lhs = _concat([a for a, _ in pairs], 1, root.loc, defs)
    rhs = _concat([b for _, b in pairs], 0, root.loc, defs)
    prod = make_op("matmul", [lhs[-1].result, rhs[-1].result], {}, root.loc)
    ops += lhs + rhs + [prod]
    if flip:
        ops.append(make_op("transpose", [prod.result], {"perm": (1, 0)}, root.loc))
    return ops


def _largest_sum(fn: Function) -> tuple[int, list[Term]] | None:
    """The add tree of the most products, its terms ordered by where their operands are
    defined (so that per-step operands concatenate in step order), a splat constant
    counting as defined first: an RNN's zero initial state then pairs with the first
    step's adjoint at the front, so its two weight gradients (states_t.T @ d_t and
    x_t.T @ d_t) order the adjoints d_t alike and CSE makes their concatenations one, and
    the inputs' concatenation is the forward pass's. (Trees are counted bottom-up, each
    add once; only the largest is walked.)"""
    defs = {r: op for op in fn.ops for r in op.results}
    uses = _use_counts(fn)
    count: dict[Value, int | None] = {}  # an add's value -> products its tree sums
    best_at, best_n = -1, 1
    for i, op in enumerate(fn.ops):
        if op.name == "add":
            n = _tree_size(op, defs, uses, count)
            count[op.result] = n
            if n is not None and n >= 2 and n >= best_n:
                best_at, best_n = i, n
    if best_at < 0:
        return None
    terms = _sum_tree(fn.ops[best_at], defs, uses)
    assert terms is not None and len(terms) == best_n
    pos = {v: i - len(fn.inputs) for i, v in enumerate(fn.inputs)}
    pos.update({r: i for i, op in enumerate(fn.ops) for r in op.results})
    first = -len(fn.inputs) - 1

    def order(t: Term) -> int:
        srcs = [_untransposed(v, defs) for v in t[0].operands]
        return min(first if v in defs and is_splat_const(defs[v]) else pos[v] for v in srcs)
    terms.sort(key=order)
    return best_at, terms


def _tree_size(op: Op, defs: dict[Value, Op], uses: dict[Value, int],
               count: dict[Value, int | None]) -> int | None:
    """The number of products ``_sum_tree(op)`` finds (None: it finds none), from the
    counts of the adds before it."""
    n = 0
    for v in op.operands:
        inner = defs.get(v)
        if inner is None or uses.get(v, 0) != 1:
            return None
        if _term(v, defs, uses) is not None:
            n += 1
        elif inner.name == "add" and count.get(v) is not None:
            n += count[v]  # type: ignore[operator]
        else:
            return None
    return n


def _untransposed(v: Value, defs: dict[Value, Op]) -> Value:
    while v in defs and defs[v].name == "transpose":
        v = defs[v].operands[0]
    return v


def _use_counts(fn: Function) -> dict[Value, int]:
    uses: dict[Value, int] = {}
    for v in [v for op in fn.ops for v in op.operands] + list(fn.outputs):
        uses[v] = uses.get(v, 0) + 1
    return uses


def _place(fn: Function, inserts: dict[int, list[Op]], subst: dict[Value, Value]) -> Function:
    """Insert ``inserts[i]`` before op ``i``, replace values through ``subst``, restore a
    valid order and drop what became dead."""
    ops: list[Op] = []
    for i, op in enumerate(fn.ops):
        ops += inserts.get(i, [])
        ops.append(op)
    out = rebuild(fn, ops, subst)
    return dce(out.replace(ops=toposort(out.ops, out.inputs)), PassContext())


def _batch_once(fn: Function) -> Function | None:
    """Apply the rewrite that merges the most products; None if none applies."""
    shared = _independent_set(fn.ops)
    summed = _largest_sum(fn)
    if summed is not None and (shared is None or len(summed[1]) >= len(shared[1])):
        i, terms = summed
        new = _merged_sum(fn.ops[i], terms, {r: o for o in fn.ops for r in o.results})
        return _place(fn, {i: new}, {fn.ops[i].result: new[-1].result})
    if shared is not None:
        side, members = shared
        new, subst = _stack(fn.ops, side, members)
        return _place(fn, {members[0]: new}, subst)
    return None


def batch_matmul(fn: Function, ctx: PassContext) -> Function:
    if not ctx.reorder_matmul:
        return fn
    while (batched := _batch_once(fn)) is not None:
        fn = batched
    return fn


BATCH_MATMUL = Pass("batch_matmul", "merge independent small matrix products that share an "
                    "operand, or are summed, into one large product", batch_matmul)
