"""The native CPU backend: an ``ir.Function`` lowered through llvmlite to one LLVM
module, optimized at O3 for the host CPU, and run as machine code.

    >>> import numpy as np
    >>> from yota.ir import parse
    >>> from yota.backends import llvm as native
    >>> f = parse('''
    ... func @f(%0: f32[4]) -> (f32[]) {
    ...   %1 = exp %0 : f32[4]
    ...   %2 = sum %1 {axes = [0]} : f32[]
    ...   return %2
    ... }''')
    >>> exe = native.compile(f)
    >>> [float(v) for v in exe(np.zeros(4, np.float32))]
    [4.0]

Public API
----------
``compile(fn, *, threads=None, par_work=None, opt_level=3) -> LLVMExecutable``
    The backend interface: the executable is called with arrays and returns the list of
    outputs (``exe(*arrays, out=[...])`` writes into caller-provided arrays). It is safe
    to call from several threads at once.
``llvm_ir(fn, optimized=False) -> str``
    The module's LLVM IR as generated, or after the O3 pipeline.
``assembly(fn) -> str``
    The host assembly of the optimized module.
``save(exe) -> bytes`` and ``load(data) -> LLVMExecutable``
    The object code plus a JSON description, reloadable in another process on the same
    target (no recompilation; raises ``YotaError`` for another target).
``target_key() -> dict``
    What object code depends on (triple, CPU, features, LLVM version...): for cache keys.
``options_key(threads=None, par_work=None, opt_level=3) -> dict``
    The compile options ``compile`` would use (they shape the code, so caches key on them).
``shared_object(fn, symbol) -> Artifact``
    Object code for linking into a shared library (``gcc -shared``): position-independent,
    kernels not split over threads, the entry point exported as ``symbol``.
``set_object_cache(path)``
    Keep the object code of the runtime modules every process needs (the helper-thread
    pool) in ``path``, keyed by their LLVM IR and the target (the on-disk cache sets it).
``stats``
    Counters of this process: ``stats["compiles"]`` LLVM compilations of programs,
    ``stats["loads"]`` object files loaded without compiling.

An ``LLVMExecutable`` also carries ``.llvm_ir``, ``.optimized_ir`` and ``.assembly()``.

How ops become code: the shared kernel layer (``backends/kernel.py``, ``layout.py``,
``lowering.py``, ``emit.py``) with this target's rules: ``layout`` (which views stay
views, which operands BLAS or a call needs copied), ``emit`` (the LLVM-only emitters:
GEMM calls, matmul loops, indexing, arg-reductions, guards, calls, pad, concatenate;
``lapack``: the np.linalg ops as LAPACK calls),
``kernel`` renders loop kernels as vectorized loop nests (``vecmath``: elementwise ops
and libmvec transcendentals), ``lower`` builds the functions (and splits large kernels
over the helper threads of the pool), ``module`` adds the entry points. ``runtime/``
holds what loading and running the code needs, without the code generator: the host
``target`` and the external symbols, the ``jit`` (optimize, emit object code, load it),
Yota's own ELF loader, the calling side (``executable``), the native Python entry, the
helper pool, and the BLAS and LAPACK bindings. ``exported`` is what other backends (mlir)
use of this one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from yota.ir.core import Function
from yota.ir.errors import YotaError
from yota.ir.verifier import maybe_verify

from ..failures import IndexOutOfRange
from .abi import ENTRY, ENTRY_OBJ, PAR_WORK
from .runtime.executable import Artifact, LLVMExecutable, ProfiledExecutable
from .runtime.jit import emit_object, load_object, optimize, set_object_cache
from .runtime.symbols import ensure_runtime
from .runtime.target import host

if TYPE_CHECKING:
    from .lower import Options

__all__ = ["compile", "llvm_ir", "assembly", "save", "load", "target_key", "options_key",
           "shared_object", "stats", "LLVMExecutable", "ProfiledExecutable", "Artifact",
           "IndexOutOfRange", "set_object_cache"]

stats = {"compiles": 0, "loads": 0}
on_phase: Any = None  # called with "codegen" where lowering ends (yota.phases times both)


def __getattr__(name: str) -> Any:
    """``lower_module`` and ``Options`` (the code generator's, imported on first use: loading
    a compiled program does not need it)."""
    if name == "lower_module":
        from .module import lower_module

        return lower_module
    if name == "Options":
        from .lower import Options

        return Options
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def compile(fn: Function, *, threads: int | None = None, par_work: float | None = None,
            opt_level: int = 3, profile: bool = False) -> LLVMExecutable:
    """Compile ``fn`` (and its callees and kernels) to native code.

    ``threads``: the most threads one kernel is split over (default:
    ``pool.num_threads()``: ``YOTA_NUM_THREADS``, ``set_num_threads``, else the cores
    this process may use, at most 8); ``par_work``: the estimated work (element-operations)
    above which a kernel is split (default ``PAR_WORK``); ``profile``: the profiled
    variant (a ``ProfiledExecutable`` timing each step, for ``yota.profile``).
    """
    from .module import lower_module  # the code generator: not needed to load a program

    stats["compiles"] += 1
    target = host()
    maybe_verify(fn)
    options = _options(threads, par_work)
    options.profile = profile
    mg = lower_module(fn, target, options)
    text = str(mg.module)
    on_phase is not None and on_phase("codegen")
    mod = optimize(text, target, opt_level)
    obj = emit_object(mod, target)
    meta = Artifact.describe(fn, mg.ws_bytes, mg.failures,  # type: ignore[attr-defined]
                             target.key())
    if profile:
        meta["profile"] = {"steps": mg.profile_steps, "offset": mg.profile_offset}
    art = Artifact(obj, meta)
    cls = ProfiledExecutable if profile else LLVMExecutable
    return cls(art, _load(obj, target), target, fn, text, str(mod))


def _load(obj: bytes, target: Any) -> Any:
    """Load object code, with the helper-thread pool it may call bound (first, or when the
    code refers to it: ``jit.load_object``)."""
    return load_object(obj, target, [ENTRY, ENTRY_OBJ], ensure_runtime)


def _options(threads: int | None, par_work: float | None = None) -> Options:
    from .lower import Options

    return Options(threads=_threads(threads),
                   par_work=PAR_WORK if par_work is None else float(par_work))


def _threads(threads: int | None) -> int:
    """The ``threads`` option: as given, else the pool's setting (``pool.num_threads``)."""
    from .runtime.pool import num_threads

    return num_threads() if threads is None else max(1, int(threads))


