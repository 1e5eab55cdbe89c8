"""The one finite-difference checker of gradients.

Everything that compares a gradient with central differences goes through the functions
here: ``check_grads`` (IR functions, run on the reference interpreter), and, on the
front-end side, ``yota.check_rule``, ``yota-ir check`` and the tests (through
``yota.gradcheck``, which walks argument structures and calls these functions).

A checked function is seen as ``value_at(i, x)``: its scalar value with input ``i``
replaced by ``x``. Two kinds of check:

- ``directional``: for each input, a random direction ``u``; the gradient's projection
  ``<g, u>`` against the central difference along ``u`` (cheap, sees every element);
- ``elementwise``: central differences on (a sample of) single elements, each with a
  step scaled by ``max(1, |x_k|)``, against the gradient's elements.

>>> from yota.ir import Builder, TensorType
>>> b = Builder("f")
>>> x = b.input(TensorType("f64", (3,)), "x")
>>> f = b.build([weighted_sum(b, b.sin(x))])
>>> g = check_grads(f, [np.array([0.1, 0.2, 0.3])], order=2)
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core import Builder, Function, Value
from ..interpreter import run
from .helpers import add
from .sweep import vjp

ValueAt = Callable[[int, Any], float]  # the scalar value with input i replaced by x


@dataclass(frozen=True)
class Comparison:
    """One input's check: the analytic and the numeric derivative (a projection on a
    random direction, or the elements checked) and how many elements that covered."""

    index: int
    analytic: Any
    numeric: Any
    checked: int

    def relative_error(self) -> float:
        """``max|analytic - numeric| / max(max|numeric|, max|analytic|)``."""
        return relative_error(np.asarray(self.analytic, dtype=np.float64),
                              np.asarray(self.numeric, dtype=np.float64))

    def close(self, rtol: float, atol: float, scale: float = 1.0) -> bool:
        """``|analytic - numeric| <= atol + scale * rtol * max(|numeric|, |analytic|)``."""
        a, n = float(self.analytic), float(self.numeric)
        return abs(a - n) <= atol + scale * rtol * max(abs(n), abs(a))


def central_difference(f: Callable[[Any], float], x: Any, u: Any, eps: float) -> float:
    """``(f(x + eps u) - f(x - eps u)) / 2 eps``: the derivative of ``f`` along ``u``."""
    return (float(f(x + eps * u)) - float(f(x - eps * u))) / (2 * eps)


def directional(value_at: ValueAt, inputs: Sequence[Any], grads: Sequence[Any],
                rng: np.random.Generator, eps: float = 1e-6) -> list[Comparison]:
    """For each input in order (one random direction drawn from ``rng`` each): ``<grad,
    u>`` against the central difference along ``u``; a gradient of None counts as zero."""
    out = []
    for i, (x, g) in enumerate(zip(inputs, grads, strict=True)):
        u = rng.standard_normal(np.shape(x))
        fd = central_difference(functools.partial(value_at, i), x, u, eps)
        ad = 0.0 if g is None else float(np.sum(np.asarray(g) * u))
        out.append(Comparison(i, ad, fd, int(np.size(x))))
    return out


def sample(size: int, max_elements: int, rng: np.random.Generator) -> np.ndarray:
    """Flat indices of the elements to check: all, or a sorted random sample."""
    if size <= max_elements:
        return np.arange(size)
    return np.sort(rng.choice(size, max_elements, replace=False))


def _perturbed(x: Any, k: int, delta: float) -> Any:
    if type(x) is float:
        return x + delta
    a = np.array(x, copy=True)
    flat = a.reshape(-1)
    flat[k] = flat[k] + delta
    return a if isinstance(x, np.ndarray) else a[()]


def elementwise(value_at: ValueAt, i: int, x: Any, grad: Any, picks: np.ndarray,
                eps: float) -> Comparison:
    """Central differences of input ``i`` on the elements ``picks`` (flat indices), each
    with the step ``eps * max(1, |x_k|)``, against those elements of ``grad`` (None:
    zero)."""
    arr = np.asarray(x)
    g = np.zeros(arr.shape) if grad is None else np.asarray(grad, dtype=np.float64)
    ad = g.reshape(arr.shape).reshape(-1)[picks]
    fd = np.empty(len(picks))
    flat = arr.reshape(-1)
    for j, k in enumerate(picks):
        h = eps * max(1.0, abs(float(flat[k])))
        plus = value_at(i, _perturbed(x, int(k), h))
        minus = value_at(i, _perturbed(x, int(k), -h))
        fd[j] = (plus - minus) / (2 * h)
    return Comparison(i, ad, fd, len(picks))


def relative_error(ad: np.ndarray, fd: np.ndarray) -> float:
    """``max|ad - fd| / max(max|fd|, max|ad|)`` (0 for none, inf if not finite)."""
    if ad.size == 0:
        return 0.0
    if not (np.all(np.isfinite(ad)) and np.all(np.isfinite(fd))):
        return math.inf
    scale = max(float(np.max(np.abs(fd))), float(np.max(np.abs(ad))))
    return 0.0 if scale == 0 else float(np.max(np.abs(ad - fd))) / scale


# -- IR functions -----------------------------------------------------------------------------
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


def ir_value_at(fn: Function, args: Sequence[np.ndarray]) -> ValueAt:
    """``value_at`` of an IR function at ``args`` (run on the reference interpreter)."""
    def value_at(i: int, x: Any) -> float:
        return _value(fn, [*args[:i], x, *args[i + 1:]])

    return value_at


def directional_fd(fn: Function, args: Sequence[np.ndarray], i: int, u: np.ndarray,
                   eps: float = 1e-6) -> float:
    """Central difference of ``fn`` at ``args`` along direction ``u`` of input ``i``."""
    value_at = ir_value_at(fn, args)
    return central_difference(lambda x: value_at(i, x), args[i], u, eps)


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
    value_at = ir_value_at(fn, args)
    wrt_of = list(g.attrs["grads"])
    found = directional(lambda k, x: value_at(wrt_of[k], x), [args[i] for i in wrt_of],
                        grads, rng, eps)
    for c in found:
        if not c.close(rtol, atol):
            raise AssertionError(f"@{fn.name}: gradient of input {wrt_of[c.index]} along a "
                                 f"random direction is {c.analytic!r}, finite differences "
                                 f"give {c.numeric!r}")
    if order > 1:
        vs = [rng.standard_normal(gi.shape) for gi in grads]
        check_grads(grad_dot(fn, wrt), [*args, *vs], order=order - 1, seed=seed + 1,
                    eps=eps, rtol=rtol, atol=atol)
    return g
