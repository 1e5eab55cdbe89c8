"""``yota-ir tape``: the Yota-style tape of a target."""

from __future__ import annotations

import json

import click

from yota.tape import Tape
from yota.tape_json import tape_json

from .app import main
from .targets import load_target, target_options, trace_target


def format_tape_with_source(tape: Tape) -> str:
    """The tape with each entry's source line after it."""
    lines = str(tape).splitlines()
    out = lines[:1]
    for line, e in zip(lines[1:], tape.entries, strict=False):
        src = e.loc.source_line() if e.loc is not None else ""
        out.append(f"{line}  | {src}" if src else line)
    return "\n".join(out + lines[1 + len(tape.entries):])


@main.command()
@target_options
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see below).")
@click.option("--source", is_flag=True, help="Show each entry's source line.")
def tape(target: str, args_expr: str | None, example: str | None, seed: int, as_json: bool,
         source: bool) -> None:
    """Print the Yota-style tape of TARGET: every call it made at the example arguments,
    with types, the user's file:line, and the guards recorded where Python branched on a
    traced value.

    \b
    Examples:
      yota-ir tape model.py:loss --example example
      yota-ir tape model.py:loss --args 'Linear(np.ones((3,4)), np.ones(3)), np.ones((4,5))'
      yota-ir tape mypkg.models:loss --example example --json | jq '.entries[].fn'

    \b
    --json prints {"schema", "kind": "tape", "function", "loc", "argnames",
    "leaves": [{"var", "arg", "path"}], "entries": [{"kind", "fn", "outs": [{"id", "type",
    "dtype", "shape", "weak"}], "args", "kwargs", "loc", "text", "guard"?}], "result", "text"};
    an argument is {"var": id}, {"seq": [...], "kind"}, {"dict": {...}} or {"static": text}.
    """
    t = load_target(target, args_expr, example, seed)
    tp = trace_target(t)
    if as_json:
        click.echo(json.dumps(tape_json(tp), indent=1))
    else:
        click.echo(format_tape_with_source(tp) if source else str(tp))
