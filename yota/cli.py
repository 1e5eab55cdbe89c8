"""``yota-ir``: every stage of Yota, from the shell (as ``mlir-opt`` is for MLIR).

    yota-ir tape model.py:loss --example example          # the Yota-style tape
    yota-ir ir model.py:loss --example example --stage grad
    yota-ir ir model.py:loss --example example --all-stages --changed
    yota-ir opt grad.yir --passes simplify,cse,dce         # passes on IR text
    yota-ir graph model.py:loss --example example -o loss.svg
    yota-ir check model.py:loss --example example          # yota.grad vs finite differences

A target is ``FILE.py:FUNC`` or ``package.module:FUNC``; its example arguments come from
``--args 'EXPR'`` (evaluated in the target's module, with ``np`` available) or
``--example FUNC2`` (a function of that module returning the argument tuple).

The group leaves room for later subcommands (``cuda``, ``cache``, ``aot``): each is a
``click`` command added to ``main`` that takes ``target_options`` and calls
``load_target``/``build_stages`` like the ones below.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import json
import math
import os
import random
import shutil
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import click
import numpy as np

from yota.ir.core import Function, Op, Value
from yota.ir.errors import YotaError
from yota.ir.printer import callee_order, format_attr, print_function
from yota.ir.types import TensorType, dtype_name

from . import pipeline, structs
from .tape import Entry, Tape, Var
from .tape_print import format_entry, format_static

EXIT_ERROR = 1  # an error in the user's code, a Yota error, a failed check
EXIT_INTERNAL = 3  # a bug in Yota itself

STAGES: dict[str, str] = {
    "traced": "the tape as typed IR (tape.to_ir())",
    "grad": "value and gradients by rule rewrites (vjp, w.r.t. every float leaf)",
    "optimized": "after the default pipeline's passes that come before fusion",
    "fused": "after fusion: elementwise chains become `fused` kernels",
    "planned": "after memory planning: the program yota.grad runs",
}
_SCHEMA = "yota-ir/1"


# -- errors ------------------------------------------------------------------------------
class ToolError(click.ClickException):
    """An error reported as ``error: <message>`` on stderr, with a non-zero exit."""

    def __init__(self, message: str, exit_code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


_HERE = os.path.abspath(__file__)
_PKG_DIRS = tuple(os.path.dirname(os.path.abspath(m.__file__ or "")) + os.sep
                  for m in (click, sys.modules["yota"], sys.modules["yota.ir"]))


def _is_machinery(filename: str) -> bool:
    """Frames of this tool, click, Yota and importlib that lead into the user's code."""
    return (os.path.abspath(filename) == _HERE or filename.startswith("<frozen importlib")
            or os.path.abspath(filename).startswith(_PKG_DIRS))


def user_traceback(e: BaseException) -> str | None:
    """``e``'s traceback from the first frame of the user's code on (None if it has no
    such frame: then the error is Yota's own). A SyntaxError gives its location."""
    tb = e.__traceback__
    while tb is not None and _is_machinery(tb.tb_frame.f_code.co_filename):
        tb = tb.tb_next
    if tb is None and not isinstance(e, SyntaxError):
        return None
    return "".join(traceback.format_exception(type(e), e, tb)).rstrip()


@contextlib.contextmanager
def user_code(what: str) -> Iterator[None]:
    """Run the user's code: an exception raised there (not a YotaError) is reported with
    the user's traceback, not as a crash of the tool. YotaErrors, and exceptions that
    never passed through the user's code, propagate."""
    try:
        yield
    except (YotaError, click.ClickException, click.exceptions.Exit, click.Abort):
        raise
    except Exception as e:
        tb = user_traceback(e)
        if tb is None:
            raise
        raise ToolError(f"{what} raised {type(e).__name__}:\n\n{tb}") from e


