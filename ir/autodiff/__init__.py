"""Reverse-mode autodiff of ``ir.Function`` by rule rewrites.

``vjp(fn)`` returns a function computing ``fn``'s value and gradients. Each op's
derivative is one small rule in a table beside its family (``rules_*.py``), merged here
into ``RULES``; ops without gradient are listed once in ``NONDIFF``; user primitives
(``call`` ops) get rules through ``register_call_rule`` and ``register_nodiff``.
"""

from __future__ import annotations

from .registry import (
    CALL_RULES,
    NODIFF_ARGS,
    NONDIFF,
    AutodiffError,
    CallRule,
    Rule,
    register_call_rule,
    register_nodiff,
)
from .rules_elementwise import RULES_ELEMENTWISE
from .rules_index import RULES_INDEX
from .rules_linalg import RULES_LINALG
from .rules_misc import RULES_MISC
from .rules_reduce import RULES_REDUCE
from .rules_shape import RULES_SHAPE

RULES: dict[str, Rule] = {
    **RULES_ELEMENTWISE, **RULES_REDUCE, **RULES_SHAPE, **RULES_INDEX, **RULES_LINALG,
    **RULES_MISC,
}

from .sweep import vjp  # noqa: E402

__all__ = [
    "vjp", "RULES", "NONDIFF", "CALL_RULES", "NODIFF_ARGS", "AutodiffError", "CallRule",
    "Rule", "register_call_rule", "register_nodiff",
]
