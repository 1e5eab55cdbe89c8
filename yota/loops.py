"""``yota.scan`` and ``yota.fori_loop``: a loop whose step is traced once.

A plain Python loop in a traced function is traced step by step, then rolled back into
one ``loop`` op (``yota.ir.passes.roll``): simple to write, but the trace costs every
step. ``scan`` traces its step function once, on the first step's values, and builds the
``loop`` op directly, so a loop of ten thousand steps traces like one step::

    def loss(Wx, Wh, xs):
        def step(h, x):
            h = np.tanh(x @ Wx + h @ Wh)
            return h, np.sum(h ** 2)
        h, per_step = yota.scan(step, np.zeros((16, 64)), xs)
        return np.sum(per_step)

``scan(f, init, xs)`` runs ``carry, y = f(carry, x)`` for each ``x = xs[i]`` (the leading
axis of every array of ``xs``, a structure of arrays or None with ``length=``) and returns
the last carry and the ``y`` stacked along a new leading axis (same structures). The carry
keeps its structure, dtypes and shapes from step to step. Outside a traced function it is
the Python loop on NumPy.

Because the step is traced once, Python decisions in it on carried or stacked values
(``if np.sum(h) > 0:``) are taken at the first step's values and checked at every step: a
step that would decide otherwise stops with an error naming the step (use ``np.where``).
Random draws inside the step are refused (draw them outside and pass them in ``xs``). A
``scan`` of no steps runs its step once, on zeros, for the shapes of its ``y``s (JAX traces it
for them too); a ``fori_loop`` of no steps returns ``init`` without running the body.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from yota.ir.core import Builder, Function
from yota.ir.errors import GuardFailed, TraceError, UnsupportedError, YotaError
from yota.ir.loops import loop_op
from yota.ir.types import TensorType, tensor_type

from . import structs
from . import tracing as _tracing
from .lowering import to_ir
from .trace_context import current_context
from .traced import traces


def scan(f: Callable[[Any, Any], tuple[Any, Any]], init: Any, xs: Any = None,
         length: int | None = None, reverse: bool = False) -> tuple[Any, Any]:
    """``carry, ys``: ``carry, y = f(carry, x)`` for each ``x`` along the leading axis of
    ``xs`` (last to first with ``reverse=True``; ``ys`` stays in ``xs``'s order), the
    ``y`` stacked along a new leading axis. In a traced function the step is traced once
    and compiled as one loop (see the module's text)."""
    who = _Who("scan", "step", f)
    n = _length(_tracing.detach(xs), length)
    if current_context() is not None:
        return _traced(f, init, xs, n, bool(reverse), who)
    return _eager(f, init, xs, n, bool(reverse), who)


def fori_loop(lower: int, upper: int, body: Callable[[Any, Any], Any], init: Any) -> Any:
    """``carry = body(i, carry)`` for ``i`` in ``range(lower, upper)``; the last carry.
    ``i`` is an int64 scalar (traced: it indexes arrays, ``x[i]``, as a traced index)."""
    who = _Who("fori_loop", "body", body)
    if not all(isinstance(b, (int, np.integer)) and not isinstance(b, bool)
               for b in (lower, upper)):
        raise YotaError(f"yota.fori_loop: lower and upper must be Python ints (the number "
                        f"of steps is fixed when the loop is traced), got "
                        f"{type(lower).__name__} and {type(upper).__name__}")

    if int(upper) <= int(lower):
        return init  # no step: the body is not run

    def step(carry: Any, i: Any) -> tuple[Any, None]:
        return body(i, carry), None

    idx = np.arange(int(lower), int(upper), dtype=np.int64)
    if current_context() is not None:
        return _traced(step, init, idx, len(idx), False, who)[0]
    return _eager(step, init, idx, len(idx), False, who)[0]


class _Who:
    """Who is speaking in an error: ``yota.scan: the step 'f'`` (the user's function)."""

    def __init__(self, api: str, what: str, f: Any) -> None:
        if not callable(f):
            sig = "(carry, x) -> (carry, y)" if api == "scan" else "(i, carry) -> carry"
            raise YotaError(f"yota.{api}: the {what} must be a function {sig}, got a "
                            f"{type(f).__name__}; call yota.{api}("
                            + ("step, init, xs)" if api == "scan" else
                               "lower, upper, body, init)"))
        self.api, self.what, self.name = api, what, getattr(f, "__name__", type(f).__name__)

    def __str__(self) -> str:
        return f"yota.{self.api}: the {self.what} {self.name!r}"


# -- the length and the steps' slices -----------------------------------------------------
def _length(xs: Any, length: int | None) -> int:
    leaves = [v for _, v in structs.flatten(xs)[0]] if xs is not None else []
    lens = {int(np.shape(v)[0]) for v in leaves if np.ndim(v) >= 1}
    if any(np.ndim(v) == 0 for v in leaves):
        raise YotaError("yota.scan: every array of xs needs a leading axis to scan over; "
                        "found a scalar (pass it through the carry or close over it)")
    if length is not None:
        if not isinstance(length, (int, np.integer)) or isinstance(length, bool) or length < 0:
            raise YotaError(f"yota.scan: length must be an int >= 0, got {length!r}")
        lens.add(int(length))
    if not lens:
        raise YotaError("yota.scan: xs holds no array; pass length= for the number of steps")
    if len(lens) > 1:
        raise YotaError(f"yota.scan: the leading axes of xs (and length=) disagree: "
                        f"{sorted(lens)}; every array of xs is scanned along axis 0")
    return lens.pop()


def _slice(xs: Any, i: int) -> Any:
    if xs is None:
        return None
    return structs.rebuild(xs, lambda _, v: v[i])


def _step(f: Callable[..., Any], carry: Any, x: Any, who: _Who) -> tuple[Any, Any]:
    out = f(carry, x)
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        got = "one value" if not isinstance(out, (tuple, list)) else f"{len(out)} values"
        raise YotaError(f"{who} must return a pair (carry, y), got {got}; return "
                        "(carry, None) for no y")
    return out[0], out[1]


# -- outside a trace: the Python loop ------------------------------------------------------
def _eager(f: Callable[..., Any], init: Any, xs: Any, n: int, reverse: bool, who: _Who
           ) -> tuple[Any, Any]:
    if n == 0:  # no step, but ys need their shapes: the step run once on zeros
        _, y0 = _on_zeros(lambda x0: _step(f, init, x0, who), xs, who)
        leaves, _, template = _split(y0)
        return init, _fill(template, [np.empty((0, *np.shape(v)), np.result_type(v))
                                      for v in leaves])
    carry, ys = init, [None] * n
    kinds0: dict[str, Any] | None = None
    for i in range(n - 1, -1, -1) if reverse else range(n):
        carry, ys[i] = _step(f, carry, _slice(xs, i), who)
        _check_carry(init, carry, who)
        kinds = _kinds(ys[i])
        if kinds0 is None:
            kinds0 = kinds
        elif kinds != kinds0:
            raise YotaError(f"{who} returns a y of another structure, dtype or shape at step "
                            f"{i} {_describe(ys[i], 'y')} than at the first step "
                            f"{_describe(ys[n - 1 if reverse else 0], 'y')}; the ys are "
                            "stacked, so every step returns the same kind of y")
    columns = zip(*[_split(y)[0] for y in ys], strict=True)  # (checked alike above)
    return carry, _fill(_split(ys[0])[2], [np.stack(c) for c in columns])


def _is_int(v: Any) -> bool:
    return isinstance(v, (bool, int))


def _kinds(x: Any) -> dict[str, tuple[Any, Any]]:
    leaves, paths, _ = _split(x)
    return {repr(p): (np.shape(v), np.result_type(v)) for p, v in zip(paths, leaves,
                                                                        strict=True)}


def _check_carry(init: Any, carry: Any, who: _Who) -> None:
    if _kinds(init) != _kinds(carry):
        raise YotaError(f"{who} returns a carry {_describe(carry)} where it was given "
                        f"{_describe(init)}; the carry keeps its structure, dtypes and shapes "
                        f"(cast with .astype){_float_hint(init)}")


def _float_hint(init: Any) -> str:
    """A Python float in the carry is float64 (NumPy's rule): say so."""
    if any(type(v) is float for v in _split(init)[0]):
        return "; a Python float in the carry is f64: start from np.float32(0.0) for f32"
    return ""


def _on_zeros(run: Callable[[Any], Any], xs: Any, who: _Who) -> Any:
    """``run(x0)`` on zeros shaped like one step of ``xs``: a loop of no step still needs
    the shapes of what its step returns."""
    x0 = None if xs is None else structs.rebuild(
        xs, lambda _, v: np.zeros(np.shape(v)[1:], np.asarray(v).dtype))
    try:
        return run(x0)
    except Exception as e:
        raise YotaError(f"{who}: a loop of no steps still runs its step once, on zeros, for "
                        f"the shapes of what it returns, and that failed ({type(e).__name__}: "
                        f"{e}); do not call it with an empty xs") from e


def _describe(x: Any, root: str = "carry") -> str:
    leaves, paths, _ = _split(x)
    parts = [f"{structs.format_path(p, root)}: {tensor_type(np.result_type(v), np.shape(v))}"
             for p, v in zip(paths, leaves, strict=True)]
    return "(" + ", ".join(parts) + ")"


# -- leaves of a carry or a y: tracers, arrays, numbers (Python ints too) ------------------
class _Slot:
    """A leaf's place in a structure whose leaves were taken out (``_split``)."""

    __slots__ = ("k",)

    def __init__(self, k: int) -> None:
        self.k = k


def _split(x: Any) -> tuple[list[Any], list[Any], Any]:
    """The leaves of ``x`` in ``structs``' order, their paths, and ``x`` with ``_Slot``s
    in their places (``_fill`` puts values there)."""
    leaves: list[Any] = []
    paths: list[Any] = []

    def take(path: Any, v: Any) -> _Slot:
        leaves.append(v)
        paths.append(path)
        return _Slot(len(leaves) - 1)

    return leaves, paths, structs.rebuild(x, take, leaf=_value_leaf)


def _value_leaf(v: Any) -> bool:
    return structs.is_traced(v) or _is_int(v) or structs.is_leaf(v)


def _fill(template: Any, values: list[Any]) -> Any:
    return structs.rebuild(template, lambda _, s: values[s.k],
                           leaf=lambda v: isinstance(v, _Slot))


def _as_value(v: Any) -> Any:
    """A leaf a nested trace can return: a number becomes an array (a constant)."""
    return v if structs.is_traced(v) else np.asarray(v)


# -- in a trace: the step traced once, one loop op -----------------------------------------


def _traced(f: Callable[..., Any], init: Any, xs: Any, n: int, reverse: bool, who: _Who
            ) -> tuple[Any, Any]:
    """Trace ``f`` once on the first step's example values (a nested trace: the
    enclosing trace's values it closes over are its captured inputs), wrap its program
    in a ``loop`` op of ``n`` steps, and run that in the enclosing trace
    (``tracing.inline``: one entry, inlined op by op when lowered). The step's carry and
    ``y`` leave the nested trace as two lists of leaves (any structure, dataclasses too,
    in ``structs``' order: the carry's leaves come out in the order they went in)."""
    name = who.name
    # a Python int or bool in the carry is a constant of a trace: carried as a 0-d array
    init = structs.rebuild(init, lambda _, v: np.asarray(v) if _is_int(v) else v,
                           leaf=_value_leaf)
    init_v, xs_v = _tracing.detach(init), _tracing.detach(xs)
    first = n - 1 if reverse else 0
    made: dict[str, Any] = {}

    def body(c: Any, x: Any) -> tuple[list[Any], list[Any]]:
        carry, y = _step(f, c, x, who)
        cl, made["carry paths"], made["carry"] = _split(carry)
        yl, _, made["y"] = _split(y)
        return [_as_value(v) for v in cl], [_as_value(v) for v in yl]

    enclosing = list(getattr(traces, "stack", None) or [])
    drawn = [_events(c) for c in enclosing]
    if n:
        x0 = None if xs_v is None else structs.rebuild(xs_v, lambda _, v: np.asarray(v)[first])
        _, tape = _tracing.trace(body, init_v, x0)
    else:
        _, tape = _on_zeros(lambda x0: _tracing.trace(body, init_v, x0), xs_v, who)
    tape.fname = name  # (the tape shows "scan(step)", errors name the step)
    for c, n0 in zip(enclosing, drawn, strict=True):
        if _events(c) != n0:  # a generator of an enclosing trace (its proxy) drew
            at = c.tape.randoms[-1].loc if c.tape.randoms else None
            raise UnsupportedError(
                f"{who} draws random numbers"
                f"{f' at {at.describe()}' if at is not None else ''} from a generator of the "
                "enclosing function; the step is traced once, so every step would get the "
                "first step's numbers. Draw them for all steps before the loop and pass "
                "them in xs (rng.standard_normal((length, ...)))")
    step_fn = to_ir(tape, f"{name}_body")
    carries = [path for argnum, path, _ in tape.leaf_vars if argnum == 0]
    stacked = sum(1 for argnum, _, _ in tape.leaf_vars if argnum == 1)
    step_fn = _in_carry_order(step_fn, carries, made["carry paths"])
    _check_carry_types(step_fn, carries, made["carry paths"], init_v, who)
    b = Builder(f"{who.api}_{name}")
    nc = len(carries)
    ins = [b.input(TensorType(t.dtype, (n, *t.shape)) if nc <= k < nc + stacked else t, label)
           for k, (t, label) in enumerate(zip(step_fn.input_types, step_fn.input_labels,
                                              strict=True))]
    b.callees[step_fn.name] = step_fn
    op = b.append(loop_op(step_fn, ins, length=n, carries=nc, stacked=stacked,
                          reverse=reverse))
    fn: Function = b.build(list(op.results))
    try:
        outs = _tracing.inline(fn, tape, (init, xs), who.api)
    except GuardFailed as e:
        raise TraceError(
            f"{who} is traced once, at the first step's values, and a Python decision in it "
            f"goes the other way at a later step: {e}. Write choices on values that change "
            "from step to step with np.where") from None
    # the last carry in the structure the carry came in (a dict's keys in its order)
    return _fill(_split(init)[2], outs[:nc]), _fill(made["y"], outs[nc:])


def _events(ctx: Any) -> int:
    rec = ctx.recorder
    return len(rec.draws.events) if rec is not None else 0


def _in_carry_order(step: Function, paths_in: list[Any], paths_out: list[Any]) -> Function:
    """``step`` with its carry outputs in the order of its carry inputs when the step
    returns the same leaves in another order (a dict built with its keys in another
    order); ``paths_out`` is updated to match."""
    n = len(paths_in)
    if paths_out == paths_in or len(paths_out) != n or \
            sorted(map(repr, paths_out)) != sorted(map(repr, paths_in)) or \
            len(set(map(repr, paths_in))) != n:
        return step
    perm = [paths_out.index(p) for p in paths_in]
    outs, labels = list(step.outputs), list(step.output_labels)
    paths_out[:] = paths_in
    return step.replace(outputs=tuple(outs[i] for i in perm) + tuple(outs[n:]),
                        output_labels=tuple(labels[i] for i in perm) + tuple(labels[n:]))


def _check_carry_types(step: Function, paths_in: list[Any], paths_out: list[Any],
                       init: Any, who: _Who) -> None:
    """The step returns a carry of the carry's structure, dtypes and shapes."""
    n = len(paths_out)
    if paths_in != paths_out or any(step.input_types[k] != step.output_types[k]
                                    for k in range(n)):
        outs = ", ".join(f"{structs.format_path(p, 'carry')}: {t}"
                         for p, t in zip(paths_out, step.output_types, strict=False))
        raise YotaError(f"{who} returns a carry ({outs}) where it was given "
                        f"{_describe(init)}; the carry keeps its structure, dtypes and shapes "
                        "from step to step (cast with .astype, or build it with the final "
                        f"shapes before the loop){_float_hint(init)}")


__all__ = ["scan", "fori_loop"]
