"""``yota.grad``: value and gradients of a scalar function, with static or dynamic graphs.

Static graphs (default): the traced, differentiated, optimized program is cached per
function (by its code: a lambda made again finds it) and argument signature, and replayed
on new inputs; what the function read from outside its arguments and the guards recorded
while tracing are checked on every replay, and a failure retraces and caches the new
variant beside the old one, saying why (``yota.variants``). ``dynamic=True`` retraces on
every call and reuses the compiled program of any earlier identical tape, fed with the
new inputs. A repeated call with the default options first tries the program's fast path
(``yota.fastpath``).
"""

from __future__ import annotations

import sys
import types
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from yota.ir.errors import GuardFailed, TraceError, YotaError
from yota.ir.printer import print_function

from . import captured, pipeline, randomness, structs, tracing
from . import device as _device
from .cache.config import log
from .fastpath import FAST, FAST_BY_NAME, FAST_WRT, remember
from .gradients import GradientResult, Tangent, unpack
from .phases import compiling, note
from .pipeline import Stats, stats
from .program import Program, flatten_args
from .validate import argnames, argnums_tuple, argument_error, check_callable
from .variants import RETRACE_WARNING, RetraceWarning, Variants, describe_signature_change

__all__ = ["GradientResult", "RetraceWarning", "Stats", "Tangent", "build_grad_program",
           "grad", "stats", "RETRACE_WARNING"]


# code (or object) -> {(signature, options...): Variants}: see _owner_of
_static_cache: weakref.WeakKeyDictionary[Any, dict[Any, Variants]] = weakref.WeakKeyDictionary()
_dynamic_cache: dict[str, Program] = {}
_PLAIN_RUN = Program.run  # (yota.profile replaces it while a profile is active)


def variants_of(f: Any) -> dict[Any, Variants]:
    """The variants ``yota.grad`` keeps for ``f`` (and for functions with its code), by
    key ``(signature, backend, optimize, has_aux, argnums, checkpoint, kind)``."""
    owner, method = _owner_of(f)
    return {k: v for k, v in _static_cache.get(owner, {}).items() if k[-1] == method}


def forget(f: Any = None) -> None:
    """Drop the programs ``yota.grad`` keeps in memory for ``f`` (and for functions with
    its code; without ``f``: all of them): the next call traces again, and the on-disk
    cache may answer it (``yota.cache``).

    >>> import numpy as np, yota
    >>> f = lambda x: np.sum(x * x)
    >>> _ = yota.grad(f, np.ones(2)); forget(f); programs_of(f)
    []
    """
    if f is None:
        _static_cache.clear()
        for table in (FAST, *FAST_BY_NAME.values(), *FAST_WRT.values()):
            table.clear()
        return
    owner, method = _owner_of(f)
    for key in [k for k in _static_cache.get(owner, {}) if k[-1] == method]:
        del _static_cache[owner][key]
    for table in (FAST, *FAST_BY_NAME.values(), *FAST_WRT.values()):
        table.pop(id(f), None)


def programs_of(f: Any) -> list[Program]:
    """Every compiled program ``yota.grad`` keeps for ``f`` (all signatures), newest first
    per signature (for inspection: ``yota.explain(f)``)."""
    return [p for v in variants_of(f).values() for p in v.programs]


