"""Loop optimization: what a step need not compute step by step is computed once.

For each ``loop`` op (its body seen as one step), in this order:

- *invariant ops*: an op of the body that reads only invariants (``W.T``, a
  concatenation of two weight matrices) runs once before the loop; its result becomes an
  invariant;
- *running sums*: a carried value that the body only ever adds a value to
  (``acc + g``, a weight gradient summed over the steps of a backward loop) becomes a
  stacked step output ``g``, summed after the loop; a sum of matrix products
  ``acc + a @ b`` keeps the factors instead, and the sum over the steps is one matrix
  product after the loop (``A.T @ B`` over all steps' rows: one large GEMM instead of a
  small one per step);
- *batched products*: a matrix product of a step slice and an invariant (``xs[t] @ W``,
  the input projection of an RNN) or of two step slices is computed for all steps at
  once before the loop, and its step slice is read instead; a step output that is a
  product of a step value and an invariant (``dx_t = d_t @ U`` in a backward loop) is
  computed after the loop, for all steps at once;
- *unread results*: a stacked step output nothing reads after the loop is no longer
  made, a carried value that neither the body nor anything after the loop reads is
  dropped, and step outputs that are the same value are made once.

Running sums and batched products add the same terms in another order (results may
change in the last bits), so they run only with ``ctx.reorder_matmul``. Products are not
batched out of a checkpointed loop's body (``yota.ir.autodiff.checkpoint``): over all
steps they would take the memory checkpointing saves.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core import Function, Op, Value, make_op
from ..loops import loop_op
from ..ops import get_opdef
from ..ops.loop import LoopShape
from .base import Pass, PassContext, fresh_names, remap, resolve
from .dce import dce

INV, STEP, CARRY = 1, 2, 3  # what a body value depends on (constants: 0)


@dataclass
class Carry:
    body_in: Value
    body_out: Value
    init: Value
    result: Value | None  # the loop's result (None: a carry made here)


@dataclass
class Step:
    body_in: Value
    operand: Value


@dataclass
class StepOut:
    body_out: Value
    result: Value | None


@dataclass
class Parts:
    """A loop taken apart: its body's inputs and outputs by role, its ops, the ops to
    run before and after it, and what replaces its old results."""

    op: Op
    name: str
    length: int
    reverse: bool
    carries: list[Carry]
    stacked: list[Step]
    invariants: list[Step]
    ys: list[StepOut]
    ops: list[Op]
    callees: dict[str, Function]
    labels: dict[Value, str | None]
    attrs: dict[str, object]
    pre: list[Op] = field(default_factory=list)
    post: list[Op] = field(default_factory=list)
    subst: dict[Value, Value] = field(default_factory=dict)
    new_body: Function | None = None

    @staticmethod
    def of(op: Op, body: Function) -> Parts:
        sh = LoopShape.of(op.attrs)
        c, s, w = sh.split_operands(list(zip(body.inputs, op.operands, strict=True)))
        outs = list(body.outputs)
        carries = [Carry(bi, outs[k], init, op.results[k]) for k, (bi, init) in enumerate(c)]
        ys = [StepOut(v, op.results[sh.carries + j]) for j, v in enumerate(outs[sh.carries:])]
        return Parts(op, body.name, sh.length, sh.reverse, carries,
                     [Step(*x) for x in s], [Step(*x) for x in w], ys, list(body.ops),
                     dict(body.callees), dict(zip(body.inputs, body.input_labels,
                                                  strict=True)), dict(body.attrs))

    def emit(self, name: str, operands: list[Value], **attrs: object) -> Value:
        """A new op of the enclosing function, before the loop."""
        op = make_op(name, operands, attrs, self.op.loc)
        self.pre.append(op)
        return op.result

    def after(self, name: str, operands: list[Value], **attrs: object) -> Value:
        """A new op of the enclosing function, after the loop."""
        op = make_op(name, operands, attrs, self.op.loc)
        self.post.append(op)
        return op.result

    def body(self) -> Function:
        inputs = [c.body_in for c in self.carries] + [s.body_in for s in self.stacked]
        inputs += [w.body_in for w in self.invariants]
        outputs = [c.body_out for c in self.carries] + [y.body_out for y in self.ys]
        fn = Function(self.name, inputs, self.ops, outputs,
                      [self.labels.get(v) for v in inputs], None, self.callees, self.attrs)
        return dce(fn, PassContext())

    def build(self) -> Op:
        """The new loop op (its results replace the old ones through ``subst``)."""
        body = self.body()
        operands = [c.init for c in self.carries] + [s.operand for s in self.stacked]
        operands += [w.operand for w in self.invariants]
        new = loop_op(body, operands, length=self.length, carries=len(self.carries),
                      stacked=len(self.stacked), reverse=self.reverse, loc=self.op.loc)
        outs = [c.result for c in self.carries] + [y.result for y in self.ys]
        for old, r in zip(outs, new.results, strict=True):
            if old is not None:
                self.subst[old] = r
        self.new_body = body
        return new


# -- what depends on what -----------------------------------------------------------------
def classes(p: Parts) -> dict[Value, int]:
    """For each body value: 0 (constants), INV, STEP (a step slice, no carried value) or
    CARRY."""
    cls: dict[Value, int] = {}
    for c in p.carries:
        cls[c.body_in] = CARRY
    for s in p.stacked:
        cls[s.body_in] = STEP
    for w in p.invariants:
        cls[w.body_in] = INV
    for op in p.ops:
        d = max((cls[v] for v in op.operands), default=0)
        if get_opdef(op.name).effect or op.name == "loop" and d < STEP:
            d = max(d, STEP)  # never moved out of the loop
        for r in op.results:
            cls[r] = d
    return cls


def uses(p: Parts) -> dict[Value, int]:
    """How many times each value is read by a body op or is a body output."""
    n: dict[Value, int] = {}
    for op in p.ops:
        for v in op.operands:
            n[v] = n.get(v, 0) + 1
    for v in [c.body_out for c in p.carries] + [y.body_out for y in p.ys]:
        n[v] = n.get(v, 0) + 1
    return n


# -- invariant ops --------------------------------------------------------------------------
def hoist_invariants(p: Parts) -> bool:
    """Run the body's invariant ops (of invariants only, not constants alone) before the
    loop; their results read in the body become invariants."""
    cls = classes(p)
    outer = {w.body_in: w.operand for w in p.invariants}
    moved: dict[Value, None] = {}  # in program order (a set's order is the addresses')
    for op in p.ops:
        if not op.results or cls[op.results[0]] != INV:
            continue
        for v in op.operands:
            if v not in outer:  # a constant: copied out
                const = next(o for o in p.ops if v in o.results)
                p.pre.append(const.replace(results=[Value(v.type)]))
                outer[v] = p.pre[-1].result
        new = op.replace(operands=[outer[v] for v in op.operands],
                         results=[Value(r.type) for r in op.results])
        p.pre.append(new)
        outer.update(zip(op.results, new.results, strict=True))
        moved.update(dict.fromkeys(op.results))
    if not moved:
        return False
    _read_from_outside(p, moved, outer)
    return True


def _read_from_outside(p: Parts, values: dict[Value, None], outer: dict[Value, Value]
                       ) -> None:
    """Body reads of ``values`` become reads of new invariants (their ``outer`` values)."""
    made: dict[Value, Value] = {}
    read = {v for op in p.ops if not any(r in values for r in op.results)
            for v in op.operands}
    read |= {c.body_out for c in p.carries} | {y.body_out for y in p.ys}
    for v in values:
        if v in read:
            made[v] = Value(v.type)
            p.invariants.append(Step(made[v], outer[v]))
    p.ops = [op.replace(operands=[made.get(v, v) for v in op.operands])
             for op in p.ops if not any(r in values for r in op.results)]
    _replace_outputs(p, made)


def _replace_outputs(p: Parts, made: dict[Value, Value]) -> None:
    for c in p.carries:
        c.body_out = made.get(c.body_out, c.body_out)
    for y in p.ys:
        y.body_out = made.get(y.body_out, y.body_out)


# -- running sums ------------------------------------------------------------------------------
def sink_sums(p: Parts) -> bool:
    """Carried running sums ``acc + g`` become step outputs summed after the loop."""
    n = uses(p)
    made = {r: op for op in p.ops for r in op.results}
    changed = False
    for c in list(p.carries):
        add = made.get(c.body_out)
        if add is None or add.name != "add" or n.get(c.body_in, 0) != 1 or \
                n.get(c.body_out, 0) != 1 or c.body_in not in add.operands:
            continue
        g = add.operands[1] if add.operands[0] is c.body_in else add.operands[0]
        if g is c.body_in:
            continue
        total = _summed(p, g, made, n)
        final = p.after("add", [c.init, total])
        p.carries.remove(c)
        if c.result is not None:
            p.subst[c.result] = final
        p.ops.remove(add)
        changed = True
    return changed


def _summed(p: Parts, g: Value, made: dict[Value, Op], n: dict[Value, int]) -> Value:
    """The sum over the steps of the body's value ``g``, after the loop (a transposed
    product's sum is the transpose of the products' sum)."""
    prod = made.get(g)
    if prod is not None and prod.name == "transpose" and g.ndim == 2 and \
            n.get(g, 0) == 1 and _product(made, prod.operands[0], n) is not None:
        return p.after("transpose", [_summed(p, prod.operands[0], made, n)], perm=(1, 0))
    prod = _product(made, g, n)
    if prod is not None:
        a, b = prod.operands
        return _sum_of_products(p, a, b, made)
    y = _stacked_out(p, g)
    return p.after("sum", [y], axes=(0,))


def _product(made: dict[Value, Op], g: Value, n: dict[Value, int]) -> Op | None:
    """The 2-D matrix product making ``g``, if nothing else reads ``g``."""
    prod = made.get(g)
    if prod is not None and prod.name == "matmul" and g.ndim == 2 and n.get(g, 0) == 1:
        return prod
    return None


def _sum_of_products(p: Parts, a: Value, b: Value, made: dict[Value, Op]) -> Value:
    """``sum_t a_t @ b_t`` as one product over all steps' rows."""
    inv = {w.body_in: w.operand for w in p.invariants}
    if a in inv:
        return p.after("matmul", [inv[a], p.after("sum", [_stacked_out(p, b)], axes=(0,))])
    if b in inv:
        return p.after("matmul", [p.after("sum", [_stacked_out(p, a)], axes=(0,)), inv[b]])
    m, k = a.shape
    n = b.shape[1]
    t = made.get(a)
    if t is not None and t.name == "transpose":  # a = x.T: rows of x, read transposed
        x = _stacked_out(p, t.operands[0])
        left = p.after("transpose", [p.after("reshape", [x], shape=(p.length * k, m))],
                       perm=(1, 0))
    else:
        y = p.after("transpose", [_stacked_out(p, a)], perm=(1, 0, 2))
        left = p.after("reshape", [y], shape=(m, p.length * k))
    right = p.after("reshape", [_stacked_out(p, b)], shape=(p.length * k, n))
    return p.after("matmul", [left, right])


