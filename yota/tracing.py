"""``trace(f, *args)``: runs a user function on tracers and returns its value and tape.

The arguments' array leaves become ``Tracer`` inputs (``yota.tracer``); the function runs
on them once, recording every NumPy call on a ``Tape``; the result is mapped back to
tape variables. ``primitives=`` traces chosen helper functions as single entries (see
``yota.primitives``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from yota.ir.errors import TraceError

from .primitives import temporary_primitives
from .randomness import Recorder, UnrecordedDraws, recording
from .sideeffects import Snapshot
from .structs import rebuild_sequence
from .tape import Loc, Tape
from .tracer import TraceContext, Tracer, active
from .validate import argnames, check_arity, check_callable


def trace(f: Callable[..., Any], *args: Any, primitives: Any = None) -> tuple[Any, Tape]:
    """Run ``f(*args)`` on tracers; returns ``(value, tape)``.

    ``value`` is the real result. Arrays, Python floats, and structures of them
    (dataclasses, objects, NamedTuples, tuples, lists, dicts) are traced; ints, bools,
    strings and None are constants of the trace.

    >>> import numpy as np, yota
    >>> val, tape = yota.trace(lambda x: np.sum(x * 2.0), np.ones(3))
    >>> float(val)
    6.0
    """
    check_callable(f, "trace")
    check_arity(f, args)
    name = getattr(f, "__name__", type(f).__name__)
    code = getattr(f, "__code__", None)
    loc = Loc(code.co_filename, code.co_firstlineno, name) if code else None
    tape = Tape(name, loc)
    tape.argnames = argnames(f, len(args))
    ctx = TraceContext(tape)
    ctx.inputs = list(args)
    traced_args = [ctx.input(i, a) for i, a in enumerate(args)]
    snapshot = Snapshot.of(f, traced_args)
    recorder = Recorder(ctx)
    check = UnrecordedDraws(snapshot.unrecordable)
    try:
        with active(ctx), temporary_primitives(f, primitives), \
                recording(recorder, snapshot.rng_slots):
            result = f(*traced_args)
    finally:
        snapshot.restore()  # no tracer outlives the trace in the user's objects
    check.after(recorder, tape)
    tape.draws = recorder.draws
    if ctx.deferred is not None:
        raise ctx.deferred
    tape.result = _result_to_tape(ctx, result)  # may read leaves: before leaf_vars
    tape.leaf_vars = [(t._path[0], t._path[1], t._var) for t in ctx.leaves]
    return _result_value(result), tape


def _result_to_tape(ctx: TraceContext, r: Any) -> Any:
    if isinstance(r, Tracer):
        if r._ctx is not ctx:
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
