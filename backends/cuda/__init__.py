"""The CUDA backend: an optimized, fused, memory-planned ``ir.Function`` rendered to CUDA C
(one module of kernels), compiled by NVRTC to a cubin for the device, and replayed as
kernel launches, cuBLAS matrix products (CuPy's ``matmul``) and memsets on CuPy's current
stream. Importing it needs neither CuPy nor a GPU; rendering and NVRTC compilation need
no GPU either.

    >>> from yota.ir import parse
    >>> from yota.backends import cuda
    >>> src = cuda.cuda_source(parse('''
    ... func @g(%0: f64[8]) -> (f64[]) {
    ...   %1 = tanh %0 : f64[8]
    ...   %2 = sum %1 {axes = [0]} : f64[]
    ...   return %2
    ... }'''))
    >>> "tanh(" in src and "y_block_reduce" in src
    True

Public API
----------
``compile(fn, *, device=None, fast_math=None) -> CudaExecutable``
    The backend interface: called with CuPy arrays (host arrays are copied over),
    returns the list of outputs as CuPy arrays the caller owns. ``device`` defaults to
    the current CUDA device (``CupyDevice``); ``emulate.EmuDevice()`` runs on the CPU.
``compile_many(fns, *, device=None) -> list[CudaExecutable]``
    Several functions in one module: one NVRTC run, one load.
``cuda_source(fn, *, config=None) -> str``
    The module's CUDA C (deterministic: equal IR gives equal text).
``lower(fn, *, config=None) -> Module``
    Kernels, per-function steps, constants and failure records, for inspection.
``compile_cubin(source, arch, *, fast_math=False) -> bytes``
    NVRTC, source to machine code for ``sm_XX`` (no GPU needed): what a cache stores.
``compile_archs(source, archs, ...) -> dict[str, bytes]``
    The same for several architectures, in parallel processes.
``check(fn, archs=("sm_80", "sm_90")) -> dict[str, int]``
    Compile ``fn``'s module for each architecture; cubin sizes by architecture.
``use_device(device)``
    Set the device ``compile`` uses by default (``emulate.EmuDevice()`` in tests).
``unavailable() -> str | None``
    None when a CUDA device can run programs here, else why not.
``target_key() -> dict``
    What compiled kernels depend on (arch, NVRTC/driver/CuPy versions, config).
``save(exe) -> bytes``, ``load(data, *, device=None) -> CudaExecutable``
    The cubin for the device's ``sm_XX`` plus the lowered module as JSON (``artifact``),
    reloadable in another process on the same device and toolchain without NVRTC
    (raises ``YotaError`` for another target). ``cacheable()``: whether the default
    device's programs can be saved (a real ``sm_XX``; not the CPU emulation), so
    ``yota.cache`` stores them; ``options_key(fast_math=None)``: ``compile``'s options.
``stats``
    Counters of this process: ``stats["nvrtc"]`` NVRTC compilations,
    ``stats["compiles"]`` programs compiled, ``stats["loads"]`` artifacts loaded.

How ops become code: the shared kernel layer (``backends/kernel.py``, ``layout.py``,
``lowering.py``, ``emit.py``, ``program.py``) with this target's rules: ``layout`` (which
views stay views), ``emit`` (the CUDA-only emitters), ``kernel`` renders loop kernels
(``cexpr``: elementwise ops as C expressions), ``special`` renders indexing,
arg-reductions and guards, ``lower`` builds the module's kernels and the steps,
``module`` lowers a function and its callees, ``nvrtc`` compiles, ``runtime`` is the
calling side.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from yota.ir.core import Function
from yota.ir.errors import YotaError
from yota.ir.verifier import maybe_verify

from ..failures import IndexOutOfRange
from .artifact import Artifact, pack, unpack
from .kernel import Config
from .lower import Module
from .module import lower_module
from .nvrtc import (
    CudaCompileError,
    CudaUnavailable,
    compile_archs,
    compile_cubin,
    nvrtc_version,
    stats,
)
from .runtime import CudaExecutable, CupyDevice

__all__ = ["compile", "compile_many", "cuda_source", "lower", "compile_cubin", "compile_archs", "check", "unavailable",
           "target_key", "Config", "CudaExecutable", "CupyDevice", "CudaUnavailable",
           "CudaCompileError", "IndexOutOfRange", "DEFAULT_ARCHS", "use_device", "Module",
           "save", "load", "options_key", "cacheable", "artifact", "Artifact", "stats"]

DEFAULT_ARCHS = ("sm_80", "sm_90")
_DEVICE: list[Any] = []


def _fast(fn: Function, fast_math: bool | None) -> bool:
    return bool(fn.attrs.get("fast_math", False)) if fast_math is None else fast_math


def lower(fn: Function, *, config: Config | None = None) -> Module:
    """Lower ``fn`` (and its callees) to a module of kernels and steps."""
    maybe_verify(fn)
    return lower_module(fn, config or Config(fast_math=_fast(fn, None)))


def cuda_source(fn: Function, *, config: Config | None = None) -> str:
    """The CUDA C module generated for ``fn``."""
    return lower(fn, config=config).source()


def default_device() -> CupyDevice:
    """The current CUDA device (made once; raises ``CudaUnavailable`` without one)."""
    if not _DEVICE:
        _DEVICE.append(CupyDevice())
    return _DEVICE[0]


def use_device(device: Any) -> None:
    """Make ``device`` the default of ``compile`` (``emulate.EmuDevice()`` for tests
    without a GPU, or a ``CupyDevice`` with another ``Config``); None: the current CUDA
    device again."""
    _DEVICE.clear()
    if device is not None:
        _DEVICE.append(device)


def compile(fn: Function, *, device: Any = None, fast_math: bool | None = None,
            profile: bool = False) -> CudaExecutable:
    """Compile ``fn`` for ``device`` (default: the current CUDA device); ``profile``: the
    profiled variant (``profiled.ProfiledCudaExecutable``, for ``yota.profile``)."""
    dev = device if device is not None else default_device()
    cfg = dev.cfg
    if _fast(fn, fast_math) != cfg.fast_math:
        from dataclasses import replace

        cfg = replace(cfg, fast_math=_fast(fn, fast_math))
    mod = lower(fn, config=cfg)
    stats["compiles"] += 1
    if profile:
        from .profiled import ProfiledCudaExecutable

        return ProfiledCudaExecutable(mod, dev, fn)
    return CudaExecutable(mod, dev, fn)


def compile_many(fns: Sequence[Function], *, device: Any = None,
                 fast_math: bool | None = None) -> list[CudaExecutable]:
    """Compile several functions with ONE module (one NVRTC run, one load): much faster
    than one ``compile`` each when there are many (kernels they share are compiled once)."""
    from dataclasses import replace

    from .lower import module_source

    dev = device if device is not None else default_device()
    fast = any(_fast(fn, fast_math) for fn in fns)
    cfg = replace(dev.cfg, fast_math=fast) if fast != dev.cfg.fast_math else dev.cfg
    mods = [lower(fn, config=cfg) for fn in fns]
    kernels = {n: src for m in mods for n, src in m.kernels.items()}
    handle = dev.load(module_source(kernels.values()), list(kernels))
    return [CudaExecutable(m, dev, fn, handle=handle) for m, fn in zip(mods, fns, strict=True)]


def check(fn: Function, archs: Sequence[str] = DEFAULT_ARCHS, *,
          config: Config | None = None) -> dict[str, int]:
    """Compile every kernel of ``fn`` with NVRTC for each of ``archs`` (no GPU needed);
    returns the cubin size per architecture. Raises ``CudaCompileError`` with NVRTC's
    log if a kernel does not compile."""
    mod = lower(fn, config=config)
    cubins = compile_archs(mod.source(), list(archs), fast_math=mod.cfg.fast_math)
    return {a: len(c) for a, c in cubins.items()}


def unavailable() -> str | None:
    """None when programs can run on a CUDA device here, else the reason."""
    try:
        default_device()
    except CudaUnavailable as e:
        return str(e)
    return None


def target_key() -> dict[str, Any]:
    return default_device().key()


def nvrtc_available() -> str | None:
    """None when kernels can be compiled here (CuPy + NVRTC), else the reason."""
    try:
        nvrtc_version()
    except CudaUnavailable as e:
        return str(e)
    return None


# -- saving and loading (the on-disk cache's hooks) ------------------------------------------
def _arch(device: Any) -> str | None:
    arch = getattr(device, "arch", None)
    return arch if isinstance(arch, str) and arch.startswith("sm_") else None


def cacheable(device: Any = None) -> bool:
    """Whether programs compiled for ``device`` (default: the default device) can be saved:
    it runs cubins for a real ``sm_XX``. False without a device, and for the CPU emulation
    (whose code is host code), so ``yota.cache`` compiles those without the cache."""
    try:
        dev = device if device is not None else default_device()
    except CudaUnavailable:
        return False
    return _arch(dev) is not None


def artifact(exe: CudaExecutable) -> Artifact:
    """The cubin ``exe`` runs (compiled by NVRTC for its device's ``sm_XX`` if this process
    did not keep it) and the JSON that launches it."""
    handle = exe.handle
    cubin = handle.get("cubin") if isinstance(handle, dict) else None
    if cubin is None:
        arch = _arch(exe.device)
        if arch is None:
            raise YotaError(f"the {exe.device.name} device runs no cubin; nothing to save")
        cubin = compile_cubin(exe.source, arch, fast_math=exe.module.cfg.fast_math)
    return pack(exe.module, cubin, exe.device.key())


def save(exe: CudaExecutable) -> bytes:
    return artifact(exe).to_bytes()


def load(data: bytes | Artifact, *, device: Any = None) -> CudaExecutable:
    """An executable from ``save``'s bytes, for ``device`` (default: the default device),
    without NVRTC: the cubin is loaded as it is (a device without ``load_cubin``, the CPU
    emulation, builds the kernel sources the artifact carries with its host compiler)."""
    stats["loads"] += 1
    art = data if isinstance(data, Artifact) else Artifact.from_bytes(data)
    dev = device if device is not None else default_device()
    if art.meta.get("target") != dev.key():
        raise YotaError("this cubin was built for another device or toolchain "
                        f"({art.meta.get('target')}, this is {dev.key()}); recompile it")
    module = unpack(art)
    load_cubin = getattr(dev, "load_cubin", None)
    if callable(load_cubin):
        handle = load_cubin(art.cubin)
    else:
        handle = dev.load(module.source(), list(module.kernels))
    return CudaExecutable(module, dev, None, handle=handle)


def options_key(fast_math: bool | None = None) -> dict[str, Any]:
    """The options ``compile(fn, fast_math=...)`` runs with (the device's launch
    configuration is part of ``target_key``)."""
    return {"fast_math": fast_math}
