"""Compiling CUDA C to a cubin with NVRTC, through CuPy's low-level binding, which works
without a GPU (CuPy's high-level compile helpers query the device). One function,
``compile_cubin``, turns source into machine code for one ``sm_XX``: what a cache stores.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from typing import Any

from yota.ir.errors import YotaError


class CudaUnavailable(YotaError):
    """CuPy, NVRTC or a CUDA device is missing (the message says which, and the fix)."""


class CudaCompileError(YotaError):
    """NVRTC rejected a generated kernel (a Yota bug: the message holds NVRTC's log)."""


# Counters of this process (re-exported as ``yota.backends.cuda.stats``): ``nvrtc`` NVRTC
# compilations in this process, ``compiles`` programs compiled, ``loads`` artifacts loaded
# without compiling.
stats = {"nvrtc": 0, "compiles": 0, "loads": 0}

INSTALL_HINT = "pip install 'yota[cuda]' (cupy-cuda13x and nvidia-cuda-nvrtc)"


def _nvrtc() -> Any:
    try:
        from cupy.cuda import nvrtc
    except ImportError as e:
        raise CudaUnavailable(f"the CUDA backend needs CuPy: {INSTALL_HINT} ({e})") from None
    return nvrtc


@functools.cache
def nvrtc_version() -> tuple[int, int]:
    """NVRTC's (major, minor); raises ``CudaUnavailable`` without CuPy or NVRTC."""
    nvrtc = _nvrtc()
    try:
        return tuple(nvrtc.getVersion())
    except Exception as e:  # noqa: BLE001 - the library itself is missing
        raise CudaUnavailable(f"NVRTC cannot be loaded: {INSTALL_HINT} ({e})") from None


def options(arch: str, fast_math: bool = False, fast_compile: bool = False
            ) -> tuple[str, ...]:
    """NVRTC options: IEEE arithmetic (no FMA contraction) unless ``fast_math``;
    ``fast_compile`` trades the code's speed for compile time (4x faster; for tests that
    only check that kernels compile)."""
    math = ("--use_fast_math",) if fast_math else ("-fmad=false",)
    quick = ("--Ofast-compile=max",) if fast_compile else ()
    return (f"-arch={arch}", "--std=c++17", *math, *quick)


def compile_cubin(source: str, arch: str, *, fast_math: bool = False,
                  fast_compile: bool = False, name: str = "yota.cu") -> bytes:
    """The cubin (machine code for ``arch``, e.g. ``"sm_90"``) of CUDA C ``source``.

    Compiling to a cubin rather than PTX means the driver loads it without JIT, so a
    newer NVRTC than the driver is fine.
    """
    nvrtc = _nvrtc()
    nvrtc_version()
    stats["nvrtc"] += 1
    prog = nvrtc.createProgram(source, name, [], [])
    try:
        try:
            nvrtc.compileProgram(prog, options(arch, fast_math, fast_compile))
        except Exception as e:  # noqa: BLE001 - NVRTCError
            log = nvrtc.getProgramLog(prog)
            raise CudaCompileError(f"NVRTC failed to compile the generated CUDA source for "
                                   f"{arch}: {e}\n{log}") from None
        return bytes(nvrtc.getCUBIN(prog))
    finally:
        nvrtc.destroyProgram(prog)


def _cubin_job(args: tuple[str, str, bool, bool]) -> bytes:
    source, arch, fast_math, fast_compile = args
    return compile_cubin(source, arch, fast_math=fast_math, fast_compile=fast_compile)


def compile_archs(source: str, archs: Sequence[str], *, fast_math: bool = False,
                  fast_compile: bool = False) -> dict[str, bytes]:
    """``compile_cubin`` for each architecture; several run in parallel in fresh
    processes (NVRTC holds the GIL; fresh processes, not forks, are safe next to
    threads)."""
    jobs = [(source, a, fast_math, fast_compile) for a in archs]
    if len(jobs) == 1:
        return {archs[0]: _cubin_job(jobs[0])}
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(min(len(jobs), os.cpu_count() or 1), mp_context=ctx) as ex:
        return dict(zip(archs, ex.map(_cubin_job, jobs), strict=True))
