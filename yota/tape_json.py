"""A tape as JSON (the form ``yota-ir tape --json`` prints).

``{"schema", "kind": "tape", "function", "loc", "argnames", "leaves": [{"var", "arg",
"path"}], "entries": [{"kind", "fn", "outs": [{"id", "type", "dtype", "shape", "weak"}],
"args", "kwargs", "loc", "text", "guard"?}], "result", "text"}``; an argument is
``{"var": id}``, ``{"seq": [...], "kind"}``, ``{"dict": {...}}`` or ``{"static": text}``.
"""

from __future__ import annotations

from typing import Any

from yota.ir.to_json import SCHEMA, json_scalar, json_type

from . import structs
from .tape import Entry, Tape, Var, format_entry, format_static


def _json_static(x: Any) -> Any:
    """A tape argument: ``{"var": id}``, ``{"seq": [...], "kind": "tuple"}`` when it holds
    variables, else ``{"static": text}``."""
    if isinstance(x, Var):
        return {"var": x.id}
    if isinstance(x, (list, tuple)) and _has_var(x):
        return {"seq": [_json_static(v) for v in x], "kind": type(x).__name__}
    if isinstance(x, dict) and _has_var(x):
        return {"dict": {str(k): _json_static(v) for k, v in x.items()}}
    return {"static": format_static(x)}


def _has_var(x: Any) -> bool:
    if isinstance(x, Var):
        return True
    if isinstance(x, (list, tuple)):
        return any(_has_var(v) for v in x)
    if isinstance(x, dict):
        return any(_has_var(v) for v in x.values())
    return False


def _json_loc(loc: Any) -> dict[str, Any] | None:
    if loc is None:
        return None
    return {"file": loc.file, "line": loc.line, "func": loc.func, "text": str(loc),
            "source": loc.source_line()}


def _json_var(v: Var, value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": v.id, "weak": v.weak}
    if v.type is not None:
        out.update(json_type(v.type))
    else:
        out.update({"type": None, "python_type": type(value).__name__})
    return out


def entry_json(e: Entry) -> dict[str, Any]:
    """One tape entry as JSON."""
    values = list(e.value) if len(e.outs) > 1 else [e.value] * len(e.outs)
    out: dict[str, Any] = {
        "kind": e.kind, "fn": e.fn or None,
        "outs": [_json_var(v, val) for v, val in zip(e.outs, values, strict=True)],
        "args": [_json_static(a) for a in e.args],
        "kwargs": {k: _json_static(v) for k, v in e.kwargs.items()},
        "loc": _json_loc(e.loc), "text": format_entry(e),
    }
    if e.kind == "guard":
        out["guard"] = {"kind": e.extra["kind"], "expected": json_scalar(e.extra["expected"])}
    return out


def tape_json(tape: Tape) -> dict[str, Any]:
    """The whole tape as JSON (see the module docstring)."""
    return {
        "schema": SCHEMA, "kind": "tape", "function": tape.fname, "loc": _json_loc(tape.loc),
        "argnames": list(tape.argnames),
        "leaves": [{"var": v.id if v is not None else None,  # None: a field f never read
                    "arg": a, "path": structs.format_path(p, tape.argnames[a])}
                   for a, p, v in tape.leaf_vars],
        "entries": [entry_json(e) for e in tape.entries],
        "result": _json_static(tape.result), "text": str(tape),
    }