def llvm_ir(fn: Function, optimized: bool = False, *, threads: int | None = None) -> str:
    """The LLVM IR of ``fn``'s module, before or after optimization."""
    from .module import lower_module

    target = host()
    text = str(lower_module(fn, target, _options(threads)).module)
    return str(optimize(text, target)) if optimized else text


def assembly(fn: Function, *, threads: int | None = None) -> str:
    """The host assembly of ``fn``'s optimized module."""
    from .runtime.jit import emit_assembly

    target = host()
    return emit_assembly(optimize(llvm_ir(fn, threads=threads), target), target)


def save(exe: LLVMExecutable) -> bytes:
    return exe.artifact.to_bytes()


def load(data: bytes | Artifact) -> LLVMExecutable:
    """An executable from ``save``'s bytes, for this machine's target."""
    stats["loads"] += 1
    art = data if isinstance(data, Artifact) else Artifact.from_bytes(data)
    target = host()
    if art.meta.get("target") != target.key():
        raise YotaError("this object code was built for another target or toolchain "
                        f"({art.meta.get('target')}); recompile it")
    cls = ProfiledExecutable if "profile" in art.meta else LLVMExecutable
    return cls(art, _load(art.object_code, target), target)


def target_key() -> dict[str, Any]:
    return host().key()


def options_key(threads: int | None = None, par_work: float | None = None,
                opt_level: int = 3) -> dict[str, Any]:
    """The options ``compile(fn, threads=..., par_work=..., opt_level=...)`` runs with."""
    return {"threads": _threads(threads),
            "par_work": PAR_WORK if par_work is None else float(par_work),
            "opt_level": opt_level}


def shared_object(fn: Function, symbol: str, *, opt_level: int = 3) -> Artifact:
    """Object code of ``fn`` for a shared library: ``reloc="pic"``, one thread (no helper
    pool), ``yota_main`` exported as ``symbol`` (same arguments: inputs, outputs,
    workspace) and the NumPy-object entry made internal. Still needs ``yota_sgemm`` /
    ``yota_dgemm`` (when ``meta["target"]["blas"]``), libmvec and libc at link time."""
    import llvmlite.binding as llvm

    from .lower import Options
    from .module import lower_module

    target = host()
    maybe_verify(fn)
    mg = lower_module(fn, target, Options(threads=1, par_work=PAR_WORK, packed=False))
    mod = optimize(str(mg.module), target, opt_level)
    mod.get_function(ENTRY).name = symbol
    mod.get_function(ENTRY_OBJ).linkage = "internal"
    machine = llvm.Target.from_triple(target.triple).create_target_machine(
        cpu=target.cpu, features=target.features, opt=opt_level, reloc="pic",
        codemodel="default")
    meta = {"format": 1, "name": fn.name, "symbol": symbol,
            "inputs": [[list(v.shape), v.dtype.str] for v in fn.inputs],
            "outputs": [[list(v.shape), v.dtype.str] for v in fn.outputs],
            "input_labels": list(fn.input_labels), "output_labels": list(fn.output_labels),
            "ws_bytes": mg.ws_bytes,  # type: ignore[attr-defined]
            "failures": mg.failures, "target": target.key()}
    return Artifact(machine.emit_object(mod), meta)
