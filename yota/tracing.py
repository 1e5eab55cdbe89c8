"""``trace(f, *args)``: runs a user function on tracers and returns its value and tape.

The arguments' array leaves become ``Tracer`` inputs (``yota.tracer``); the function runs
on them once, recording every NumPy call on a ``Tape``; the result is mapped back to
tape variables. ``primitives=`` traces chosen helper functions as single entries (see
``yota.primitives``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from yota.ir.core import Function
from yota.ir.errors import TraceError, UnsupportedError
from yota.ir.interpreter import run
from yota.ir.types import TensorType

from . import captured, foreign, structs
from . import tracer as _tracer
from .patching import NumpyPatch
from .primitives import temporary_primitives
from .randomness import Recorder, UnrecordedDraws, recording
from .recording import record
from .sideeffects import Snapshot
from .structs import rebuild_sequence
from .substitution import substituted
from .tape import Entry, Inlined, Loc, Tape, Var
from .trace_context import TraceContext, active, current_context
from .traced import traces  # (.stack: the traces running in this thread)
from .tracer import Tracer
from .validate import argnames, check_arity, check_callable


def trace(f: Callable[..., Any], *args: Any, primitives: Any = None) -> tuple[Any, Tape]:
    """Run ``f(*args)`` on tracers; returns ``(value, tape)``.

    ``value`` is the real result. Arrays, Python floats, and structures of them
    (dataclasses, objects, NamedTuples, tuples, lists, dicts) are traced; ints, bools,
    strings and None are constants of the trace.

    This is the raw trace; ``yota.trace`` (``yota.pipeline.trace``) also traces through
    when called inside a function that Yota is tracing.

    >>> import numpy as np, yota
    >>> val, tape = yota.trace(lambda x: np.sum(x * 2.0), np.ones(3))
    >>> float(val)
    6.0
    """
    check_callable(f, "trace")
    return _trace(f, *args, primitives=primitives)


# the code of functions whose trace met a traced value NumPy converts: traced with lists
_CONVERTS: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def _trace(f: Callable[..., Any], *args: Any, primitives: Any = None) -> tuple[Any, Tape]:
    code = getattr(getattr(f, "__func__", f), "__code__", None)
    lists = code is not None and code in _CONVERTS
    try:
        return _trace_once(f, *args, primitives=primitives, lists=lists)
    except _tracer.ConversionError as e:
        pol = captured.current_policy()
        small: frozenset[Any] = getattr(e, "small_arrays", frozenset())
        if lists and not small:
            raise
        # NumPy converted a traced value: a list holding one given to a NumPy function or
        # ufunc (np.mean([a, b])), or a small array read from outside indexed by one
        # (G[ix]). Once more with NumPy answering lists, and those arrays as run-time
        # inputs; the function's later traces answer lists from the start.
        with captured.policy(dataclasses.replace(pol, promoted=pol.promoted | small)):
            try:
                out = _trace_once(f, *args, primitives=primitives, lists=True)
            except _tracer.ConversionError:
                raise e from None
        if code is not None:
            _CONVERTS[code] = True
        return out


def _trace_once(f: Callable[..., Any], *args: Any, primitives: Any = None,
                lists: bool = False) -> tuple[Any, Tape]:
    check_arity(f, args)
    name = getattr(f, "__name__", type(f).__name__)
    # a front end's wrapper (yota.autograd.diff's) names the user's function it runs
    code = getattr(getattr(f, "__yota_source__", f), "__code__", None)
    loc = Loc(code.co_filename, code.co_firstlineno, name) if code else None
    tape = Tape(name, loc)
    tape.argnames = argnames(f, len(args))
    nested = current_context() is not None
    ctx = TraceContext(tape)
    ctx.inputs = list(args)
    traced_args = [ctx.input(i, a) for i, a in enumerate(args)]
    pol = captured.Policy(substitute=False) if nested else captured.current_policy()
    found = ctx.found = captured.discover(f, len(args), pol)
    snapshot = Snapshot.of(f, traced_args)
    recorder = ctx.recorder = Recorder(ctx)
    check = UnrecordedDraws(snapshot.unrecordable)
    try:
        with active(ctx), temporary_primitives(f, primitives), foreign.answering(lists), \
                recording(recorder, snapshot.rng_slots), \
                substituted(found, f, ctx.source_input):
            result = f(*traced_args)
    except _tracer.ConversionError as e:
        if pol.substitute:  # the small arrays read from outside that could be inputs
            e.small_arrays = frozenset(r.path for r in found.reads.values()  # type: ignore
                                       if r.mode == "array" and r.promotable)
        raise
    finally:
        snapshot.restore()  # no tracer outlives the trace in the user's objects
    tape.reads = captured.settle(found, f)
    tape.function = captured.handle(f)
    check.after(recorder, tape)
    tape.draws = recorder.draws
    if ctx.deferred is not None:
        raise ctx.deferred
    tape.result = _result_to_tape(ctx, result)  # may read leaves: before leaf_vars
    tape.leaf_vars = [(t._path[0], t._path[1], t._var) for t in ctx.leaves]
    tape.foreign_tracers = {var: t for t, var in ctx.foreign.values()}
    return _result_value(result), tape


def squeeze_result(tape: Tape, has_aux: bool = False) -> None:
    """A loss that is an array of one element (``shape (1,)``, ``(1, 1)``...) is
    differentiated as its one value, as autograd does: the tape's result becomes that
    value (0-d; ``tape.value_shape`` keeps the shape the value is returned in)."""
    if has_aux and not (isinstance(tape.result, (list, tuple)) and len(tape.result) == 2):
        return  # (not a pair: an error that check_pair gives)
    r = tape.result[0] if has_aux else tape.result
    if not isinstance(r, Var) or r.type is None or r.type.ndim == 0 or r.type.size != 1 \
            or r.type.dtype.kind != "f":
        return
    var = tape.new_var(TensorType(r.type.dtype, ()))
    loc = next((e.loc for e in reversed(tape.entries) if r in e.outs), None)
    tape.add(Entry("call", [var], "reshape", (r, ()), {"order": "C"}, loc=loc))
    tape.value_shape = r.type.shape
    tape.result = (var, tape.result[1]) if has_aux else var


def _result_to_tape(ctx: TraceContext, r: Any) -> Any:
    if isinstance(r, Tracer):
        if r._ctx is not ctx:
            if r._ctx in _stack():  # a value of an enclosing trace
                return ctx.foreign_var(r)
            raise TraceError("the function returned a value traced by another trace")
        return r.tape_var
    if isinstance(r, (np.ndarray, np.generic)):
        return ctx.array_var(r)
    if isinstance(r, (list, tuple)):
        return rebuild_sequence(r, [_result_to_tape(ctx, v) for v in r])
    if isinstance(r, dict):
        return {k: _result_to_tape(ctx, v) for k, v in r.items()}
    if isinstance(r, (float, int, bool)) or r is None:
        return r
    raise TraceError(f"{ctx.tape.fname} (defined at {ctx.tape.loc}) returned a "
                     f"{type(r).__name__}: a traced function returns arrays, floats, or "
                     "tuples, NamedTuples, lists and dicts of them")


def _result_value(r: Any) -> Any:
    if isinstance(r, Tracer):
        return r.value
    if isinstance(r, (list, tuple)):
        return rebuild_sequence(r, [_result_value(v) for v in r])
    if isinstance(r, dict):
        return {k: _result_value(v) for k, v in r.items()}
    return r


# -- nested traces: a program built inside a traced function is inlined into its trace ----
structs.register(traced=Tracer)


def _stack() -> list[TraceContext]:
    return list(getattr(traces, "stack", None) or [])


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """Run the block as if no trace were active in this thread: compiling and running a
    program inside a traced function (``yota.compile`` there) must see plain NumPy, not
    the trace's hooks (creation functions returning traced constants)."""
    saved = getattr(traces, "stack", None)
    traces.stack = []
    try:
        with NumpyPatch.suspended():
            yield
    finally:
        traces.stack = saved


