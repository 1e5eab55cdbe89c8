"""Dtypes and tensor types: every IR value has a dtype and a static shape."""

from __future__ import annotations

from dataclasses import dataclass

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


def as_dtype(dt: object) -> np.dtype:
    """Normalize a dtype-like (numpy dtype, type, or short name) to a supported numpy dtype."""
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
        object.__setattr__(self, "dtype", as_dtype(self.dtype))
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        if any(s < 0 for s in self.shape):
            raise IRTypeError(f"negative dimension in shape {self.shape}")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def with_shape(self, shape: tuple[int, ...]) -> TensorType:
        return TensorType(self.dtype, tuple(shape))

    def with_dtype(self, dtype: object) -> TensorType:
        return TensorType(as_dtype(dtype), self.shape)

    def __str__(self) -> str:
        return f"{dtype_name(self.dtype)}[{','.join(str(s) for s in self.shape)}]"

    __repr__ = __str__


def type_of(x: object) -> TensorType:
    """The TensorType of a NumPy array or scalar."""
    a = np.asarray(x)
    return TensorType(as_dtype(a.dtype), a.shape)
