"""``yota-ir ir``, ``opt`` and ``passes``: IR at every stage, passes over IR text."""

from __future__ import annotations

from typing import Any

import click

from yota.ir import passes as _passes
from yota.ir.parser import parse_module

from .app import ToolError, main
from .stages import STAGES, build_stages, echo_function, echo_stages, pass_names, run_passes
from .targets import load_target, target_options, trace_target
from .transform_stages import TRANSFORMS, transform_stages


@main.command("ir")
@target_options
@click.option("--stage", type=click.Choice(list(STAGES)), default=None,
              help="Which IR to print (default: traced; see Stages above).")
@click.option("--all-stages", is_flag=True,
              help="Print every stage up to --stage (default: all): traced, grad, then the "
                   "output of each pass, each under a '# ==== pass 3/12: cse ====' header.")
@click.option("--changed", is_flag=True, help="With --all-stages: only stages that changed.")
@click.option("--fast-math", is_flag=True, help="Let passes make rewrites that are not exact "
                                                "in IEEE arithmetic.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (see below).")
@click.option("--transform", type=click.Choice(TRANSFORMS), default=None,
              help="Print the program of yota.jvp / vmap / jacobian / hessian instead of the "
                   "gradient's (stage 'grad' is then the transformed program, the default).")
@click.option("--in-axes", default=None, metavar="EXPR",
              help="With --transform vmap: the batch axis per argument (an int, None, or a "
                   "tuple with one per argument; default 0).")
@click.option("--batch-size", type=int, default=8, show_default=True,
              help="With --transform vmap: the number of examples.")
@click.option("--argnums", type=int, default=0, show_default=True,
              help="With --transform jacobian/hessian: the argument to differentiate by.")
def ir_cmd(target: str, args_expr: str | None, example: str | None, seed: int,
           stage: str | None, all_stages: bool, changed: bool, fast_math: bool,
           as_json: bool, transform: str | None = None, in_axes: str | None = None,
           batch_size: int = 8, argnums: int = 0) -> None:
    """Print the typed IR of TARGET at one stage of the pipeline, or at every stage.

    \b
    Stages:
      traced     the tape as typed SSA IR (yota.to_ir(tape))
      grad       value and gradients, by rule rewrites (w.r.t. every float leaf)
      optimized  after the default pipeline's passes before fusion
      fused      after fusion (elementwise chains become `fused` kernels)
      planned    after memory planning: the program yota.grad runs

    \b
    Examples:
      yota-ir ir model.py:loss --example example
      yota-ir ir model.py:loss --example example --stage grad > grad.yir
      yota-ir ir model.py:loss --example example --all-stages --changed
      yota-ir ir model.py:loss --example example --stage planned --json
      yota-ir ir model.py:predict --example example --transform jvp
      yota-ir ir model.py:loss --example one --transform vmap --in-axes '(None, 0, 0)'
      yota-ir ir model.py:predict --example example --transform jacobian --stage fused

    \b
    --json prints {"schema", "kind": "ir", "target", "stage", "entry", "functions": [...],
    "text"} (--all-stages: {"kind": "stages", "stages": [{"index", "name", "changed",
    "entry", "functions", "text"}]}); a function is {"name", "attrs", "inputs": [{"name",
    "label", "type", "dtype", "shape"}], "ops": [{"results": [{"name", "type", "dtype",
    "shape", "buffer"?}], "op", "operands", "attrs", "loc", "phase"}], "outputs", "callees"};
    "phase" is forward, backward ("adjoint of ..." provenance), mixed or null.
    """
    if changed and not all_stages:
        raise click.UsageError("--changed goes with --all-stages")
    t = load_target(target, args_expr, example, seed)
    upto = stage or ("planned" if all_stages else "grad" if transform else "traced")
    if transform:  # the transformed program's stages (yota/cli/transform_stages.py)
        stages = transform_stages(trace_target(t), transform, upto, in_axes=in_axes,
                                  batch=batch_size, argnums=argnums, fast_math=fast_math)
    else:
        stages = build_stages(trace_target(t), upto, fast_math=fast_math)
    extra = {"target": t.spec, "stage": upto}
    if all_stages:
        echo_stages(stages, only_changed=changed, as_json=as_json, extra=extra)
    else:
        echo_function(stages[-1][1], as_json, extra)


@main.command()
@click.argument("file", type=click.File("r"), metavar="FILE.yir")
@click.option("--passes", "-p", "passes_text", default="", metavar="P1,P2,...",
              help="Passes to run, in order ('default': the default pipeline). None: print "
                   "the IR back unchanged.")
@click.option("--all-stages", is_flag=True, help="Print the IR after every pass.")
@click.option("--changed", is_flag=True, help="With --all-stages: only stages that changed.")
@click.option("--fast-math", is_flag=True, help="Allow rewrites that are not exact in IEEE "
                                                "arithmetic.")
@click.option("--verify/--no-verify", default=True, show_default=True,
              help="Verify the input and the output of every pass.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (as `ir`).")
def opt(file: Any, passes_text: str, all_stages: bool, changed: bool, fast_math: bool,
        verify: bool, as_json: bool) -> None:
    """Read IR text (the printer's format; '-' reads stdin), run the named passes, and
    print the result, like mlir-opt. The last function in the file is the entry; the
    functions before it are its callees.

    \b
    Examples:
      yota-ir ir model.py:loss --example example --stage grad > grad.yir
      yota-ir opt grad.yir                              # prints grad.yir back
      yota-ir opt grad.yir --passes simplify,cse,dce
      yota-ir opt grad.yir --passes default --all-stages --changed
      yota-ir ir model.py:loss --example example --stage grad | yota-ir opt - -p fuse

    Run `yota-ir passes` for the list of passes.
    """
    if changed and not all_stages:
        raise click.UsageError("--changed goes with --all-stages")
    funcs = parse_module(file.read())
    if not funcs:
        raise ToolError(f"{file.name}: no function found")
    fn = funcs[-1]
    dropped = [f.name for f in funcs if f.name not in fn.all_callees() and f is not fn]
    if dropped:
        click.echo(f"note: only @{fn.name} and its callees are kept; ignored: "
                   + ", ".join(f"@{n}" for n in dropped), err=True)
    stages = run_passes(fn, pass_names(passes_text), fast_math=fast_math, verify=verify)
    extra = {"file": file.name, "passes": [n for n, _ in stages[1:]]}
    if all_stages:
        echo_stages(stages, only_changed=changed, as_json=as_json, extra=extra)
    else:
        echo_function(stages[-1][1], as_json, extra)


@main.command("passes")
def passes_cmd() -> None:
    """List the optimization passes and the default pipeline, with the reason for each.

    \b
    Example:
      yota-ir passes
    """
    passes = _passes
    click.echo("passes:")
    width = max(len(n) for n in passes.PASSES)
    for name, p in passes.PASSES.items():
        click.echo(f"  {name:<{width}}  {getattr(p, 'reason', '')}")
    click.echo("\ndefault pipeline (yota.grad runs it; `yota-ir opt -p default`):")
    for i, (name, why) in enumerate(passes.PIPELINE, 1):
        click.echo(f"  {i:2}. {name:<{width}}  {why}")