def has_tracers(x: Any) -> bool:
    """True when structure ``x`` holds a tracer."""
    found = False

    def see(path: Any, leaf: Any) -> Any:
        nonlocal found
        found = found or isinstance(leaf, Tracer)
        return leaf

    structs.rebuild(x, see, leaf=_leaf_or_tracer)
    return found


def _leaf_or_tracer(x: Any) -> bool:
    return isinstance(x, Tracer) or structs.is_leaf(x)


def detach(args: Any) -> Any:
    """``args`` with each tracer replaced by its example value: what a nested trace runs
    on (its program is then inlined into the enclosing trace, fed with the tracers)."""
    return structs.rebuild(args, lambda _, x: x.value if isinstance(x, Tracer) else x,
                           leaf=_leaf_or_tracer)


def inline(fn: Function, tape: Tape, args: Any, what: str) -> list[Any]:
    """Run ``fn`` (the IR built from ``tape``, traced at ``detach(args)``) inside the
    enclosing trace: one ``call`` entry whose lowering inlines ``fn``'s ops, so the
    enclosing program differentiates through them. Its inputs are fed with the tracers
    (or arrays) of ``args`` at the tape's leaves, then the tape's captured arrays (a value
    of the enclosing trace that ``f`` closes over is its tracer). Returns ``fn``'s outputs:
    tracers of the enclosing trace, or arrays when nothing traced reaches them."""
    if tape.randoms:
        loc = tape.randoms[0].loc
        raise UnsupportedError(
            f"{tape.fname} draws random numbers{f' at {loc.describe()}' if loc else ''} "
            f"inside a nested yota.{what} (called from a function Yota is tracing): draw them "
            "in the enclosing function and pass them as an argument")
    operands = [structs.get_path(args[argnum], path) for argnum, path, _ in tape.leaf_vars]
    operands += [tape.foreign_tracers.get(e.outs[0], e.value) for e in tape.captured]
    ctx = current_context()
    if ctx is not None:  # the nested tape's constants from user code: checked per call
        for e in tape.entries:
            if e.kind == "const" and isinstance(e.extra, np.ndarray):
                ctx.array_var(e.extra)
        ctx.tape.bound_consts += tape.bound_consts
        ctx.tape.held = ctx.tape.held or tape.held
        fn_obj = tape.function() if tape.function is not None else None
        ctx.tape.reads += [r if r.root is not None else dataclasses.replace(r, root=fn_obj)
                           for r in tape.reads if r.root is not None or fn_obj is not None]
    tape.foreign_tracers = {}  # the tape outlives this trace: it must hold no tracer

    def forward(*xs: Any) -> list[Any]:
        with suspended():
            return list(run(fn, *xs))

    outs = record(what, tuple(operands), {}, forward, extra=Inlined(fn, tape, what),
                  display=f"{what}({tape.fname})")
    if what != "trace":  # the enclosing tape keeps this one: not its activations
        tape.release_values()
    return list(outs)


