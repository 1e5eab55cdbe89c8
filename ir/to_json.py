"""IR as JSON (the form ``yota-ir ... --json`` prints), beside the text printer.

A function is ``{"name", "attrs", "inputs": [{"name", "label", "type", "dtype",
"shape"}], "ops": [{"results": [{"name", "type", "dtype", "shape", "buffer"?}], "op",
"operands", "attrs", "loc", "phase"}], "outputs", "callees"}``; value names are the
printer's (``%0, %1, ...``); ``phase`` is forward, backward (provenance "adjoint of
..."), mixed (a kernel fusing both) or null.

>>> from yota.ir import Builder, TensorType
>>> b = Builder("f")
>>> x = b.input(TensorType("f32", (3,)), "x")
>>> d = function_json(b.build([b.neg(x)]))
>>> d["ops"][0]["op"], d["ops"][0]["operands"], d["outputs"][0]["type"]
('neg', ['%0'], 'f32[3]')
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from .core import Function, Op, Value
from .printer import callee_order, format_attr, print_function
from .types import TensorType, dtype_name

SCHEMA = "yota-ir/1"  # the "schema" field of yota-ir's JSON output


def value_names(fn: Function) -> dict[Value, str]:
    """``%0, %1, ...`` as the printer assigns them: inputs, then results in order."""
    vals = list(fn.inputs) + [r for op in fn.ops for r in op.results]
    return {v: f"%{i}" for i, v in enumerate(vals)}


def phase(op: Op) -> str | None:
    """``forward``, ``backward`` (its provenance is "adjoint of ..."), ``mixed`` (a kernel
    fusing both) or None (no provenance)."""
    locs = [s.strip() for s in (op.loc or "").split(";") if s.strip() not in ("", "...")]
    if not locs:
        return None
    back = {s.startswith("adjoint of") for s in locs}
    return "mixed" if len(back) == 2 else "backward" if True in back else "forward"


def buffers(fn: Function) -> dict[Value, int]:
    """Each op result's buffer under ``fn``'s memory plan (empty without a plan)."""
    from .passes import MemoryPlan

    plan = MemoryPlan.of(fn)
    return plan.buffer_of(fn) if plan is not None else {}


def json_scalar(x: Any) -> Any:
    """A scalar as JSON (non-finite floats as the printer writes them)."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        f = float(x)
        return f if math.isfinite(f) else format_attr(f)
    return str(x)


def json_attr(v: Any) -> Any:
    """An attribute as JSON: arrays as ``{dtype, shape, value}`` (one value if all equal)."""
    if isinstance(v, str):
        return v
    if isinstance(v, np.dtype):
        return dtype_name(v)
    if isinstance(v, np.ndarray):
        flat = v.reshape(-1)
        splat = flat.size > 0 and bool(np.all(flat == flat[0]))
        value = json_scalar(flat[0]) if splat else json.loads(
            json.dumps(v.tolist(), default=str).replace("NaN", '"nan"')
            .replace("-Infinity", '"-inf"').replace("Infinity", '"inf"'))
        return {"dtype": dtype_name(v.dtype), "shape": list(v.shape), "value": value}
    if isinstance(v, (list, tuple)):
        return [json_attr(x) for x in v]
    return json_scalar(v)


def json_type(t: TensorType) -> dict[str, Any]:
    """``{"type": "f32[3]", "dtype": "f32", "shape": [3]}``."""
    return {"type": str(t), "dtype": dtype_name(t.dtype), "shape": list(t.shape)}


def function_json(fn: Function) -> dict[str, Any]:
    """One function: inputs, ops (results, op, operands, attrs, loc, phase), outputs."""
    names = value_names(fn)
    bufs = buffers(fn)
    ops = []
    for op in fn.ops:
        results = [{"name": names[r], **json_type(r.type),
                    **({"buffer": bufs[r]} if r in bufs else {})} for r in op.results]
        ops.append({"results": results, "op": op.name,
                    "operands": [names.get(v, "?") for v in op.operands],
                    "attrs": {k: json_attr(op.attrs[k]) for k in sorted(op.attrs)},
                    "loc": op.loc, "phase": phase(op)})
    return {
        "name": fn.name,
        "attrs": {k: json_attr(fn.attrs[k]) for k in sorted(fn.attrs)},
        "inputs": [{"name": names[v], "label": lab, **json_type(v.type)}
                   for v, lab in zip(fn.inputs, fn.input_labels, strict=True)],
        "ops": ops,
        "outputs": [{"name": names.get(v, "?"), "label": lab, **json_type(v.type)}
                    for v, lab in zip(fn.outputs, fn.output_labels, strict=True)],
        "callees": sorted(fn.callees),
    }


def module_json(fn: Function) -> dict[str, Any]:
    """``fn`` with its callees: ``{"entry": name, "functions": [callees..., fn], "text"}``."""
    return {"entry": fn.name, "functions": [function_json(f) for f in [*callee_order(fn), fn]],
            "text": print_function(fn)}
