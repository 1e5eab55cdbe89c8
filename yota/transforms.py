"""Transformations beyond ``grad``: the machinery they share, and ``jvp`` and ``hvp``.

A transformation traces ``f`` once per argument signature (``yota.pipeline``), turns the
traced program into another by an IR transformation (``yota.ir.autodiff.jvp``,
``.jacobian``, ``yota.ir.vmap``), optimizes and compiles it through the on-disk cache like
``yota.grad``'s, and replays it on later calls: guards checked, a failed guard retraces,
random draws drawn again at every call. Called inside a function that Yota is tracing,
it traces through: its program, unoptimized, is inlined into the enclosing trace, so
``grad`` of ``jvp``, ``jvp`` of ``vmap`` and the like compose.

``yota.jacobian`` and ``yota.hessian`` live in ``yota.jacobians``, ``yota.vmap`` in
``yota.vmapping``.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from yota.ir.core import Function
from yota.ir.errors import GuardFailed, UnsupportedError, YotaError

from . import pipeline, randomness, structs, tracing
from .cache.config import Counters
from .phases import compiling
from .program import Program, flatten_args, signature
from .recording import record
from .tape import Inlined, Tape, Var
from .trace_context import current_context
from .validate import check_callable

__all__ = ["jvp", "hvp", "stats", "TransformError"]


class TransformError(YotaError):
    """A transformation cannot be applied as asked (tangents that do not match the
    primals, bad ``argnums`` or axes, a batch whose examples take different branches)."""


class TransformStats(Counters):
    """Counters of the transformations' programs: traces, hits (a cached program ran),
    compiles."""

    _FIELDS = ("traces", "hits", "compiles")
    traces: int
    hits: int
    compiles: int


stats = TransformStats()
BATCHED_GUARD = "every example of a vmapped batch"  # (the location of such a guard says so)


@dataclass
class Request:
    """One call of a transformed function: ``f`` traced at ``trace_args``; the program's
    inputs are ``inputs`` (flat arrays: the arguments' leaves and then the
    transformation's own, such as tangents), then the trace's captured arrays and random
    draws. ``build(tape, fn)`` turns the traced program ``fn`` into the transformed one
    (its inputs in that order); ``finish(tape, outs)`` makes the user's result; ``draws``
    (optional) gives the random inputs ``draws(tape, first)``."""

    f: Callable[..., Any]
    kind: str
    key: Hashable
    trace_args: tuple[Any, ...]
    inputs: list[Any]
    build: Callable[[Tape, Function], Function]
    finish: Callable[[Tape, list[Any]], Any]
    backend: str | None = None
    draws: Callable[[Tape, bool], list[np.ndarray]] | None = None
    leaf_args: tuple[Any, ...] | None = None  # where the leaves are read when inlined
    extra_operands: list[Any] = field(default_factory=list)
    fast: tuple[dict[Any, Any], Any] | None = None  # (table, key): remember the program


# -- the fast path of a repeated call -------------------------------------------------------
# A front end looks its arguments' signature up in a table before building a Request: a
# program remembered there (one without random draws, whose guards hold) runs at once.
MISS: Any = object()
_fast: weakref.WeakKeyDictionary[Any, dict[Any, Any]] = weakref.WeakKeyDictionary()


def fast_table(f: Any) -> dict[Any, Any] | None:
    """The fast-path table of ``f`` (None for a callable that cannot be weakly
    referenced, or a bound method: a new object at each ``obj.method``)."""
    if isinstance(f, types.MethodType):
        return None
    try:
        return _fast.setdefault(f, {})
    except TypeError:
        return None


def run_fast(table: dict[Any, Any] | None, key: Any, inputs: list[Any]) -> Any:
    """The result of the program remembered under ``key`` on ``inputs``, or ``MISS``."""
    entry = table.get(key) if table is not None else None
    if entry is None:
        return MISS
    program, finish = entry
    if not (program.still_valid() and program.tape.bindings_hold()):
        del table[key]  # type: ignore[union-attr]
        return MISS
    try:
        outs = program.exe(*inputs, *[obj for obj, _, _ in program.captured])
    except GuardFailed:
        return MISS
    stats.hits += 1
    return finish(program.tape, list(outs))


def fast_call(f: Any, key: Any, args: Sequence[Any]) -> tuple[Any, Any]:
    """For a transformation whose program's inputs are the leaves of ``args``: the result
    of the program remembered for ``f``, ``key`` and the arguments' signature (else
    ``MISS``), and where a new one is remembered (None inside a trace)."""
    if current_context() is not None:
        return MISS, None
    table = fast_table(f)
    try:
        leaves, sig = flatten_args(args)
    except YotaError:
        return MISS, None
    if table is None:
        return MISS, None
    return run_fast(table, (key, sig), leaves), (table, (key, sig))


def _remember(req: Request, program: Program) -> None:
    if req.fast is not None and not program.tape.randoms:
        table, key = req.fast
        table[key] = (program, req.finish)


_programs: weakref.WeakKeyDictionary[Any, dict[Any, list[Program]]] = \
    weakref.WeakKeyDictionary()
_strong: dict[int, tuple[Any, dict[Any, list[Program]]]] = {}


def _cache_of(f: Any) -> dict[Any, list[Program]]:
    """The programs of ``f`` (by its function for a bound method: a new object each time)."""
    owner = f.__func__ if isinstance(f, types.MethodType) else f
    try:
        return _programs.setdefault(owner, {})
    except TypeError:  # not weakly referenceable: kept alive with its programs
        box = _strong.get(id(owner))
        if box is None or box[0] is not owner:
            box = _strong[id(owner)] = (owner, {})
        return box[1]


def run(req: Request) -> Any:
    """Run the transformed program of ``req`` (built on the first call of a signature)."""
    if current_context() is not None:
        return _nested(req)
    key = (signature(req.trace_args), req.kind, req.key, req.backend,
           req.f.__self__ if isinstance(req.f, types.MethodType) else None)
    variants = _cache_of(req.f).setdefault(key, [])
    rngs = randomness.states_of([p.tape for p in variants])
    for program in list(variants):
        if not (program.still_valid() and program.tape.bindings_hold()):
            variants.remove(program)
            continue
        try:
            outs = _run(program, req, first=False)
        except GuardFailed:
            if rngs is not None:
                randomness.restore_states(*rngs)
            continue
        stats.hits += 1
        _remember(req, program)
        return req.finish(program.tape, outs)
    with compiling(req.f, req.kind, req.backend):
        stats.traces += 1
        _, tape = pipeline.trace_forward(req.f, req.trace_args)
        program = _build(req, tape)
        program, outs = _first_run(program, req)
    variants.insert(0, program)
    del variants[pipeline.MAX_VARIANTS:]
    _remember(req, program)
    return req.finish(program.tape, outs)


def _run(program: Program, req: Request, first: bool,
         draws: list[np.ndarray] | None = None) -> list[Any]:
    tape = program.tape
    xs = list(req.inputs) + [obj for obj, _, _ in program.captured]
    if tape.randoms:
        if draws is None:
            draws = req.draws(tape, first) if req.draws is not None else (
                program.tape_draws() if first else tape.draws.replay())
        xs += draws
    return list(program.exe(*xs))


# Passes the default pipeline runs that a transformation's program skips, and why.
SKIPPED_PASSES: dict[str, dict[str, str]] = {
    # each tangent product shares an operand with its primal product (x @ W, x @ tW):
    # merged, the weights and their tangents are concatenated at every call (W3's jvp:
    # 4.5 ms against 3.8 ms without, interleaved on one machine)
    "jvp": {"batch_matmul": "merges x @ W with x @ tW by concatenating the weights"},
    "hvp": {"batch_matmul": "as for jvp"},
}


def passes_of(kind: str) -> list[str]:
    """The passes a transformation's program runs: the default pipeline's, but those in
    ``SKIPPED_PASSES``."""
    from .cache.key import default_pipeline

    skip = SKIPPED_PASSES.get(kind, {})
    return [n for n in default_pipeline() if n not in skip]


def _build(req: Request, tape: Tape, roll: bool = True) -> Program:
    """Lower, roll, transform, optimize and compile (through the cache)."""
    from .cache import lookup

    stats.compiles += 1
    fn = pipeline.lower(tape)
    names = passes_of(req.kind)

    def build() -> Function:
        return pipeline.optimize(req.build(tape, pipeline.rolled(fn, roll)), names)

    derivation = {"roll": roll and pipeline.roll_enabled(), "transform": req.kind,
                  "options": repr(req.key), "passes": names}
    exe, built, facts = lookup.compile_traced(
        fn, build, req.backend, kind=req.kind, signature=pipeline.tape_signature(tape),
        derivation=derivation)
    return Program.build(tape, built, exe, facts)


def _first_run(program: Program, req: Request) -> tuple[Program, list[Any]]:
    """Run a program just built on the inputs it was built from: a guard whose value
    the compiled program computes with other rounding is anchored to it (as
    ``pipeline.first_run``); a guard in a loop's body that fails compiles unrolled."""
    draws = (req.draws(program.tape, True) if req.draws is not None
             else program.tape_draws()) if program.tape.randoms else None
    for _ in range(program.guard_count + 2):
        try:
            return program, _run(program, req, True, draws)
        except GuardFailed as e:
            if BATCHED_GUARD in str(e):  # not a rounding: the examples disagree
                raise _failed_own_guard(req, program, e) from None
            fn = None if e.steps else pipeline.reanchor(program.fn, e)
            if e.steps:
                program = _build(req, program.tape, roll=False)
                continue
            if fn is None:
                raise _failed_own_guard(req, program, e) from None
            from .cache import lookup

            exe = lookup.compile_cached(fn, req.backend, kind=req.kind,
                                        signature=pipeline.tape_signature(program.tape))
            program = Program(program.tape, fn, exe, program.consts, program.captured)
    raise TransformError(f"{req.kind} of {_name(req.f)}: could not anchor the guards of its "
                         "program to its own values; this is a Yota bug, please report it")


