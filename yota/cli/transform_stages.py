"""The stages of a transformed program for ``yota-ir ir TARGET --transform T``: the traced
program, the transformation's program (``jvp``, ``vmap``, ``jacobian``, ``hessian``, as
``yota.jvp``... build it from the traced program), then the default pipeline's passes."""

from __future__ import annotations

import ast
from typing import Any

from yota import pipeline
from yota.ir.core import Function
from yota.ir.errors import YotaError
from yota.tape import Tape
from yota.transforms import passes_of

from .app import ToolError

TRANSFORMS = ("jvp", "vmap", "jacobian", "hessian")


def transform_stages(tape: Tape, transform: str, upto: str, *, in_axes: str | None = None,
                     batch: int = 8, argnums: int = 0, fast_math: bool = False
                     ) -> list[tuple[str, Function]]:
    """``[("traced", fn), (transform, fn), (pass, fn after it), ...]`` through stage
    ``upto`` (``grad`` stands for the transformation's own program)."""
    fn = pipeline.traced_ir(tape)
    out = [("traced", fn)]
    if upto == "traced":
        return out
    try:
        t = _build(tape, fn, transform, in_axes, batch, argnums)
    except YotaError as e:
        raise ToolError(f"--transform {transform}: {e}") from None
    out.append((transform, t))
    if upto == "grad":
        return out
    names = passes_of(transform)  # (as the front end runs them)
    run = pipeline.timed_passes(t, names[:_stage_end(names, upto)], fast_math=fast_math,
                                keep=True)
    return out + run[1:]


def _stage_end(names: list[str], stage: str) -> int:
    fuse = names.index("fuse") if "fuse" in names else len(names)
    plan = names.index("plan_memory") if "plan_memory" in names else len(names)
    return {"optimized": min(fuse, plan), "fused": plan}.get(stage, len(names))


def _leaves(tape: Tape, fn: Function, argnums: int | None) -> list[int]:
    """The float leaves (of argument ``argnums``; None: all)."""
    return [i for i, (a, _, _) in enumerate(tape.leaf_vars)
            if fn.inputs[i].dtype.kind == "f" and (argnums is None or a == argnums)]


def _build(tape: Tape, fn: Function, transform: str, in_axes: str | None, batch: int,
           argnums: int) -> Function:
    from yota.ir.autodiff import jacobian
    from yota.ir.autodiff.jvp import jvp
    from yota.ir.vmap import vmap

    if transform == "jvp":
        return jvp(fn, _leaves(tape, fn, None))
    if transform == "vmap":
        return vmap(fn, _axes(tape, fn, in_axes), batch)
    wrt = _leaves(tape, fn, argnums)
    if transform == "hessian":
        return jacobian.hessian(fn, wrt)
    outs = [j for j, v in enumerate(fn.outputs) if v.dtype.kind == "f"]
    n_in = sum(fn.inputs[i].type.size for i in wrt)
    n_out = sum(fn.outputs[j].type.size for j in outs)
    return (jacobian.jacfwd if n_in <= n_out else jacobian.jacrev)(fn, wrt, outs)


def _axes(tape: Tape, fn: Function, in_axes: str | None) -> list[int | None]:
    """Per input: the batch axis of its argument's leaves (``--in-axes``, a Python literal:
    an int, None, or one entry per argument; default 0), None for captured arrays and 0
    for random draws."""
    spec: Any = 0 if in_axes is None else ast.literal_eval(in_axes)
    nargs = len(tape.argnames)
    per = spec if isinstance(spec, (tuple, list)) else [spec] * nargs
    if len(per) != nargs or not all(a is None or isinstance(a, int) for a in per):
        raise ToolError(f"--in-axes {in_axes!r}: give an int, None, or one per argument "
                        f"({nargs})")
    axes: list[int | None] = [per[a] for a, _, _ in tape.leaf_vars]
    extra = len(fn.inputs) - len(axes) - len(tape.randoms)
    return axes + [None] * extra + [0] * len(tape.randoms)
