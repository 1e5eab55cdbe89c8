"""IR as a Graphviz graph (DOT text), and rendering DOT with Graphviz's ``dot``.

Inputs, ops and the return are nodes; values are edges labelled ``%n type`` (and ``buf
k`` under a memory plan); ops are coloured by phase: forward blue, backward (provenance
"adjoint of ...") orange, kernels fusing both purple. ``notes`` adds lines under a
node for the values it makes (``yota.graph(..., values=True)``: value and gradient
summaries, ``summary`` formats one array).

>>> from yota.ir import Builder, TensorType
>>> b = Builder("f")
>>> x = b.input(TensorType("f32", (3,)), "x")
>>> print(to_dot(b.build([b.neg(x)])).splitlines()[0])
digraph "f" {
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence

import numpy as np

from .core import Function, Op, Value
from .errors import YotaError
from .printer import format_attr
from .to_json import buffers, phase, value_names

COLORS = {"forward": "#d6e6ff", "backward": "#ffdcb8", "mixed": "#e6d4f5", None: "#eeeeee"}
_IO_COLOR = "#dff2d8"
FORMATS = ("dot", "gv", "svg", "png", "pdf")


class GraphvizError(YotaError):
    """Graphviz's ``dot`` is missing or failed."""


def _dot_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _short(s: str, n: int = 40) -> str:
    return s if len(s) <= n else s[:n - 1] + "…"


def _op_label(op: Op, fn: Function, names: dict[Value, str]) -> str:
    results = ", ".join(names[r] for r in op.results)
    lines = [f"{results} = {op.name}" if results else op.name]
    if "callee" in op.attrs:
        lines[0] += f" @{op.attrs['callee']}"
        body = fn.callees.get(op.attrs["callee"])
        if body is not None:
            inner = [o.name for o in body.ops if o.name not in ("broadcast", "const")]
            lines.append(_short(" ".join(inner), 48))
    else:
        attrs = [f"{k}={format_attr(op.attrs[k])}" for k in sorted(op.attrs)]
        if attrs:
            lines.append(_short(", ".join(attrs)))
    if op.loc:
        lines.append(_short(op.loc, 48))
    return "\n".join(lines)


Notes = Mapping[Value, Sequence[str]]


def to_dot(fn: Function, title: str | None = None, notes: Notes | None = None) -> str:
    """``fn`` as a Graphviz digraph: inputs, ops and the return as nodes, values as edges
    labelled ``%n type`` (and ``buf k`` under a memory plan); ops coloured by phase;
    ``notes[v]``: lines added to the node that makes value ``v``."""
    names, bufs = value_names(fn), buffers(fn)
    notes = notes or {}
    where: dict[Value, str] = {}
    lines = [f"digraph {_dot_str(fn.name)} {{",
             "  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=11, labelloc=t, "
             f"label={_dot_str(title or '@' + fn.name)}];",
             "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];",
             "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];"]
    for i, (v, lab) in enumerate(zip(fn.inputs, fn.input_labels, strict=True)):
        where[v] = f"in{i}"
        label = f"{names[v]}: {v.type}" + (f"\n{lab}" if lab else "")
        label += "".join(f"\n{line}" for line in notes.get(v, ()))
        lines.append(f"  in{i} [label={_dot_str(label)}, fillcolor=\"{_IO_COLOR}\", "
                     "shape=invhouse];")
    for k, op in enumerate(fn.ops):
        node = f"op{k}"
        style = _op_style(op)
        label = _op_label(op, fn, names) + _notes(op, names, notes)
        lines.append(f"  {node} [label={_dot_str(label)}, "
                     f"fillcolor=\"{COLORS[phase(op)]}\"{style}];")
        lines += _edges(op.operands, node, where, names, bufs)
        for r in op.results:
            where[r] = node
    lines.append(f"  ret [label=\"return\", fillcolor=\"{_IO_COLOR}\", shape=house];")
    labels = {v: lab for v, lab in zip(fn.outputs, fn.output_labels, strict=True)}
    lines += _edges(fn.outputs, "ret", where, names, bufs, labels)
    lines.append("  legend [shape=plaintext, style=\"\", fontsize=9, label="
                 "\"blue: forward   orange: backward (adjoint of ...)   purple: kernel with "
                 "both   green: inputs and outputs\"];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _notes(op: Op, names: dict[Value, str], notes: Notes) -> str:
    out = ""
    for r in op.results:
        lines = notes.get(r, ())
        prefix = f"{names[r]} " if len(op.results) > 1 and lines else ""
        out += "".join(f"\n{prefix}{line}" for line in lines)
    return out


def summary(a: np.ndarray, what: str = "=") -> str:
    """One line about an array: ``= 3.142`` for one element (or all equal: ``= 1 (all
    12)``), else ``what`` followed by min, mean and max (NaNs counted apart); ``(empty)``
    for none."""
    a = np.asarray(a)
    if a.size == 0:
        return f"{what} (empty)"
    if a.dtype.kind == "b":
        a = a.astype(np.int64)
    if a.size == 1:
        return f"{what} {_num(a.reshape(-1)[0])}"
    nan = int(np.isnan(a).sum()) if a.dtype.kind == "f" else 0
    ok = a[~np.isnan(a)] if nan else a
    lo, hi = (ok.min(), ok.max()) if ok.size else (None, None)
    text = (f"{what}" if lo is None else f"{what} {_num(lo)} (all {ok.size})" if lo == hi
            else f"{what} min {_num(lo)}  mean {_num(ok.mean())}  max {_num(hi)}")
    return text + (f"  ({nan} NaN)" if nan else "")


def _num(x: object) -> str:
    return f"{float(x):.4g}" if isinstance(x, (float, np.floating)) else str(x)


def _op_style(op: Op) -> str:
    if op.name == "const":
        return ", shape=ellipse, fontsize=8"
    if op.name == "fused":
        return ", peripheries=2"
    if op.name == "guard":
        return ", shape=diamond, style=filled"
    return ""


def _edges(values: Sequence[Value], node: str, where: dict[Value, str], names: dict[Value, str],
           bufs: dict[Value, int], labels: dict[Value, str | None] | None = None) -> list[str]:
    out, seen = [], set()
    for v in values:
        if v in seen or v not in where:
            continue
        seen.add(v)
        label = f"{names[v]} {v.type}"
        if labels and labels.get(v):
            label += f"\n{labels[v]}"
        if bufs.get(v, -1) >= 0:
            label += f"\nbuf {bufs[v]}"
        out.append(f"  {where[v]} -> {node} [label={_dot_str(label)}];")
    return out


def format_of(path: str, fmt: str | None = None) -> str:
    """The output format: ``fmt``, else ``path``'s extension if it names one, else dot."""
    if fmt is not None:
        return fmt
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    return ext if ext in FORMATS else "dot"


def render(dot: str, fmt: str) -> bytes:
    """``dot`` rendered as ``fmt`` (svg, png, pdf) by Graphviz's ``dot``; raises
    ``GraphvizError`` if it is not installed or fails."""
    exe = shutil.which("dot")
    if exe is None:
        raise GraphvizError(f"writing {fmt.upper()} needs Graphviz's `dot`, which is not "
                            "installed: install it with `apt-get install graphviz` "
                            "(Debian/Ubuntu), `brew install graphviz` (macOS) or `conda "
                            "install graphviz`, or write DOT text with -o FILE.dot")
    proc = subprocess.run([exe, f"-T{fmt}"], input=dot.encode(), capture_output=True,
                          check=False)
    if proc.returncode != 0:
        raise GraphvizError(f"dot -T{fmt} failed: "
                            f"{proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout

