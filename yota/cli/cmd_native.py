"""``yota-ir llvm`` and ``cuda``: the code the native backends generate for a target."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Callable
from types import ModuleType
from typing import Any

import click

from .app import InternalError, ToolError, main
from .stages import STAGES, build_stages
from .targets import load_target, target_options, trace_target


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
            raise InternalError(str(e)) from None
        click.echo(f"NVRTC: the module compiles for {arch} ({sizes[arch]} bytes of cubin)",
                   err=True)


def _accepts(f: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(f).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind == p.VAR_KEYWORD for p in params.values())