def grad(f: Callable[..., Any], *args: Any, argnums: int | Sequence[int] | None = None,
         dynamic: bool = False, backend: str | None = None,
         optimize: bool = True, cache: bool = True, has_aux: bool = False,
         comm: Any = None, checkpoint: bool | int | str = "auto"
         ) -> tuple[Any, GradientResult]:
    """Value and gradient of scalar function ``f`` at ``args``: ``(value, grads)``.

    ``f`` returns a scalar float (a 0-d array or a Python float). ``args`` are arrays,
    Python floats (traced, differentiable), ints, bools, strings and None (constants of the
    trace and part of the cache key), and structures of them (dataclasses, objects,
    NamedTuples, tuples, lists, dicts).

    Parameters:

    - ``argnums``: the arguments to differentiate (JAX's ``argnums``: an index or a tuple
      of indices, negative ones counting from the end); the others are constants of the
      call: no gradient is computed for them (the program costs what a closure over them
      would) and their ``grads[i]`` is None. Default: every argument.
    - ``dynamic``: False (default) compiles ``f`` once per argument signature and replays
      the compiled program on later calls; Python code in ``f`` runs only while tracing.
      True traces ``f`` on every call (its Python side effects run every time) and reuses
      the compiled program of an identical earlier trace.
    - ``backend``: ``"llvm"`` (native CPU code, the default), ``"interp"`` (the reference
      interpreter) or ``"cuda"`` (picked by itself for CuPy arrays).
    - ``optimize``: run the optimization passes (fusion, memory plan...); False compiles
      the differentiated program as it is.
    - ``cache``: consult the on-disk cache of compiled programs (``yota.cache``); False
      compiles in this process only.
    - ``comm``: an ``mpi4py`` communicator (or a ``yota.distributed.DataParallel``):
      data-parallel training. Each rank computes the value and gradients at its own
      arguments (its shard of the data); the result is their mean over the ranks,
      the same on every rank. A failure on any rank raises ``DistributedError`` on
      every rank (``yota.distributed``).
    - ``has_aux``: ``f`` returns a pair ``(loss, aux)``, ``aux`` any structure of arrays
      and numbers; the gradients are those of ``loss``, and the result is
      ``((loss, aux), grads)`` (JAX's convention), all computed by one compiled program.
    - ``checkpoint``: how the gradient of a loop (a Python loop Yota compiled as one)
      keeps what its backward steps read. ``"auto"`` (default): checkpointed when its
      per-step values over all steps would pass 256 MiB; ``True``: every loop of 4 steps
      or more keeps only the carried values of every ``ceil(sqrt(T))``-th step and runs
      each segment forward again during the backward pass (memory O(sqrt(T)), the
      forward run twice); an int ``s``: segments of ``s`` steps; ``False``: never.

    Called inside a function that Yota is tracing (a gradient of a gradient, a gradient
    penalty, a meta-learning inner step), ``yota.grad`` traces through: its program is
    built from the traced values, inlined into the enclosing trace and differentiated
    again with it; the value and gradients it returns are traced values, and its guards
    are guards of the enclosing program.

    ``grads[i]`` is the gradient for ``args[i]``, shaped like it: an array of its shape for
    an array, a float for a Python float, a dict with the same keys for a dict, a list,
    tuple or NamedTuple for those, and for a dataclass or another object a read-only
    ``yota.Tangent`` with one attribute per field (``g[0].W``), nested; ``None`` for an
    argument (or a field) that is not differentiable (ints, bools, strings, integer arrays),
    that ``f`` does not use, or that ``argnums`` leaves out. ``grads.flat[i]`` is the flat
    view ``{field path: gradient}`` (``yota.gradients``).

    Values ``f`` reads from outside its arguments (globals, closure cells, attributes of a
    bound method's ``self``, items of dicts and lists reached from them) are never
    silently stale: each is checked on every call (a change retraces, with a
    ``RetraceWarning`` naming it), or read at call time as an implicit input (large
    arrays, and a value that changed twice); see ``yota.captured``.

    A Python value taken from a traced array (``float()``, ``int()``, ``bool()``,
    ``.item()``, an ``if`` on an array) is a constant of the compiled program, checked by
    a guard on every call: when it changes, ``f`` is traced again (as a PyTorch ``.item()``
    detaches). Random numbers drawn inside ``f`` are drawn again at every call, as eager
    NumPy would (``yota.randomness``).

    >>> import numpy as np, yota
    >>> val, g = yota.grad(lambda x, y: np.sum(x * y), np.array([1.0, 2.0]), 3.0)
    >>> float(val), g[0], g[1]
    (9.0, array([3., 3.]), 3.0)
    """
    table = (FAST if backend is None else FAST_BY_NAME.get(backend)) \
        if not dynamic and optimize and not has_aux and comm is None and \
        checkpoint == "auto" else None
    wrt = None
    if argnums is not None:
        wrt = argnums_tuple(argnums, len(args), "grad")
        table = None if table is None else FAST_WRT.setdefault((backend, wrt), {})
    if table is not None and Program.run is _PLAIN_RUN:  # (yota.profile replaces .run)
        fast = table.get(id(f))
        if fast is not None:  # the latest program, if f is still the function it was
            done = fast[1](f, args)  # made for, no trace runs here, and the arguments fit
            if done is not None:
                return done
    check_callable(f, "grad")
    _check_checkpoint(checkpoint)
    if comm is not None:  # data-parallel: this rank's gradients, averaged over the ranks
        return _distributed(f, args, comm, dynamic=dynamic, backend=backend,
                            optimize=optimize, cache=cache, has_aux=has_aux, argnums=wrt)
    opts = Options(dynamic, backend, optimize, cache, has_aux, wrt, checkpoint=checkpoint)
    if Program.run is not _PLAIN_RUN:  # a profile is active: yota.grad's own time too
        return _profiled(f, args, opts)
    value, grads, program = run_grad(f, args, opts)
    if table is not None and program is not None:
        remember(f, program, args, table)
    return value, grads


