"""Finite-difference checks of yota.grad over argument structures (float64)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from yota import structs


def _with_leaf(args: list[Any], argnum: int, path: tuple[Any, ...], value: Any) -> list[Any]:
    def swap(p: tuple[Any, ...], leaf: Any) -> Any:
        return value if p == path else leaf

    new = list(args)
    new[argnum] = structs.rebuild(args[argnum], swap)
    return new


def check_grad(f: Callable[..., Any], args: list[Any], g: Any, *, eps: float = 1e-6,
               rtol: float = 1e-6, atol: float = 1e-9, seed: int = 0) -> int:
    """Compare each float leaf's gradient in ``g`` with central differences along a random
    direction; returns how many leaves were checked."""
    rng = np.random.default_rng(seed)
    checked = 0
    for argnum, arg in enumerate(args):
        leaves, _ = structs.flatten(arg)
        for path, leaf in leaves:
            if np.asarray(leaf).dtype.kind != "f":
                continue
            u = rng.standard_normal(np.shape(leaf))
            plus = _with_leaf(args, argnum, path, leaf + eps * u)
            minus = _with_leaf(args, argnum, path, leaf - eps * u)
            fd = (float(f(*plus)) - float(f(*minus))) / (2 * eps)
            gi = g[argnum] if path == () else (g[argnum] or {}).get(path)
            ad = 0.0 if gi is None else float(np.sum(np.asarray(gi) * u))
            assert abs(ad - fd) <= atol + rtol * max(abs(fd), abs(ad)) * 10, (
                f"argument {argnum} path {path}: yota {ad!r} vs finite differences {fd!r}")
            checked += 1
    return checked
