"""The one place where Yota's stages are chained.

    user f(args) --trace--> Tape --lower--> ir.Function --vjp--> ir.Function
                 --optimize--> ir.Function --compile (through yota.cache)--> executable

``yota.grad``, ``yota.compile``, ``yota.simplegrad``, ``yota.aot``, the cache's
``explain``/``program_ir`` and ``yota-ir`` all build their programs with the functions
below, so every entry point runs the same stages in the same order.

Each stage runs under ``phase(name)`` (``yota.phases``): a compile's log line and
``yota-ir --timings`` show its time. A new stage is timed by one line where it runs,
``with phase("roll"): fn = roll(fn)``; the phases print in the order they ran.

>>> import numpy as np
>>> _, tape = trace_grad(lambda x: np.sum(x * x), (np.ones(3),))
>>> [name for name, _ in stages(tape, "grad")]
['traced', 'grad']
>>> grad_ir(tape).outputs[1].type
f64[3]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from yota.ir.core import Function
from yota.ir.errors import GuardFailed, TraceError, YotaError

from . import device as _device
from . import tracing as _tracing
from .cache.config import Counters, log
from .lowering import to_ir
from .phases import compiling, importing, note, phase
from .program import Program
from .tape import Loc, Tape, Var


def tape_signature(tape: Tape) -> tuple[Any, ...]:
    """``yota.cache.key.tape_signature`` (the cache is imported on first use)."""
    with importing("yota.cache.key"):
        from .cache.key import tape_signature as signature

    return signature(tape)


def _passes() -> Any:
    """``yota.ir.passes`` (imported on first use: a cache hit runs no pass)."""
    with importing("yota.ir.passes"):
        from yota.ir import passes

    return passes


def _lookup() -> Any:
    """``yota.cache.lookup`` (imported on first use)."""
    with importing("yota.cache.lookup"):
        from .cache import lookup
    return lookup


def vjp(fn: Function, wrt: list[int]) -> Function:
    """``yota.ir.autodiff.vjp`` (imported on first use: a cache hit differentiates
    nothing)."""
    with importing("yota.ir.autodiff"):
        from yota.ir.autodiff import vjp as _vjp

    with phase("vjp"):
        return _vjp(fn, wrt)

STAGES: dict[str, str] = {
    "traced": "the tape as typed IR (yota.to_ir(tape)), repeated steps rolled into loops",
    "grad": "value and gradients by rule rewrites (vjp, w.r.t. every float leaf)",
    "optimized": "after the default pipeline's passes that come before fusion",
    "fused": "after fusion: elementwise chains become `fused` kernels",
    "planned": "after memory planning: the program yota.grad runs",
}


class StageError(YotaError):
    """A stage that cannot be built for this function (not a scalar, a missing pass)."""


class Stats(Counters):
    """Counters that make caching observable: ``yota.stats.traces`` etc."""

    _FIELDS = ("traces", "hits", "guard_failures", "compiles")
    traces: int
    hits: int
    guard_failures: int
    compiles: int


stats = Stats()

MAX_VARIANTS = 8  # compiled programs kept per function and signature (latest first)


# -- trace ------------------------------------------------------------------------------------
def trace(f: Callable[..., Any], *args: Any, primitives: Any = None) -> tuple[Any, Tape]:
    """Run ``f(*args)`` on tracers; returns ``(value, tape)`` (``yota.tracing.trace``).

    Called inside a function that Yota is tracing, on its traced values (or on a function
    that closes over them), the tape's program is inlined into the enclosing trace and
    ``value`` holds the enclosing trace's values: the code is traced through.

    >>> import numpy as np, yota
    >>> val, tape = yota.trace(lambda x: np.sum(x * 2.0), np.ones(3))
    >>> float(val)
    6.0
    """
    nested = _tracing.current_context() is not None and _tracing.has_tracers(args)
    val, tape = _tracing.trace(f, *(_tracing.detach(args) if nested else args),
                               primitives=primitives)
    if nested or tape.foreign_tracers:  # traced values of an enclosing trace reach f
        outs = _tracing.inline(lower(tape), tape, args, "trace")
        return _tracing.restructure(tape.result, outs), tape
    return val, tape


def nested_forward(f: Callable[..., Any], args: Sequence[Any], what: str) -> Any:
    """``f(*args)`` inside a trace, through a nested trace whose program is inlined into
    the enclosing one (``yota.compile``'s functions called in a traced function)."""
    _, tape = _tracing.trace(f, *_tracing.detach(tuple(args)))
    return _tracing.restructure(tape.result, _tracing.inline(lower(tape), tape, args, what))


def trace_forward(f: Callable[..., Any], args: Sequence[Any]) -> tuple[Any, Tape]:
    """Trace ``f`` at ``args`` (host copies of device arrays)."""
    with phase("trace"):
        return _tracing.trace(f, *_device.host_values(args))


def trace_grad(f: Callable[..., Any], args: Sequence[Any], has_aux: bool = False,
               wrt: Sequence[int] | None = None, checkpoint: Any = "auto"
               ) -> tuple[Any, Tape]:
    """Trace ``f`` for differentiation: counted in ``stats.traces``; ``f`` must return a
    scalar float (with ``has_aux``: a pair ``(scalar float, aux)``); ``wrt``: the
    arguments to differentiate (default: all); ``checkpoint``: which loops' gradients
    are checkpointed (``yota.ir.autodiff.checkpoint``)."""
    stats.traces += 1
    log.info("yota: tracing %s", getattr(f, "__name__", f))
    val, tape = trace_forward(f, args)
    tape.wrt = None if wrt is None else tuple(wrt)
    tape.checkpoint = checkpoint
    _tracing.squeeze_result(tape, has_aux)  # a loss of shape (1,): its one value
    if has_aux:
        check_pair(tape, val, f)
        tape.has_aux = True
        check_scalar(tape, val[0], f, tape.result[0])
    else:
        check_scalar(tape, val, f)
    return val, tape


def check_pair(tape: Tape, val: Any, f: Any) -> None:
    """Raise ``TraceError`` unless ``f`` returned a pair ``(loss, aux)``."""
    if isinstance(val, (tuple, list)) and len(val) == 2:
        return
    name = getattr(f, "__name__", "f")
    where = f" ({tape.loc})" if tape.loc else ""
    if isinstance(val, (tuple, list)):
        got = f"a {type(val).__name__} of length {len(val)}"
    elif hasattr(val, "shape"):
        got = f"an array of shape {tuple(val.shape)}"
    else:
        got = f"a {type(val).__name__}"
    raise TraceError(f"yota.grad(..., has_aux=True) needs {name}{where} to return a pair "
                     f"(loss, aux), but it returned {got}; return (loss, aux) with aux any "
                     "structure of arrays, or leave has_aux out")


_RESULT: Any = object()


def check_scalar(tape: Tape, val: Any, f: Any, r: Any = _RESULT) -> None:
    """Raise ``TraceError`` unless the traced result (``r``, default the tape's) is a
    scalar float."""
    r = tape.result if r is _RESULT else r
    name = getattr(f, "__name__", "f")
    if isinstance(r, Var):
        if r.type is not None and r.type.ndim == 0 and r.type.dtype.kind == "f":
            return
        what = f"an array {r.type}"
    elif isinstance(r, float):
        return
    else:
        what = f"a {type(val).__name__}"
    where = f" ({tape.loc})" if tape.loc else ""
    api = getattr(f, "__yota_api__", "yota.grad")  # the front end that differentiates f
    raise TraceError(f"{api} needs {name}{where} to return a scalar float (0-d), but it "
                     f"returned {what}; reduce it first (np.sum, np.mean) or differentiate "
                     "one element")


# -- lower, differentiate, optimize -----------------------------------------------------------
def lower(tape: Tape) -> Function:
    """The tape as typed IR."""
    with phase("to_ir"):
        fn = to_ir(tape)
    note(traced=len(fn.ops))
    return fn


def traced_ir(tape: Tape) -> Function:
    """The tape as typed IR with its repeated steps rolled into loop ops: the program
    every compiled stage starts from (``rolled``)."""
    return rolled(lower(tape))


def rolled(fn: Function, roll: bool = True) -> Function:
    """``fn`` (a lowered tape) with its repeated steps rolled into loop ops
    (``yota.ir.passes.roll``; not with ``roll=False`` or ``YOTA_ROLL=0``). The on-disk
    cache is asked by the unrolled program: a hit rolls nothing (and imports no pass)."""
    if not (roll and roll_enabled()):
        return fn
    from yota.ir.passes.roll import roll as _roll

    with phase("roll"):
        return _roll(fn)


def roll_enabled() -> bool:
    """Repeated steps are rolled into loops unless ``YOTA_ROLL=0``."""
    return os.environ.get("YOTA_ROLL", "1") not in ("0", "")


def float_leaves(tape: Tape, fn: Function) -> list[int]:
    """The inputs yota.grad differentiates: every float leaf of the arguments (of those
    in ``tape.wrt`` when it is set)."""
    return [i for i, (argnum, _, _) in enumerate(tape.leaf_vars)
            if fn.inputs[i].dtype.kind == "f" and (tape.wrt is None or argnum in tape.wrt)]


def differentiate(tape: Tape, fn: Function) -> Function:
    """Value and gradients of ``fn`` (the lowered ``tape``) w.r.t. every float leaf; for
    a tape with auxiliary outputs (``has_aux``) the gradients are those of its first
    output, and the others follow the gradients as outputs of the same program."""
    from yota.ir.autodiff.checkpoint import checkpoint_loops

    fn = checkpoint_loops(fn, tape.checkpoint)
    if not tape.has_aux:
        return vjp(fn, float_leaves(tape, fn))
    loss = fn.replace(outputs=fn.outputs[:1], output_labels=fn.output_labels[:1])
    g = vjp(loss, float_leaves(tape, fn))
    aux = [f"aux {i}" for i in range(len(fn.outputs) - 1)]
    return g.replace(outputs=g.outputs + fn.outputs[1:],
                     output_labels=g.output_labels + tuple(aux))


def optimize(fn: Function, passes: Sequence[str] | None = None, *,
             fast_math: bool = False) -> Function:
    """``fn`` after ``passes`` (default: the whole pipeline, ``yota.ir.passes.PIPELINE``)."""
    names = [n for n, _ in _passes().PIPELINE] if passes is None else list(passes)
    return timed_passes(fn, names, fast_math=fast_math)[-1][1]


def timed_passes(fn: Function, names: Sequence[str], *, fast_math: bool = False,
                 keep: bool = False) -> list[tuple[str, Function]]:
    """The passes ``names`` over ``fn``, one at a time, each timed as a part of phase
    ``passes``: ``[("input", fn), (pass, fn after it), ...]`` with ``keep``, else the
    input and the last stage (``yota.ir.passes.optimize`` with ``trace_stages``)."""
    passes = _passes()
    ctx = passes.PassContext(fast_math=fast_math)
    out = [("input", fn)]
    with phase("passes"):
        for name in names:
            with phase(name):
                fn = passes.optimize(fn, [name], ctx=ctx)
            if keep or len(out) == 1:
                out.append((name, fn))
            else:
                out[-1] = (name, fn)
    note(ops=len(fn.ops))
    return out


def forward_ir(tape: Tape, *, optimized: bool = True) -> Function:
    """The program ``yota.compile`` runs for ``tape``."""
    fn = traced_ir(tape)
    return optimize(fn) if optimized else fn


def grad_ir(tape: Tape, *, optimized: bool = True, fn: Function | None = None,
            passes: Sequence[str] | None = None) -> Function:
    """The program ``yota.grad`` runs for ``tape`` (``fn``: its IR, if already lowered;
    ``passes``: other passes than the whole pipeline)."""
    gfn = differentiate(tape, traced_ir(tape) if fn is None else fn)
    return optimize(gfn, passes) if optimized else gfn


def program_ir(f: Callable[..., Any], args: Sequence[Any], *, kind: str = "grad",
               optimized: bool = True) -> tuple[Function, Any]:
    """The IR ``yota.grad`` (``kind="forward"``: ``yota.compile``) would compile for ``f``
    at ``args``, and the argument signature."""
    if kind == "forward":
        _, tape = _tracing.trace(f, *args)
        return forward_ir(tape, optimized=optimized), tape_signature(tape)
    _, tape = trace_grad(f, args)
    return grad_ir(tape, optimized=optimized), tape_signature(tape)


# -- compile --------------------------------------------------------------------------------
def build_program(tape: Tape, fn: Function, backend: str | None, *, kind: str,
                  cache: bool = True) -> Program:
    """Compile ``fn`` (built from ``tape``) through the on-disk cache: the key comes from
    the printed IR, so a hit skips only the native compilation."""
    exe = _lookup().compile_cached(fn, backend, kind=kind, use_cache=cache,
                         signature=tape_signature(tape))
    return Program.build(tape, fn, exe)


def build_grad(tape: Tape, backend: str | None, *, optimized: bool = True,
               cache: bool = True, fn: Function | None = None, roll: bool = True) -> Program:
    """The compiled gradient program of ``tape`` (counted in ``stats.compiles``). The
    cache is asked by the traced program (``fn``: its IR, if already lowered) first: a
    hit skips rolling, differentiation, the passes and the native compilation."""
    stats.compiles += 1
    with compiling(tape.fname, "grad", backend):  # (joins yota.grad's, with its trace)
        fn = lower(tape) if fn is None else fn
        exe, built, facts = _lookup().compile_traced(
            fn, lambda: grad_ir(tape, optimized=optimized, fn=rolled(fn, roll)), backend,
            kind="grad", signature=tape_signature(tape),
            derivation=lambda: grad_derivation(tape, optimized, roll), use_cache=cache)
        return Program.build(tape, built, exe, facts)


def grad_derivation(tape: Tape, optimized: bool = True, roll: bool = True) -> dict[str, Any]:
    """How ``build_grad`` turns the traced program into the one that runs (a part of the
    cache's traced key): rolling, what it differentiates, and the passes."""
    return {"roll": roll and roll_enabled(), "differentiate": "vjp",
            "wrt": None if tape.wrt is None else list(tape.wrt), "has_aux": tape.has_aux,
            "checkpoint": tape.checkpoint, "passes": _pipeline_names() if optimized else []}


def build_forward(tape: Tape, backend: str | None, *, cache: bool = True,
                  fn: Function | None = None, roll: bool = True) -> Program:
    """The compiled, optimized forward program of ``tape`` (through the cache by the
    traced program first, as ``build_grad``; ``fn``: its IR, if already lowered)."""
    with compiling(tape.fname, "forward", backend):  # (joins yota.compile's)
        fn = lower(tape) if fn is None else fn
        exe, built, facts = _lookup().compile_traced(
            fn, lambda: optimize(rolled(fn, roll)), backend, kind="forward",
            signature=tape_signature(tape),
            derivation=lambda: {"roll": roll and roll_enabled(), "passes": _pipeline_names()},
            use_cache=cache)
        return Program.build(tape, built, exe, facts)


def _pipeline_names() -> list[str]:
    """The default pipeline's pass names (read without importing the passes when the
    cache directory remembers them for these sources: ``cache.key.default_pipeline``)."""
    from .cache.key import default_pipeline

    return default_pipeline()


def first_run(program: Program, args: Sequence[Any], backend: str | None, *, kind: str,
              cache: bool = True) -> tuple[Program, list[Any]]:
    """Run a program just built from ``args`` on those same arguments.

    A guard holds the Python value seen while tracing (``float(np.mean(x))``, computed by
    NumPy). The compiled program may compute that value with other rounding; then the
    guard is re-anchored to the compiled program's own value and the program rebuilt, so
    the inputs that built a program always pass its guards, on every backend."""
    tries = 0
    while tries <= program.guard_count + 1:  # each guard re-anchored once, and unrolling
        tries += 1
        try:
            with phase("run"):
                return program, program(args, traced_draws=True)
        except GuardFailed as e:
            if e.steps:  # a guard in a loop's body: its steps cannot each be re-anchored
                log.info("yota: a guard in a loop fails on its own inputs (%s); compiling "
                         "the steps unrolled", e)
                program = _unrolled(program, backend, kind, cache)
                continue
            fn = reanchor(program.fn, e)
            if fn is None:
                raise YotaError(f"{program.tape.fname}: the compiled program fails its own "
                                f"guard on the inputs it was traced with ({e}); this is a "
                                "Yota bug, please report it") from None
            log.info("yota: re-anchoring a guard of @%s: %s", fn.name, e)
            program = build_program(program.tape, fn, backend, kind=kind, cache=cache)
    raise YotaError(f"{program.tape.fname}: could not anchor the guards of the compiled "
                    "program to its own values; this is a Yota bug, please report it")


def _unrolled(program: Program, backend: str | None, kind: str, cache: bool) -> Program:
    """``program`` built again from its tape without rolling its steps into loops."""
    if kind == "grad":
        return build_grad(program.tape, backend, cache=cache, roll=False)
    return build_forward(program.tape, backend, cache=cache, roll=False)


def reanchor(fn: Function, e: GuardFailed) -> Function | None:
    """``fn`` with the failed guard expecting the value the program computed, or None when
    the guard cannot be found."""
    i = e.guard_index
    if e.value is None or not 0 <= i < len(fn.ops) or fn.ops[i].name != "guard":
        return None
    op = fn.ops[i]
    kind = op.attrs["kind"]
    value = {"bool": bool, "int": int, "float": float}[kind](e.value)
    if value == op.attrs["expected"] or value != value:  # nothing to re-anchor to
        return None
    ops = list(fn.ops)
    ops[i] = op.replace(attrs={**op.attrs, "expected": value})
    return fn.replace(ops=ops)


def guard_loc(fn: Function, tape: Tape, e: GuardFailed) -> Loc | None:
    """Where in the user's code the guard that failed in ``fn`` (built from ``tape``) was
    recorded: the i-th guard op is the tape's i-th guard, as lowering keeps their order."""
    ops = fn.ops
    if not 0 <= e.guard_index < len(ops) or ops[e.guard_index].name != "guard":
        return None
    k = sum(op.name == "guard" for op in ops[:e.guard_index])
    guards = tape.guards
    return guards[k].loc if k < len(guards) else None


# -- stages, for inspection -------------------------------------------------------------------
def stages(tape: Tape, upto: str, *, fast_math: bool = False) -> list[tuple[str, Function]]:
    """``[("traced", fn), ("grad", fn), (pass name, fn after it), ...]`` through stage
    ``upto`` (a key of ``STAGES``); the last one is what that stage compiles."""
    fn = traced_ir(tape)
    out = [("traced", fn)]
    if upto == "traced":
        return out
    _check_differentiable(tape, fn, upto)
    out.append(("grad", differentiate(tape, fn)))
    if upto == "grad":
        return out
    names = [n for n, _ in _passes().PIPELINE]
    run = timed_passes(out[-1][1], names[:_stage_end(names, upto)], fast_math=fast_math,
                       keep=True)
    return out + run[1:]


def _check_differentiable(tape: Tape, fn: Function, upto: str) -> None:
    out = fn.outputs[0].type if len(fn.outputs) == 1 or tape.has_aux and fn.outputs else None
    if out is None or out.ndim != 0 or out.dtype.kind != "f":
        got = ", ".join(str(v.type) for v in fn.outputs) or "nothing"
        raise StageError(f"stage {upto!r} differentiates {tape.fname}, which must return a "
                         f"scalar float; it returns {got} (--stage traced shows its IR)")


def _stage_end(names: list[str], stage: str) -> int:
    """How many passes of the pipeline ``names`` make up ``stage``."""
    fuse = names.index("fuse") if "fuse" in names else None
    plan = names.index("plan_memory") if "plan_memory" in names else None
    need = {"fused": ("fuse", fuse), "planned": ("plan_memory", plan)}.get(stage)
    if need is not None and need[1] is None:
        raise StageError(f"stage {stage!r} is not available yet: the pipeline "
                         f"(yota.ir.passes.PIPELINE) has no {need[0]!r} pass")
    if stage == "optimized":
        return min(i for i in (fuse, plan, len(names)) if i is not None)
    if stage == "fused":
        return plan if plan is not None and fuse is not None and plan > fuse else len(names)
    return len(names)


def run_passes(fn: Function, names: Sequence[str], *,
               fast_math: bool = False) -> list[tuple[str, Function]]:
    """``[("input", fn), (pass, fn after it), ...]`` for the passes ``names``."""
    return timed_passes(fn, names, fast_math=fast_math, keep=True)
