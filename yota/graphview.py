"""Graph views of a traced function with the values it computed and their gradients
(AutoGrad.jl's inspection of the recorded nodes, drawn).

``yota.graph(f, *args)`` draws ``f``'s IR at a stage (``yota-ir graph`` from Python);
with ``values=True`` every node also shows the value it computed at ``args`` (min, mean
and max; shape and dtype are on the edges) and, when ``f`` returns a scalar float, the
gradient of that scalar with respect to the value, the same min/mean/max:

    >>> import numpy as np, yota
    >>> g = yota.graph(lambda x: np.sum(np.tanh(x) * x), np.linspace(-1, 1, 5),
    ...                values=True, stage="traced")
    >>> print([ln for ln in g.dot.splitlines() if "tanh" in ln][0])  # doctest: +ELLIPSIS
      op0 [label="%1 = tanh\\n...\\n= min -0.7616  mean 0  max 0.7616\\ngrad min -1  mean 0  max 1", ...];
    >>> g.render("f.svg")  # doctest: +SKIP

The gradient of every value comes from one extra program: each float value ``v`` gets
a zero input ``e`` added to it (``v + e`` replaces ``v`` for its users), and the
gradient with respect to ``e`` at zero is the gradient with respect to ``v``. Values
run on the reference interpreter.

A program of more than ``MAX_NODES`` ops (an unrolled recurrent network's gradient has
thousands; Graphviz's layout takes minutes to hours on them) is drawn by source line:
one node per line of the user's code (its ops counted by name, the gradient's ops under
"grad of" the line they differentiate), edges where values flow from one to another;
the title says so. ``max_nodes=None`` draws every op.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from yota.backends.interp import run_all
from yota.ir import dot as _dot
from yota.ir.autodiff import vjp
from yota.ir.core import Builder, Function, Value
from yota.ir.errors import YotaError
from yota.ir.types import is_float

from . import pipeline
from .program import flatten_args
from .tape import Tape
from .tracing import trace

__all__ = ["Graph", "graph", "grouped_dot", "value_notes"]
MAX_NODES = 400  # ops drawn one by one, at most; larger programs are drawn by source line


class Graph:
    """A drawn IR function: ``.dot`` (Graphviz source), ``.render(path)`` (SVG, PNG or
    PDF by Graphviz's ``dot``), and SVG in notebooks (``_repr_svg_``)."""

    def __init__(self, fn: Function, dot: str) -> None:
        self.fn, self.dot = fn, dot

    def render(self, path: str | None = None, fmt: str | None = None) -> bytes:
        """The graph as ``fmt`` (default: ``path``'s extension, else svg), written to
        ``path`` when given; raises ``GraphvizError`` (a ``YotaError``) when Graphviz's
        ``dot`` is not installed. ``.dot`` files need no Graphviz."""
        fmt = fmt or (_dot.format_of(path) if path else "svg")
        if fmt in ("dot", "gv"):
            data = self.dot.encode()
        else:
            data = _dot.render(self.dot, fmt)
        if path is not None:
            with open(path, "wb") as f:
                f.write(data)
        return data

    def _repr_svg_(self) -> str | None:
        try:
            return self.render(fmt="svg").decode()
        except _dot.GraphvizError:
            return None  # the notebook shows repr() instead

    def __str__(self) -> str:
        return self.dot

    def __repr__(self) -> str:
        return f"<yota.Graph of @{self.fn.name}: {len(self.fn.ops)} ops (.dot, .render())>"


def graph(f: Callable[..., Any], *args: Any, values: bool = False, stage: str = "grad",
          title: str | None = None, max_nodes: int | None = MAX_NODES) -> Graph:
    """``f``'s IR at ``stage`` (``traced``, ``grad``, ``optimized``, ``fused``,
    ``planned``: ``yota.pipeline.STAGES``) as a graph; ``values=True`` labels each node
    with the value it computed at ``args`` and its gradient (see the module's doc). A
    program of more than ``max_nodes`` ops is drawn by source line (``grouped_dot``;
    None: every op, however long Graphviz takes)."""
    _, tape = trace(f, *args)
    fn = stage_function(tape, stage)
    name = getattr(f, "__name__", "f")
    head = title or f"{name}: {stage} (@{fn.name})"
    if max_nodes is not None and len(fn.ops) > max_nodes:
        return Graph(fn, grouped_dot(fn, head, max_nodes))
    notes = value_notes(tape, fn, args) if values else None
    return Graph(fn, _dot.to_dot(fn, head, notes))


_ADJOINT = re.compile(r"adjoint of (%\d+)")


def grouped_dot(fn: Function, title: str, max_nodes: int = MAX_NODES) -> str:
    """``fn`` drawn by source line: one node per line of the user's code that made ops
    (the ops of the gradient under "grad of" the line whose values they differentiate),
    labelled with its op counts; an edge where a value flows from one line's ops to
    another's. At most ``max_nodes`` nodes (the busiest lines; the others in one)."""
    names = _dot.value_names(fn)
    made_at: dict[str, str] = {}
    group_of: dict[Value, str] = {v: "inputs" for v in fn.inputs}
    counts: dict[str, Counter[str]] = {}
    for op in fn.ops:
        key = _group(op.loc, made_at)
        counts.setdefault(key, Counter())[op.name] += 1
        for r in op.results:
            group_of[r] = key
            if op.loc and not op.loc.startswith("adjoint"):
                made_at[names[r]] = key
    keep = sorted(counts, key=lambda k: -sum(counts[k].values()))[:max_nodes - 1]
    node = {k: f"g{i}" for i, k in enumerate(keep)}
    other = "g_other"
    edges: Counter[tuple[str, str]] = Counter()
    for op in fn.ops:
        dst = node.get(group_of[op.results[0]] if op.results else "", other)
        for v in op.operands:
            src = "in" if group_of.get(v) == "inputs" else node.get(group_of.get(v, ""), other)
            if src != dst:
                edges[(src, dst)] += 1
    note = (f"{len(fn.ops)} ops drawn by source line ({len(counts)} lines): "
            "graph(..., max_nodes=None) draws every op")
    lines = [f"digraph {_dot._dot_str(fn.name)} {{",
             f"  graph [rankdir=TB, labelloc=t, label={_dot._dot_str(title + chr(10) + note)}];",
             "  node [shape=box, style=\"rounded,filled\", fontsize=10];",
             f"  in [label={_dot._dot_str(f'{len(fn.inputs)} inputs')}, shape=invhouse];"]
    for k, n in node.items():
        ops = ", ".join(f"{name}x{c}" for name, c in counts[k].most_common(4))
        color = _dot.COLORS["backward" if k.startswith("grad of") else "forward"]
        label = f"{k}\n{sum(counts[k].values())} ops: {ops}"
        lines.append(f"  {n} [label={_dot._dot_str(label)}, fillcolor=\"{color}\"];")
    if len(counts) > len(keep):
        lines.append(f"  {other} [label=\"{len(counts) - len(keep)} other lines\"];")
    lines += [f"  {a} -> {b} [label=\"{c}\"];" for (a, b), c in edges.items()]
    return "\n".join(lines + ["}"]) + "\n"


def _group(loc: str | None, made_at: dict[str, str]) -> str:
    if not loc:
        return "(no source line)"
    m = _ADJOINT.match(loc)
    if m is None:
        return loc.split(";")[0]
    return f"grad of {made_at.get(m.group(1), 'values')}"


def stage_function(tape: Tape, stage: str) -> Function:
    if stage not in pipeline.STAGES:
        raise YotaError(f"unknown stage {stage!r}; the stages are "
                        f"{', '.join(pipeline.STAGES)}")
    return pipeline.stages(tape, stage)[-1][1]


def tape_inputs(tape: Tape, args: Sequence[Any]) -> list[Any]:
    """The IR's inputs for ``args``: their dynamic leaves, the captured arrays, the
    numbers drawn while tracing."""
    return (flatten_args(args)[0] + [e.value for e in tape.captured]
            + [e.value for e in tape.randoms])


def value_notes(tape: Tape, fn: Function, args: Sequence[Any]) -> dict[Value, list[str]]:
    """For each value of ``fn`` (the IR of ``tape`` at some stage): its summary at
    ``args``, and the summary of the gradient of the traced function's scalar result
    with respect to it where that value is one the traced function computes."""
    inputs = tape_inputs(tape, args)
    env = run_all(fn, *inputs)
    grads = value_gradients(pipeline.lower(tape), inputs)
    return {v: [_dot.summary(a)] + ([_dot.summary(grads[v], "grad")] if v in grads else [])
            for v, a in env.items()}


def value_gradients(fn: Function, inputs: Sequence[Any]) -> dict[Value, np.ndarray]:
    """The gradient of ``fn``'s output with respect to each of its float values (inputs
    and op results connected to the output); empty unless the output is a float
    scalar."""
    if len(fn.outputs) != 1 or fn.outputs[0].ndim or not is_float(fn.outputs[0].dtype):
        return {}
    pf, targets = perturbed(fn)
    n = len(fn.inputs)
    wrt = [i for i in range(n) if is_float(fn.inputs[i].dtype)] + \
        list(range(n, len(pf.inputs)))
    gfn = vjp(pf, wrt)
    zeros = [np.zeros(v.shape, v.dtype) for v in pf.inputs[n:]]
    outs = run_all(gfn, *inputs, *zeros)
    got = [outs[v] for v in gfn.outputs[1:]]
    which = [fn.inputs[i] if i < n else targets[i - n] for i in gfn.attrs["grads"]]
    return dict(zip(which, got, strict=True))


def perturbed(fn: Function) -> tuple[Function, list[Value]]:
    """``fn`` with a zero input ``e`` added to each float op result ``v`` (its users read
    ``v + e``); the values, in the order of the new inputs."""
    b = Builder(f"{fn.name}_perturbed")
    b.inputs, b.input_labels, b.callees = list(fn.inputs), list(fn.input_labels), \
        dict(fn.callees)
    sub: dict[Value, Value] = {}
    targets: list[Value] = []
    for op in fn.ops:
        if any(v in sub for v in op.operands):
            op = op.replace(operands=[sub.get(v, v) for v in op.operands])
        b.append(op)
        for r in op.results:
            if is_float(r.dtype):
                e = b.input(r.type, f"perturbation of a value at {op.loc}")
                with b.at(op.loc):
                    sub[r] = b.add(r, e)
                targets.append(r)
    return b.build([sub.get(v, v) for v in fn.outputs]), targets
