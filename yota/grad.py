"""``yota.grad``: value and gradients of a scalar function, with static or dynamic graphs.

Static graphs (default): the traced, differentiated, optimized program is cached per
function and argument signature and replayed on new inputs; the guards recorded while
tracing are checked on every replay, and a failed guard retraces and caches the new
variant beside the old one. ``dynamic=True`` retraces on every call and reuses the
compiled program of any earlier identical tape, fed with the new inputs.
"""

from __future__ import annotations

import logging
import sys
import warnings
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from yota.ir.core import Function
from yota.ir.errors import GuardFailed, TraceError
from yota.ir.printer import print_function

from . import device as _device
from . import pipeline, randomness, structs
from .pipeline import Stats, stats
from .program import Program, flatten_args
from .tape import Var
from .validate import argument_error, check_callable

log = logging.getLogger("yota")

__all__ = ["GradientResult", "Stats", "build_grad_program", "grad", "stats"]


class GradientResult:
    """Gradients by argument: ``g[i]`` is an array for an array argument, a float for a
    float argument, a dict ``{field path: gradient}`` for a structure (only the fields
    that received a gradient), and None for an argument with no gradient."""

    def __init__(self, grads: list[Any], program: Program, argnames: Sequence[str]) -> None:
        self._grads = grads
        self._program = program
        self._argnames = list(argnames)

    def __getitem__(self, i: int) -> Any:
        return self._grads[i]

    def __len__(self) -> int:
        return len(self._grads)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._grads)

    @property
    def tape(self) -> Function:
        """The gradient program (IR) that computed these gradients."""
        return self._program.fn

    def __repr__(self) -> str:
        lines = ["GradientResult("]
        for name, g in zip(self._argnames, self._grads, strict=True):
            if isinstance(g, dict):
                lines.append(f"  {name}: {{")
                for k, v in g.items():
                    lines.append(f"    {k!r}: {_short(v)},")
                lines.append("  },")
            else:
                lines.append(f"  {name}: {_short(g)},")
        return "\n".join(lines + [")"])


def _short(v: Any) -> str:
    if isinstance(v, np.ndarray):
        body = np.array2string(v, threshold=8, precision=4, separator=", ")
        return f"{body.replace(chr(10), ' ')} ({v.dtype}{list(v.shape)})"
    return repr(v)


RETRACE_WARNING = 5  # consecutive retraces of one function and signature before a warning


class RetraceWarning(UserWarning):
    """A function is traced again on every call because a guarded value keeps changing."""


@dataclass
class _Variants:
    programs: list[Program] = field(default_factory=list)
    retraces: int = 0  # consecutive calls that ended in a retrace
    warned: bool = False
    draws: bool = False  # a program draws random numbers: save generator states per call


_static_cache: weakref.WeakKeyDictionary[Any, dict[Any, _Variants]] = weakref.WeakKeyDictionary()
_dynamic_cache: dict[str, Program] = {}


