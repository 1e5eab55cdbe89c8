"""Boolean masks read only to decide something in Python are guards (issue: masks as
guards); a mask-selected array used in the computation is a clear error; ``np.any``,
``np.all`` and ``np.count_nonzero`` are traced reductions."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import yota

BACKENDS = ["interp", "llvm"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_checks_on_masks_are_guards(backend: str) -> None:
    def f(x: np.ndarray) -> Any:
        assert np.all(np.isfinite(x)), "bad input"
        if np.any(x < 0):
            return np.sum(-x)
        return np.sum(x * x) * x[x > 1].size

    for x in (np.array([1.0, 2.0, 3.0]), np.array([-1.0, 2.0, 3.0]), np.array([0.5, 0.2, 3.0]),
              np.array([1.0, 2.0, 3.0])):
        v, g = yota.grad(f, x, backend=backend)
        assert float(v) == pytest.approx(float(f(x)))
        n = (x > 1).sum()
        want = -np.ones(3) if (x < 0).any() else 2 * x * n
        np.testing.assert_allclose(g[0], want)
    with pytest.raises(AssertionError, match="bad input"):  # the user's own assert
        yota.grad(f, np.array([np.nan, 1.0, 2.0]), backend=backend)


def test_a_masked_selection_used_in_the_loss_names_the_line() -> None:
    def f(x: np.ndarray) -> Any:
        kept = x[x > 0]
        return np.sum(kept * 2.0)

    with pytest.raises(yota.UnsupportedError, match=r"test_masks.py:\d+ in f.*np.where"):
        yota.grad(f, np.array([1.0, -2.0]))


def test_a_constant_mask_selects_like_numpy() -> None:
    mask = np.array([[True, False, True], [False, False, True]])
    x = np.arange(6.0).reshape(2, 3)
    v, g = yota.grad(lambda x: np.sum(x[mask] ** 2), x)
    assert float(v) == float(np.sum(x[mask] ** 2))
    assert g[0].tolist() == np.where(mask, 2 * x, 0.0).tolist()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn", [np.any, np.all, np.count_nonzero])
def test_any_all_count_nonzero_match_numpy(fn: Any, backend: str) -> None:
    rng = np.random.default_rng(0)
    for shape, axes in (((), [None]), ((0,), [None, 0]), ((5,), [None, 0, -1]),
                        ((3, 4), [None, 0, 1, (0, 1), -1]), ((2, 0, 3), [None, 1, 2])):
        x = rng.standard_normal(shape)
        x[x > 0.5] = 0.0  # zeros count as False
        for axis in axes:
            kws: list[dict[str, Any]] = [{"axis": axis}, {"axis": axis, "keepdims": True}]
            for kw in kws:
                want = fn(x, **kw)
                got = yota.compile(lambda x, kw=kw: fn(x, **kw), x, backend=backend)(x)
                assert np.asarray(got).dtype == np.asarray(want).dtype
                assert np.array_equal(got, want), (shape, kw)
    x = np.array([[0.0, np.nan], [1.0, 0.0]])  # NaN is nonzero, as in NumPy
    assert np.array_equal(yota.compile(lambda x: fn(x, axis=1), x, backend=backend)(x),
                          fn(x, axis=1))