def _stacked_out(p: Parts, v: Value) -> Value:
    """``v`` of every step, stacked (a step slice's own array; else a new step output)."""
    for s in p.stacked:
        if s.body_in is v:
            return s.operand
    for y in p.ys:
        if y.body_out is v and y.result is not None:
            return y.result
    y = StepOut(v, Value(v.type.with_shape((p.length,) + v.shape)))
    p.ys.append(y)
    assert y.result is not None
    return y.result


# -- batched products ---------------------------------------------------------------------------
BATCHABLE = frozenset({"reshape", "transpose", "convert", "matmul"})


def batch_products(p: Parts) -> bool:
    """Matrix products of step slices (and invariants) run for all steps before the loop."""
    cls = classes(p)
    batched: dict[Value, Value] = {s.body_in: s.operand for s in p.stacked}
    inv = {w.body_in: w.operand for w in p.invariants}
    made: dict[Value, None] = {}  # in program order
    for op in p.ops:
        if not op.results or cls.get(op.results[0], 0) != STEP or \
                op.name not in BATCHABLE or not all(v in batched or v in inv
                                                    for v in op.operands):
            continue
        new = _batched(p, op, batched, inv)
        if new is not None:
            batched[op.result] = new
            if op.name == "matmul":
                made[op.result] = None
    if not made:
        return False
    new_in: dict[Value, Value] = {}
    for v in made:
        new_in[v] = Value(v.type)
        p.stacked.append(Step(new_in[v], batched[v]))
    p.ops = [op.replace(operands=[new_in.get(v, v) for v in op.operands]) for op in p.ops]
    _replace_outputs(p, new_in)
    return True