def _failed_own_guard(req: Request, program: Program, e: GuardFailed) -> YotaError:
    if BATCHED_GUARD in str(e):
        return TransformError(
            f"vmap of {_name(req.f)}: the examples of the batch take different branches of "
            f"Python control flow on a batched value ({e}). vmap traces the function once, "
            "for all examples: compute both branches and pick per example (np.where), or "
            "leave the value out of the batch (in_axes None)")
    return YotaError(f"{req.kind} of {_name(req.f)}: the compiled program fails its own "
                     f"guard on the inputs it was traced with ({e}); this is a Yota bug, "
                     "please report it")


def _name(f: Any) -> str:
    return str(getattr(f, "__name__", type(f).__name__))


# -- tracing through: the program inlined into the enclosing trace ---------------------------
def _nested(req: Request) -> Any:
    """Inside a trace: the transformed program, built at the example values and not
    optimized, runs as one recorded entry whose lowering inlines its ops."""
    _, tape = tracing.trace(req.f, *tracing.detach(req.trace_args))
    fn = req.build(tape, pipeline.lower(tape))
    if tape.randoms:
        loc = tape.randoms[0].loc
        raise UnsupportedError(
            f"{tape.fname} draws random numbers{f' at {loc.describe()}' if loc else ''} "
            f"inside a nested yota.{req.kind} (called from a function Yota is tracing): draw "
            "them in the enclosing function and pass them as an argument")
    args = req.leaf_args if req.leaf_args is not None else req.trace_args
    operands = [structs.get_path(args[argnum], path) for argnum, path, _ in tape.leaf_vars]
    operands += req.extra_operands
    operands += [tape.foreign_tracers.get(e.outs[0], e.value) for e in tape.captured]
    ctx = current_context()
    assert ctx is not None
    for e in tape.entries:  # the nested tape's constants from user code: checked per call
        if e.kind == "const" and isinstance(e.extra, np.ndarray):
            ctx.array_var(e.extra)
    ctx.tape.bound_consts += tape.bound_consts
    tape.foreign_tracers = {}

    def forward(*xs: Any) -> list[Any]:
        from yota.ir.interpreter import run as interpret

        with tracing.suspended():
            return list(interpret(fn, *xs))

    outs = record(req.kind, tuple(operands), {}, forward, extra=Inlined(fn, tape, req.kind),
                  display=f"{req.kind}({tape.fname})")
    tape.release_values()
    return req.finish(tape, list(outs))


