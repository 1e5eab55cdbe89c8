"""``yota-ir profile``: run a target's compiled gradient (or forward program) many times
under ``yota.profile`` and print the table of its steps (or write a Chrome trace)."""

from __future__ import annotations

import time
from typing import Any

import click

from yota.backends import BACKENDS, DEFAULT_BACKEND
from yota.compile import compile as yota_compile
from yota.grad import grad
from yota.profile import Profile, format_table

from .app import main, user_code
from .targets import load_target, target_options


@main.command("profile")
@target_options
@click.option("-n", "--calls", type=click.IntRange(min=1), default=100, show_default=True,
              help="How many profiled calls.")
@click.option("--warmup", type=click.IntRange(min=1), default=2, show_default=True,
              help="Calls before profiling (tracing, compiling, the profiled variant).")
@click.option("--backend", type=click.Choice(sorted(BACKENDS)), default=DEFAULT_BACKEND,
              show_default=True, help="Which backend runs the program.")
@click.option("--forward", is_flag=True,
              help="Profile the forward program (yota.compile) instead of the gradient.")
@click.option("--trace", "trace_path", metavar="FILE.json", default=None,
              help="Also write the calls and steps as a Chrome trace (Perfetto, "
                   "chrome://tracing).")
@click.option("--top", type=click.IntRange(min=1), default=None,
              help="Show only the TOP sites that took most time.")
def profile_cmd(target: str, args_expr: str | None, example: str | None, seed: int,
                calls: int, warmup: int, backend: str, forward: bool, trace_path: str | None,
                top: int | None) -> None:
    """Run TARGET's compiled gradient (--forward: its forward program) CALLS times under
    `yota.profile` and print where the time goes: each step of the program (fused kernels,
    matrix products, LAPACK calls, copies, guards) by your file:line and op, forward or
    backward, with calls, total, mean and share, most first. `(call)` is the time a call
    spends outside its steps (argument checks, output arrays).

    \b
    Examples:
      yota-ir profile model.py:loss --example example
      yota-ir profile mlp.py:loss --example example -n 1000 --trace mlp.json
      yota-ir profile model.py:predict --example example --forward --backend interp
    """
    t = load_target(target, args_expr, example, seed)
    run = _runner(t.func, t.args, backend, forward)
    what = f"{'the forward program' if forward else 'yota.grad'} of {t.name}"
    p = Profile()
    with user_code(what):
        with p:  # the warm-up builds the profiled variant too
            for _ in range(warmup):
                run()
        p.reset()
        t0 = time.perf_counter()
        with p:
            for _ in range(calls):
                run()
        wall = time.perf_counter() - t0
    click.echo(format_table(p, limit=top))
    click.echo(f"  {calls} calls took {wall * 1e3:.2f} ms of wall time "
               f"({wall / calls * 1e6:.1f} us per call, profiling included)")
    if trace_path:
        p.chrome_trace(trace_path)
        click.echo(f"wrote {trace_path} (open it in https://ui.perfetto.dev or "
                   "chrome://tracing)", err=True)


def _runner(func: Any, args: tuple[Any, ...], backend: str, forward: bool) -> Any:
    if forward:
        compiled = yota_compile(func, *args, backend=backend)
        return lambda: compiled(*args)
    return lambda: grad(func, *args, backend=backend)