def _batched(p: Parts, op: Op, batched: dict[Value, Value], inv: dict[Value, Value]
             ) -> Value | None:
    """``op`` for all steps (operands: stacked ``[T, ...]`` or invariant), or None."""
    xs = [batched.get(v) for v in op.operands]
    T = p.length
    if op.name == "reshape" and xs[0] is not None:
        return p.emit("reshape", [xs[0]], shape=(T,) + op.attrs["shape"])
    if op.name == "transpose" and xs[0] is not None:
        return p.emit("transpose", [xs[0]], perm=(0,) + tuple(a + 1 for a in op.attrs["perm"]))
    if op.name == "convert" and xs[0] is not None:
        return p.emit("convert", [xs[0]], dtype=op.attrs["dtype"])
    if op.name != "matmul" or op.result.ndim != 2:
        return None
    (m, k), n = op.operands[0].shape, op.result.shape[1]
    if xs[0] is not None and xs[1] is None:  # x_t @ W: all steps' rows at once
        rows = p.emit("reshape", [xs[0]], shape=(T * m, k))
        return p.emit("reshape", [p.emit("matmul", [rows, inv[op.operands[1]]])],
                      shape=(T, m, n))
    if xs[0] is not None and xs[1] is not None:
        return p.emit("matmul", [xs[0], xs[1]])
    return None


