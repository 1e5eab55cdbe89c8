"""``yota-ir graph``: a target's IR drawn as a graph (DOT, or SVG/PNG/PDF by Graphviz)."""

from __future__ import annotations

import sys

import click

from yota.graphview import MAX_NODES, grouped_dot, value_notes
from yota.ir import dot as _dot

from .app import ToolError, main
from .stages import STAGES, build_stages
from .targets import load_target, target_options, trace_target


@main.command()
@target_options
@click.option("--stage", type=click.Choice(list(STAGES)), default="grad", show_default=True,
              help="Which IR to draw.")
@click.option("-o", "--output", default="-", metavar="OUT.svg|png|pdf|dot",
              help="Output file; its extension picks the format. Default: DOT on stdout.")
@click.option("--format", "fmt", type=click.Choice(["dot", "svg", "png", "pdf"]), default=None,
              help="Output format (default: from the extension of -o, else dot).")
@click.option("--fast-math", is_flag=True, help="As for `ir`.")
@click.option("--values", is_flag=True,
              help="Label each node with the value it computes at the example arguments "
                   "(min/mean/max) and its gradient.")
def graph(target: str, args_expr: str | None, example: str | None, seed: int, stage: str,
          output: str, fmt: str | None, fast_math: bool, values: bool) -> None:
    """Draw TARGET's IR at a stage as a graph: ops are nodes, values are edges labelled with
    their names and types (and buffers, once memory is planned). Forward ops are blue,
    backward ops (provenance "adjoint of ...") orange, fused kernels that mix both purple.

    With --values, each node also shows the value it computed at the example arguments
    (`= min .. mean .. max ..`; shape and dtype are on the edges) and, when TARGET returns
    a scalar float, the gradient of that scalar with respect to the value (`grad ...`).

    DOT output needs nothing else; SVG, PNG and PDF run Graphviz's `dot`
    (`apt-get install graphviz`).

    \b
    Examples:
      yota-ir graph model.py:loss --example example -o loss.svg
      yota-ir graph mlp.py:loss --example example --stage fused -o mlp.png
      yota-ir graph model.py:loss --example example --stage traced > loss.dot
      yota-ir graph model.py:loss --example example --values -o loss.svg
    """
    fmt = _dot.format_of(output, fmt)
    t = load_target(target, args_expr, example, seed)
    tape = trace_target(t)
    fn = build_stages(tape, stage, fast_math=fast_math)[-1][1]
    head = f"{t.name}: {stage} (@{fn.name})"
    if len(fn.ops) > MAX_NODES:  # Graphviz would take minutes or hours: by source line
        write(grouped_dot(fn, head), output, fmt)
    else:
        notes = value_notes(tape, fn, t.args) if values else None
        write(_dot.to_dot(fn, head, notes), output, fmt)
    if output != "-":
        click.echo(f"wrote {output}", err=True)


def write(dot: str, path: str, fmt: str) -> None:
    """Write ``dot`` as ``fmt`` (dot, svg, png, pdf) to ``path`` ('-': stdout)."""
    if fmt in ("dot", "gv"):
        if path == "-":
            click.echo(dot, nl=False)
        else:
            with open(path, "w") as f:
                f.write(dot)
        return
    try:
        data = _dot.render(dot, fmt)
    except _dot.GraphvizError as e:
        raise ToolError(str(e)) from None
    if path == "-":
        sys.stdout.buffer.write(data)
    else:
        with open(path, "wb") as f:
            f.write(data)