class _Group(click.Group):
    """Turns YotaErrors into clean messages and anything else into a reported bug."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except YotaError as e:
            if ctx.meta.get("yota_ir.traceback"):
                click.echo("".join(traceback.format_exception(e)).rstrip(), err=True)
            raise ToolError(f"{type(e).__name__}: {e}") from e
        except Exception as e:
            tb = "".join(traceback.format_exception(e)).rstrip()
            raise ToolError(f"internal error in Yota (a bug: please report it with this "
                            f"traceback)\n\n{tb}", EXIT_INTERNAL) from e


# -- targets -----------------------------------------------------------------------------
@dataclass
class Target:
    """The function a subcommand looks at, its module and its example arguments."""

    spec: str
    module: ModuleType
    func: Callable[..., Any]
    args: tuple[Any, ...]
    seed: int

    @property
    def name(self) -> str:
        return getattr(self.func, "__name__", self.spec.rsplit(":", 1)[-1])


def split_target(spec: str) -> tuple[str, str]:
    where, sep, func = spec.rpartition(":")
    if not sep or not where or not func:
        raise click.BadParameter(f"{spec!r} is not FILE.py:FUNC or package.module:FUNC",
                                 param_hint="TARGET")
    return where, func


def _is_file(where: str) -> bool:
    return where.endswith(".py") or os.sep in where or "/" in where


def load_module(where: str) -> ModuleType:
    """Import ``where``: a path to a ``.py`` file, or a dotted module name (found from the
    current directory first, as ``python -m`` does)."""
    if _is_file(where):
        return _load_file(where)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        found = importlib.util.find_spec(where) is not None
    except ModuleNotFoundError:
        found = False
    except Exception:  # a parent package failed to import: import_module below shows how
        found = True
    if not found:
        raise ToolError(f"cannot import {where!r}: no such module (run from the directory "
                        f"that holds it, or give a FILE.py)")
    with user_code(f"importing {where}"):
        return importlib.import_module(where)


def _load_file(path: str) -> ModuleType:
    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise ToolError(f"no such file: {path}")
    folder, stem = os.path.dirname(path), os.path.splitext(os.path.basename(path))[0]
    if folder not in sys.path:
        sys.path.insert(0, folder)
    old = sys.modules.get(stem)
    name = stem if old is None or getattr(old, "__file__", None) == path else f"{stem}__yota_ir"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ToolError(f"cannot load {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look modules up here
    with user_code(f"loading {os.path.basename(path)}"):
        spec.loader.exec_module(module)
    return module


def _lookup(module: ModuleType, dotted: str, what: str) -> Any:
    obj: Any = module
    for part in dotted.split("."):
        if not hasattr(obj, part):
            names = sorted(n for n, v in vars(module).items()
                           if callable(v) and not n.startswith("_")
                           and getattr(v, "__module__", None) == module.__name__)
            hint = f"; it defines: {', '.join(names)}" if names else ""
            raise ToolError(f"{what} {dotted!r} not found in {module.__name__}{hint}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ToolError(f"{what} {dotted!r} in {module.__name__} is not callable")
    return obj


def _seed(seed: int) -> None:
    np.random.seed(seed)
    random.seed(seed)


def example_args(module: ModuleType, func: Callable[..., Any], args_expr: str | None,
                 example: str | None, seed: int) -> tuple[Any, ...]:
    """The argument tuple: ``--args`` evaluated in the module, or ``--example``'s result."""
    if args_expr is not None and example is not None:
        raise click.UsageError("give either --args or --example, not both")
    _seed(seed)
    if args_expr is not None:
        namespace = {"np": np, "numpy": np, **vars(module)}
        with user_code(f"evaluating --args {args_expr!r}"):
            value = eval(compile(args_expr, "<--args>", "eval"), namespace)  # noqa: S307
        return value if isinstance(value, tuple) else (value,)
    if example is not None:
        make = _lookup(module, example, "example function")
        kwargs = {}
        with contextlib.suppress(TypeError, ValueError):
            if "rng" in inspect.signature(make).parameters:
                kwargs["rng"] = np.random.default_rng(seed)
        with user_code(f"the example function {example}()"):
            value = make(**kwargs)
        return value if isinstance(value, tuple) else (value,)
    if _needs_args(func):
        raise click.UsageError(
            f"{getattr(func, '__name__', 'the target')} takes arguments: give them with "
            f"--args 'EXPR' (a Python expression for the argument tuple) or --example FUNC "
            f"(a function in the same module that returns it)")
    return ()


def _needs_args(func: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               for p in params)


def load_target(spec: str, args_expr: str | None, example: str | None, seed: int) -> Target:
    where, fname = split_target(spec)
    module = load_module(where)
    func = _lookup(module, fname, "function")
    return Target(spec, module, func, example_args(module, func, args_expr, example, seed), seed)


def target_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """TARGET and the example-argument options shared by the subcommands."""
    decorators = [
        click.argument("target", metavar="TARGET"),
        click.option("--args", "args_expr", metavar="EXPR",
                     help="Example arguments: a Python expression evaluated in TARGET's "
                          "module with np available; a tuple gives several arguments "
                          "(end a single tuple argument with a comma: '(a, b),')."),
        click.option("--example", metavar="FUNC",
                     help="A function in TARGET's module that returns the argument tuple "
                          "(it gets np.random.default_rng(SEED) if it takes `rng`)."),
        click.option("--seed", type=int, default=0, show_default=True,
                     help="Seeds np.random and random before the example arguments are made."),
    ]
    for deco in reversed(decorators):
        command = deco(command)
    return command


def trace_target(t: Target) -> Tape:
    from .tracer import trace

    with user_code(f"tracing {t.name}"):
        _, tape = trace(t.func, *t.args)
    return tape


# -- stages ------------------------------------------------------------------------------
def _passes_module(stage: str) -> Any:
    try:
        return importlib.import_module("yota.ir.passes")
    except ImportError as e:
        raise ToolError(f"stage {stage!r} is not available yet: the optimization passes "
                        f"(yota.ir.passes) cannot be imported ({e})") from e


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
    stages = [("input", fn)]
    if verify:
        _verify_stage("input", fn)
    if names:
        stages = list(_passes_module("opt").optimize(fn, list(names), fast_math=fast_math,
                                                     trace_stages=True))
    if verify:
        for name, f in stages[1:]:
            _verify_stage(name, f)
    return stages


def _verify_stage(name: str, fn: Function) -> None:
    from yota.ir.verifier import verify

    try:
        verify(fn)
    except YotaError as e:
        what = "the input" if name == "input" else f"pass {name!r}"
        raise ToolError(f"{what} gives invalid IR: {type(e).__name__}: {e}") from e