def batch_step_outputs(p: Parts) -> bool:
    """A step output that is a product of a step value and an invariant (``dx_t = d_t @
    U``, maybe reshaped), read by nothing else in the body, is computed after the loop for
    all steps at once, from the stacked step values."""
    n = uses(p)
    made = {r: op for op in p.ops for r in op.results}
    inv = {w.body_in: w.operand for w in p.invariants}
    changed = False
    for y in list(p.ys):
        v = y.body_out
        shaped = made.get(v)
        if shaped is not None and shaped.name == "reshape" and n.get(v, 0) == 1:
            v = shaped.operands[0]
        prod = _product(made, v, n)
        if prod is None or prod.operands[1] not in inv or y.result is None or \
                prod.operands[0] is v:
            continue
        a = prod.operands[0]
        m, k = a.shape
        rows = p.after("reshape", [_stacked_out(p, a)], shape=(p.length * m, k))
        out = p.after("matmul", [rows, inv[prod.operands[1]]])
        p.subst[y.result] = p.after("reshape", [out], shape=y.result.shape)
        p.ys.remove(y)
        changed = True
    return changed


# -- unread results -------------------------------------------------------------------------------
def drop_unread(p: Parts, read: set[Value]) -> bool:
    """Step outputs nothing reads, that repeat another or that are a step slice's own
    array (or a reshape of it), carried values nothing reads and those the body passes
    on unchanged, and inputs the body does not read."""
    changed = _drop_outputs(p, read)
    changed = _passed_on(p) | changed
    _live_ops(p)
    n = uses(p)
    for c in list(p.carries):
        if (c.result is None or c.result not in read) and n.get(c.body_in, 0) == 0:
            p.carries.remove(c)
            changed = True
    for group in (p.stacked, p.invariants):
        for s in list(group):
            if n.get(s.body_in, 0) == 0:
                group.remove(s)
                changed = True
    return changed


def _live_ops(p: Parts) -> None:
    """Keep the body ops the outputs need (and guards)."""
    live = {c.body_out for c in p.carries} | {y.body_out for y in p.ys}
    kept = []
    for op in reversed(p.ops):
        if get_opdef(op.name).effect or op.name == "loop" or any(r in live for r in op.results):
            kept.append(op)
            live.update(op.operands)
    p.ops = kept[::-1]


