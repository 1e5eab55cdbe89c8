"""Reductions over static axes (``keepdims`` is a reshape in the IR)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import IRTypeError
from ..types import I64, TensorType
from .table import OpDef, an_int, register, tuple_of_ints


def check_axes(name: str, t: TensorType, axes: tuple[int, ...]) -> None:
    if list(axes) != sorted(set(axes)) or any(not 0 <= a < t.ndim for a in axes):
        raise IRTypeError(
            f"'{name}' needs sorted, distinct axes in [0, {t.ndim}) for {t}; got {list(axes)}"
        )


def reduced_shape(shape: tuple[int, ...], axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(s for i, s in enumerate(shape) if i not in axes)


def _reduction(name: str, fn: Callable[..., Any], needs_nonempty: bool) -> None:
    def infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
        t = types[0]
        check_axes(name, t, attrs["axes"])
        if needs_nonempty and any(t.shape[a] == 0 for a in attrs["axes"]):
            raise IRTypeError(f"'{name}' over an empty axis of {t} has no identity")
        return t.with_shape(reduced_shape(t.shape, attrs["axes"]))

    def impl(x: np.ndarray, *, axes: tuple[int, ...]) -> np.ndarray:
        return np.asarray(fn(x, axis=axes))

    register(OpDef(name, 1, infer, impl, attrs={"axes": tuple_of_ints},
                   source=f"np.{fn.__name__}({{0}}, axis={{axes}})"))


_reduction("sum", np.sum, False)
_reduction("prod", np.prod, False)
_reduction("max", np.max, True)
_reduction("min", np.min, True)


def _arg(name: str, fn: Callable[..., Any]) -> None:
    def infer(types: list[TensorType], attrs: dict[str, Any]) -> TensorType:
        t, a = types[0], attrs["axis"]
        if not 0 <= a < t.ndim or t.shape[a] == 0:
            raise IRTypeError(f"'{name}' needs a non-empty axis in [0, {t.ndim}) of {t}; got {a}")
        return TensorType(I64, reduced_shape(t.shape, (a,)))

    def impl(x: np.ndarray, *, axis: int) -> np.ndarray:
        return np.asarray(fn(x, axis=axis)).astype(np.int64)

    register(OpDef(name, 1, infer, impl, attrs={"axis": an_int},
                   source=f"np.{fn.__name__}({{0}}, axis={{axis}})"))


_arg("argmax", np.argmax)
_arg("argmin", np.argmin)
