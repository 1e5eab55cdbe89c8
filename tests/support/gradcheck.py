"""Finite-difference checks of yota.grad over argument structures (float64), by the one
checker (``yota.gradcheck`` over ``yota.ir.autodiff.check``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from yota import gradcheck


def check_grad(f: Callable[..., Any], args: list[Any], g: Any, *, eps: float = 1e-6,
               rtol: float = 1e-6, atol: float = 1e-9, seed: int = 0) -> int:
    """Compare each float leaf's gradient in ``g`` with central differences along a random
    direction; returns how many leaves were checked."""
    leaves = gradcheck.float_leaves(args)
    found = gradcheck.directional(f, args, g, np.random.default_rng(seed), eps=eps,
                                  leaves=leaves)
    for c in found:
        lf = leaves[c.index]
        assert c.close(rtol, atol, scale=10), (
            f"argument {lf.argnum} path {lf.path}: yota {c.analytic!r} vs finite "
            f"differences {c.numeric!r}")
    return len(found)