def pass_names(text: str) -> list[str]:
    """``dce,cse`` -> the pass names; ``default`` stands for the whole default pipeline."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        return []
    passes = _passes_module("opt")
    out: list[str] = []
    for n in names:
        if n in ("default", "pipeline"):
            out += [p for p, _ in passes.PIPELINE]
        elif n in passes.PASSES:
            out.append(n)
        else:
            raise click.BadParameter(f"unknown pass {n!r}; passes: "
                                     f"{', '.join(passes.PASSES)} (or 'default')",
                                     param_hint="--passes")
    return out


# -- printing and JSON -------------------------------------------------------------------
def value_names(fn: Function) -> dict[Value, str]:
    """``%0, %1, ...`` as the printer assigns them: inputs, then results in order."""
    vals = list(fn.inputs) + [r for op in fn.ops for r in op.results]
    return {v: f"%{i}" for i, v in enumerate(vals)}


def phase(op: Op) -> str | None:
    """``forward``, ``backward`` (its provenance is "adjoint of ..."), ``mixed`` (a kernel
    fusing both) or None (no provenance)."""
    locs = [s.strip() for s in (op.loc or "").split(";") if s.strip() not in ("", "...")]
    if not locs:
        return None
    back = {s.startswith("adjoint of") for s in locs}
    return "mixed" if len(back) == 2 else "backward" if True in back else "forward"


def _json_scalar(x: Any) -> Any:
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        f = float(x)
        return f if math.isfinite(f) else format_attr(f)
    return str(x)


def json_attr(v: Any) -> Any:
    """An attribute as JSON: arrays as ``{dtype, shape, value}`` (one value if all equal)."""
    if isinstance(v, str):
        return v
    if isinstance(v, np.dtype):
        return dtype_name(v)
    if isinstance(v, np.ndarray):
        flat = v.reshape(-1)
        splat = flat.size > 0 and bool(np.all(flat == flat[0]))
        value = _json_scalar(flat[0]) if splat else json.loads(
            json.dumps(v.tolist(), default=str).replace("NaN", '"nan"')
            .replace("-Infinity", '"-inf"').replace("Infinity", '"inf"'))
        return {"dtype": dtype_name(v.dtype), "shape": list(v.shape), "value": value}
    if isinstance(v, (list, tuple)):
        return [json_attr(x) for x in v]
    return _json_scalar(v)


def json_type(t: TensorType) -> dict[str, Any]:
    return {"type": str(t), "dtype": dtype_name(t.dtype), "shape": list(t.shape)}


def function_json(fn: Function) -> dict[str, Any]:
    """One function: inputs, ops (results, op, operands, attrs, loc, phase), outputs."""
    names = value_names(fn)
    buffers = _buffers(fn)
    ops = []
    for op in fn.ops:
        results = [{"name": names[r], **json_type(r.type),
                    **({"buffer": buffers[r]} if r in buffers else {})} for r in op.results]
        ops.append({"results": results, "op": op.name,
                    "operands": [names.get(v, "?") for v in op.operands],
                    "attrs": {k: json_attr(op.attrs[k]) for k in sorted(op.attrs)},
                    "loc": op.loc, "phase": phase(op)})
    return {
        "name": fn.name,
        "attrs": {k: json_attr(fn.attrs[k]) for k in sorted(fn.attrs)},
        "inputs": [{"name": names[v], "label": lab, **json_type(v.type)}
                   for v, lab in zip(fn.inputs, fn.input_labels, strict=True)],
        "ops": ops,
        "outputs": [{"name": names.get(v, "?"), "label": lab, **json_type(v.type)}
                    for v, lab in zip(fn.outputs, fn.output_labels, strict=True)],
        "callees": sorted(fn.callees),
    }


def module_json(fn: Function) -> dict[str, Any]:
    """``fn`` with its callees: ``{"entry": name, "functions": [callees..., fn], "text"}``."""
    return {"entry": fn.name, "functions": [function_json(f) for f in [*callee_order(fn), fn]],
            "text": print_function(fn)}


def _buffers(fn: Function) -> dict[Value, int]:
    passes = sys.modules.get("yota.ir.passes")
    plan_cls = getattr(passes, "MemoryPlan", None)
    plan = plan_cls.of(fn) if plan_cls is not None else None
    return plan.buffer_of(fn) if plan is not None else {}


def _json_static(x: Any) -> Any:
    """A tape argument: ``{"var": id}``, ``{"seq": [...], "kind": "tuple"}`` when it holds
    variables, else ``{"static": text}``."""
    if isinstance(x, Var):
        return {"var": x.id}
    if isinstance(x, (list, tuple)) and _has_var(x):
        return {"seq": [_json_static(v) for v in x], "kind": type(x).__name__}
    if isinstance(x, dict) and _has_var(x):
        return {"dict": {str(k): _json_static(v) for k, v in x.items()}}
    return {"static": format_static(x)}


def _has_var(x: Any) -> bool:
    if isinstance(x, Var):
        return True
    if isinstance(x, (list, tuple)):
        return any(_has_var(v) for v in x)
    if isinstance(x, dict):
        return any(_has_var(v) for v in x.values())
    return False


def _json_loc(loc: Any) -> dict[str, Any] | None:
    if loc is None:
        return None
    return {"file": loc.file, "line": loc.line, "func": loc.func, "text": str(loc),
            "source": loc.source_line()}


def _json_var(v: Var, value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"id": v.id, "weak": v.weak}
    if v.type is not None:
        out.update(json_type(v.type))
    else:
        out.update({"type": None, "python_type": type(value).__name__})
    return out


def entry_json(e: Entry) -> dict[str, Any]:
    values = list(e.value) if len(e.outs) > 1 else [e.value] * len(e.outs)
    out: dict[str, Any] = {
        "kind": e.kind, "fn": e.fn or None,
        "outs": [_json_var(v, val) for v, val in zip(e.outs, values, strict=True)],
        "args": [_json_static(a) for a in e.args],
        "kwargs": {k: _json_static(v) for k, v in e.kwargs.items()},
        "loc": _json_loc(e.loc), "text": format_entry(e),
    }
    if e.kind == "guard":
        out["guard"] = {"kind": e.extra["kind"], "expected": _json_scalar(e.extra["expected"])}
    return out


def tape_json(tape: Tape) -> dict[str, Any]:
    return {
        "schema": _SCHEMA, "kind": "tape", "function": tape.fname, "loc": _json_loc(tape.loc),
        "argnames": list(tape.argnames),
        "leaves": [{"var": v.id, "arg": a, "path": structs.format_path(p, tape.argnames[a])}
                   for a, p, v in tape.leaf_vars],
        "entries": [entry_json(e) for e in tape.entries],
        "result": _json_static(tape.result), "text": str(tape),
    }


def format_tape_with_source(tape: Tape) -> str:
    """The tape with each entry's source line after it."""
    lines = str(tape).splitlines()
    out = lines[:1]
    for line, e in zip(lines[1:], tape.entries, strict=False):
        src = e.loc.source_line() if e.loc is not None else ""
        out.append(f"{line}  | {src}" if src else line)
    return "\n".join(out + lines[1 + len(tape.entries):])


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
        click.echo(json.dumps({"schema": _SCHEMA, "kind": "stages", **extra, "stages": [
            {"index": i, "name": name, "title": title, "changed": changed, **module_json(fn)}
            for i, name, title, fn, _, changed in rows]}, indent=1))
        return
    click.echo("\n\n".join(f"# ==== {title}{'' if changed else ' (unchanged)'} ====\n{text}"
                           for _, _, title, _, text, changed in rows))


