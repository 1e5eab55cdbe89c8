"""MLIR text pieces: element and tensor types, literals, affine maps, locations, and
``Lines``, the sink an emitter writes SSA lines into (with fresh value names)."""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence

import numpy as np
from yota.ir.types import TensorType

ELEMENT = {"b": "i1", "i4": "i32", "i8": "i64", "f4": "f32", "f8": "f64"}


def elem(dt: np.dtype) -> str:
    """The MLIR element type of a Yota dtype: ``i1``, ``i32``, ``i64``, ``f32``, ``f64``."""
    return ELEMENT[_key(np.dtype(dt))]


def _key(dt: np.dtype) -> str:
    return "b" if dt.kind == "b" else f"{'f' if dt.kind == 'f' else 'i'}{dt.itemsize}"


def tensor(t: TensorType) -> str:
    """``tensor<3x4xf32>`` (``tensor<f32>`` for 0-d)."""
    return f"tensor<{''.join(f'{d}x' for d in t.shape)}{elem(t.dtype)}>"


def memref(t: TensorType) -> str:
    return f"memref<{''.join(f'{d}x' for d in t.shape)}{elem(t.dtype)}>"


def scalar(value: object, dt: np.dtype) -> str:
    """A scalar literal of element type ``dt``: floats as their exact bit pattern."""
    dt = np.dtype(dt)
    if dt.kind == "b":
        return "true" if bool(value) else "false"
    if dt.kind == "f":
        v = np.asarray(value, dtype=dt)
        if dt.itemsize == 8:
            bits = struct.unpack("<Q", v.tobytes())[0]
            return f"0x{bits:016X}"
        bits = struct.unpack("<I", v.tobytes())[0]
        return f"0x{bits:08X}"
    return str(int(value))  # type: ignore[call-overload]


def dense(arr: np.ndarray) -> str:
    """``dense<...>`` of a constant: a splat as one literal, else nested lists."""
    arr = np.asarray(arr)
    flat = arr.reshape(-1)
    if flat.size and (flat.size == 1 or not any(arr.strides) or _all_same(flat)):
        return f"dense<{scalar(flat[0], arr.dtype)}>"
    if arr.ndim == 0:
        return f"dense<{scalar(arr[()], arr.dtype)}>"
    return f"dense<{_nested(arr)}>"


def _all_same(flat: np.ndarray) -> bool:
    raw = np.ascontiguousarray(flat).view(np.uint8).reshape(flat.size, -1)
    return bool((raw == raw[0]).all())


def _nested(arr: np.ndarray) -> str:
    if arr.ndim == 1:
        return "[" + ", ".join(scalar(x, arr.dtype) for x in arr) + "]"
    return "[" + ", ".join(_nested(a) for a in arr) + "]"


def affine_map(ndim: int, results: Sequence[str]) -> str:
    dims = ", ".join(f"d{i}" for i in range(ndim))
    return f"affine_map<({dims}) -> ({', '.join(results)})>"


def identity_map(ndim: int) -> str:
    return affine_map(ndim, [f"d{i}" for i in range(ndim)])


_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_$.]*$")


def symbol(name: str) -> str:
    """``@name``, quoted where the name is not a bare identifier."""
    return f"@{name}" if _PLAIN.match(name) else "@" + _quote(name)


_FILE_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+)(?::(?P<col>\d+))?$")


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _one_loc(part: str) -> str:
    m = _FILE_LINE.match(part.strip())
    if m:
        return f"{_quote(m['file'])}:{m['line']}:{m['col'] or 0}"
    return _quote(part.strip())


def location(loc: str | None) -> str:
    """Yota's provenance as an MLIR location: ``"file.py":3:0`` for a source line, a name
    location for ``adjoint of %5 via rule mul``, ``fused[...]`` for several."""
    if not loc:
        return "loc(unknown)"
    parts = [p for p in loc.split("; ") if p.strip() and p.strip() != "..."]
    if len(parts) == 1:
        return f"loc({_one_loc(parts[0])})"
    if not parts:
        return "loc(unknown)"
    return "loc(fused[" + ", ".join(_one_loc(p) for p in parts) + "])"


class Lines:
    """SSA lines under construction, with fresh names (``%v12``) and an indent."""

    def __init__(self, counter: list[int] | None = None, indent: str = "    ") -> None:
        self.out: list[str] = []
        self.counter = counter if counter is not None else [0]
        self.indent = indent
        self.loc: str | None = None  # appended to every op line while set

    def fresh(self, base: str = "v") -> str:
        self.counter[0] += 1
        return f"%{base}{self.counter[0]}"

    def line(self, text: str) -> None:
        """One line; an op's line (not a block label, not a line opening a region) ends
        with the current location."""
        if self.loc and not text.endswith("{") and not text.startswith("^"):
            text = f"{text} {self.loc}"
        self.out.append(self.indent + text)

    def op(self, rhs: str, base: str = "v") -> str:
        """Emit ``%new = rhs``; returns ``%new``."""
        name = self.fresh(base)
        self.line(f"{name} = {rhs}")
        return name

    def const(self, value: object, dt: np.dtype) -> str:
        if np.dtype(dt).kind == "b":  # a bool literal carries its type (i1)
            return self.op(f"arith.constant {scalar(value, dt)}", "c")
        return self.op(f"arith.constant {scalar(value, dt)} : {elem(dt)}", "c")

    def index(self, value: int) -> str:
        return self.op(f"arith.constant {int(value)} : index", "c")
