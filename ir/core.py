"""Values, ops, functions and the builder: the typed SSA IR.

IR nodes are small slotted objects treated as immutable: a transformation builds new
ops (``Op.replace``) instead of editing old ones. Values have no names; the printer
assigns ``%0, %1, ...`` in order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from .errors import IRTypeError
from .types import TensorType, as_dtype


class Value:
    """An SSA value: the result of one op, or a function input."""

    __slots__ = ("type", "__weakref__")

    def __init__(self, type: TensorType) -> None:
        self.type = type

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self) -> np.dtype:
        return self.type.dtype

    @property
    def ndim(self) -> int:
        return len(self.type.shape)

    def __repr__(self) -> str:
        return f"<Value {self.type} at {id(self):#x}>"


class Op:
    """One operation: ``results = name(operands) {attrs}``, with provenance ``loc``."""

    __slots__ = ("name", "operands", "attrs", "results", "loc")

    def __init__(
        self,
        name: str,
        operands: Sequence[Value],
        attrs: dict[str, Any],
        results: Sequence[Value],
        loc: str | None = None,
    ) -> None:
        self.name = name
        self.operands = tuple(operands)
        self.attrs = dict(attrs)
        self.results = tuple(results)
        self.loc = loc

    @property
    def result(self) -> Value:
        if len(self.results) != 1:
            raise IRTypeError(f"op {self.name} has {len(self.results)} results, not one")
        return self.results[0]

    def replace(self, **changes: Any) -> Op:
        """A new op with some fields changed (results are kept unless given)."""
        fields: dict[str, Any] = {
            "name": self.name,
            "operands": self.operands,
            "attrs": self.attrs,
            "results": self.results,
            "loc": self.loc,
        }
        fields.update(changes)
        return Op(**fields)

    def __repr__(self) -> str:
        return f"<Op {self.name} -> {', '.join(str(r.type) for r in self.results)}>"


class Function:
    """A typed SSA function: inputs, ops in order, outputs, and the callees its calls use.

    ``input_labels``/``output_labels`` name inputs and outputs for people (a field path
    such as ``m.W``, or ``grad m.W``); ``attrs`` holds function-level metadata (for a
    primitive's body: the primitive's key and keyword arguments).
    """

    __slots__ = ("name", "inputs", "ops", "outputs", "input_labels", "output_labels",
                 "callees", "attrs")

    def __init__(
        self,
        name: str,
        inputs: Sequence[Value],
        ops: Sequence[Op],
        outputs: Sequence[Value],
        input_labels: Sequence[str | None] | None = None,
        output_labels: Sequence[str | None] | None = None,
        callees: dict[str, Function] | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.inputs = tuple(inputs)
        self.ops = list(ops)
        self.outputs = tuple(outputs)
        self.input_labels = tuple(input_labels) if input_labels else (None,) * len(self.inputs)
        self.output_labels = (
            tuple(output_labels) if output_labels else (None,) * len(self.outputs)
        )
        self.callees = dict(callees or {})
        self.attrs = dict(attrs or {})

    def replace(self, **changes: Any) -> Function:
        fields = {s: getattr(self, s) for s in Function.__slots__}
        fields.update(changes)
        return Function(**fields)

    @property
    def input_types(self) -> tuple[TensorType, ...]:
        return tuple(v.type for v in self.inputs)

    @property
    def output_types(self) -> tuple[TensorType, ...]:
        return tuple(v.type for v in self.outputs)

    def producers(self) -> dict[Value, Op]:
        """Map from each op result to the op that defines it."""
        return {r: op for op in self.ops for r in op.results}

    def uses(self) -> dict[Value, list[Op]]:
        """Map from each value to the ops that read it (in program order)."""
        out: dict[Value, list[Op]] = {}
        for op in self.ops:
            for v in op.operands:
                out.setdefault(v, []).append(op)
        return out

    def all_callees(self) -> dict[str, Function]:
        """Callees of this function and, transitively, of its callees."""
        out: dict[str, Function] = {}
        stack = list(self.callees.items())
        while stack:
            name, f = stack.pop()
            if name not in out:
                out[name] = f
                stack.extend(f.callees.items())
        return out

    def __str__(self) -> str:
        from .printer import print_function

        return print_function(self)

    def __repr__(self) -> str:
        return f"<ir.Function @{self.name}: {len(self.inputs)} inputs, {len(self.ops)} ops>"


def make_op(name: str, operands: Sequence[Value], attrs: dict[str, Any] | None = None,
            loc: str | None = None, result_types: Sequence[TensorType] | None = None) -> Op:
    """Create an op, inferring (and checking) its result types from the op table."""
    opdef = (_OPS if _OPS is not None else _opdefs()).get(name)
    if opdef is None:
        from .ops import get_opdef

        opdef = get_opdef(name)  # raises: an unknown op
    attrs = opdef.normalize_attrs(attrs or {}) if attrs or opdef.attrs else {}
    if result_types is None:
        result_types = opdef.infer_types([v.type for v in operands], attrs, len(operands))
    return Op(name, operands, attrs, [Value(t) for t in result_types], loc)


_OPS: dict[str, Any] | None = None


def _opdefs() -> dict[str, Any]:
    """The op table ``yota.ir.ops.OPS``, imported on first use (``ir.ops`` imports this
    module), then kept: ``make_op`` runs once per op built."""
    global _OPS
    if _OPS is None:
        from .ops import OPS

        _OPS = OPS
    return _OPS


class Builder:
    """Builds an ``ir.Function`` op by op: ``b.mul(x, y)``, ``b.sum(x, axes=(0,))``.

    Every op emitted inside ``with b.at(loc):`` carries that provenance.
    """

    def __init__(self, name: str = "f") -> None:
        self.name = name
        self.inputs: list[Value] = []
        self.input_labels: list[str | None] = []
        self.ops: list[Op] = []
        self.callees: dict[str, Function] = {}
        self.loc: str | None = None

    def input(self, type: TensorType, label: str | None = None) -> Value:
        v = Value(type)
        self.inputs.append(v)
        self.input_labels.append(label)
        return v

    @contextlib.contextmanager
    def at(self, loc: str | None) -> Iterator[None]:
        old = self.loc
        self.loc = loc if loc is not None else old
        try:
            yield
        finally:
            self.loc = old

    def append(self, op: Op) -> Op:
        """Append a ready-made op (``b.add(x, y)`` emits the ``add`` op instead)."""
        self.ops.append(op)
        return op

    def emit(self, name: str, *operands: Value, **attrs: Any) -> Any:
        """Emit op ``name``; returns its single result, or a tuple of results."""
        op = make_op(name, operands, attrs, self.loc)
        self.ops.append(op)  # as self.append does
        if len(op.results) == 1:
            return op.results[0]
        return op.results

    def __getattr__(self, name: str) -> Any:
        """``b.<op>(*operands, **attrs)`` emits op ``<op>``: on first use, the method is
        added to the class (ops are only ever added to the table), so later calls find it
        without coming here."""
        if name in _opdefs():
            setattr(Builder, name, _emitter(name))
            return getattr(self, name)
        raise AttributeError(name)

    # -- conveniences that skip no-op conversions -------------------------------------
    def const(self, value: Any, dtype: Any = None, shape: Sequence[int] | None = None) -> Value:
        """A constant; a scalar with ``shape`` is a splat."""
        arr = np.asarray(value, dtype=as_dtype(dtype) if dtype is not None else None)
        if arr.dtype == np.float16 or arr.dtype.kind not in "biuf":
            raise IRTypeError(f"cannot make an IR constant of dtype {arr.dtype}")
        if dtype is None:
            arr = arr.astype(as_dtype(_default_dtype(arr.dtype)))
        if shape is not None and tuple(shape) != arr.shape:
            arr = np.broadcast_to(arr, tuple(shape))
        return self.emit("const", value=arr)

    def convert_to(self, x: Value, dtype: Any) -> Value:
        if x.type.dtype is dtype:  # already of that (supported) dtype
            return x
        dt = as_dtype(dtype)
        return x if x.dtype == dt else self.emit("convert", x, dtype=dt)

    def broadcast_to(self, x: Value, shape: Sequence[int]) -> Value:
        shape = tuple(shape)
        return x if x.type.shape == shape else self.emit("broadcast", x, shape=shape)

    def reshape_to(self, x: Value, shape: Sequence[int]) -> Value:
        shape = tuple(shape)
        return x if x.type.shape == shape else self.emit("reshape", x, shape=shape)

    def sum_to_shape(self, x: Value, shape: Sequence[int]) -> Value:
        shape = tuple(shape)
        return x if x.type.shape == shape else self.emit("sum_to", x, shape=shape)

    def call(self, callee: Function, *operands: Value) -> tuple[Value, ...]:
        """Call a sub-function (a primitive's body); returns its results."""
        self.callees[callee.name] = callee
        op = self.append(make_op("call", operands, {"callee": callee.name}, self.loc,
                              result_types=callee.output_types))
        return op.results

    def build(self, outputs: Sequence[Value],
              output_labels: Sequence[str | None] | None = None,
              attrs: dict[str, Any] | None = None) -> Function:
        return Function(self.name, self.inputs, self.ops, outputs, self.input_labels,
                        output_labels, self.callees, attrs)


def _emitter(name: str) -> Any:
    def emit_op(self: Builder, *operands: Value, **attrs: Any) -> Any:
        return self.emit(name, *operands, **attrs)

    emit_op.__name__ = emit_op.__qualname__ = name
    emit_op.__doc__ = f"Emit op ``{name}``; its single result, or a tuple of results."
    return emit_op


def _default_dtype(dt: np.dtype) -> np.dtype:
    """Map platform dtypes NumPy may produce to Yota's supported set."""
    if dt.kind == "b":
        return np.dtype(np.bool_)
    if dt.kind in "iu":
        return np.dtype(np.int64) if dt.itemsize > 4 or dt.kind == "u" else np.dtype(np.int32)
    return np.dtype(np.float64) if dt.itemsize > 4 else np.dtype(np.float32)