def grad(f: Callable[..., Any], *args: Any, dynamic: bool = False, backend: str | None = None,
         optimize: bool = True, cache: bool = True) -> tuple[Any, GradientResult]:
    """Value and gradient of scalar function ``f`` at ``args``: ``(value, grads)``.

    ``f`` returns a scalar float (a 0-d array or a Python float). ``args`` are arrays,
    Python floats (traced, differentiable), ints, bools, strings and None (constants of the
    trace and part of the cache key), and structures of them (dataclasses, objects,
    NamedTuples, tuples, lists, dicts).

    Parameters:

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

    ``grads[i]`` is the gradient for ``args[i]``: an array of its shape for an array, a
    float for a Python float, a dict ``{field path: gradient}`` for a structure (only the
    fields that get one), and ``None`` for an argument that is not differentiable (ints,
    bools, strings, integer arrays) or that ``f`` does not use.

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
    check_callable(f, "grad")
    if "cupy" in sys.modules:  # only then can an argument be a CuPy array
        args, backend = _device.prepare(f, args, backend)  # CuPy arrays: the cuda backend
    if dynamic:
        program, outs = _dynamic_program(f, args, backend, optimize, cache)
    else:
        program, outs = _static_run(f, args, backend, optimize, cache)
    return _unpack(program, outs, args)


def _static_run(f: Callable[..., Any], args: Sequence[Any], backend: str | None,
                optimize: bool, cache: bool = True) -> tuple[Program, list[np.ndarray]]:
    try:
        leaves, sig = flatten_args(args)
    except TraceError as e:
        raise argument_error(f, args, e) from None
    key = (sig, backend, optimize)
    per_fn = _static_cache.setdefault(_cache_owner(f), {})
    variants = per_fn.setdefault(key, _Variants())
    failed: tuple[Program, GuardFailed] | None = None
    rngs = randomness.states_of([p.tape for p in variants.programs]) if variants.draws \
        else None
    for program in list(variants.programs):
        if not program.still_valid():
            variants.programs.remove(program)
            continue
        try:
            outs = program.run(leaves)
        except GuardFailed as e:
            stats.guard_failures += 1
            log.info("yota: %s", e)
            failed = (program, e)
            if rngs is not None:  # the next variant (or the trace) draws the same numbers
                randomness.restore_states(*rngs)
            continue
        stats.hits += 1
        variants.retraces = 0
        return program, outs
    if failed is not None:
        _note_retrace(f, variants, *failed)
    program = build_grad_program(f, args, backend, optimize, cache)
    program, outs = pipeline.first_run(program, args, backend, kind="grad", cache=cache)
    variants.programs.insert(0, program)
    del variants.programs[pipeline.MAX_VARIANTS:]
    variants.draws = any(p.tape.draws for p in variants.programs)
    return program, outs


def _note_retrace(f: Any, variants: _Variants, program: Program, e: GuardFailed) -> None:
    """Count a retrace after failed guards; warn once when they keep coming."""
    variants.retraces += 1
    if variants.retraces < RETRACE_WARNING or variants.warned:
        return
    variants.warned = True
    name = getattr(f, "__name__", type(f).__name__)
    loc = pipeline.guard_loc(program.fn, program.tape, e)
    where = loc.describe() if loc is not None else "a line of your code"
    warnings.warn(
        f"yota.grad: {name} was traced again on each of the last {variants.retraces} calls "
        f"because the Python value taken from a traced array at {where} (float(), int(), "
        "bool(), .item() or an if on an array) changed every time. Such a value is a "
        "constant of the compiled program, checked on each call, and each new value "
        "compiles a new program. Keep it as an array (to log it, return it as a second "
        "output of a wrapper) or compute it outside the function.", RetraceWarning,
        stacklevel=4)


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


def _dynamic_program(f: Callable[..., Any], args: Sequence[Any], backend: str | None,
                     optimize: bool, cache: bool = True) -> tuple[Program, list[np.ndarray]]:
    val, tape = pipeline.trace_grad(f, args)
    fn = pipeline.lower(tape)
    key = f"{backend}|{optimize}|{print_function(fn)}"
    known = _dynamic_cache.get(key)
    if known is not None:
        program = Program.build(tape, known.fn, known.exe)
        try:
            outs = program(args, traced_draws=True)
        except GuardFailed:  # its guards were anchored to other inputs' compiled values
            stats.guard_failures += 1
        else:
            stats.hits += 1
            return program, outs
    program = pipeline.build_grad(tape, backend, optimized=optimize, cache=cache, fn=fn)
    program, outs = pipeline.first_run(program, args, backend, kind="grad", cache=cache)
    _dynamic_cache[key] = program
    return program, outs


def build_grad_program(f: Callable[..., Any], args: Sequence[Any], backend: str | None,
                       optimize: bool, cache: bool = True) -> Program:
    """Trace ``f`` at ``args`` and compile its gradient program (``yota.pipeline``)."""
    _, tape = pipeline.trace_grad(f, args)
    return pipeline.build_grad(tape, backend, optimized=optimize, cache=cache)


def _unpack(program: Program, outs: list[np.ndarray], args: Sequence[Any]
            ) -> tuple[Any, GradientResult]:
    plan = _unpack_plan(program, args)
    value = _scalar(outs[0], plan.value_is_float)
    grads: list[Any] = [None] * len(args)
    for argnum, path, j, as_float in plan.leaves:
        g = float(outs[j]) if as_float else outs[j]
        if path is None:
            grads[argnum] = g
        else:
            if grads[argnum] is None:
                grads[argnum] = {}
            grads[argnum][path] = g
    return value, GradientResult(grads, program, program.tape.argnames)


@dataclass(frozen=True)
class _UnpackPlan:
    """Where each gradient output goes: (argument, field path or None, output, as float)."""

    value_is_float: bool
    leaves: tuple[tuple[int, tuple[Any, ...] | None, int, bool], ...]


def _unpack_plan(program: Program, args: Sequence[Any]) -> _UnpackPlan:
    plan = getattr(program, "unpack_plan", None)
    if plan is not None:
        return plan
    tape = program.tape
    out_of = {leaf: j for j, leaf in enumerate(program.fn.attrs.get("grads", ()), start=1)}
    leaves = []
    for i, (argnum, path, _) in enumerate(tape.leaf_vars):
        if i in out_of:
            leaf = structs.get_path(args[argnum], path)
            direct = path == () and structs.is_leaf(args[argnum])
            leaves.append((argnum, None if direct else path, out_of[i], type(leaf) is float))
    plan = _UnpackPlan(isinstance(tape.result, float) or _weak(tape.result), tuple(leaves))
    program.unpack_plan = plan  # type: ignore[attr-defined]  # same signature, same plan
    return plan


def _weak(r: Any) -> bool:
    return isinstance(r, Var) and r.weak


def _scalar(x: np.ndarray, as_float: bool) -> Any:
    return float(x) if as_float else x[()] if isinstance(x, np.ndarray) and x.ndim == 0 else x
