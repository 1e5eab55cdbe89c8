"""Reverse-mode autodiff of ``ir.Function`` by rule rewrites.

``vjp(fn)`` returns a function computing ``fn``'s value and gradients. Each op's
derivative is one small rule in a table beside its family (``rules_*.py``), merged in
``rules.RULES``; ops without gradient are listed once in ``NONDIFF``; user primitives
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
from .rules import RULES
from .sweep import vjp

__all__ = [
    "vjp", "RULES", "NONDIFF", "CALL_RULES", "NODIFF_ARGS", "AutodiffError", "CallRule",
    "Rule", "register_call_rule", "register_nodiff",
]