# -- helpers the front ends share -----------------------------------------------------------
def leaves_of(args: Sequence[Any]) -> list[Any]:
    """The dynamic leaves of ``args`` in the program's input order."""
    return flatten_args(args)[0]


def leaf_paths(args: Sequence[Any]) -> list[tuple[int, tuple[Any, ...], Any]]:
    """``(argument, path, leaf)`` of each dynamic leaf, in the program's input order."""
    out = []
    for i, a in enumerate(args):
        found, _ = structs.flatten(a)
        out += [(i, path, leaf) for path, leaf in found]
    return out


def _leaves(args: Sequence[Any]) -> list[Any]:
    """The leaves of ``args`` (none inside a trace: the program is inlined, not run)."""
    return leaves_of(args) if current_context() is None else []


def is_float_leaf(x: Any) -> bool:
    return type(x) is float or (structs.is_traced(x) and x.dtype.kind == "f") or \
        (not structs.is_traced(x) and np.asarray(x).dtype.kind == "f")


def reorder_inputs(fn: Function, nleaves: int, nextra: int) -> Function:
    """``fn`` with its last ``nextra`` inputs moved after its first ``nleaves`` (a
    transformation appends its own inputs; the program wants them before the trace's
    captured arrays and draws)."""
    if nextra == 0:
        return fn
    order = list(range(nleaves)) + list(range(len(fn.inputs) - nextra, len(fn.inputs))) + \
        list(range(nleaves, len(fn.inputs) - nextra))
    return fn.replace(inputs=[fn.inputs[i] for i in order],
                      input_labels=[fn.input_labels[i] for i in order])


