"""Prints a tape the way Yota.jl does, with the user's file:line on each entry."""

from __future__ import annotations

from typing import Any

import numpy as np

from .tape import Entry, Tape, Var


def format_static(x: Any) -> str:
    if isinstance(x, Var):
        return repr(x)
    if isinstance(x, slice):
        parts = ["" if v is None else format_static(v) for v in (x.start, x.stop, x.step)]
        return ":".join(parts[:2]) + (f":{parts[2]}" if x.step is not None else "")
    if x is Ellipsis:
        return "..."
    if isinstance(x, tuple):
        inner = ", ".join(format_static(v) for v in x)
        return f"({inner},)" if len(x) == 1 else f"({inner})"
    if isinstance(x, list):
        return "[" + ", ".join(format_static(v) for v in x) + "]"
    if isinstance(x, np.dtype):
        return f"np.{x}"
    if isinstance(x, type):
        return x.__name__
    if isinstance(x, np.ndarray):
        text = np.array2string(x, threshold=6, separator=", ", max_line_width=10**6)
        return f"array({text.replace(chr(10), '')})"  # one line per tape entry
    return repr(x)


def _type_str(v: Var, value: Any) -> str:
    if v.type is not None:
        return str(v.type) + ("{weak}" if v.weak else "")
    return type(value).__name__


def format_entry(e: Entry) -> str:
    outs = ", ".join(repr(v) for v in e.outs)
    if e.kind == "input":
        line = f"inp {outs}::{_type_str(e.outs[0], e.value)}"
    elif e.kind == "guard":
        line = f"guard {e.extra['kind']}({e.args[0]!r}) == {e.extra['expected']!r}"
    elif e.kind == "const":
        line = f"{outs} = const({format_static(e.value)})::{e.outs[0].type}"
    elif e.kind == "captured":
        line = f"{outs} = captured({e.extra[1]})::{e.outs[0].type}"
    else:
        args = [format_static(a) for a in e.args]
        args += [f"{k}={format_static(v)}" for k, v in e.kwargs.items()]
        types = ", ".join(_type_str(v, val) for v, val in zip(e.outs, _values(e), strict=True))
        line = f"{outs} = {e.fn}({', '.join(args)})::{types}"
    if e.loc is not None:
        line += f"  # {e.loc}"
    return line


def _values(e: Entry) -> list[Any]:
    if e.value is None:
        return [None] * len(e.outs)
    return list(e.value) if len(e.outs) > 1 else [e.value]


def format_tape(tape: Tape) -> str:
    head = f"Tape for {tape.fname}" + (f" ({tape.loc})" if tape.loc else "")
    lines = [head] + ["  " + format_entry(e) for e in tape.entries]
    lines.append("  return " + format_static(tape.result))
    return "\n".join(lines)
