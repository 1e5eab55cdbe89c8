"""The rules API: ``diffrule``, ``nodiff`` and ``check_rule``.

User rules go into the same registry as the built-in ones
(``yota.ir.autodiff.register_call_rule``). A rule body is NumPy code: it is traced into
IR and inlined into the backward pass, so it is optimized (and differentiable) like the
rest of the program.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from yota.ir.autodiff import register_call_rule, register_nodiff
from yota.ir.core import Builder, Function, Op, Value, make_op
from yota.ir.errors import YotaError

from .primitives import EXAMPLES, Primitive, primitive_key

_RULES: dict[str, dict[str, Callable[..., Any]]] = {}
_TRACED: dict[tuple[Any, ...], tuple[Function, Any]] = {}  # IR, and what the rule read


def _key_of(fn: Any, what: str) -> tuple[str, list[str]]:
    if not isinstance(fn, Primitive):
        name = getattr(fn, "__name__", repr(fn))
        raise YotaError(f"{what}({name}, ...): {name} is not a primitive; decorate it with "
                        f"@yota.primitive so that calls to it are traced as one unit")
    params = [p.name for p in inspect.signature(fn.fn).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return primitive_key(fn.fn), params


def diffrule(fn: Any, *args: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the derivative of primitive ``fn`` with respect to argument(s) ``args``.

    The rule's positional parameters bind to the primal's arguments; keyword-only ``y``
    is the primal output and ``dy`` its cotangent; the primal's keyword arguments are
    passed on. It returns the cotangent of the argument::

        @yota.diffrule(logistic, "x")
        def _(x, *, y, dy):
            return y * (1 - y) * dy
    """
    key, params = _key_of(fn, "diffrule")
    for a in args:
        if a not in params:
            raise YotaError(f"diffrule: {fn.__name__} has no argument {a!r} "
                            f"(its arguments: {', '.join(params)})")

    def deco(rule: Callable[..., Any]) -> Callable[..., Any]:
        for a in args:
            _RULES.setdefault(key, {})[a] = rule
        _TRACED.clear()
        register_call_rule(key, _call_rule)
        return rule

    return deco


def nodiff(fn: Any, *args: str) -> None:
    """Declare that no gradient flows into argument(s) ``args`` of primitive ``fn``."""
    key, params = _key_of(fn, "nodiff")
    for a in args:
        if a not in params:
            raise YotaError(f"nodiff: {fn.__name__} has no argument {a!r}")
        register_nodiff(key, a)


def _call_rule(b: Builder, op: Op, callee: Function, dys: Sequence[Value]) -> list[Value | None]:
    key = str(callee.attrs["primitive"])
    rules = _RULES.get(key, {})
    argnames = [str(a) for a in callee.attrs.get("argnames", ())]
    out: list[Value | None] = []
    for i, name in enumerate(argnames):
        rule = rules.get(name)
        if rule is None:
            out.append(None)
            continue
        g = _traced_rule(key, name, rule, op, callee)
        out.append(_fit(b, _inline(b, g, [*op.operands, *op.results, *dys])[0],
                        op.operands[i], key, name))
    return out


def _traced_rule(key: str, name: str, rule: Callable[..., Any], op: Op,
                 callee: Function) -> Function:
    from .lowering import to_ir
    from .tracing import trace

    types = tuple(v.type for v in (*op.operands, *op.results))
    cache_key = (key, name, types, callee.attrs.get("kwargs"))
    known = _TRACED.get(cache_key)
    if known is not None and isinstance(known[1](None), list):  # what it read still holds
        return known[0]
    argnames = [str(a) for a in callee.attrs["argnames"]]
    kwargs = dict(callee.attrs.get("kwargs", ()))
    n_in, n_out = len(op.operands), len(op.results)
    params = list(inspect.signature(rule).parameters.values())
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                       p.POSITIONAL_OR_KEYWORD)]
    takes_var_kw = any(p.kind == p.VAR_KEYWORD for p in params)
    keyword = {p.name for p in params if p.kind == p.KEYWORD_ONLY}

    def body(*vals: Any) -> Any:
        env = dict(zip(argnames, vals[:n_in], strict=True)) | kwargs
        ys, dys = vals[n_in:n_in + n_out], vals[n_in + n_out:]
        pos = [env[p] for p in positional]
        kw = {k: v for k, v in kwargs.items() if takes_var_kw or k in keyword}
        return rule(*pos, y=ys[0] if n_out == 1 else ys, dy=dys[0] if n_out == 1 else dys,
                    **kw)

    # an opaque primitive's last traced call gives the values (its rule may call opaque
    # primitives, which run on them while tracing); else ones
    primal = EXAMPLES.get((key, types)) or [np.ones(t.shape, t.dtype) for t in types]
    examples = list(primal) + [np.ones(t.shape, t.dtype) for t in types[n_in:]]
    _, tape = trace(body, *examples)
    tape.argnames = [*argnames, *(["y"] if n_out == 1 else [f"y{i}" for i in range(n_out)]),
                     *(["dy"] if n_out == 1 else [f"dy{i}" for i in range(n_out)])]
    g = to_ir(tape, f"rule_{name}")
    _TRACED[cache_key] = (g, _reads_check(tape))
    return g