def argnums_of(argnums: int | Sequence[int], nargs: int, what: str) -> tuple[int, ...]:
    """``argnums`` as a tuple of argument indices, checked."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for a in nums:
        if not isinstance(a, int) or not -nargs <= a < nargs:
            raise TransformError(f"yota.{what}: argnums {argnums!r} does not name an "
                                 f"argument of the call ({nargs} given)")
    return tuple(a % nargs for a in nums)


def check_scalar(tape: Tape, what: str) -> None:
    """Raise ``TransformError`` unless the traced function returned a scalar float."""
    r = tape.result
    t = getattr(r, "type", None)
    if isinstance(r, float) or (t is not None and t.ndim == 0 and t.dtype.kind == "f"):
        return
    got = f"an array {t}" if t is not None else f"a {type(r).__name__}"
    raise TransformError(f"yota.{what} needs {tape.fname} to return a scalar float (0-d), "
                         f"but it returned {got}")


def memo(tape: Tape, what: str, make: Callable[[Tape], Any]) -> Any:
    """``make(tape)``, computed once per tape (a plan the calls of its program share)."""
    plans = tape.__dict__.setdefault("_transform_plans", {})
    if what not in plans:
        plans[what] = make(tape)
    return plans[what]


def output_floats(tape: Tape) -> list[bool]:
    """Whether each output of the traced program (a leaf of the result) is a float."""
    from .lowering import result_leaves

    out = []
    for leaf in result_leaves(tape.result):
        t = getattr(leaf, "type", None)
        out.append(t.dtype.kind == "f" if t is not None else isinstance(leaf, float))
    return out


# -- jvp -------------------------------------------------------------------------------------
def jvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any], *,
        backend: str | None = None) -> tuple[Any, Any]:
    """Forward mode: ``(f(*primals), tangent of f's result)`` for the tangents of the
    arguments, ``tangents`` shaped as ``primals`` (a tangent per float leaf; the leaves
    of other dtypes and static values are ignored). The result's tangent has the
    result's structure (None at a leaf that is not a float). One compiled program
    computes both, cached per signature like ``yota.grad``'s; inside a traced function
    it traces through, so ``yota.grad`` of a function calling ``jvp`` works, and ``jvp``
    of a function calling ``yota.grad`` is a Hessian-vector product.

    >>> import numpy as np, yota
    >>> y, t = yota.jvp(lambda x: np.sin(x) * 2.0, (np.zeros(2),), (np.ones(2),))
    >>> t
    array([2., 2.])
    """
    check_callable(f, "jvp")
    primals, tangents = _as_tuple(primals, "primals"), _as_tuple(tangents, "tangents")
    fast = _jvp_fast(f, primals, tangents, backend)
    if fast[0] is not MISS:
        return fast[0]
    if len(primals) != len(tangents):
        raise TransformError(f"yota.jvp: {len(primals)} primals but {len(tangents)} tangents")
    paths = leaf_paths(tracing.detach(primals))
    floats = [k for k, (_, _, leaf) in enumerate(paths) if is_float_leaf(leaf)]
    ts = [_tangent(tangents, *paths[k][:2], paths[k][2]) for k in floats]
    nl = len(paths)

    def build(tape: Tape, fn: Function) -> Function:
        from yota.ir.autodiff.jvp import jvp as ir_jvp

        return reorder_inputs(ir_jvp(fn, floats), nl, len(floats))

    def finish(tape: Tape, outs: list[Any]) -> Any:
        flt = memo(tape, "floats", output_floats)
        it = iter(outs[len(flt):])
        touts = [next(it) if fl else None for fl in flt]
        return _restructure(tape, outs[:len(flt)]), tangent_structure(tape.result, iter(touts))

    req = Request(f, "jvp", ("jvp", tuple(floats)), primals, _leaves(primals) + ts, build,
                  finish, backend, extra_operands=ts, fast=fast[1])
    return run(req)


def _jvp_fast(f: Any, primals: tuple[Any, ...], tangents: tuple[Any, ...],
              backend: str | None) -> tuple[Any, tuple[dict[Any, Any], Any] | None]:
    """A remembered jvp program's result (else ``MISS``) and where to remember one: only
    for tangents of exactly the primals' signature, outside a trace."""
    if current_context() is not None:
        return MISS, None
    try:
        pl, psig = flatten_args(primals)
        tl, tsig = flatten_args(tangents)
    except YotaError:
        return MISS, None
    table = fast_table(f)
    if psig != tsig or table is None:
        return MISS, None
    key = ("jvp", psig, backend)
    ts = [t for p, t in zip(pl, tl, strict=True) if is_float_leaf(p)]
    return run_fast(table, key, pl + ts), (table, key)


def _as_tuple(x: Any, what: str) -> tuple[Any, ...]:
    if not isinstance(x, (tuple, list)):
        raise TransformError(f"yota.jvp: {what} must be a tuple of arguments, got "
                             f"{type(x).__name__}")
    return tuple(x)


def _tangent(tangents: tuple[Any, ...], argnum: int, path: tuple[Any, ...], primal: Any
             ) -> Any:
    """The tangent of the primal leaf at ``(argnum, path)``, as an array of its type."""
    where = structs.format_path(path, f"tangents[{argnum}]")
    try:
        t = structs.get_path(tangents[argnum], path)
    except (KeyError, IndexError, AttributeError, TypeError):
        raise TransformError(f"yota.jvp: {where} is missing: the tangents must have the "
                             "structure of the primals") from None
    if structs.is_traced(t):
        return t
    dtype = np.float64 if type(primal) is float else np.asarray(primal).dtype
    arr = np.asarray(t, dtype=dtype)
    if arr.shape != np.shape(primal):
        raise TransformError(f"yota.jvp: {where} has shape {arr.shape}, its primal "
                             f"{np.shape(primal)}")
    return arr


def _restructure(tape: Tape, outs: list[Any]) -> Any:
    return tracing.restructure(tape.result, outs)


def tangent_structure(r: Any, it: Any, scalars: bool = True) -> Any:
    """The result structure ``r`` (of a tape) with the next of ``it`` at each of its
    output leaves (traced values and Python numbers); with ``scalars``, a 0-d array at a
    weak value or a Python float becomes a float."""
    if isinstance(r, dict):
        return {k: tangent_structure(v, it, scalars) for k, v in r.items()}
    if isinstance(r, (list, tuple)):
        return structs.rebuild_sequence(r, [tangent_structure(v, it, scalars) for v in r])
    if r is None:
        return None
    v = next(it)
    weak = r.weak if isinstance(r, Var) else isinstance(r, float)
    return float(v) if scalars and weak and isinstance(v, np.ndarray) else v


# -- hvp -------------------------------------------------------------------------------------
def hvp(f: Callable[..., Any], args: Sequence[Any], v: Any, *, argnums: int | Sequence[int] = 0,
        backend: str | None = None) -> Any:
    """The Hessian-vector product ``H v`` of scalar ``f`` at ``args`` with respect to
    ``args[argnums]`` (forward over reverse: one jvp of the gradient, one compiled
    program). ``v`` is shaped as ``args[argnums]`` (a tuple of those for a tuple of
    argnums); so is the result.

    >>> import numpy as np, yota
    >>> yota.hvp(lambda x: np.sum(x ** 3), (np.array([1.0, 2.0]),), np.ones(2))
    array([ 6., 12.])
    """
    check_callable(f, "hvp")
    args = tuple(args) if isinstance(args, (tuple, list)) else (args,)
    nums = argnums_of(argnums, len(args), "hvp")
    vs = (v,) if isinstance(argnums, int) else tuple(v)
    paths = leaf_paths(tracing.detach(args))
    wrt = [k for k, (a, _, leaf) in enumerate(paths) if a in nums and is_float_leaf(leaf)]
    tv = tuple(vs[nums.index(a)] if a in nums else None for a in range(len(args)))
    ts = [_tangent(tv, *paths[k][:2], paths[k][2]) for k in wrt]
    nl = len(paths)

    def build(tape: Tape, fn: Function) -> Function:
        from yota.ir.autodiff.jacobian import hvp as ir_hvp

        check_scalar(tape, "hvp")
        return reorder_inputs(ir_hvp(fn, wrt), nl, len(wrt))

    def finish(tape: Tape, outs: list[Any]) -> Any:
        got = dict(zip(wrt, outs, strict=True))
        res = tuple(_by_leaf(args[a], a, paths, got) for a in nums)
        return res[0] if isinstance(argnums, int) else res

    req = Request(f, "hvp", ("hvp", tuple(wrt)), args, _leaves(args) + ts, build, finish,
                  backend, extra_operands=ts)
    return run(req)


def _by_leaf(arg: Any, argnum: int, paths: list[tuple[int, tuple[Any, ...], Any]],
             values: dict[int, Any]) -> Any:
    """``arg``'s structure with the value of each of its leaves from ``values`` (by leaf
    index; None for a leaf without one)."""
    index = {(a, p): k for k, (a, p, _) in enumerate(paths)}
    return structs.rebuild(arg, lambda path, _: values.get(index.get((argnum, path), -1)),
                           leaf=_leaf)


def _leaf(x: Any) -> bool:
    return structs.is_leaf(x) or structs.is_traced(x)
