"""Targets (``FILE.py:FUNC`` or ``package.module:FUNC``) and their example arguments."""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import inspect
import os
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import click
import numpy as np

from yota import phases
from yota.tape import Tape
from yota.tracing import trace

from .app import ToolError, user_code


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
    with phases.phase("target"):  # its module and example arguments (--timings)
        module = load_module(where)
        func = _lookup(module, fname, "function")
        args = example_args(module, func, args_expr, example, seed)
    return Target(spec, module, func, args, seed)


def target_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """TARGET, the example-argument options and ``--timings``, shared by the subcommands."""
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
        click.option("--timings", is_flag=True,
                     help="Also print, on stderr, how long each phase of the command's "
                          "compile took (trace, to_ir, vjp, each pass, backend, cache)."),
    ]
    command = _timed(command)
    for deco in reversed(decorators):
        command = deco(command)
    return command


def _timed(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command``, which with ``timings`` records its compile's phases (``yota.phases``)
    and prints their table on stderr (stdout stays the command's output)."""
    @functools.wraps(command)
    def run(*args: Any, timings: bool = False, **kwargs: Any) -> Any:
        if not timings:
            return command(*args, **kwargs)
        name = str(kwargs.get("target", "")).rpartition(":")[2]
        with phases.compiling(name, click.get_current_context().info_name or "") as rec:
            out = command(*args, **kwargs)
        click.echo(phases.table(rec), err=True)
        return out
    return run


def trace_target(t: Target) -> Tape:
    """Trace the target at its example arguments (errors in its code reported as such)."""
    with user_code(f"tracing {t.name}"), phases.phase("trace"):
        _, tape = trace(t.func, *t.args)
    return tape