def _reads_check(tape: Any) -> Callable[[Any], Any]:
    """The check that what a rule read from outside (a global...) is as it was traced."""
    from .guards import Checker, anchored

    return Checker(anchored(tape.reads), [])


def _inline(b: Builder, g: Function, args: Sequence[Value]) -> list[Value]:
    """Copy ``g``'s ops into ``b`` with its inputs bound to ``args``; returns its outputs."""
    env: dict[Value, Value] = dict(zip(g.inputs, args, strict=True))
    b.callees.update(g.callees)
    for op in g.ops:
        new = make_op(op.name, [env[v] for v in op.operands], op.attrs, b.loc or op.loc,
                      result_types=[r.type for r in op.results] if op.name == "call" else None)
        b.append(new)
        env.update(zip(op.results, new.results, strict=True))
    return [env[v] for v in g.outputs]


def _fit(b: Builder, g: Value, x: Value, key: str, name: str) -> Value:
    """Make a rule's result match its argument's type (broadcast, sum back, convert)."""
    from yota.ir.ops.shape import broadcastable

    if g.shape != x.shape:
        if broadcastable(g.shape, x.shape):
            g = b.broadcast_to(g, x.shape)
        elif broadcastable(x.shape, g.shape):
            g = b.sum_to_shape(g, x.shape)
        else:
            raise YotaError(f"the diffrule of {key} for {name!r} returned shape "
                            f"{list(g.shape)}, but {name} has shape {list(x.shape)}")
    return b.convert_to(g, x.dtype)


def check_rule(fn: Callable[..., Any], *args: Any, eps: float = 1e-6, rtol: float = 1e-5,
               atol: float = 1e-7, seed: int = 0) -> dict[int, float]:
    """Check ``yota.grad`` of ``fn`` against central finite differences at ``args``.

    Each argument is an array, a float, or a shape tuple (a random float64 array of that
    shape is drawn). The output is weighted by a random array and summed, and each
    argument's gradient is compared, in a random direction, with finite differences.
    Returns the relative error per argument; raises ``YotaError`` when one is too large.

    >>> import numpy as np, yota
    >>> errs = yota.check_rule(np.tanh, (3, 2))
    >>> errs[0] < 1e-6
    True
    """
    from . import gradcheck
    from .grad import grad

    rng = np.random.default_rng(seed)
    vals = [rng.standard_normal(a) if isinstance(a, tuple) else a for a in args]
    out = np.asarray(fn(*vals))
    w = rng.standard_normal(out.shape)

    def loss(*xs: Any) -> Any:
        return np.sum(fn(*xs) * w)

    _, g = grad(loss, *vals)
    leaves = [lf for lf in gradcheck.float_leaves(vals) if lf.path == ()]
    errors: dict[int, float] = {}
    for c in gradcheck.directional(loss, vals, g, rng, eps=eps, leaves=leaves):
        i, ad, fd = leaves[c.index].argnum, c.analytic, c.numeric
        errors[i] = abs(ad - fd) / max(abs(fd), atol / rtol)
        if abs(ad - fd) > atol + rtol * abs(fd):
            raise YotaError(f"check_rule({getattr(fn, '__name__', fn)}): gradient of argument "
                            f"{i} is {ad:.8g} along a random direction, finite differences "
                            f"give {fd:.8g}")
    return errors
