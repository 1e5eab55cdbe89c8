"""Dtypes and tensor types: every IR value has a dtype and a static shape."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import IRTypeError

# Short names used by the printer, in promotion order within each kind.
DTYPE_NAMES: dict[np.dtype, str] = {
    np.dtype(np.bool_): "bool",
    np.dtype(np.int32): "i32",
    np.dtype(np.int64): "i64",
    np.dtype(np.float32): "f32",
    np.dtype(np.float64): "f64",
}
NAME_TO_DTYPE: dict[str, np.dtype] = {v: k for k, v in DTYPE_NAMES.items()}

BOOL = np.dtype(np.bool_)
I32 = np.dtype(np.int32)
I64 = np.dtype(np.int64)
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)


_AS_DTYPE: dict[object, np.dtype] = {}  # dtype-likes met before -> their supported dtype


def as_dtype(dt: object) -> np.dtype:
    """Normalize a dtype-like (numpy dtype, type, or short name) to a supported numpy dtype."""
    try:
        return _AS_DTYPE[dt]
    except (KeyError, TypeError):  # new, or not hashable
        d = _as_dtype(dt)
    if len(_AS_DTYPE) < 1024:
        try:
            _AS_DTYPE[dt] = d
        except TypeError:
            pass
    return d


def _as_dtype(dt: object) -> np.dtype:
    if isinstance(dt, str) and dt in NAME_TO_DTYPE:
        return NAME_TO_DTYPE[dt]
    try:
        d = np.dtype(dt)  # type: ignore[call-overload]
    except TypeError as e:
        raise IRTypeError(f"not a dtype: {dt!r}") from e
    if d not in DTYPE_NAMES:
        supported = ", ".join(str(k) for k in DTYPE_NAMES)
        raise IRTypeError(f"dtype {d} is not supported by Yota (supported: {supported})")
    return d


def dtype_name(dt: np.dtype) -> str:
    return DTYPE_NAMES[np.dtype(dt)]


def is_float(dt: np.dtype) -> bool:
    return np.dtype(dt).kind == "f"


def is_int(dt: np.dtype) -> bool:
    return np.dtype(dt).kind in "iu"


def is_bool(dt: np.dtype) -> bool:
    return np.dtype(dt).kind == "b"


@dataclass(frozen=True, slots=True)
class TensorType:
    """A dtype and a static shape, printed as ``f32[128,10]`` (``f64[]`` for 0-d)."""

    dtype: np.dtype
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        key = (self.dtype, self.shape)
        try:  # a (dtype, shape) pair met before: its normal form (a tuple of ints)
            dtype, shape = _NORMAL[key]
        except (KeyError, TypeError):  # new, or not hashable (a list of dimensions)
            dtype, shape = _normalize(*key)
            _remember(_NORMAL, key, (dtype, shape))
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "shape", shape)

    def __eq__(self, other: object) -> bool:
        if self is other:  # types are mostly shared objects (``tensor_type``)
            return True
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self.dtype == other.dtype and self.shape == other.shape

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def with_shape(self, shape: tuple[int, ...]) -> TensorType:
        return tensor_type(self.dtype, tuple(shape))

    def with_dtype(self, dtype: object) -> TensorType:
        return tensor_type(as_dtype(dtype), self.shape)

    def __str__(self) -> str:
        return f"{dtype_name(self.dtype)}[{','.join(str(s) for s in self.shape)}]"

    __repr__ = __str__


# Types are made per op while tracing and lowering (100k ops for a long unrolled loop), from
# few distinct (dtype, shape) pairs: each pair is normalized once, and ``tensor_type`` hands
# out one shared object per pair (a TensorType is immutable). Both tables are bounded.
_CACHE_LIMIT = 1 << 16
_NORMAL: dict[tuple[Any, Any], tuple[np.dtype, tuple[int, ...]]] = {}
_TYPES: dict[tuple[Any, Any], TensorType] = {}


def _normalize(dtype: object, shape: Any) -> tuple[np.dtype, tuple[int, ...]]:
    dt = as_dtype(dtype)
    dims = tuple(int(s) for s in shape)
    if any(s < 0 for s in dims):
        raise IRTypeError(f"negative dimension in shape {dims}")
    return dt, dims


def _remember(table: dict[Any, Any], key: tuple[Any, Any], value: Any) -> None:
    """Keep ``value`` for a (dtype, shape) key whose shape is a tuple of hashable items."""
    if type(key[1]) is not tuple:
        return
    if len(table) >= _CACHE_LIMIT:
        table.clear()
    try:
        table[key] = value
    except TypeError:  # an unhashable dimension (a 0-d array)
        pass


def tensor_type(dtype: Any, shape: Any) -> TensorType:
    """``TensorType(dtype, shape)``, equal to a new one but shared: one object per pair.

    >>> t = tensor_type(np.float64, (2, 3))
    >>> t == TensorType(np.float64, (2, 3)) and t is tensor_type(np.float64, (2, 3))
    True
    """
    key = (dtype, shape)
    try:
        return _TYPES[key]
    except (KeyError, TypeError):  # new, or not hashable (a list of dimensions)
        t = TensorType(dtype, shape)
        _remember(_TYPES, key, t)
        return t


def type_of(x: object) -> TensorType:
    """The TensorType of a NumPy array or scalar."""
    a = np.asarray(x)
    return TensorType(as_dtype(a.dtype), a.shape)
