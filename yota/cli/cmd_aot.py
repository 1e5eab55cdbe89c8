"""``yota-ir aot``: compile a target's gradient ahead of time."""

from __future__ import annotations

import click

from yota.aot import aot

from .app import main, user_code
from .targets import load_target, target_options


@main.command("aot")
@target_options
@click.option("-o", "--output", default=None, metavar="DIR",
              help="Write into DIR (a cache directory that can be shipped; use it with "
                   "YOTA_CACHE_DIR=DIR) instead of the user's cache.")
@click.option("--shared-library", is_flag=True,
              help="Link DIR/lib<NAME>.so with DIR/<NAME>.h (C functions; needs gcc).")
@click.option("--name", default=None, metavar="NAME",
              help="The C function's name [default: <function>_grad].")
def aot_cmd(target: str, args_expr: str | None, example: str | None, seed: int,
            output: str | None, shared_library: bool, name: str | None) -> None:
    """Compile TARGET's gradient ahead of time, for the signature of its example arguments.

    \b
    Examples:
      yota-ir aot model.py:loss --example example                # into the user's cache
      yota-ir aot model.py:loss --example example -o shipped/     # a shippable cache dir
      yota-ir aot model.py:loss --example example -o lib/ --shared-library
    """
    if shared_library and output is None:
        raise click.UsageError("--shared-library needs -o DIR")
    t = load_target(target, args_expr, example, seed)
    with user_code(f"tracing {t.name}"):
        r = aot(t.func, *t.args, path=output, shared_library=shared_library, name=name)
    if r.library is not None:
        lib = r.library
        click.echo(f"wrote {lib.library}\n      {lib.header}\n      {lib.manifest}")
        for p in lib.programs:
            click.echo(f"  int {p['name']}({len(p['inputs'])} inputs, {len(p['outputs'])} "
                       f"outputs); workspace {p['workspace_bytes']} bytes")
        return
    what = "compiled and stored" if r.compiled else "already stored"
    click.echo(f"{what}: {r.key}\n  {r.path}")