def echo_function(fn: Function, as_json: bool, extra: dict[str, Any]) -> None:
    if as_json:
        click.echo(json.dumps({"schema": _SCHEMA, "kind": "ir", **extra, **module_json(fn)},
                              indent=1))
    else:
        click.echo(print_function(fn))


# -- graphs ------------------------------------------------------------------------------
COLORS = {"forward": "#d6e6ff", "backward": "#ffdcb8", "mixed": "#e6d4f5", None: "#eeeeee"}
_IO_COLOR = "#dff2d8"


def _dot_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _short(s: str, n: int = 40) -> str:
    return s if len(s) <= n else s[:n - 1] + "…"


def _op_label(op: Op, fn: Function, names: dict[Value, str]) -> str:
    results = ", ".join(names[r] for r in op.results)
    lines = [f"{results} = {op.name}" if results else op.name]
    if "callee" in op.attrs:
        lines[0] += f" @{op.attrs['callee']}"
        body = fn.callees.get(op.attrs["callee"])
        if body is not None:
            inner = [o.name for o in body.ops if o.name not in ("broadcast", "const")]
            lines.append(_short(" ".join(inner), 48))
    else:
        attrs = [f"{k}={format_attr(op.attrs[k])}" for k in sorted(op.attrs)]
        if attrs:
            lines.append(_short(", ".join(attrs)))
    if op.loc:
        lines.append(_short(op.loc, 48))
    return "\n".join(lines)