def _drop_outputs(p: Parts, read: set[Value]) -> bool:
    changed = False
    made = {r: op for op in p.ops for r in op.results}
    kept = [y for y in p.ys if y.result is None or y.result in read]
    changed = len(kept) != len(p.ys)
    p.ys = kept
    seen: dict[Value, Value] = {y.body_out: y.result for y in kept if y.result is not None}
    for y in list(p.ys):
        old = y.result
        if old is None:
            continue
        alias = _step_array(p, y.body_out, made)
        first = seen.get(y.body_out)
        if alias is None and first is not None and first is not old:
            alias = first
        if alias is None:
            alias = _reshaped(p, y.body_out, made, seen)
        if alias is not None:
            p.subst[old] = alias
            p.ys.remove(y)
            seen[y.body_out] = alias
            changed = True
    return changed


def _reshaped(p: Parts, v: Value, made: dict[Value, Op], seen: dict[Value, Value]
              ) -> Value | None:
    """A step output that is a reshape of another step output, reshaped after the loop
    (the values are stacked once)."""
    op = made.get(v)
    if op is None or op.name != "reshape" or op.operands[0] not in seen:
        return None
    return p.after("reshape", [seen[op.operands[0]]], shape=(p.length,) + v.shape)


def _step_array(p: Parts, v: Value, made: dict[Value, Op]) -> Value | None:
    """The stacked array whose step slice ``v`` is (a step slice, or a reshape of one),
    made after the loop; None for any other value."""
    op = made.get(v)
    src = op.operands[0] if op is not None and op.name == "reshape" else v
    for s in p.stacked:
        if s.body_in is src:
            if src is v:
                return s.operand
            return p.after("reshape", [s.operand], shape=(p.length,) + v.shape)
    return None


def _passed_on(p: Parts) -> bool:
    """A carried value the body returns unchanged is an invariant."""
    changed = False
    for c in list(p.carries):
        if c.body_out is c.body_in:
            p.carries.remove(c)
            p.invariants.append(Step(c.body_in, c.init))
            if c.result is not None:
                p.subst[c.result] = c.init
            changed = True
    return changed


# -- the pass ------------------------------------------------------------------------------------
def optimize_loop(op: Op, body: Function, read: set[Value], ctx: PassContext) -> Parts | None:
    """``op`` taken apart and rewritten, or None when nothing changes."""
    p = Parts.of(op, body)
    changed = hoist_invariants(p)
    if ctx.reorder_matmul:
        changed = sink_sums(p) | changed
        if not body.attrs.get("checkpoint"):  # a segment's products stay in the segment
            changed = batch_products(p) | changed
            changed = batch_step_outputs(p) | changed
    changed = drop_unread(p, read | {v for o in p.post for v in o.operands}) | changed
    return p if changed else None


def loops(fn: Function, ctx: PassContext) -> Function:
    if not any(op.name == "loop" for op in fn.ops):
        return fn
    read = {v for op in fn.ops for v in op.operands} | set(fn.outputs)
    names = fresh_names("loop", set(fn.all_callees()))
    ops: list[Op] = []
    subst: dict[Value, Value] = {}
    callees = dict(fn.callees)
    changed = False
    for op in fn.ops:
        op = remap(op, subst)
        p = optimize_loop(op, fn.callees[op.attrs["callee"]], read, ctx) \
            if op.name == "loop" else None
        if p is None:
            ops.append(op)
            continue
        p.name = next(names)
        new = p.build()
        assert p.new_body is not None
        callees[p.name] = p.new_body
        ops += p.pre + [new] + _in_order([remap(o, p.subst) for o in p.post])
        subst.update(p.subst)
        changed = True
    if not changed:
        return fn
    outputs = tuple(resolve(v, subst) for v in fn.outputs)
    return dce(fn.replace(ops=ops, outputs=outputs, callees=callees), ctx)


def _in_order(ops: list[Op]) -> list[Op]:
    """The ops made after a loop, each placed after those whose results it reads: a step
    output dropped late (``drop_unread``: a reshape of another output) is replaced by an
    op made after the ops that already read it (a sum of products' factor)."""
    made = {r: op for op in ops for r in op.results}
    out: list[Op] = []
    placed: set[int] = set()

    def place(op: Op) -> None:
        if id(op) in placed:
            return
        placed.add(id(op))
        for v in op.operands:
            dep = made.get(v)
            if dep is not None:
                place(dep)
        out.append(op)

    for op in ops:
        place(op)
    return out


LOOPS = Pass("loops", "loop-invariant ops run once, running sums summed after the loop, "
             "products of step slices batched, unread results dropped", loops)
