"""``yota.grad``: value and gradients of a scalar function, with static or dynamic graphs.

Static graphs (default): the traced, differentiated, optimized program is cached per
function (by its code: a lambda made again finds it) and argument signature, and replayed
on new inputs; what the function read from outside its arguments and the guards recorded
while tracing are checked on every replay, and a failure retraces and caches the new
variant beside the old one, saying why (``yota.variants``). ``dynamic=True`` retraces on
every call and reuses the compiled program of any earlier identical tape, fed with the
new inputs.
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
from .gradients import GradientResult, Tangent, UnpackPlan, unpack
from .guards import native_reads
from .phases import compiling, note
from .pipeline import Stats, stats
from .program import Program, flatten_args
from .tracer import _local as tracer_state  # (its "stack": tracer.current_context)
from .validate import argnames, argnums_tuple, argument_error, check_callable
from .variants import RETRACE_WARNING, RetraceWarning, Variants, describe_signature_change

__all__ = ["GradientResult", "RetraceWarning", "Stats", "Tangent", "build_grad_program",
           "grad", "stats", "RETRACE_WARNING"]


# code (or object) -> {(signature, options...): Variants}: see _owner_of
_static_cache: weakref.WeakKeyDictionary[Any, dict[Any, Variants]] = weakref.WeakKeyDictionary()
_dynamic_cache: dict[str, Program] = {}


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
        for table in (_fast, *_FAST_BY_NAME.values(), *_FAST_WRT.values()):
            table.clear()
        return
    owner, method = _owner_of(f)
    for key in [k for k in _static_cache.get(owner, {}) if k[-1] == method]:
        del _static_cache[owner][key]
    for table in (_fast, *_FAST_BY_NAME.values(), *_FAST_WRT.values()):
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
    table = (_fast if backend is None else _FAST_BY_NAME.get(backend)) \
        if not dynamic and optimize and not has_aux and comm is None and \
        checkpoint == "auto" else None
    wrt = None
    if argnums is not None:
        wrt = argnums_tuple(argnums, len(args), "grad")
        table = None if table is None else _FAST_WRT.setdefault((backend, wrt), {})
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
        _remember_fast(f, program, args, table)
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


# -- the fast path of a repeated call -------------------------------------------------------
# id(f) -> (weak reference to f, fast(f, args), program): the latest program
# ``yota.grad(f, ...)`` ran with the default options (one table for backend=None, one
# for backend="llvm"), as a function made for its signature that checks the arguments and
# returns ``(value, grads)``, or None when they do not fit (then the general path runs:
# signature lookup, variants, guards, retracing). On the llvm backend that function is
# native code (``_native_fast``: backends/llvm/runtime/pyentry.py); else, and where that
# does not apply, Python code generated by ``_make_fast``.
_Fast = dict[int, tuple[weakref.ref[Any], Callable[[Any, tuple[Any, ...]], Any], Program]]
_fast: _Fast = {}  # backend=None (the default)
_FAST_BY_NAME: dict[str, _Fast] = {"llvm": {}}  # an explicit backend= that has a fast path
_FAST_WRT: dict[tuple[Any, tuple[int, ...]], _Fast] = {}  # (backend, argnums) -> table
_PLAIN_RUN = Program.run
NATIVE_FAST = True  # False: fast paths made from now on are Python (tools/bench_call.py --ab)


def _remember_fast(f: Any, program: Program, args: Sequence[Any], table: _Fast) -> None:
    if isinstance(f, types.MethodType):  # a new object at each obj.method: never found
        return
    known = table.get(id(f))
    if known is not None and known[0]() is f and known[2] is program:
        return
    try:
        ref = weakref.ref(f, _forget(id(f), table))
    except TypeError:  # not weakly referenceable: no fast path
        return
    if program.fast is None:  # per function: programs are shared by functions of one code
        program.fast = weakref.WeakKeyDictionary()  # (a lambda made per call: gone with it)
    fast = program.fast.get(f)
    if fast is None:
        fast = program.fast[f] = _deferred(program, args, ref, table)
    if fast is False:
        return
    table[id(f)] = (ref, fast, program)


def _deferred(program: Program, args: Sequence[Any], ref: weakref.ref[Any],
              table: _Fast) -> Any:
    """The fast path of ``program``, made at its first use (a first call, the one that
    traced or loaded the program, pays nothing for it): from the arguments of that use,
    which must have the signature ``args`` have. False where there is none."""
    try:
        sig = flatten_args(args)[1]
        hash(sig)
    except (TraceError, TypeError):
        return False

    def build(f: Any, now: tuple[Any, ...]) -> Any:
        if ref() is not f:
            return None
        try:
            if flatten_args(now)[1] != sig:
                return None
        except TraceError:
            return None
        made = _make_fast(program, now, ref)
        program.fast[f] = made if made is not None else False
        known = table.get(id(f))
        if known is not None and known[2] is program:  # (else already replaced)
            if made is None:
                del table[id(f)]
            else:
                table[id(f)] = (known[0], made, program)
        return None if made is None else made(f, now)
    return build


def _forget(key: int, table: _Fast) -> Callable[[Any], Any]:
    return lambda _: table.pop(key, None)


def _make_fast(program: Program, args: Sequence[Any], ref: weakref.ref[Any]
               ) -> Callable[..., Any] | None:
    """The fast path ``fast(f, args)`` of ``program`` for function ``ref()`` (else None),
    no trace running in this thread, and arguments like ``args``: arrays, hashable
    constants (int, bool, str, None) and tuples and lists of them, and a program without
    captured arrays, constants from user code or random numbers (those need the general
    path's checks). None when it does not apply."""
    tape = program.tape
    if not program.shareable or tape.randoms or tape.has_aux or tape.value_shape or \
            program.unpack_plan is None or program.variants is None:
        return None
    plan: UnpackPlan = program.unpack_plan
    native = _native_fast(program, args, plan, ref) if NATIVE_FAST else None
    if native is not None:
        return native
    names = [f"a{i}" for i in range(len(args))]
    ns: dict[str, Any] = {"ndarray": np.ndarray, "stats": stats, "Result": GradientResult,
                          "program": program, "plan": plan, "argnames": tape.argnames,
                          "variants": program.variants,
                          "GuardFailed": GuardFailed, "run": getattr(program.exe, "_stub",
                                                                     program.exe),
                          "ref": ref, "context": tracing.current_context,
                          "check": program.checker}
    checks: list[str] = []
    leaves: list[str] = []  # in the order of flatten_args
    if not all(_fast_checks(a, name, ns, checks, leaves) for a, name in zip(args, names,
                                                                             strict=True)):
        return None
    grads = _fast_grads(plan, args)
    value = "float(outs[0])" if plan.value_is_float else "outs[0][()]"
    reads = bool(tape.reads or tape.captured)  # checked, and the captured inputs read
    lines = [
        "def fast(f, args):",
        f"    if ref() is f and context() is None and len(args) == {len(args)}:",
        f"        {', '.join(names)}{',' if len(names) == 1 else ''} = args" if names else "",
        f"        if {' and '.join(checks) or 'True'}:",
        "            got = check(f)" if reads else "            got = ()",
        "            if type(got) is int: return None" if reads else "",
        "            try:",
        f"                outs = run({', '.join(leaves + ['*got'])})",
        "            except GuardFailed:",
        "                return None",
        "            stats.hits += 1",
        "            variants.retraces = 0  # a hit: the calls that retrace are not consecutive",
        f"            return {value}, Result([{', '.join(grads)}], program, argnames, plan)",
        "    return None",
    ]
    exec("\n".join(lines), ns)  # noqa: S102 - code generated from the signature
    return ns["fast"]


def _native_fast(program: Program, args: Sequence[Any], plan: UnpackPlan,
                 ref: weakref.ref[Any]) -> Callable[..., Any] | None:
    """The fast path as native code (the llvm backend's ``pyentry``): the same checks,
    outputs and result as ``_make_fast``'s Python code, with no Python frame; None where
    it does not apply (another backend, a layout it does not know, an argument it does
    not check)."""
    exe = program.exe
    np_plan = getattr(exe, "native_plan", lambda nargs: None)(2)  # fast(f, args)
    if np_plan is None:
        return None
    np_plan.referent(0, ref)
    np_plan.not_set(tracer_state, "stack")  # tracing.current_context() is None
    ins, outs = exe.signature
    leaves: list[Any] = []
    if not all(_native_checks(a, reg, np_plan, ins, leaves) for a, reg in
               zip(args, np_plan.seq(1, tuple, len(args)), strict=True)) \
            or len(leaves) + len(program.checker.captured) != len(ins):
        return None
    f = ref()
    if not native_reads(np_plan, program.tape.reads, program.checker.captured, f, ins,
                        len(leaves)):
        return None
    as_float = _native_scalars(exe, args, plan)
    if as_float is None:
        return None
    exe.native_run(np_plan, set(as_float))

    def push(j: int) -> None:  # output j, as the result holds it
        if j not in as_float:
            np_plan.push_out(len(ins) + j)
        elif as_float[j]:
            np_plan.push_float(len(ins) + j, outs[j][1])
        else:
            np_plan.push_scalar(len(ins) + j, outs[j][1])
    push(0)
    fields = ("_grads", "_fn", "_argnames", "_plan")
    made = np_plan.can_make(GradientResult, fields)  # else called: GradientResult(...)
    if not made:
        np_plan.push(GradientResult)
    _native_grads(np_plan, len(args), plan, push)
    np_plan.push(program)
    np_plan.push(program.tape.argnames)
    np_plan.push(plan)
    if made:
        np_plan.new_object(GradientResult, fields)
    else:
        np_plan.call(4)
    np_plan.build(tuple, 2)
    np_plan.incr(stats, "hits")
    np_plan.setattr(program.variants, "retraces", 0)  # a hit: retraces are not consecutive
    return np_plan.finish()


def _native_grads(np_plan: Any, nargs: int, plan: UnpackPlan, push: Callable[[int], None]
                  ) -> None:
    """Add to ``np_plan`` the list of gradients as ``_unpack`` builds it (``push(j)``:
    output ``j`` as the result holds it)."""
    grads: list[Any] = [None] * nargs
    for argnum, path, j, _ in plan.leaves:
        grads[argnum] = j if path is None else [*(grads[argnum] or []), (path, j)]
    for g in grads:
        if g is None:
            np_plan.push(None)
        elif isinstance(g, int):
            push(g)
        else:
            for path, j in g:
                np_plan.push(path)
                push(j)
            np_plan.build(dict, len(g))
    np_plan.build(list, nargs)


def _native_scalars(exe: Any, args: Sequence[Any], plan: UnpackPlan) -> dict[int, bool] | None:
    """The outputs the result holds as scalars: output -> a float (True) or a NumPy
    scalar (False); None if one is not a 0-d number the native path reads."""
    as_float = {0: plan.value_is_float}
    for argnum, path, j, flt in plan.leaves:
        leaf = args[argnum] if path is None else structs.get_path(args[argnum], path)
        if flt or np.ndim(leaf) == 0:
            as_float[j] = flt
    for j, flt in as_float.items():
        shape, dt = exe.signature[1][j]
        if shape != () or dt.kind not in "biufc" or flt and dt not in (np.float32, np.float64):
            return None
    return as_float


def _native_checks(a: Any, reg: int, plan: Any, ins: list[tuple[tuple[int, ...], Any]],
                   leaves: list[Any]) -> bool:
    """Add to ``plan`` the checks ``_fast_checks`` makes of the value in register ``reg``,
    and those of dicts (keys in order) and Python floats (its leaves, in ``flatten_args``
    order, are the program's inputs ``ins``)."""
    if type(a) is np.ndarray:
        k = len(leaves)
        leaves.append(a)
        if k >= len(ins) or ins[k] != (a.shape, a.dtype):
            return False
        plan.array(reg, ins[k][1], a.shape, k)
        return True
    if a is None or type(a) is bool:
        plan.is_(reg, a)  # (type(x) is bool and x == v: x is v)
        return True
    if type(a) in (int, str):
        plan.equal(reg, a)
        return True
    if type(a) in (tuple, list, dict):
        regs = plan.dict_items(reg, list(a)) if type(a) is dict else \
            plan.seq(reg, type(a), len(a))
        return all(_native_checks(x, r, plan, ins, leaves)
                   for x, r in zip(a.values() if type(a) is dict else a, regs, strict=True))
    if type(a) is float:  # a traced input: its value is copied into a 0-d float
        k = len(leaves)
        leaves.append(a)
        if k >= len(ins) or ins[k][0] != () or ins[k][1] not in (np.float32, np.float64):
            return False
        plan.float_input(reg, k, ins[k][1])
        return True
    return False


def _fast_checks(a: Any, expr: str, ns: dict[str, Any], checks: list[str],
                 leaves: list[str]) -> bool:
    """Append the checks that a value at ``expr`` is like ``a`` (and the expressions of
    its array leaves); False for a value the fast path does not check."""
    k = len(ns)
    if type(a) is np.ndarray:
        ns[f"d{k}"], ns[f"s{k}"] = a.dtype, a.shape
        checks.append(f"type({expr}) is ndarray and {expr}.dtype is d{k} and "
                      f"{expr}.shape == s{k}")
        leaves.append(expr)
        return True
    if a is None:
        checks.append(f"{expr} is None")
        return True
    if type(a) in (int, bool, str):
        ns[f"t{k}"], ns[f"v{k}"] = type(a), a
        checks.append(f"type({expr}) is t{k} and {expr} == v{k}")
        return True
    if type(a) in (tuple, list):
        ns[f"t{k}"] = type(a)
        checks.append(f"type({expr}) is t{k} and len({expr}) == {len(a)}")
        return all(_fast_checks(x, f"{expr}[{i}]", ns, checks, leaves)
                   for i, x in enumerate(a))
    return False


def _fast_grads(plan: UnpackPlan, args: Sequence[Any]) -> list[str]:
    """The expressions of the gradients, as ``_unpack`` builds them: an array (a NumPy
    scalar for a 0-d one) for an array argument, ``{path: gradient}`` for a structure."""
    grads: list[Any] = [None] * len(args)
    for argnum, path, j, as_float in plan.leaves:
        leaf = args[argnum] if path is None else structs.get_path(args[argnum], path)
        scalar = not as_float and np.ndim(leaf) == 0  # a NumPy scalar, as _scalar
        g = f"float(outs[{j}])" if as_float else f"outs[{j}][()]" if scalar else f"outs[{j}]"
        if path is None:
            grads[argnum] = g
        else:
            grads[argnum] = (grads[argnum] or []) + [f"{path!r}: {g}"]
    return ["None" if g is None else g if isinstance(g, str) else "{" + ", ".join(g) + "}"
            for g in grads]


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
    if "cupy" in sys.modules:  # only then can an argument be a CuPy array
        args, backend = _device.prepare(f, args, opts.backend)  # CuPy arrays: cuda
        opts = replace(opts, backend=backend)
    if opts.dynamic:
        program, outs = _dynamic_program(f, args, opts)
    else:
        program, outs = _static_run(f, args, opts)
    return (*unpack(program, program.tape, outs, args), program)


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