def to_dot(fn: Function, title: str | None = None) -> str:
    """``fn`` as a Graphviz digraph: inputs, ops and the return as nodes, values as edges
    labelled ``%n type`` (and ``buf k`` under a memory plan); ops coloured by phase."""
    names, buffers = value_names(fn), _buffers(fn)
    where: dict[Value, str] = {}
    lines = [f"digraph {_dot_str(fn.name)} {{",
             "  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=11, labelloc=t, "
             f"label={_dot_str(title or '@' + fn.name)}];",
             "  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];",
             "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];"]
    for i, (v, lab) in enumerate(zip(fn.inputs, fn.input_labels, strict=True)):
        where[v] = f"in{i}"
        label = f"{names[v]}: {v.type}" + (f"\n{lab}" if lab else "")
        lines.append(f"  in{i} [label={_dot_str(label)}, fillcolor=\"{_IO_COLOR}\", "
                     "shape=invhouse];")
    for k, op in enumerate(fn.ops):
        node = f"op{k}"
        style = _op_style(op)
        lines.append(f"  {node} [label={_dot_str(_op_label(op, fn, names))}, "
                     f"fillcolor=\"{COLORS[phase(op)]}\"{style}];")
        lines += _edges(op.operands, node, where, names, buffers)
        for r in op.results:
            where[r] = node
    lines.append(f"  ret [label=\"return\", fillcolor=\"{_IO_COLOR}\", shape=house];")
    labels = {v: lab for v, lab in zip(fn.outputs, fn.output_labels, strict=True)}
    lines += _edges(fn.outputs, "ret", where, names, buffers, labels)
    lines.append("  legend [shape=plaintext, style=\"\", fontsize=9, label="
                 "\"blue: forward   orange: backward (adjoint of ...)   purple: kernel with "
                 "both   green: inputs and outputs\"];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _op_style(op: Op) -> str:
    if op.name == "const":
        return ", shape=ellipse, fontsize=8"
    if op.name == "fused":
        return ", peripheries=2"
    if op.name == "guard":
        return ", shape=diamond, style=filled"
    return ""


def _edges(values: Sequence[Value], node: str, where: dict[Value, str], names: dict[Value, str],
           buffers: dict[Value, int], labels: dict[Value, str | None] | None = None) -> list[str]:
    out, seen = [], set()
    for v in values:
        if v in seen or v not in where:
            continue
        seen.add(v)
        label = f"{names[v]} {v.type}"
        if labels and labels.get(v):
            label += f"\n{labels[v]}"
        if buffers.get(v, -1) >= 0:
            label += f"\nbuf {buffers[v]}"
        out.append(f"  {where[v]} -> {node} [label={_dot_str(label)}];")
    return out


def render_dot(dot: str, path: str, fmt: str) -> None:
    """Write ``dot`` as ``fmt`` (dot, svg, png, pdf) to ``path`` ('-': stdout)."""
    if fmt in ("dot", "gv"):
        if path == "-":
            click.echo(dot, nl=False)
        else:
            with open(path, "w") as f:
                f.write(dot)
        return
    exe = shutil.which("dot")
    if exe is None:
        raise ToolError(f"writing {fmt.upper()} needs Graphviz's `dot`, which is not installed: "
                        "install it with `apt-get install graphviz` (Debian/Ubuntu), "
                        "`brew install graphviz` (macOS) or `conda install graphviz`, or "
                        "write DOT text with -o FILE.dot")
    proc = subprocess.run([exe, f"-T{fmt}"], input=dot.encode(), capture_output=True, check=False)
    if proc.returncode != 0:
        raise ToolError(f"dot -T{fmt} failed: {proc.stderr.decode(errors='replace').strip()}")
    if path == "-":
        click.get_binary_stream("stdout").write(proc.stdout)
    else:
        with open(path, "wb") as f:
            f.write(proc.stdout)


# -- gradient check ----------------------------------------------------------------------
@dataclass
class LeafCheck:
    """The finite-difference check of one float leaf of one argument."""

    arg: str
    leaf: str
    type: str
    checked: int
    size: int
    error: float


def _perturbed(leaf: Any, k: int, delta: float) -> Any:
    if type(leaf) is float:
        return leaf + delta
    a = np.array(leaf, copy=True)
    flat = a.reshape(-1)
    flat[k] = flat[k] + delta
    return a if isinstance(leaf, np.ndarray) else a[()]


def _with_leaf(args: tuple[Any, ...], argnum: int, path: tuple[Any, ...], value: Any
               ) -> tuple[Any, ...]:
    new = list(args)
    new[argnum] = structs.rebuild(args[argnum], lambda p, leaf: value if p == path else leaf)
    return tuple(new)


def _gradient_of(g: Any, argnum: int, path: tuple[Any, ...], shape: tuple[int, ...]
                 ) -> np.ndarray:
    gi = g[argnum] if path == () else (g[argnum] or {}).get(path)
    return np.zeros(shape) if gi is None else np.asarray(gi, dtype=np.float64).reshape(shape)


def check_leaf(t: Target, g: Any, argnum: int, path: tuple[Any, ...], leaf: Any, *,
               eps: float | None, max_elements: int, rng: np.random.Generator
               ) -> tuple[int, float]:
    """Central differences on up to ``max_elements`` elements of one leaf; the error is
    ``max|ad - fd| / max(max|fd|, max|ad|)`` over those elements. Returns (how many
    elements were checked, the error)."""
    arr = np.asarray(leaf)
    size = arr.size
    picks = (np.arange(size) if size <= max_elements
             else np.sort(rng.choice(size, max_elements, replace=False)))
    step = eps if eps is not None else (1e-6 if arr.dtype == np.float64 else 1e-2)
    ad = _gradient_of(g, argnum, path, arr.shape).reshape(-1)[picks]
    fd = np.empty(len(picks))
    flat = arr.reshape(-1)
    for j, k in enumerate(picks):
        h = step * max(1.0, abs(float(flat[k])))
        with user_code(f"calling {t.name} for finite differences"):
            plus = float(np.asarray(t.func(*_with_leaf(t.args, argnum, path,
                                                       _perturbed(leaf, int(k), h)))))
            minus = float(np.asarray(t.func(*_with_leaf(t.args, argnum, path,
                                                        _perturbed(leaf, int(k), -h)))))
        fd[j] = (plus - minus) / (2 * h)
    return len(picks), _relative_error(ad, fd)


def _relative_error(ad: np.ndarray, fd: np.ndarray) -> float:
    if ad.size == 0:
        return 0.0
    if not (np.all(np.isfinite(ad)) and np.all(np.isfinite(fd))):
        return math.inf
    scale = max(float(np.max(np.abs(fd))), float(np.max(np.abs(ad))))
    return 0.0 if scale == 0 else float(np.max(np.abs(ad - fd))) / scale


def check_target(t: Target, g: Any, argnames: Sequence[str], *, eps: float | None,
                 max_elements: int) -> tuple[list[LeafCheck], dict[str, str]]:
    """Every float leaf checked; and, for arguments with none, why."""
    rng = np.random.default_rng(t.seed)
    checks: list[LeafCheck] = []
    skipped: dict[str, str] = {}
    for argnum, arg in enumerate(t.args):
        name = argnames[argnum]
        leaves, _ = structs.flatten(arg)
        floats = [(p, leaf) for p, leaf in leaves if np.asarray(leaf).dtype.kind == "f"]
        if not floats:
            skipped[name] = _no_float_reason(arg, leaves)
        for path, leaf in floats:
            n, err = check_leaf(t, g, argnum, path, leaf, eps=eps, max_elements=max_elements,
                                rng=rng)
            checks.append(LeafCheck(name, structs.format_path(path, name), _leaf_type(leaf),
                                    n, int(np.size(leaf)), err))
    return checks, skipped


def _argnames(func: Callable[..., Any], n: int) -> list[str]:
    try:
        params = [p.name for p in inspect.signature(func).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return (params + [f"arg{i}" for i in range(len(params), n)])[:n]


def _leaf_type(leaf: Any) -> str:
    if type(leaf) is float:
        return "float"
    a = np.asarray(leaf)
    return str(TensorType(a.dtype, a.shape))


def _no_float_reason(arg: Any, leaves: list[tuple[Any, Any]]) -> str:
    if not leaves:
        return f"not differentiable ({type(arg).__name__}: a constant of the trace)"
    types = ", ".join(sorted({_leaf_type(leaf) for _, leaf in leaves}))
    return f"not differentiable (no float leaves: {types})"


def _tolerance(checks: Sequence[LeafCheck], tol: float | None) -> dict[str, float]:
    if tol is not None:
        return {c.leaf: tol for c in checks}
    return {c.leaf: (1e-2 if c.type.startswith("f32") else 1e-5) for c in checks}


# -- commands ----------------------------------------------------------------------------
_CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group(cls=_Group, context_settings=_CONTEXT)
@click.version_option(package_name="yota", prog_name="yota-ir")
@click.option("--traceback", "show_traceback", is_flag=True,
              help="Also print the Python traceback of Yota errors.")
@click.pass_context
def main(ctx: click.Context, show_traceback: bool) -> None:
    """Look at every stage of Yota: tapes, IR before and after each pass, graphs, and a
    gradient check.

    TARGET is FILE.py:FUNC or package.module:FUNC; its example arguments come from
    --args 'EXPR' or --example FUNC (see each command's --help).

    \b
    Examples:
      yota-ir tape model.py:loss --args 'Linear(np.random.rand(3,4), np.random.rand(3)), np.random.rand(4,5)'
      yota-ir ir model.py:loss --example example --stage grad
      yota-ir ir model.py:loss --example example --all-stages --changed
      yota-ir ir model.py:loss --example example --stage grad > grad.yir
      yota-ir opt grad.yir --passes simplify,cse,dce
      yota-ir graph model.py:loss --example example -o loss.svg
      yota-ir check model.py:loss --example example

    \b
    Exit status: 0 success; 1 an error in your code, a Yota error, or a failed check;
    2 bad usage; 3 an internal error of Yota (please report it).
    """
    ctx.meta["yota_ir.traceback"] = show_traceback


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
def ir_cmd(target: str, args_expr: str | None, example: str | None, seed: int,
           stage: str | None, all_stages: bool, changed: bool, fast_math: bool,
           as_json: bool) -> None:
    """Print the typed IR of TARGET at one stage of the pipeline, or at every stage.

    \b
    Stages:
      traced     the tape as typed SSA IR (tape.to_ir())
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
    upto = stage or ("planned" if all_stages else "traced")
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
    from yota.ir.parser import parse_module

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
    passes = _passes_module("passes")
    click.echo("passes:")
    width = max(len(n) for n in passes.PASSES)
    for name, p in passes.PASSES.items():
        click.echo(f"  {name:<{width}}  {getattr(p, 'reason', '')}")
    click.echo("\ndefault pipeline (yota.grad runs it; `yota-ir opt -p default`):")
    for i, (name, why) in enumerate(passes.PIPELINE, 1):
        click.echo(f"  {i:2}. {name:<{width}}  {why}")


@main.command()
@target_options
@click.option("--stage", type=click.Choice(list(STAGES)), default="grad", show_default=True,
              help="Which IR to draw.")
@click.option("-o", "--output", default="-", metavar="OUT.svg|png|pdf|dot",
              help="Output file; its extension picks the format. Default: DOT on stdout.")
@click.option("--format", "fmt", type=click.Choice(["dot", "svg", "png", "pdf"]), default=None,
              help="Output format (default: from the extension of -o, else dot).")
@click.option("--fast-math", is_flag=True, help="As for `ir`.")
def graph(target: str, args_expr: str | None, example: str | None, seed: int, stage: str,
          output: str, fmt: str | None, fast_math: bool) -> None:
    """Draw TARGET's IR at a stage as a graph: ops are nodes, values are edges labelled with
    their names and types (and buffers, once memory is planned). Forward ops are blue,
    backward ops (provenance "adjoint of ...") orange, fused kernels that mix both purple.

    DOT output needs nothing else; SVG, PNG and PDF run Graphviz's `dot`
    (`apt-get install graphviz`).

    \b
    Examples:
      yota-ir graph model.py:loss --example example -o loss.svg
      yota-ir graph mlp.py:loss --example example --stage fused -o mlp.png
      yota-ir graph model.py:loss --example example --stage traced > loss.dot
    """
    if fmt is None:
        ext = os.path.splitext(output)[1].lstrip(".").lower()
        fmt = ext if ext in ("dot", "gv", "svg", "png", "pdf") else "dot"
    t = load_target(target, args_expr, example, seed)
    fn = build_stages(trace_target(t), stage, fast_math=fast_math)[-1][1]
    render_dot(to_dot(fn, f"{t.name}: {stage} (@{fn.name})"), output, fmt)
    if output != "-":
        click.echo(f"wrote {output}", err=True)


@main.command()
@target_options
@click.option("--stage", type=click.Choice(list(STAGES)), default="planned", show_default=True,
              help="Which IR to compile (traced: the forward function alone).")
@click.option("--optimized", is_flag=True, help="LLVM IR after LLVM's optimizations.")
@click.option("--asm", is_flag=True, help="The machine assembly instead of LLVM IR.")
@click.option("--threads", type=int, default=None,
              help="Threads the generated code is built for (default: the backend's).")
@click.option("--fast-math", is_flag=True, help="As for `ir`.")
def llvm(target: str, args_expr: str | None, example: str | None, seed: int, stage: str,
         optimized: bool, asm: bool, threads: int | None, fast_math: bool) -> None:
    """Print the LLVM IR (or assembly) the native CPU backend generates for TARGET.

    \b
    Examples:
      yota-ir llvm model.py:loss --example example
      yota-ir llvm model.py:loss --example example --optimized
      yota-ir llvm model.py:loss --example example --asm
    """
    backend = _llvm_backend()
    hook_name = "assembly" if asm else "llvm_ir"
    hook = getattr(backend, hook_name, None)
    if not callable(hook):
        public = sorted(n for n in dir(backend) if not n.startswith("_"))
        raise ToolError(f"yota.backends.llvm has no inspection hook {hook_name}(fn, ...) yet "
                        f"(it has: {', '.join(public)})")
    t = load_target(target, args_expr, example, seed)
    fn = build_stages(trace_target(t), stage, fast_math=fast_math)[-1][1]
    kwargs: dict[str, Any] = {"optimized": optimized} if _accepts(hook, "optimized") else {}
    if optimized and not kwargs and not asm:
        raise ToolError(f"yota.backends.llvm.{hook_name} does not take optimized=")
    if threads is not None:
        if not _accepts(hook, "threads"):
            raise ToolError(f"yota.backends.llvm.{hook_name} does not take threads=")
        kwargs["threads"] = threads
    click.echo(str(hook(fn, **kwargs)).rstrip())


def _llvm_backend() -> ModuleType:
    try:
        found = importlib.util.find_spec("yota.backends.llvm") is not None
    except ImportError:
        found = False
    if not found:
        raise ToolError("the native LLVM backend (yota.backends.llvm) is not available yet; "
                        "`yota-ir ir TARGET --stage planned` shows the IR it will compile")
    try:
        return importlib.import_module("yota.backends.llvm")
    except Exception as e:
        raise ToolError(f"the native LLVM backend (yota.backends.llvm) cannot be imported "
                        f"yet: {type(e).__name__}: {e}") from e


@main.command("cuda")
@target_options
@click.option("--stage", type=click.Choice(list(STAGES)), default="planned", show_default=True,
              help="Which IR to render (traced: the forward function alone).")
@click.option("--check", "check_nvrtc", is_flag=True,
              help="Also compile the module with NVRTC for --arch (needs CuPy and NVRTC, "
                   "not a GPU).")
@click.option("--arch", default="sm_90", show_default=True, metavar="sm_XX",
              help="The GPU architecture --check compiles for.")
@click.option("--fast-math", is_flag=True, help="As for `ir`; kernels also use CUDA's fast "
              "intrinsics (__expf...) and FMA contraction.")
def cuda_cmd(target: str, args_expr: str | None, example: str | None, seed: int, stage: str,
             check_nvrtc: bool, arch: str, fast_math: bool) -> None:
    """Print the CUDA C the CUDA backend generates for TARGET (no GPU needed).

    \b
    Examples:
      yota-ir cuda model.py:loss --example example
      yota-ir cuda model.py:loss --example example --check --arch sm_80
    """
    backend = importlib.import_module("yota.backends.cuda")
    t = load_target(target, args_expr, example, seed)
    fn = build_stages(trace_target(t), stage, fast_math=fast_math)[-1][1]
    config = backend.Config(fast_math=fast_math)
    click.echo(backend.cuda_source(fn, config=config).rstrip())
    if check_nvrtc:
        try:
            sizes = backend.check(fn, (arch,), config=config)
        except backend.CudaUnavailable as e:
            raise ToolError(str(e)) from None
        except backend.CudaCompileError as e:
            raise ToolError(str(e), EXIT_INTERNAL) from None
        click.echo(f"NVRTC: the module compiles for {arch} ({sizes[arch]} bytes of cubin)",
                   err=True)


def _accepts(f: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(f).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


@main.command()
@target_options
@click.option("--tol", type=float, default=None,
              help="Largest relative error accepted [default: 1e-5 for float64 leaves, 1e-2 "
                   "for float32].")
@click.option("--eps", type=float, default=None,
              help="Finite-difference step, scaled by max(1, |x|) [default: 1e-6 for float64, "
                   "1e-2 for float32].")
@click.option("--max-elements", type=int, default=64, show_default=True,
              help="Elements checked per leaf (a random sample of larger leaves).")
def check(target: str, args_expr: str | None, example: str | None, seed: int,
          tol: float | None, eps: float | None, max_elements: int) -> None:
    """Compare yota.grad of TARGET with central finite differences at the example
    arguments, element by element, and print the worst relative error per argument; exit
    with status 1 if any exceeds the tolerance.

    The relative error of a leaf is max|yota - fd| / max(max|fd|, max|yota|) over the
    elements checked.

    \b
    Examples:
      yota-ir check model.py:loss --example example
      yota-ir check mlp.py:loss --example example --tol 1e-6 --max-elements 500
    """
    from .grad import grad

    t = load_target(target, args_expr, example, seed)
    with user_code(f"yota.grad of {t.name}"):
        _, g = grad(t.func, *t.args)
    argnames = _argnames(t.func, len(t.args))
    checks, skipped = check_target(t, g, argnames, eps=eps, max_elements=max_elements)
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


# -- the compiled-program cache and ahead-of-time compilation ------------------------------
@main.group("cache")
@click.option("--dir", "cache_dir", default=None, metavar="DIR",
              help="The cache directory [default: $YOTA_CACHE_DIR, else ~/.cache/yota].")
def cache_group(cache_dir: str | None) -> None:
    """Inspect and manage the on-disk cache of compiled programs (yota.cache).

    \b
    Examples:
      yota-ir cache list
      yota-ir cache info 3f2a91
      yota-ir cache explain model.py:loss --example example
      yota-ir cache verify --remove
      yota-ir cache clear
    """
    if cache_dir is not None:
        os.environ["YOTA_CACHE_DIR"] = os.path.abspath(cache_dir)


@cache_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per entry, in a list.")
def cache_list(as_json: bool) -> None:
    """List the entries, most recently used first."""
    from . import cache as yc

    rows = yc.entries()
    if as_json:
        click.echo(json.dumps(rows, indent=1))
        return
    click.echo(f"{len(rows)} entries, {sum(r['bytes'] for r in rows)} bytes in "
               f"{yc.cache_dir()}")
    for r in rows:
        when = _ago(r["last_used"])
        click.echo(f"  {r['key'][:16]}  {r['bytes']:>9}  {when:>9}  {r['kind'] or '?':<7}  "
                   f"@{r['function']}  {_clip(r['signature'] or '', 60)}")


def _ago(t: float) -> str:
    import time

    s = max(0.0, time.time() - t)
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s / n:.0f}{unit} ago"
    return f"{s:.0f}s ago"


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n - 3] + "..."


@cache_group.command("info")
@click.argument("key")
@click.option("--ir", "show_ir", is_flag=True, help="Also print the stored IR.")
@click.option("--json", "as_json", is_flag=True, help="The entry's metadata as JSON.")
def cache_info(key: str, show_ir: bool, as_json: bool) -> None:
    """Show one entry (KEY: the key or a unique prefix), checked as a load would."""
    from . import cache as yc

    cache = yc.default_cache()
    full = cache.resolve(key)
    try:
        entry = cache.read(full)
    except yc.BadEntry as e:
        raise ToolError(f"entry {full[:16]} is unusable: {e}") from None
    if entry is None:
        raise ToolError(f"no entry {full}")
    meta = entry.meta
    if as_json:
        click.echo(json.dumps(meta, indent=1, sort_keys=True))
        return
    click.echo(f"key {full}  (checksum ok)\n  path {entry.path}")
    click.echo(f"  @{meta['function']}: {meta['parts']['kind']}, "
               f"{len(entry.files['object.o'])} bytes of object code")
    for name in yc.KEY_PARTS:
        click.echo(f"  {name:<10} {_clip(json.dumps(meta['parts'][name]), 90)}")
    click.echo("  inputs:  " + ", ".join(f"{i['label']}: {i['type']}" for i in meta["inputs"]))
    click.echo("  outputs: " + ", ".join(f"{o['label']}: {o['type']}" for o in meta["outputs"]))
    plan = meta.get("memory_plan", {})
    if plan:
        click.echo(f"  memory plan: {plan.get('mem_total_bytes')} bytes in "
                   f"{len(plan.get('mem_buffers', []))} buffers (peak "
                   f"{plan.get('mem_peak_bytes')})")
    click.echo(f"  guards: {len(meta.get('guards', []))}; checks in the code: "
               f"{len(meta['backend_meta'].get('failures', []))}")
    if show_ir:
        click.echo(entry.files["program.yir"].decode().rstrip())


@cache_group.command("explain")
@target_options
@click.option("--forward", is_flag=True, help="The program yota.compile builds (not the "
              "gradient).")
def cache_explain(target: str, args_expr: str | None, example: str | None, seed: int,
                  forward: bool) -> None:
    """Show the key of TARGET's gradient program, its parts, and whether it is cached; on
    a miss, the nearest stored entry and the parts that differ (with an IR diff)."""
    from . import cache as yc

    t = load_target(target, args_expr, example, seed)
    with user_code(f"tracing {t.name}"):
        ex = yc.explain(t.func, *t.args, kind="forward" if forward else "grad")
    click.echo(str(ex))


@cache_group.command("clear")
def cache_clear() -> None:
    """Remove every entry."""
    from . import cache as yc

    n = yc.clear()
    click.echo(f"removed {n} entries from {yc.cache_dir()}")


@cache_group.command("verify")
@click.option("--remove", is_flag=True, help="Remove the entries that would not load.")
def cache_verify(remove: bool) -> None:
    """Check every entry (format, sizes, checksum) without loading it; exit status 1 if
    some are bad (unless --remove removed them)."""
    from . import cache as yc

    bad = yc.verify(remove=remove)
    total = len(yc.default_cache().keys()) + (len(bad) if remove else 0)
    for k, why in bad:
        click.echo(f"  {k[:16]}  {'removed: ' if remove else ''}{why}")
    click.echo(f"{total - len(bad)} of {total} entries ok in {yc.cache_dir()}")
    if bad and not remove:
        raise click.exceptions.Exit(EXIT_ERROR)


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
    from .aot import aot

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



if __name__ == "__main__":  # pragma: no cover
    main()
