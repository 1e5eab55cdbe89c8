"""Checking gradients against central finite differences (for tests of rules).

>>> from yota.ir import Builder, TensorType
>>> b = Builder("f")
>>> x = b.input(TensorType("f64", (3,)), "x")
>>> f = b.build([weighted_sum(b, b.sin(x))])
>>> g = check_grads(f, [np.array([0.1, 0.2, 0.3])], order=2)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..core import Builder, Function, Value
from ..interpreter import run
from .helpers import add
from .sweep import vjp


def weighted_sum(b: Builder, y: Value, seed: int = 0) -> Value:
    """``sum(y * w)`` over all axes for fixed random weights ``w``: a scalar that sees
    every element of ``y`` with its own weight."""
    w = np.random.default_rng(seed).uniform(0.5, 1.5, y.shape).astype(y.dtype)
    return b.sum(b.mul(y, b.const(w)), axes=tuple(range(y.ndim)))


def grad_dot(fn: Function, wrt: Sequence[int] | None = None) -> Function:
    """``h(inputs, v...) = sum_k <grad_k fn(inputs), v_k>``: a scalar whose gradient is a
    Hessian-vector product (one ``v`` input per gradient of ``vjp(fn, wrt)``)."""
    g = vjp(fn, wrt)
    b = Builder(f"{fn.name}_grad_dot")
    b.inputs, b.input_labels = list(g.inputs), list(g.input_labels)
    b.ops, b.callees = list(g.ops), dict(g.callees)
    total = b.const(0.0, g.outputs[0].dtype, ())
    for gk, lab in zip(g.outputs[1:], g.output_labels[1:], strict=True):
        v = b.input(gk.type, f"v ({lab})")
        total = add(b, total, b.sum(b.mul(gk, v), axes=tuple(range(gk.ndim))))
    return b.build([total])


def _value(fn: Function, args: Sequence[np.ndarray]) -> float:
    return float(run(fn, *args)[0])


def directional_fd(fn: Function, args: Sequence[np.ndarray], i: int, u: np.ndarray,
                   eps: float = 1e-6) -> float:
    """Central difference of ``fn`` at ``args`` along direction ``u`` of input ``i``."""
    hi, lo = list(args), list(args)
    hi[i], lo[i] = args[i] + eps * u, args[i] - eps * u
    return (_value(fn, hi) - _value(fn, lo)) / (2 * eps)


def check_grads(fn: Function, args: Sequence[Any], wrt: Sequence[int] | None = None, *,
                order: int = 1, seed: int = 0, eps: float = 1e-6, rtol: float = 1e-5,
                atol: float = 1e-6) -> Function:
    """Compare ``vjp(fn, wrt)`` with central differences in a random direction per input;
    with ``order=2`` also check the gradient of ``grad_dot(fn)`` (Hessian-vector products).
    Raises ``AssertionError`` on a mismatch; returns the vjp function."""
    args = [np.asarray(a) for a in args]
    g = vjp(fn, wrt)
    value, *grads = run(g, *args)
    np.testing.assert_allclose(value, _value(fn, args), rtol=1e-12, atol=1e-12)
    rng = np.random.default_rng(seed)
    for i, gi in zip(g.attrs["grads"], grads, strict=True):
        u = rng.standard_normal(gi.shape)
        fd, an = directional_fd(fn, args, i, u, eps), float(np.sum(gi * u))
        if not abs(fd - an) <= atol + rtol * max(abs(fd), abs(an)):
            raise AssertionError(f"@{fn.name}: gradient of input {i} along a random "
                                 f"direction is {an!r}, finite differences give {fd!r}")
    if order > 1:
        vs = [rng.standard_normal(gi.shape) for gi in grads]
        check_grads(grad_dot(fn, wrt), [*args, *vs], order=order - 1, seed=seed + 1,
                    eps=eps, rtol=rtol, atol=atol)
    return g
