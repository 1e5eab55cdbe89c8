"""``yota-ir mlir``: a target's IR as an upstream MLIR module (``yota.backends.mlir``)."""

from __future__ import annotations

from typing import Any

import click

from yota.ir.errors import YotaError

from .app import ToolError, main
from .stages import build_stages
from .targets import load_target, target_options, trace_target

MLIR_STAGES = ["traced", "grad", "optimized", "fused"]


@main.command("mlir")
@target_options
@click.option("--stage", type=click.Choice(MLIR_STAGES), default="fused", show_default=True,
              help="Which IR to export (fused: the program yota.grad runs).")
@click.option("--lower", is_flag=True,
              help="Print the LLVM-dialect module after the mlir backend's pipeline instead "
                   "(needs mlir-opt-22).")
@click.option("-o", "--output", type=click.File("w"), default="-", metavar="FILE",
              help="Write the module to FILE (default: stdout).")
def mlir_cmd(target: str, args_expr: str | None, example: str | None, seed: int, stage: str,
             lower: bool, output: Any) -> None:
    """Print TARGET's IR at one stage as MLIR in upstream dialects (func, arith, math,
    tensor, linalg), each op located at its Python source line; `mlir-opt-22 FILE`
    parses and verifies it.

    \b
    Examples:
      yota-ir mlir model.py:loss --example example -o loss.mlir
      mlir-opt-22 loss.mlir                      # parse, verify, print back
      yota-ir mlir model.py:loss --example example --stage grad
      yota-ir mlir model.py:loss --example example --lower   # the LLVM dialect
    """
    from yota.backends import mlir

    t = load_target(target, args_expr, example, seed)
    fn = build_stages(trace_target(t), stage)[-1][1]
    try:
        text = mlir.lowered(fn) if lower else mlir.export(fn)
    except YotaError as e:
        raise ToolError(str(e)) from e
    output.write(text if text.endswith("\n") else text + "\n")
