"""The canonical text form of the IR (MLIR-like; ``parse(print(f))`` prints identically).

    func @loss(%0: f64[3,4] "m.W", %1: f64[4,5] "X") -> (f64[]) {
      %2 = matmul %0, %1 : f64[3,5]  # model.py:12
      %3 = sum %2 {axes = [0, 1]} : f64[]  # model.py:12
      return %3 "value"
    }
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from .core import Function, Op, Value
from .types import DTYPE_NAMES, TensorType


def format_scalar(x: Any) -> str:
    if isinstance(x, (bool, np.bool_)):
        return "true" if x else "false"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (float, np.floating)):
        f = float(x)
        if math.isnan(f):
            return "nan"
        if math.isinf(f):
            return "inf" if f > 0 else "-inf"
        s = str(x) if isinstance(x, np.float32) else repr(f)
        return s if any(c in s for c in ".en") else s + ".0"
    raise TypeError(f"cannot print attribute value {x!r}")


# texts of the types (by object) and of the int attributes (by value) met in programs: a
# traced loop repeats them (100k ops, a few dozen distinct types); at most _TEXTS_LIMIT
_TEXTS: dict[Any, Any] = {}
_TEXTS_LIMIT = 1 << 14


def type_text(t: TensorType) -> str:
    """``str(t)``, remembered by the type object (types are mostly shared objects:
    ``tensor_type``); the entry keeps the object alive, so its id is not reused."""
    e = _TEXTS.get(id(t))
    if e is not None and e[0] is t:
        return e[1]
    s = str(t)
    if len(_TEXTS) >= _TEXTS_LIMIT:
        _TEXTS.clear()
    _TEXTS[id(t)] = (t, s)
    return s


def _attr_text(v: Any) -> str:
    """``format_attr(v)``, remembered for an int or a tuple of ints (the key holds the
    type: ``True``, ``1`` and ``1.0`` are equal as keys but print differently)."""
    tv = type(v)
    if tv is int or tv is tuple and all(type(x) is int for x in v):
        key = (tv, v)
        s = _TEXTS.get(key)
        if s is None:
            s = format_attr(v)
            if len(_TEXTS) >= _TEXTS_LIMIT:
                _TEXTS.clear()
            _TEXTS[key] = s
        return s
    return format_attr(v)


def format_attr(v: Any) -> str:
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, np.dtype):
        return DTYPE_NAMES[v]
    if isinstance(v, np.ndarray):
        if v.ndim and v.size and not any(v.strides):  # a lazy splat: print its one value
            return format_scalar(v.flat[0])
        flat = np.ascontiguousarray(v).reshape(-1)
        raw, n = flat.tobytes(), flat.dtype.itemsize
        if flat.size and raw == raw[:n] * flat.size:
            return format_scalar(flat[0])
        return format_attr(v.tolist() if v.dtype != np.float32 else _f32_list(v))
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(format_attr(x) for x in v) + "]"
    return format_scalar(v)


def _f32_list(v: np.ndarray) -> Any:
    if v.ndim == 0:
        return v[()]
    return [_f32_list(x) for x in v]


class Namer:
    """Assigns ``%0, %1, ...`` to values in definition order."""

    def __init__(self) -> None:
        self.names: dict[Value, str] = {}

    def define(self, v: Value) -> str:
        name = f"%{len(self.names)}"
        self.names[v] = name
        return name

    def __getitem__(self, v: Value) -> str:
        try:
            return self.names[v]
        except KeyError:
            return f"%<undefined {v.type}>"


def format_op(op: Op, names: Namer) -> str:
    parts = []
    if op.results:
        parts.append(", ".join([names.define(r) for r in op.results]) + " =")
    parts.append(op.name)
    if op.operands:
        parts.append(", ".join([names[v] for v in op.operands]))
    attrs = op.attrs
    if attrs:
        parts.append("{" + ", ".join([f"{k} = {_attr_text(attrs[k])}"
                                      for k in sorted(attrs)]) + "}")
    line = " ".join(parts)
    if op.results:
        line += " : " + ", ".join([type_text(r.type) for r in op.results])
    if op.loc:
        line += f"  # {op.loc}"
    return line


def _label(label: str | None) -> str:
    return f" {json.dumps(label)}" if label is not None else ""


def print_function(fn: Function, with_callees: bool = True) -> str:
    """The text of ``fn``, preceded by its callees (each once, callees first)."""
    chunks = []
    if with_callees:
        for callee in callee_order(fn):
            chunks.append(print_function(callee, with_callees=False))
    names = Namer()
    args = ", ".join(f"{names.define(v)}: {v.type}{_label(lab)}"
                     for v, lab in zip(fn.inputs, fn.input_labels, strict=True))
    rets = ", ".join(str(v.type) for v in fn.outputs)
    head = f"func @{fn.name}({args}) -> ({rets})"
    if fn.attrs:
        head += " attributes {" + ", ".join(f"{k} = {format_attr(fn.attrs[k])}"
                                            for k in sorted(fn.attrs)) + "}"
    lines = [head + " {"]
    lines.extend("  " + format_op(op, names) for op in fn.ops)
    ret = ", ".join(names[v] + _label(lab)
                    for v, lab in zip(fn.outputs, fn.output_labels, strict=True))
    lines.append(f"  return {ret}" if ret else "  return")
    lines.append("}")
    chunks.append("\n".join(lines))
    return "\n\n".join(chunks)


def callee_order(fn: Function) -> list[Function]:
    """Callees in dependency order (a callee before any function that calls it), each
    once; ``fn`` itself is not included."""
    seen: dict[str, Function] = {}

    def visit(f: Function) -> None:
        for name, c in sorted(f.callees.items()):
            if name not in seen:
                visit(c)
                seen[name] = c

    visit(fn)
    return list(seen.values())
