"""Building ``loop`` ops (the op itself, its types and semantics: ``yota.ir.ops.loop``).

Apart from the op table because an op is built from ``yota.ir.core``, which imports the
op table."""

from __future__ import annotations

from collections.abc import Sequence

from .core import Function, Op, Value
from .errors import IRTypeError
from .ops.loop import loop_types


def loop_op(body: Function, operands: Sequence[Value], *, length: int, carries: int,
            stacked: int, reverse: bool = False, loc: str | None = None) -> Op:
    """A ``loop`` op running ``body`` (the caller adds ``body`` to the function's
    callees) on ``operands``: ``carries`` carried values, ``stacked`` stacked arrays,
    then invariants."""
    attrs = {"callee": body.name, "length": int(length), "carries": int(carries),
             "stacked": int(stacked), "reverse": bool(reverse)}
    want, results = loop_types(attrs, body)
    got = tuple(v.type for v in operands)
    if got != want:
        raise IRTypeError(f"loop of @{body.name}: operands typed {', '.join(map(str, got))}, "
                          f"the body needs {', '.join(map(str, want))}")
    return Op("loop", operands, attrs, [Value(t) for t in results], loc)
