"""``yota-ir compile``: compile a target as its first ``yota.grad`` call does and show
where the time went (the phase table of ``yota.phases``)."""

from __future__ import annotations

import click

import yota
from yota import phases
from yota.backends import BACKENDS

from .app import main, user_code
from .targets import load_target, target_options


@main.command("compile")
@target_options
@click.option("--forward", is_flag=True,
              help="Compile the function itself, as yota.compile does (default: its "
                   "gradient, as yota.grad does).")
@click.option("--backend", type=click.Choice(sorted(BACKENDS)), default=None,
              help="The backend to compile for [default: llvm].")
@click.option("--cache/--no-cache", default=False, show_default=True,
              help="Use the on-disk cache of compiled programs (a hit loads the program "
                   "instead of compiling it).")
def compile_cmd(target: str, args_expr: str | None, example: str | None, seed: int,
                forward: bool, backend: str | None, cache: bool) -> None:
    """Compile TARGET's gradient as the first yota.grad call does (--forward: TARGET
    itself, as yota.compile) and print how long each phase took: trace, to_ir, vjp, each
    pass, the backend's lowering and code generation, the cache, the first run.

    \b
    Examples:
      yota-ir compile model.py:loss --example example
      yota-ir compile model.py:loss --example example --cache
      yota-ir compile model.py:loss --example example --forward --backend interp
    """
    t = load_target(target, args_expr, example, seed)
    shown = phases.current() is not None  # --timings prints the table on stderr
    kind = "forward" if forward else "grad"
    with phases.compiling(t.name, kind, backend) as rec, user_code(f"compiling {t.name}"):
        if forward:
            yota.compile(t.func, *t.args, backend=backend, cache=cache)
        else:
            yota.grad(t.func, *t.args, backend=backend, cache=cache)
    if not shown:
        click.echo(phases.table(rec))
