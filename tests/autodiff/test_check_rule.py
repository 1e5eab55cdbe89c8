"""yota.check_rule on the built-in rules, end to end through the tracer (float64).

Each case is a NumPy function with the shapes of its arguments; check_rule draws random
inputs, weights the output randomly and compares yota.grad with central differences.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest

import yota

pos = lambda x: x * x + 0.5  # noqa: E731  (keeps log/sqrt/pow in their domains)

CASES: list[tuple[str, Any, list[tuple[int, ...]]]] = [
    ("neg", np.negative, [(3, 2)]),
    ("abs", lambda x: np.abs(x + 0.05), [(4,)]),
    ("exp", np.exp, [(2, 3)]),
    ("expm1", np.expm1, [(3,)]),
    ("log", lambda x: np.log(pos(x)), [(3, 2)]),
    ("log1p", lambda x: np.log1p(pos(x)), [(3,)]),
    ("log2", lambda x: np.log2(pos(x)), [(3,)]),
    ("log10", lambda x: np.log10(pos(x)), [(3,)]),
    ("sqrt", lambda x: np.sqrt(pos(x)), [(2, 2)]),
    ("square", np.square, [(3,)]),
    ("reciprocal", lambda x: np.reciprocal(pos(x)), [(3,)]),
    ("sin", np.sin, [(3,)]), ("cos", np.cos, [(3,)]), ("tan", lambda x: np.tan(0.3 * x), [(3,)]),
    ("tanh", np.tanh, [(2, 3)]), ("sinh", np.sinh, [(3,)]), ("cosh", np.cosh, [(3,)]),
    ("arctan", np.arctan, [(3,)]),
    ("arcsin", lambda x: np.arcsin(0.3 * np.tanh(x)), [(3,)]),
    ("arccos", lambda x: np.arccos(0.3 * np.tanh(x)), [(3,)]),
    ("arctan2", np.arctan2, [(3,), (3,)]),
    ("add broadcast", np.add, [(3, 1), (1, 4)]),
    ("sub broadcast", np.subtract, [(2, 3), (3,)]),
    ("mul 0-d", np.multiply, [(), (2, 3)]),
    ("div", lambda a, b: a / pos(b), [(2, 3), (2, 1)]),
    ("pow", lambda a, b: pos(a) ** b, [(3,), (3,)]),
    ("x**2", lambda a: a ** 2, [(3,)]),
    ("2**x", lambda a: 2.0 ** a, [(3,)]),
    ("maximum", np.maximum, [(4,), (4,)]),
    ("minimum", np.minimum, [(2, 2), (2, 1)]),
    ("where", lambda a, b: np.where(a > 0, a, b), [(5,), (5,)]),
    ("clip", lambda a: np.clip(a, -0.5, 0.5), [(6,)]),
    ("matmul 2-d", np.matmul, [(2, 3), (3, 4)]),
    ("matmul 1-d", np.matmul, [(3,), (3, 2)]),
    ("matmul batched", np.matmul, [(2, 1, 2, 3), (3, 3, 2)]),
    ("dot", np.dot, [(3,), (3,)]),
    ("outer", np.outer, [(3,), (2,)]),
    ("inner", np.inner, [(2, 3), (4, 3)]),
    ("sum axis", lambda a: np.sum(a, axis=1), [(2, 3, 2)]),
    ("sum keepdims", lambda a: np.sum(a, axis=(0, 2), keepdims=True), [(2, 3, 2)]),
    ("mean", lambda a: np.mean(a, axis=0), [(4, 3)]),
    ("prod", lambda a: np.prod(a, axis=1), [(3, 4)]),
    ("max", lambda a: np.max(a, axis=1), [(3, 4)]),
    ("min", lambda a: np.min(a), [(3, 4)]),
    ("var", lambda a: np.var(a, axis=1), [(3, 4)]),
    ("std", lambda a: np.std(a, axis=0, ddof=1), [(3, 4)]),
    ("reshape", lambda a: a.reshape(-1, 2) * np.arange(6.0).reshape(3, 2), [(2, 3)]),
    ("transpose", lambda a: np.transpose(a, (2, 0, 1)), [(2, 3, 4)]),
    ("T", lambda a: a.T, [(2, 3)]),
    ("swapaxes", lambda a: np.swapaxes(a, 0, 2), [(2, 3, 1)]),
    ("moveaxis", lambda a: np.moveaxis(a, 0, -1), [(2, 3, 4)]),
    ("expand_dims", lambda a: np.expand_dims(a, 1), [(3,)]),
    ("squeeze", np.squeeze, [(3, 1)]),
    ("broadcast_to", lambda a: np.broadcast_to(a, (4, 3)), [(3,)]),
    ("ravel", np.ravel, [(2, 3)]),
    ("concatenate", lambda a, b: np.concatenate([a, b], axis=1), [(2, 3), (2, 1)]),
    ("stack", lambda a, b: np.stack([a, b], axis=-1), [(2, 3), (2, 3)]),
    ("split", lambda a: np.split(a, [1, 3], axis=1)[1] * 2.0, [(2, 4)]),
    ("getitem slices", lambda a: a[1:, ::-2], [(3, 5)]),
    ("getitem int", lambda a: a[-1, 2], [(3, 4)]),
    ("getitem None/...", lambda a: a[None, ..., 0], [(2, 3)]),
    ("gather", lambda a: a[np.arange(3), np.array([0, 2, 0])], [(3, 4)]),
    ("gather repeated", lambda a: a[np.array([1, 1, 0])], [(2, 3)]),
    ("gather non-adjacent", lambda a: a[np.array([0, 1]), :, np.array([1, 0])], [(2, 3, 2)]),
    ("astype", lambda a: a.astype(np.float32).astype(np.float64) * 0 + a, [(3,)]),
    ("full_like", lambda a: a * np.full_like(a, 3.0), [(3,)]),
    ("logsumexp", lambda a: np.log(np.sum(np.exp(a - np.max(a)))) + np.max(a), [(5,)]),
]


@pytest.mark.parametrize("name,fn,shapes", CASES, ids=[c[0] for c in CASES])
def test_builtin_rule(name: str, fn: Any, shapes: list[tuple[int, ...]]) -> None:
    errors = yota.check_rule(fn, *shapes, seed=zlib.crc32(name.encode()) % 1000)
    assert errors, "no argument was checked"
    assert all(e < 1e-5 for e in errors.values()), errors


def test_check_rule_reports_a_wrong_rule() -> None:
    @yota.primitive
    def cube(x: Any) -> Any:
        return x * x * x

    @yota.diffrule(cube, "x")
    def _(x: Any, *, y: Any, dy: Any) -> Any:
        return 2 * x * x * dy  # wrong on purpose: should be 3 x^2

    with pytest.raises(yota.YotaError, match="finite differences"):
        yota.check_rule(cube, (4,))


def test_one_checker_and_its_docstrings() -> None:
    import doctest

    from yota.ir.autodiff import check

    from yota import gradcheck, pipeline

    for mod in (gradcheck, check, pipeline):
        assert doctest.testmod(mod).failed == 0, mod.__name__
    x = np.array([0.5, -1.0, 2.0])
    f = lambda x: np.sum(np.sin(x) * x)  # noqa: E731
    _, g = yota.grad(f, x)
    rng = np.random.default_rng(0)
    (c,) = gradcheck.elementwise(f, [x], g, ["x"], eps=None, max_elements=2, rng=rng)
    assert (c.leaf, c.type, c.checked, c.size) == ("x", "f64[3]", 2, 3) and c.error < 1e-8
    (d,) = gradcheck.directional(f, [x], g, rng)
    assert d.close(1e-8, 1e-10) and d.relative_error() < 1e-8
