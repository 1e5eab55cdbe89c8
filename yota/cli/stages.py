"""Building and printing stages for the commands: the pipeline's stages of a target,
passes over parsed IR (verified after each), and printing them as text or JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click

from yota import pipeline
from yota.ir import passes as _passes
from yota.ir.core import Function
from yota.ir.errors import YotaError
from yota.ir.printer import print_function
from yota.ir.to_json import SCHEMA, module_json
from yota.ir.verifier import verify as verify_ir
from yota.tape import Tape

from .app import ToolError

STAGES = pipeline.STAGES


def float_leaves(tape: Tape, fn: Function) -> list[int]:
    """The inputs yota.grad differentiates: every float leaf of the arguments."""
    return pipeline.float_leaves(tape, fn)


def build_stages(tape: Tape, upto: str, *, fast_math: bool = False) -> list[tuple[str, Function]]:
    """``[("traced", fn), ("grad", fn), (pass name, fn after it), ...]`` through ``upto``."""
    try:
        return pipeline.stages(tape, upto, fast_math=fast_math)
    except pipeline.StageError as e:
        raise ToolError(str(e)) from None


def run_passes(fn: Function, names: Sequence[str], *, fast_math: bool = False,
               verify: bool = True) -> list[tuple[str, Function]]:
    """``[("input", fn), (pass, fn after it), ...]``; with ``verify``, the input is checked
    before any pass runs and each pass's output after, naming the first that breaks it."""
    if verify:
        _verify_stage("input", fn)
    stages = pipeline.run_passes(fn, names, fast_math=fast_math)
    if verify:
        for name, f in stages[1:]:
            _verify_stage(name, f)
    return stages


def _verify_stage(name: str, fn: Function) -> None:
    try:
        verify_ir(fn)
    except YotaError as e:
        what = "the input" if name == "input" else f"pass {name!r}"
        raise ToolError(f"{what} gives invalid IR: {type(e).__name__}: {e}") from e


def pass_names(text: str) -> list[str]:
    """``dce,cse`` -> the pass names; ``default`` stands for the whole default pipeline."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    out: list[str] = []
    for n in names:
        if n in ("default", "pipeline"):
            out += [p for p, _ in _passes.PIPELINE]
        elif n in _passes.PASSES:
            out.append(n)
        else:
            raise click.BadParameter(f"unknown pass {n!r}; passes: "
                                     f"{', '.join(_passes.PASSES)} (or 'default')",
                                     param_hint="--passes")
    return out


_NOT_PASSES = ("traced", "grad", "input")


def stage_titles(stages: Sequence[tuple[str, Function]]) -> list[str]:
    """``traced``, ``grad``, ``input``, then ``pass 3/12: cse`` for the passes."""
    total = sum(name not in _NOT_PASSES for name, _ in stages)
    out, k = [], 0
    for name, _ in stages:
        if name in _NOT_PASSES:
            out.append(name)
        else:
            k += 1
            out.append(f"pass {k}/{total}: {name}")
    return out


def echo_stages(stages: list[tuple[str, Function]], *, only_changed: bool, as_json: bool,
                extra: dict[str, Any]) -> None:
    """Every stage under a ``# ==== title ====`` header (``--all-stages``), or only those
    that changed the printed IR."""
    rows, prev = [], None
    for i, ((name, fn), title) in enumerate(zip(stages, stage_titles(stages), strict=True)):
        text = print_function(fn)
        changed = text != prev
        prev = text
        if changed or not only_changed:
            rows.append((i, name, title, fn, text, changed))
    if as_json:
        click.echo(json.dumps({"schema": SCHEMA, "kind": "stages", **extra, "stages": [
            {"index": i, "name": name, "title": title, "changed": changed, **module_json(fn)}
            for i, name, title, fn, _, changed in rows]}, indent=1))
        return
    click.echo("\n\n".join(f"# ==== {title}{'' if changed else ' (unchanged)'} ====\n{text}"
                           for _, _, title, _, text, changed in rows))


def echo_function(fn: Function, as_json: bool, extra: dict[str, Any]) -> None:
    if as_json:
        click.echo(json.dumps({"schema": SCHEMA, "kind": "ir", **extra, **module_json(fn)},
                              indent=1))
    else:
        click.echo(print_function(fn))