def _profiled(f: Callable[..., Any], args: tuple[Any, ...], opts: Options
              ) -> tuple[Any, GradientResult]:
    """``yota.grad`` while a profile is active, its own time recorded (``yota.profile``;
    a function of its own: a closure in ``grad`` would cost every call its cells)."""
    from .profile import front_end

    value, grads = front_end("yota.grad", f, lambda: run_grad(f, args, opts)[:2])
    return value, grads


def _distributed(f: Callable[..., Any], args: tuple[Any, ...], comm: Any, **options: Any
                 ) -> tuple[Any, GradientResult]:
    """``yota.grad(..., comm=comm)``: this rank's result averaged over the ranks (a
    function of its own: a closure in ``grad`` would cost every call its cells)."""
    from . import distributed

    return distributed.step(comm, lambda: grad(f, *args, **options), args)


def _check_checkpoint(checkpoint: Any) -> None:
    if checkpoint is True or checkpoint is False or checkpoint == "auto" or (
            isinstance(checkpoint, int) and checkpoint > 0):
        return
    raise YotaError(f"yota.grad: checkpoint must be 'auto', True, False or a positive number "
                    f"of steps per segment, not {checkpoint!r}")


@dataclass(frozen=True)
class Options:
    """How ``yota.grad`` builds and runs a gradient program (its keyword arguments), and
    for front ends built on it (``yota.autograd``): ``wrt``, the arguments to
    differentiate (None: all), and ``owner``, the object its programs are cached under
    (None: the function)."""

    dynamic: bool = False
    backend: str | None = None
    optimize: bool = True
    cache: bool = True
    has_aux: bool = False
    wrt: tuple[int, ...] | None = None
    owner: Any = None
    checkpoint: bool | int | str = "auto"


def run_grad(f: Callable[..., Any], args: Sequence[Any], opts: Options
             ) -> tuple[Any, GradientResult, Program | None]:
    """``yota.grad``'s work: value, gradients, and the program that ran (None when
    called inside a trace: the program is inlined into the enclosing one)."""
    if tracing.current_context() is not None:
        return (*nested_grad(f, args, opts.has_aux, wrt=opts.wrt), None)
    if structs.has_half(args):
        return (*_half_grad(f, args, opts), None)
    if "cupy" in sys.modules:  # only then can an argument be a CuPy array
        args, backend = _device.prepare(f, args, opts.backend)  # CuPy arrays: cuda
        opts = replace(opts, backend=backend)
    if opts.dynamic:
        program, outs = _dynamic_program(f, args, opts)
    else:
        program, outs = _static_run(f, args, opts)
    return (*unpack(program, program.tape, outs, args), program)


def _half_grad(f: Callable[..., Any], args: Sequence[Any], opts: Options
               ) -> tuple[Any, GradientResult]:
    """float16 arguments: computed at float32 copies (as JAX does on CPU); the value in
    float16 when every float argument is, each float16 argument's gradient in float16."""
    wide, narrow = structs.widen_half(tuple(args))
    value, grads, _ = run_grad(f, wide, opts)
    if narrow:
        value = structs.narrow_half(value)
    flat = [{p: structs.half_like(args[i], p, v) for p, v in g.items()} if type(g) is dict
            else structs.half_like(args[i], (), g) for i, g in enumerate(grads.flat)]
    return value, GradientResult(flat, grads._fn, grads._argnames, grads._plan)


def nested_grad(f: Callable[..., Any], args: Sequence[Any], has_aux: bool = False,
                what: str = "grad", wrt: tuple[int, ...] | None = None
                ) -> tuple[Any, GradientResult]:
    """``yota.grad`` inside a trace: the gradient program of ``f`` at the values of
    ``args`` (unoptimized: the enclosing program is optimized as a whole), inlined into
    the enclosing trace; the value and gradients are its traced values."""
    _, tape = pipeline.trace_grad(f, tracing.detach(tuple(args)), has_aux, wrt)
    gfn = pipeline.grad_ir(tape, optimized=False)
    outs = tracing.inline(gfn, tape, args, what)
    return unpack(gfn, tape, outs, args)


def _static_run(f: Callable[..., Any], args: Sequence[Any], opts: Options
                ) -> tuple[Program, list[np.ndarray]]:
    try:
        leaves, sig = flatten_args(args)
    except TraceError as e:
        raise argument_error(f, args, e) from None
    owner, method = _owner_of(f if opts.owner is None else opts.owner)
    key = (sig, opts.backend, opts.optimize, opts.has_aux, opts.wrt, opts.checkpoint, method)
    per_fn = _static_cache.setdefault(owner, {})
    variants = per_fn.get(key)
    first = "first trace"
    if variants is None:
        earlier = [k for k in per_fn if k[1:] == key[1:]]
        if earlier:  # traced before with other arguments
            first = describe_signature_change(earlier[-1][0], sig, argnames(f, len(args)))
        variants = per_fn[key] = Variants()
    rngs = randomness.states_of([p.tape for p in variants.programs]) if variants.draws \
        else None
    found = variants.find(f, leaves, rngs, randomness.restore_states,
                          strict=opts.owner is None)
    if found is not None:
        return found
    why = variants.retrace(f, "grad", first)
    with compiling(f, "grad", opts.backend):  # its phases, logged (yota.phases)
        tape = _trace(f, args, opts, variants)
        program = pipeline.build_grad(tape, opts.backend, optimized=opts.optimize,
                                      cache=opts.cache)
        program, outs = pipeline.first_run(program, args, opts.backend, kind="grad",
                                           cache=opts.cache)
    variants.add(program, why)
    return program, outs


