"""``yota-ir check``: yota.grad of a target against finite differences (the one checker,
``yota.ir.autodiff.check``, through ``yota.gradcheck``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import click
import numpy as np

from yota import gradcheck
from yota.grad import grad
from yota.gradcheck import LeafCheck

from .app import EXIT_ERROR, main, user_code
from .targets import Target, load_target, target_options


def _argnames(func: Callable[..., Any], n: int) -> list[str]:
    try:
        params = [p.name for p in inspect.signature(func).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return (params + [f"arg{i}" for i in range(len(params), n)])[:n]


def _tolerance(checks: Sequence[LeafCheck], tol: float | None) -> dict[str, float]:
    if tol is not None:
        return {c.leaf: tol for c in checks}
    return {c.leaf: (1e-3 if c.type.startswith("f32") else 1e-5) for c in checks}


@main.command()
@target_options
@click.option("--tol", type=float, default=None,
              help="Largest relative error accepted [default: 1e-5 for float64 leaves, 1e-3 "
                   "for float32].")
@click.option("--eps", type=float, default=None,
              help="Finite-difference step, scaled by max(1, |x|) [default: 1e-6; the "
                   "differences are taken in float64, float32 arguments made float64].")
@click.option("--max-elements", type=int, default=64, show_default=True,
              help="Elements checked per leaf (a random sample of larger leaves).")
def check(target: str, args_expr: str | None, example: str | None, seed: int,
          tol: float | None, eps: float | None, max_elements: int) -> None:
    """Compare yota.grad of TARGET with central finite differences at the example
    arguments, element by element, and print the worst relative error per argument; exit
    with status 1 if any exceeds the tolerance.

    The relative error of a leaf is max|yota - fd| / max(max|fd|, max|yota|) over the
    elements checked. The finite differences are taken in float64 (float32 arguments are
    made float64 for them), so a float32 model is compared with accurate differences.

    \b
    Examples:
      yota-ir check model.py:loss --example example
      yota-ir check mlp.py:loss --example example --tol 1e-6 --max-elements 500
    """
    t = load_target(target, args_expr, example, seed)
    with user_code(f"yota.grad of {t.name}"):
        _, g = grad(t.func, *t.args)
    argnames = _argnames(t.func, len(t.args))
    rng = np.random.default_rng(t.seed)
    with user_code(f"calling {t.name} for finite differences"):
        checks = gradcheck.elementwise(t.func, t.args, g, argnames, eps=eps,
                                       max_elements=max_elements, rng=rng)
    skipped = {name: why for name, arg in zip(argnames, t.args, strict=True)
               if (why := gradcheck.no_float_reason(arg)) is not None}
    tols = _tolerance(checks, tol)
    _echo_checks(t, checks, skipped, tols, argnames)
    bad = [c for c in checks if not c.error <= tols[c.leaf]]
    if bad:
        worst = max(bad, key=lambda c: c.error)
        click.echo(f"FAILED: {len(bad)} leaf(s) above tolerance; worst {worst.leaf}: "
                   f"{worst.error:.2e} > {tols[worst.leaf]:.0e}")
        raise click.exceptions.Exit(EXIT_ERROR)
    click.echo("OK")


def _echo_checks(t: Target, checks: Sequence[LeafCheck], skipped: dict[str, str],
                 tols: dict[str, float], argnames: Sequence[str]) -> None:
    click.echo(f"yota.grad of {t.name} vs central finite differences at the example arguments")
    w = max([len(c.leaf) for c in checks] + [4])
    tw = max([len(c.type) for c in checks] + [4])
    click.echo(f"  {'leaf':<{w}}  {'type':<{tw}}  {'checked':>9}  rel. error")
    for c in checks:
        click.echo(f"  {c.leaf:<{w}}  {c.type:<{tw}}  {f'{c.checked}/{c.size}':>9}  "
                   f"{c.error:.2e}")
    click.echo("worst relative error per argument:")
    aw = max(len(a) for a in argnames) if argnames else 4
    for name in argnames:
        mine = [c for c in checks if c.arg == name]
        if not mine:
            click.echo(f"  {name:<{aw}}  -         {skipped.get(name, '')}")
            continue
        worst = max(mine, key=lambda c: c.error)
        ok = "ok" if all(c.error <= tols[c.leaf] for c in mine) else "FAIL"
        click.echo(f"  {name:<{aw}}  {worst.error:.2e}  {ok} (tolerance {tols[worst.leaf]:.0e})")
