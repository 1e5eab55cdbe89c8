"""The MLIR tools: finding ``mlir-opt`` / ``mlir-translate`` (Debian's ``mlir-22-tools``:
``mlir-opt-22``, ``mlir-translate-22``; or unversioned ones on ``PATH``), their version,
and ``PIPELINE``, the one named pass pipeline that lowers an executable module to the
LLVM dialect."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess

from yota.ir.errors import YotaError

VERSION = "22"  # LLVM 22, as llvmlite 0.50: the translated IR parses in llvmlite

# One named pipeline (the passes in order, and why):
PIPELINE_NAME = "yota-mlir-to-llvm"
PIPELINE_PASSES = [
    ("inline", "callees (primitive bodies) into their callers"),
    ("symbol-dce", "drop the inlined private functions"),
    ("eliminate-empty-tensors", "results computed straight into the caller's output arrays"),
    ("one-shot-bufferize{bufferize-function-boundaries=1 "
     "function-boundary-type-conversion=identity-layout-map}",
     "tensors to memrefs, in place where the analysis allows"),
    ("buffer-deallocation-pipeline", "free every temporary buffer"),
    ("convert-linalg-to-loops", "linalg ops (generic, matmul, ...) as scf loop nests"),
    ("convert-scf-to-cf", "structured loops to branches"),
    ("expand-strided-metadata", "subviews to plain offsets and strides"),
    ("lower-affine", "affine index maps to arith"),
    ("convert-math-to-funcs", "integer powers (math.ipowi) as a loop"),
    ("convert-math-to-libm", "tanh, atan, expm1, ... as calls to libm"),
    ("convert-math-to-llvm", "the rest of math as LLVM intrinsics"),
    ("finalize-memref-to-llvm{use-generic-functions=1}",
     "memrefs to pointers, allocations to the runtime's allocator (which keeps large "
     "buffers for the next call)"),
    ("convert-arith-to-llvm", "arith to LLVM"),
    ("convert-index-to-llvm", "index arithmetic to i64"),
    ("convert-cf-to-llvm", "branches to LLVM"),
    ("convert-func-to-llvm{use-bare-ptr-memref-call-conv=1}",
     "functions to LLVM; memref arguments as bare pointers (the llvm backend's entry)"),
    ("reconcile-unrealized-casts", "remove the casts between the conversions"),
]
PIPELINE = "builtin.module(" + ",".join(p for p, _ in PIPELINE_PASSES) + ")"


@functools.cache
def find(tool: str) -> str | None:
    """The path of ``mlir-opt``/``mlir-translate``: ``$YOTA_MLIR_OPT`` /
    ``$YOTA_MLIR_TRANSLATE``, else ``TOOL-22``, else ``TOOL`` on ``PATH``."""
    env = os.environ.get("YOTA_" + tool.upper().replace("-", "_"))
    if env:
        return shutil.which(env)  # a path or a name; None if it cannot be run
    return shutil.which(f"{tool}-{VERSION}") or shutil.which(tool)


def missing() -> str | None:
    """Why the MLIR tools cannot be used here, or None when they can."""
    for tool in ("mlir-opt", "mlir-translate"):
        if find(tool) is None:
            env = "YOTA_" + tool.upper().replace("-", "_")
            if os.environ.get(env):
                return f"${env}={os.environ[env]} cannot be run"
            return (f"{tool}-{VERSION} is not installed (Debian/Ubuntu: apt-get install "
                    f"mlir-{VERSION}-tools)")
    return None


def _require(tool: str) -> str:
    why = missing()
    if why:
        raise YotaError(f"the MLIR backend needs the MLIR tools: {why}")
    path = find(tool)
    assert path is not None
    return path


@functools.cache
def version() -> str:
    """``mlir-opt --version``'s LLVM version (e.g. ``22.1.8``); part of cache keys."""
    out = _run([_require("mlir-opt"), "--version"], "")
    m = re.search(r"LLVM version (\S+)", out)
    return m.group(1) if m else out.strip().splitlines()[0] if out.strip() else "unknown"


def _run(cmd: list[str], text: str) -> str:
    p = subprocess.run(cmd, input=text, capture_output=True, text=True, check=False)
    if p.returncode:
        raise YotaError(f"{os.path.basename(cmd[0])} failed (exit {p.returncode}):\n"
                        f"{p.stderr.strip()[:4000]}")
    return p.stdout


def opt(text: str, *args: str) -> str:
    """``mlir-opt ARGS`` on module text: parsed and verified (raises ``YotaError`` with
    the tool's diagnostics), printed back."""
    return _run([_require("mlir-opt"), *args, "-"], text)


def lower(text: str) -> str:
    """The module after ``PIPELINE``: LLVM dialect only."""
    return opt(text, f"--pass-pipeline={PIPELINE}")


def translate(llvm_dialect: str) -> str:
    """LLVM-dialect MLIR to LLVM IR text."""
    return _run([_require("mlir-translate"), "--mlir-to-llvmir", "-"], llvm_dialect)


@functools.cache
def runtime_library() -> str | None:
    """MLIR's C runner utilities (``libmlir_c_runner_utils``, which ``memrefCopy`` of
    strided views lowers to), next to the tools: ``LLVM_ROOT/lib``."""
    opt_path = find("mlir-opt")
    if opt_path is None:
        return None
    lib = os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(opt_path))), "lib")
    try:
        names = sorted(n for n in os.listdir(lib) if n.startswith("libmlir_c_runner_utils.so"))
    except OSError:
        return None
    return os.path.join(lib, names[0]) if names else None
