"""The error hierarchy. It lives in the lowest layer so every layer can raise it."""

from __future__ import annotations

from typing import Any

import numpy as np


class YotaError(Exception):
    """Base class of every error Yota raises on purpose (re-exported as ``yota.YotaError``)."""


class IRTypeError(YotaError):
    """An op was applied to operands of the wrong dtype or shape, or with bad attributes."""


class VerifyError(YotaError):
    """An ``ir.Function`` breaks an invariant (SSA order, types, attributes)."""


class ParseError(YotaError):
    """IR text could not be parsed."""


class GuardFailed(YotaError):
    """A guard recorded while tracing does not hold for the current inputs.

    ``guard_index``: the guard op's index in the function that ran (-1 for a guard
    inside a loop's body); ``value``: the guarded value the program computed (a NumPy
    scalar), None when unknown; ``steps``: for a guard inside loops, the step of each
    loop it failed in, outermost first."""

    def __init__(self, message: str, *, guard_index: int = -1, value: Any = None,
                 steps: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.guard_index = guard_index
        self.value = value
        self.steps = steps

    def in_step(self, i: int, length: int) -> GuardFailed:
        """This failure seen from the loop around it: it happened in step ``i`` of
        ``length``."""
        return GuardFailed(f"{self} (in step {i} of a loop of {length})", value=self.value,
                           steps=(i, *self.steps))


class MissingRuleError(YotaError):
    """Reverse-mode differentiation met an op or primitive that has no derivative rule."""


class UnsupportedError(YotaError):
    """User code used something Yota cannot trace (an unsupported NumPy function, mutation...)."""


class TraceError(YotaError):
    """Tracing failed for a reason rooted in the user's code or arguments."""


class SignatureError(YotaError):
    """Arguments do not match the signature a program was compiled for."""


class DistributedError(YotaError):
    """A data-parallel step (``yota.grad(..., comm=comm)``, ``yota.distributed``) failed on
    at least one rank, or the ranks' gradients do not have one structure; raised on every
    rank, before any gradient was exchanged, so no rank is left waiting."""


class LinAlgError(YotaError, np.linalg.LinAlgError):
    """A linear-algebra op met input NumPy's ``np.linalg`` rejects (a singular matrix in
    ``solve``/``inv``, one that is not positive definite in ``cholesky``, no convergence).
    It is also a ``numpy.linalg.LinAlgError``, so code that catches NumPy's error catches
    it, from the interpreter as from compiled code."""
