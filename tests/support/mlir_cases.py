"""What the MLIR tests share: skipping without the MLIR tools (with the reason), batching
many programs into one ``mlir-opt`` call (nested modules) or one compilation (programs
merged side by side into one function), and comparing the mlir backend's results with
the reference interpreter's (``precision.py``'s per-op tolerance)."""

from __future__ import annotations

import subprocess
import warnings
from collections.abc import Sequence

import numpy as np
import pytest
from yota.backends import mlir
from yota.ir import Function, run
from yota.ir.core import Op
from yota.ir.parser import parse_module
from yota.ir.printer import print_function

from support import backend_cases  # noqa: E402

MISSING = mlir.tools.missing()
if MISSING:  # shown in the warnings summary, so the skips' reason is seen without -rs
    warnings.warn(f"the MLIR tests skip: {MISSING}", stacklevel=1)
needs_mlir = pytest.mark.skipif(MISSING is not None, reason=f"MLIR tools: {MISSING}")
Program = tuple[str, Function, list[np.ndarray]]


def verify_exports(fns: Sequence[Function]) -> list[str]:
    """Export every function and verify them all with one ``mlir-opt`` run (each in its
    own nested module); returns one message per function that does not verify (found by
    verifying alone the functions of a batch that failed)."""
    texts = [mlir.export(f) for f in fns]
    if _verify(texts) is None:
        return []
    errors = []
    for f, t in zip(fns, texts, strict=True):
        err = _verify([t])
        if err is not None:
            errors.append(f"@{f.name}: {err}\n{f}\n{t}")
    return errors or ["the batch failed to verify, but each function alone verifies"]


def _verify(texts: list[str]) -> str | None:
    body = "\n".join(t.replace("module {", f"module @p{i} {{", 1)
                     for i, t in enumerate(texts))
    opt = mlir.tools.find("mlir-opt")
    assert opt is not None
    p = subprocess.run([opt, "--verify-each", "-o", "/dev/null", "-"],
                       input=f"module {{\n{body}\n}}\n", capture_output=True, text=True,
                       check=False)
    return p.stderr.strip()[:3000] if p.returncode else None


def _renamed(fn: Function, prefix: str) -> Function:
    """``fn`` with every callee (transitively) renamed ``prefix + name``."""
    def op(o: Op) -> Op:
        if "callee" in o.attrs:
            return o.replace(attrs={**o.attrs, "callee": prefix + o.attrs["callee"]})
        return o
    callees = {prefix + n: _renamed(c, prefix).replace(name=prefix + n)
               for n, c in fn.callees.items()}
    return fn.replace(ops=[op(o) for o in fn.ops], callees=callees)


def merge(fns: Sequence[Function], name: str = "batch") -> Function:
    """The functions side by side in one: inputs, ops and outputs concatenated (callees
    renamed apart), so one compilation covers them all."""
    inputs, ops, outs, callees = [], [], [], {}
    seen: set[object] = set()
    for k, f in enumerate(fns):
        if seen & set(f.inputs):  # values shared with an earlier program: fresh ones
            f = parse_module(print_function(f))[-1]
        seen |= set(f.inputs)
        g = _renamed(f, f"p{k}_")
        inputs += list(g.inputs)
        ops += list(g.ops)
        outs += list(g.outputs)
        callees.update(g.callees)
    return Function(name, inputs, ops, outs, callees=callees)


def compare(fn: Function, args: list[np.ndarray], exe: object = None,
            opt_level: int = 3) -> str | None:
    """None if the mlir backend's run of ``fn`` (compiled at ``opt_level`` unless ``exe``
    is given) agrees with the interpreter's (or both raise the same error with the same
    message)."""
    def call(*a: np.ndarray) -> list[np.ndarray]:
        return (exe or mlir.compile(fn, opt_level=opt_level))(*a)  # type: ignore[operator]
    return backend_cases.compare(fn, args, call, backend="mlir")


MAX_ARGS = 600  # inputs and outputs of one merged function (ctypes takes at most 1024)


def check_batch(programs: Sequence[Program], opt_level: int = 0) -> list[str]:
    """Compile the programs merged into a few functions (at most ``MAX_ARGS`` arrays in
    and out each) and compare with the interpreter; where a batch disagrees, each of its
    programs alone, to name the ones that do.

    LLVM's optimization and code generation of one function grow faster than linearly
    with its size, and a merged function is large: batches are compiled at ``opt_level``
    0 by default (LLVM's passes do not change IEEE results; the MLIR pipeline, the
    translation and the calling path are the same), single programs at 3 elsewhere."""
    bad: list[str] = []
    chunk: list[Program] = []
    n = 0
    for p in programs:
        k = len(p[1].inputs) + len(p[1].outputs)
        if chunk and n + k > MAX_ARGS:
            bad += _check_chunk(chunk, opt_level)
            chunk, n = [], 0
        chunk.append(p)
        n += k
    return bad + (_check_chunk(chunk, opt_level) if chunk else [])


def _check_chunk(programs: Sequence[Program], opt_level: int) -> list[str]:
    fn = merge([f for _, f, _ in programs])
    args = [a for _, _, xs in programs for a in xs]
    whole = compare(fn, args, opt_level=opt_level)
    if whole is None:
        return []
    bad = []
    for label, f, xs in programs:
        msg = compare(f, xs, opt_level=opt_level)
        if msg:
            bad.append(f"{label}: {msg}\n{f}")
    return bad or [f"the batch disagrees, but each program alone agrees: {whole[:3000]}"]


def interp_runs(fn: Function, args: list[np.ndarray]) -> bool:
    try:
        run(fn, *args)
    except Exception:  # noqa: BLE001 - programs whose run raises are checked alone
        return False
    return True
