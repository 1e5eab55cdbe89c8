"""Calls of user primitives, and the messages for ops and primitives that lack a rule.

``const`` and ``guard`` carry no gradient (see ``NONDIFF``); a ``call`` is differentiated
by the rule registered for its callee's primitive key with ``register_call_rule``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core import Builder, Function, Op, Value
from ..errors import MissingRuleError
from ..ops import types_str
from .registry import CALL_RULES, Grads, Rule, primitive_key


def _callback(b: Builder, op: Op, dy: Any) -> Grads:
    """An opaque primitive's body is differentiated by its primitive's ``diffrule``,
    through the ``call`` that holds it; met on its own, it has no derivative."""
    name = str(op.attrs["fn"]).split("#")[0]
    raise MissingRuleError(f"the opaque primitive {name} {_where(op)} is differentiated by "
                           f"its @yota.diffrule through the call that holds it; this callback "
                           "is not inside such a call (differentiate the program before "
                           "inlining its calls)")


RULES_MISC: dict[str, Rule] = {"callback": _callback}


def call_vjp(b: Builder, op: Op, callee: Function, dys: Sequence[Value],
             needed: Sequence[int]) -> Grads:
    """Cotangents of a call's operands by its primitive's registered rule."""
    rule = CALL_RULES.get(primitive_key(callee))
    if rule is None:
        raise MissingRuleError(missing_call_message(op, callee, needed))
    grads = rule(b, op, callee, dys)
    missing = [i for i in needed if i < len(grads) and grads[i] is None]
    if missing:
        raise MissingRuleError(missing_call_message(op, callee, missing))
    return grads


def _where(op: Op) -> str:
    types = types_str([v.type for v in op.operands])
    return f"(operands: {types})" + (f" at {op.loc}" if op.loc else "")


def missing_op_message(op: Op) -> str:
    return (f"no derivative rule for op '{op.name}' {_where(op)}; add one to RULES in "
            f"yota.ir.autodiff (rules_<family>.py), or list the op in NONDIFF")


def _kwarg_names(kwargs: Any) -> list[str]:
    if isinstance(kwargs, dict):
        return [str(k) for k in kwargs]
    names = [k[0] if isinstance(k, (tuple, list)) else k for k in kwargs or ()]
    return [str(n) for n in names]


def _stub(callee: Function, argnames: Sequence[str], arg: str) -> str:
    short = primitive_key(callee).rsplit(".", 1)[-1]
    params = ", ".join([*argnames, "*", *_kwarg_names(callee.attrs.get("kwargs")), "y", "dy"])
    return (f'    @yota.diffrule({short}, "{arg}")\n'
            f"    def _({params}):\n"
            f"        return ...  # the cotangent of {arg}, given output y and its "
            f"cotangent dy")


def missing_call_message(op: Op, callee: Function, needed: Sequence[int]) -> str:
    argnames = [str(a) for a in callee.attrs.get("argnames", ())]
    argnames += [f"arg{i}" for i in range(len(argnames), len(op.operands))]
    stubs = "\n\n".join(_stub(callee, argnames, argnames[i]) for i in needed)
    return (f"no derivative rule for primitive '{primitive_key(callee)}' {_where(op)}\n"
            f"write one{' per argument' if len(needed) > 1 else ''}:\n\n{stubs}")