def _trace(f: Callable[..., Any], args: Sequence[Any], opts: Options, variants: Variants
           ) -> Any:
    """Trace ``f`` for its gradient, the values it reads from outside treated as the
    variants' retraces taught (``Variants.policy``); when values read from outside made
    the trace fail as traced values, once more with them guarded instead."""
    policy = variants.policy()
    try:
        with captured.policy(policy):
            return pipeline.trace_grad(f, args, opts.has_aux, opts.wrt, opts.checkpoint)[1]
    except YotaError as e:
        if not policy.used:
            raise
        log.info("yota: tracing %s with the values it reads from outside as traced "
                 "values failed (%s); they are guarded instead", getattr(f, "__name__", f),
                 e)
        variants.substitute = False
        with captured.policy(variants.policy()):
            return pipeline.trace_grad(f, args, opts.has_aux, opts.wrt, opts.checkpoint)[1]


def _owner_of(f: Any) -> tuple[Any, Any]:
    """The object ``f``'s programs are cached under, and what tells them apart there. A
    function (or a bound method, a callable object) written in Python: its code, so that a
    function made again with the same code finds the programs (each checks what it read
    from outside on the function called, ``Program.check``); else the object itself."""
    func = f.__func__ if isinstance(f, types.MethodType) else f
    if isinstance(func, types.FunctionType):
        kind = "method" if func is not f else "function"
        return func.__code__, (kind, id(func.__globals__))
    call = vars(type(f)).get("__call__") if not isinstance(f, type) else None
    if isinstance(call, types.FunctionType) and type(f).__module__ != "functools":
        return call.__code__, ("callable", id(call.__globals__))
    return _cache_owner(f), None


def _cache_owner(f: Any) -> Any:
    try:
        weakref.ref(f)
        return f
    except TypeError:
        return _Unweakrefable.get(f)


class _Unweakrefable:
    """Holds cache entries for callables that cannot be weakly referenced."""

    _boxes: dict[int, Any] = {}

    @classmethod
    def get(cls, f: Any) -> Any:
        box = cls._boxes.get(id(f))
        if box is None or box[0] is not f:
            box = cls._boxes[id(f)] = (f, cls())
        return box[1]


def _dynamic_program(f: Callable[..., Any], args: Sequence[Any], opts: Options
                     ) -> tuple[Program, list[np.ndarray]]:
    with compiling(f, "grad", opts.backend):  # its phases, logged (yota.phases)
        return _dynamic_build(f, args, opts)


def _dynamic_build(f: Callable[..., Any], args: Sequence[Any], opts: Options
                   ) -> tuple[Program, list[np.ndarray]]:
    val, tape = pipeline.trace_grad(f, args, opts.has_aux, opts.wrt, opts.checkpoint)
    fn = pipeline.lower(tape)
    backend, cache = opts.backend, opts.cache
    key = (f"{backend}|{opts.optimize}|{opts.has_aux}|{opts.wrt}|{opts.checkpoint}|"
           f"{print_function(fn)}")
    known = _dynamic_cache.get(key)
    if known is not None:
        program = Program.build(tape, known.fn, known.exe)
        try:
            outs = program(args, traced_draws=True)
        except GuardFailed:  # its guards were anchored to other inputs' compiled values
            stats.guard_failures += 1
        else:
            stats.hits += 1
            note(quiet=True)  # traced again, not compiled: nothing to log
            return program, outs
    program = pipeline.build_grad(tape, backend, optimized=opts.optimize, cache=cache, fn=fn)
    program, outs = pipeline.first_run(program, args, backend, kind="grad", cache=cache)
    _dynamic_cache[key] = program
    return program, outs


def build_grad_program(f: Callable[..., Any], args: Sequence[Any], backend: str | None,
                       optimize: bool, cache: bool = True) -> Program:
    """Trace ``f`` at ``args`` and compile its gradient program (``yota.pipeline``)."""
    with compiling(f, "grad", backend):
        _, tape = pipeline.trace_grad(f, args)
        return pipeline.build_grad(tape, backend, optimized=optimize, cache=cache)