def restructure(result: Any, outs: list[Any],
                scalar: Callable[[Any], Any] | None = None) -> Any:
    """The result structure of a tape (Vars at its traced leaves) with its outputs
    ``outs`` in place of the Vars (a Python number in it is an output too); a weak
    Var's output becomes ``scalar(output)`` (default: a NumPy array's ``item()``).

    The walk is a module-level function over an iterator, not a nested function that
    calls itself: such a closure is a reference cycle (the function, its cell) that
    keeps ``outs`` alive until the cyclic garbage collector runs, so a compiled
    function's outputs outlived the caller's last reference to them, and large ones
    could not be handed out again (``Recycler``): every call faulted fresh pages in
    (a 1.5 MB elementwise product: 97 page faults and 171 us per call against 40 us)."""
    return _fill(result, iter(outs), scalar or _item)


def _item(v: Any) -> Any:
    return v.item() if isinstance(v, np.ndarray) else v


def _fill(r: Any, it: Iterator[Any], scalar: Callable[[Any], Any]) -> Any:
    if isinstance(r, Var):
        v = next(it)
        return scalar(v) if r.weak else v
    if isinstance(r, dict):
        return {k: _fill(v, it, scalar) for k, v in r.items()}
    if isinstance(r, (list, tuple)):
        return rebuild_sequence(r, [_fill(v, it, scalar) for v in r])
    if r is not None:
        next(it)
    return r
