"""``yota-ir``: every stage of Yota, from the shell (as ``mlir-opt`` is for MLIR).

    yota-ir tape model.py:loss --example example          # the Yota-style tape
    yota-ir ir model.py:loss --example example --stage grad
    yota-ir ir model.py:loss --example example --all-stages --changed
    yota-ir opt grad.yir --passes simplify,cse,dce         # passes on IR text
    yota-ir graph model.py:loss --example example -o loss.svg
    yota-ir check model.py:loss --example example          # yota.grad vs finite differences
    yota-ir compile model.py:loss --example example        # where its compile's time goes
    yota-ir profile model.py:loss --example example        # time per step, by file:line

A target is ``FILE.py:FUNC`` or ``package.module:FUNC``; its example arguments come from
``--args 'EXPR'`` (evaluated in the target's module, with ``np`` available) or
``--example FUNC2`` (a function of that module returning the argument tuple).

One small module per command (``cmd_*.py``), each a ``click`` command added to ``main``
(``app.py``) that takes ``target_options`` (``targets.py``) and calls library functions:
the stages come from ``yota.pipeline`` (``stages.py``), JSON and DOT of IR from
``yota.ir.to_json`` and ``yota.ir.dot``, the tape's JSON from ``yota.tape_json``, the
gradient check from ``yota.gradcheck`` (the one finite-difference checker).
"""

from __future__ import annotations

from yota.ir.dot import COLORS, to_dot
from yota.ir.to_json import function_json, module_json, phase, value_names
from yota.tape_json import tape_json

from . import (
    cmd_aot,
    cmd_cache,
    cmd_check,
    cmd_compile,
    cmd_graph,
    cmd_ir,
    cmd_mlir,
    cmd_native,
    cmd_profile,
    cmd_tape,
)
from .app import EXIT_ERROR, EXIT_INTERNAL, ToolError, main, user_code, user_traceback
from .stages import STAGES, build_stages, float_leaves, pass_names, run_passes
from .targets import (
    Target,
    example_args,
    load_module,
    load_target,
    split_target,
    target_options,
    trace_target,
)

__all__ = [
    "COLORS", "EXIT_ERROR", "EXIT_INTERNAL", "STAGES", "Target", "ToolError", "build_stages",
    "cmd_aot", "cmd_cache", "cmd_check", "cmd_compile", "cmd_graph", "cmd_ir", "cmd_mlir", "cmd_native", "cmd_profile",
    "cmd_tape",
    "example_args", "float_leaves", "function_json", "load_module", "load_target", "main",
    "module_json", "pass_names", "phase", "run_passes", "split_target", "tape_json",
    "target_options", "to_dot", "trace_target", "user_code", "user_traceback", "value_names",
]
