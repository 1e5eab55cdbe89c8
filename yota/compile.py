"""``yota.compile`` and ``yota.play``: run a traced function (not its gradient) on new inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from yota.backends import get_backend
from yota.ir.errors import GuardFailed, SignatureError, TraceError

from . import captured, pipeline, randomness, structs, tracing
from . import device as _device
from .cache import tape_signature
from .phases import compiling
from .program import Program, Stale, flatten_args, signature
from .tape import Tape
from .validate import argnames, check_callable
from .variants import Variants, describe_signature_change


def _restructure(result: Any, outs: list[Any]) -> Any:
    """The traced result structure with the program's outputs (a weak value as a
    Python scalar, from the host or a device)."""
    return tracing.restructure(result, outs, _device.item)


def play(tape: Tape, *args: Any) -> Any:
    """Replay ``tape`` on new arguments of the same signature (Yota.jl's ``play!``).

    Runs the tape's IR on the reference interpreter and checks its guards: a guard that
    fails raises ``GuardFailed`` naming the branch and its source line.

    >>> import numpy as np, yota
    >>> _, tape = yota.trace(lambda x: np.sum(x * 2.0), np.ones(3))
    >>> float(yota.play(tape, np.arange(3.0)))
    6.0
    """
    if signature(args) != tape_signature(tape):
        raise SignatureError(f"play: the arguments do not match the signature {tape.fname} "
                             "was traced with (structure, static values, dtypes, shapes)")
    fn = pipeline.lower(tape)
    program = Program.build(tape, fn, get_backend("interp").compile(fn))
    stale = program.check()
    if isinstance(stale, Stale):
        raise TraceError(f"play: a value that {tape.fname} reads from outside its arguments "
                         f"changed after the trace ({stale.reason}), so the tape is stale; "
                         "trace again (yota.compile retraces by itself)")
    try:
        outs = program(args)
    except GuardFailed as e:
        raise _name_branch(e, tape, fn) from None
    return _restructure(tape.result, outs)


def _name_branch(e: GuardFailed, tape: Tape, fn: Any) -> GuardFailed:
    """The error with the guarded branch's source line."""
    in_fn = 0 <= e.guard_index < len(fn.ops) and fn.ops[e.guard_index].name == "guard"
    if not in_fn:  # a guard inside a callee
        return e
    loc = pipeline.guard_loc(fn, tape, e)
    if loc is not None and f"at {loc}:" not in str(e):  # the guard of a primitive's body
        return e
    where = loc.describe() if loc is not None else "an unknown line"
    return GuardFailed(f"{tape.fname}: the branch at {where} goes the other way: {e}",
                       guard_index=e.guard_index)


_PLAIN_RUN = Program.run


class CompiledFunction:
    """A traced function compiled for one signature; retraces on a new signature or a
    failed guard (Yota.jl's ``compile!``)."""

    def __init__(self, f: Callable[..., Any] | None, tape: Tape, backend: str | None,
                 cache: bool = True, args: Any = None) -> None:
        self.f = f
        self.backend = backend
        self.cache = cache  # consult the on-disk cache (yota.cache)
        self.variants: dict[Any, Variants] = {}
        self._add(tape, args, "first trace")

    @property
    def programs(self) -> dict[Any, list[Program]]:
        """The compiled programs by argument signature, newest first."""
        return {sig: v.programs for sig, v in self.variants.items()}

    def _add(self, tape: Tape, args: Any, why: str) -> tuple[Program, list[Any] | None]:
        """Compile ``tape``; with ``args`` (the arguments it was traced with) run it on
        them, its guards anchored to its own values (``pipeline.first_run``)."""
        program = pipeline.build_forward(tape, self.backend, cache=self.cache)
        outs = None
        if args is not None:
            program, outs = pipeline.first_run(program, args, self.backend, kind="forward",
                                               cache=self.cache)
        self.variants.setdefault(tape_signature(tape), Variants()).add(program, why)
        return program, outs

    @property
    def ir(self) -> Any:
        return next(iter(self.programs.values()))[0].fn

    def __call__(self, *args: Any) -> Any:
        if tracing.current_context() is not None:  # called inside a traced function
            return self._inline(args)
        if Program.run is not _PLAIN_RUN:  # a profile is active: this call's own time too
            return self._profiled(args)
        return self._call(args)

    def _profiled(self, args: tuple[Any, ...]) -> Any:
        from .profile import front_end  # (a closure in __call__ would cost every call)

        return front_end("yota.compile", self.f or self, lambda: self._call(args))

    def _call(self, args: tuple[Any, ...]) -> Any:
        if structs.has_half(args):  # float16: computed in float32, as JAX does on CPU
            wide, narrow = structs.widen_half(args)
            out = self._call(wide)
            return structs.narrow_half(out) if narrow else out
        args = _device.for_backend(self.f, args, self.backend)  # CuPy arrays need "cuda"
        leaves, sig = flatten_args(args)
        variants = self.variants.get(sig)
        if variants is None:
            variants = Variants()
            first = describe_signature_change(next(iter(self.variants)), sig,
                                              argnames(self.f, len(args))) \
                if self.variants and self.f is not None else "first trace"
        else:
            first = "first trace"
        rngs = randomness.states_of([p.tape for p in variants.programs])
        found = variants.find(self.f, leaves, rngs, randomness.restore_states)
        if found is not None:
            return _restructure(found[0].tape.result, found[1])
        if self.f is None:
            raise SignatureError("this function was compiled from a tape; the arguments do not "
                                 "match its signature or a guard failed, and it cannot retrace")
        why = variants.retrace(self.f, "compile", first)
        with compiling(self.f, "forward", self.backend), captured.policy(variants.policy()):
            _, tape = pipeline.trace_forward(self.f, args)
            self.variants.setdefault(sig, variants)
            program, outs = self._add(tape, args, why)
        assert outs is not None  # _add ran the program on args
        return _restructure(program.tape.result, outs)


    def _inline(self, args: tuple[Any, ...]) -> Any:
        """Trace through: the forward program, built at the values of ``args``, inlined
        into the enclosing trace (a gradient of it differentiates through it)."""
        if self.f is not None:
            return pipeline.nested_forward(self.f, args, "compile")
        tape = next(iter(self.programs.values()))[0].tape
        if signature(tracing.detach(args)) != tape_signature(tape):
            raise SignatureError("this function was compiled from a tape; the arguments do "
                                 "not match its signature, and it cannot retrace")
        outs = tracing.inline(pipeline.lower(tape), tape, args, "compile")
        return tracing.restructure(tape.result, outs)


def compile(f: Callable[..., Any] | Tape, *example_args: Any,
            backend: str | None = None, cache: bool = True) -> CompiledFunction:
    """Compile ``f`` for the signature of ``example_args`` (or compile a ``Tape``);
    ``cache=False``: do not use the on-disk cache of compiled programs (``yota.cache``).

    >>> import numpy as np, yota
    >>> cf = yota.compile(lambda x: np.tanh(x) * 2.0, np.zeros(3))
    >>> cf(np.zeros(3))
    array([0., 0., 0.])

    Called inside a function that Yota is tracing, the compiled function traces through
    (its program is inlined into the enclosing one and differentiated with it).
    """
    if isinstance(f, Tape):
        return CompiledFunction(None, f, backend, cache)
    check_callable(f, "compile")
    if tracing.current_context() is not None:  # built from the values; called, it inlines
        with tracing.suspended():
            return compile(f, *tracing.detach(example_args), backend=backend, cache=cache)
    if structs.has_half(example_args):  # float16: traced in float32 (see _call)
        example_args = structs.widen_half(example_args)[0]
    example_args, backend = _device.prepare(f, example_args, backend)  # CuPy: "cuda"
    with compiling(f, "forward", backend):  # its phases, logged (yota.phases)
        _, tape = pipeline.trace_forward(f, example_args)
        return CompiledFunction(f, tape, backend, cache, args=example_args)
