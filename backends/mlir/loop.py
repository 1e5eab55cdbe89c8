"""A ``loop`` op as ``scf.for``: the carried values and the stacked results (a
``tensor.empty`` filled one slab per step with ``tensor.insert_slice``) are its
``iter_args``, each step reads its slice of the stacked operands with
``tensor.extract_slice``, calls the body's function and copies the next carried values
into the ones it was given (``linalg.copy``: a step yields its own ``iter_args``, so
bufferization keeps one buffer per carried value). In an executable module the
status (failure code, offending value) is carried too, and the body's status is merged
into it step by step (the first failure is kept)."""

from __future__ import annotations

from yota.ir.core import Function, Op, Value
from yota.ir.ops.loop import LoopShape

from .context import FnCtx
from .emit import emitter
from .text import Lines, symbol, tensor


def _slab(L: Lines, i: str, t: Value) -> tuple[str, str, str]:
    """(offsets, sizes, strides) of step ``i``'s slab of stacked ``t``."""
    rest = t.shape[1:]
    offsets = ", ".join([i] + ["0"] * len(rest))
    sizes = ", ".join(str(d) for d in (1, *rest))
    return f"[{offsets}]", f"[{sizes}]", f"[{', '.join(['1'] * (1 + len(rest)))}]"


@emitter("loop")
def _loop(c: FnCtx, op: Op) -> None:
    body = c.fn.callees[op.attrs["callee"]]
    c.mod.render(body)
    sh = LoopShape.of(op.attrs)
    L = c.L
    carried, stacked, inv = sh.split_operands(list(op.operands))
    ys = list(op.results[sh.carries:])
    init = [c.name(v) for v in carried]
    init += [L.op(f"tensor.empty() : {tensor(r.type)}") for r in ys]
    types = [tensor(v.type) for v in carried] + [tensor(r.type) for r in ys]
    if c.executable:
        assert c.status is not None
        init += list(c.status)
        types += ["i32", "i64"]
    accs = [L.fresh("acc") for _ in init]
    t, res = L.fresh("t"), L.fresh("loop")
    lo, hi, one = L.index(0), L.index(sh.length), L.index(1)
    args = ", ".join(f"{a} = {v}" for a, v in zip(accs, init, strict=True))
    L.line(f"{res}:{len(types)} = scf.for {t} = {lo} to {hi} step {one} "
           f"iter_args({args}) -> ({', '.join(types)}) {{")
    L.indent += "  "
    new = _step(c, op, body, sh, accs, t)
    L.line(f"scf.yield {', '.join(new)} : {', '.join(types)}")
    L.indent = L.indent[:-2]
    L.line("}")
    for k, v in enumerate(op.results):
        c.bind(v, f"{res}#{k}")
    if c.executable:
        c.status = (f"{res}#{len(types) - 2}", f"{res}#{len(types) - 1}")


def _step(c: FnCtx, op: Op, body: Function, sh: LoopShape, accs: list[str], t: str
          ) -> list[str]:
    """One step's code inside the ``scf.for``; returns the values it yields."""
    L = c.L
    carried, stacked, inv = sh.split_operands(list(op.operands))
    i = L.op(f"arith.subi {L.index(sh.length - 1)}, {t} : index") if sh.reverse else t
    args = accs[:sh.carries]
    for v in stacked:
        off, size, st = _slab(L, i, v)
        part = tensor(v.type.with_shape(v.shape[1:]))
        args.append(L.op(f"tensor.extract_slice {c.name(v)}{off} {size} {st} : "
                         f"{tensor(v.type)} to {part}"))
    args += [c.name(v) for v in inv]
    outs = [tensor(v.type) for v in body.outputs]
    ins = [tensor(v.type) for v in body.inputs]
    rtypes = outs + (["i32", "i64"] if c.executable else [])
    r = L.fresh("r")
    L.line(f"{r}:{len(rtypes)} = func.call {symbol(body.name)}({', '.join(args)}) : "
           f"({', '.join(ins)}) -> ({', '.join(rtypes)})")
    got = [f"{r}#{k}" for k in range(len(rtypes))]
    ys = op.results[sh.carries:]
    stacked_new = []
    for k, y in enumerate(ys):
        off, size, st = _slab(L, i, y)
        stacked_new.append(L.op(f"tensor.insert_slice {got[sh.carries + k]} into "
                                f"{accs[sh.carries + k]}{off} {size} {st} : "
                                f"{outs[sh.carries + k]} into {tensor(y.type)}"))
    new = _carried(L, body, sh.carries, accs, got, outs) + stacked_new
    if c.executable:
        saved = c.status
        c.status = (accs[-2], accs[-1])
        c.merge_status(got[-2], got[-1])
        new += list(c.status)
        c.status = saved
    return new


def _carried(L: Lines, body: Function, n: int, accs: list[str], got: list[str],
             outs: list[str]) -> list[str]:
    """The next carried values, written into the buffers the step was given (after
    every read of them: the stacked results first, then copies; a value passed on
    unchanged is yielded as it is, and one the body took as another carried value is
    copied aside first)."""
    inputs = list(body.inputs)
    src = list(got[:n])
    for k in range(n):
        v = body.outputs[k]
        if v in inputs[:n] and inputs.index(v) != k:
            tmp = L.op(f"tensor.empty() : {outs[k]}")
            src[k] = L.op(f"linalg.copy ins({got[k]} : {outs[k]}) outs({tmp} : {outs[k]}) "
                          f"-> {outs[k]}")
    new = []
    for k in range(n):
        same = body.outputs[k] is inputs[k]
        new.append(accs[k] if same else L.op(
            f"linalg.copy ins({src[k]} : {outs[k]}) outs({accs[k]} : {outs[k]}) -> {outs[k]}"))
    return new
