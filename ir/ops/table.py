"""The op table itself: ``OpDef``, the registry ``OPS`` that the family modules fill, and
the attribute normalizers they share."""


from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import IRTypeError
from ..types import TensorType

InferFn = Callable[[list[TensorType], dict[str, Any]], "TensorType | tuple[TensorType, ...]"]


@dataclass(frozen=True)
class OpDef:
    """Everything the IR knows about one op.

    - ``nin``: number of operands (``None``: variadic, at least ``min_in``).
    - ``attrs``: attribute names with a normalizer each (``tuple_of_ints``...).
    - ``infer``: result type(s) from operand types and attributes; raises ``IRTypeError``.
    - ``impl``: the NumPy reference implementation, ``impl(*arrays, **attrs)``.
    - ``elementwise``: the op maps each element independently (fusable).
    - ``source``: a NumPy expression template for generated Python (``{0}``, ``{axes}``).
    - ``effect``: the op must not be removed even if its results are unused (guards).
    - ``calls``: the op runs the function ``attrs["callee"]`` (in ``fn.callees``) on its
      operands and its result types are that function's output types (``call``, ``fused``).
    - ``callee_types``: for an op that runs its callee otherwise (``loop``): the operand
      and result types ``callee_types(attrs, callee)`` the op has; ``run_callee``: how the
      reference interpreter runs it, ``run_callee(attrs, callee, operands, run)``.
    """

    name: str
    nin: int | None
    infer: InferFn
    impl: Callable[..., Any]
    attrs: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    elementwise: bool = False
    source: str | None = None
    effect: bool = False
    min_in: int = 1
    calls: bool = False
    callee_types: Callable[[dict[str, Any], Any], tuple[tuple[TensorType, ...],
                                                        tuple[TensorType, ...]]] | None = None
    run_callee: Callable[..., list[Any]] | None = None

    def types_with(self, attrs: dict[str, Any], callee: Any
                   ) -> tuple[tuple[TensorType, ...], tuple[TensorType, ...]]:
        """(operand types, result types) of this op running ``callee`` (``calls`` ops)."""
        if self.callee_types is not None:
            return self.callee_types(attrs, callee)
        return callee.input_types, callee.output_types

    def normalize_attrs(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.keys() == self.attrs.keys():  # the common case: exactly the op's attributes
            norm = self.attrs
            return {k: norm[k](v) for k, v in attrs.items()}
        missing = [a for a in self.attrs if a not in attrs]
        extra = [a for a in attrs if a not in self.attrs]
        if missing or extra:
            raise IRTypeError(
                f"op '{self.name}' takes attributes {sorted(self.attrs)}; "
                f"missing {missing}, unexpected {extra}"
            )
        return {k: self.attrs[k](v) for k, v in attrs.items()}

    def infer_types(self, types: list[TensorType], attrs: dict[str, Any],
                    n: int) -> tuple[TensorType, ...]:
        if self.nin is not None and n != self.nin:
            raise IRTypeError(f"op '{self.name}' takes {self.nin} operands, got {n}")
        if self.nin is None and n < self.min_in:
            raise IRTypeError(f"op '{self.name}' takes at least {self.min_in} operands, got {n}")
        out = self.infer(types, attrs)
        return out if isinstance(out, tuple) else (out,)


OPS: dict[str, OpDef] = {}


def runs_callee(*args: Any, **attrs: Any) -> Any:
    """The ``impl`` of ops that run a callee (``call``, ``fused``): the interpreter runs
    ``fn.callees[attrs["callee"]]`` instead, so this is never called."""
    raise IRTypeError(f"an op that runs its callee {attrs.get('callee')!r} has no NumPy "
                      "reference of its own; run the function that holds it")


def register(opdef: OpDef) -> OpDef:
    if opdef.name in OPS:
        raise ValueError(f"op {opdef.name} registered twice")
    OPS[opdef.name] = opdef
    return opdef


def get_opdef(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise IRTypeError(f"unknown op '{name}'") from None


# -- attribute normalizers ------------------------------------------------------------
def tuple_of_ints(v: Any) -> tuple[int, ...]:
    if isinstance(v, int):
        return (int(v),)
    return tuple(map(int, v))


def an_int(v: Any) -> int:
    return int(v)


def a_bool(v: Any) -> bool:
    return bool(v)


def a_str(v: Any) -> str:
    return str(v)


def anything(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(anything(x) for x in v)
    return v


def types_str(types: Sequence[TensorType]) -> str:
    return ", ".join(str(t) for t in types)
