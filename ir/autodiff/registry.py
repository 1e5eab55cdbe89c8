"""The derivative-rule registries: built-in op rules, zero-gradient ops, primitive rules.

A rule is a pure function ``rule(b, op, dy) -> Sequence[Value | None]`` giving one
cotangent per operand (``None``: no gradient). It emits ordinary IR through the builder,
so the backward pass is itself differentiable. An op with several results (``lu``,
``eigh``, ``svd``, ``qr``) gets the list of their cotangents instead of ``dy``. A call rule for a user primitive has the
signature ``rule(b, op, callee, dys)``, with one cotangent per result of the call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..core import Builder, Function, Op, Value
from ..errors import YotaError

Grads = Sequence["Value | None"]
Rule = Callable[[Builder, Op, Value], Grads]
CallRule = Callable[[Builder, Op, Function, Sequence[Value]], Grads]


class AutodiffError(YotaError):
    """A function cannot be differentiated as asked (not a scalar, bad ``wrt``, bad rule)."""


# Ops whose results carry no gradient to their operands.
NONDIFF: frozenset[str] = frozenset({
    "lt", "le", "gt", "ge", "eq", "ne", "and", "or", "xor", "not",
    "isnan", "isinf", "isfinite", "floor", "ceil", "round", "sign", "floordiv",
    "argmax", "argmin", "const", "guard", "iota", "pivots",
})

CALL_RULES: dict[str, CallRule] = {}
NODIFF_ARGS: dict[str, set[int | str]] = {}


def register_call_rule(key: str, rule: CallRule) -> CallRule:
    """Register the derivative rule of the primitive ``key`` (replacing an older one).

    >>> _ = register_call_rule("demo.double", lambda b, op, callee, dys: [b.add(*dys * 2)])
    """
    CALL_RULES[key] = rule
    return rule


def register_nodiff(key: str, arg: int | str) -> None:
    """Declare that argument ``arg`` (an index, or a name from the body's ``argnames``) of
    the primitive ``key`` receives no gradient.

    >>> register_nodiff("demo.scale", 1)
    """
    NODIFF_ARGS.setdefault(key, set()).add(arg if isinstance(arg, str) else int(arg))


def primitive_key(callee: Function) -> str:
    """The registry key of a primitive's body (its qualified name), or its function name."""
    return str(callee.attrs.get("primitive", callee.name))


def nodiff_args(callee: Function) -> set[int]:
    """Indices of the arguments of ``callee``'s primitive that receive no gradient."""
    marks = NODIFF_ARGS.get(primitive_key(callee), set())
    names = [str(a) for a in callee.attrs.get("argnames", ())]
    return {m if isinstance(m, int) else names.index(m) for m in marks
            if isinstance(m, int) or m in names}
