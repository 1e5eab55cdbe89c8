"""The CUDA backend on random programs (``irgen``), as generated and after the default pass
pipeline (fusion, batching, memory plan):

- every kernel of 100 programs (200 functions) compiles with NVRTC for sm_80 and sm_90
  (``test_cuda_nvrtc.py``);
- on the CPU emulation of the kernels, results match the interpreter (float32 programs
  within a float32 tolerance, as for the llvm backend; errors must be the same error);
- on a GPU (skipped without one), the same; ``tools/gpu_check.py`` runs hundreds.

``compare`` is shared with ``tools/gpu_check.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from yota.backends import cuda
from yota.backends.cuda.emulate import emulation_available
from yota.ir import Function
from yota.ir.passes import optimize

sys.path.insert(0, str(Path(__file__).parent))
import backend_cases  # noqa: E402
import irgen  # noqa: E402

NVRTC = cuda.nvrtc_available()
EMU = emulation_available()


def compare(fn: Function, args: list[np.ndarray], exe: Callable[..., list[Any]],
            to_host: Callable[[Any], np.ndarray] = np.asarray) -> str | None:
    """None if ``exe`` (a compiled ``fn``) agrees with the interpreter on ``args``."""
    return backend_cases.compare(fn, args, exe, to_host, "cuda")


def programs(seeds: range) -> list[tuple[int, str, Function, list[np.ndarray]]]:
    out = []
    for seed in seeds:
        fn, args = irgen.random_program(np.random.default_rng(seed))
        out += [(seed, "raw", fn, args), (seed, "optimized", optimize(fn), args)]
    return out


NVRTC_PROGRAMS = range(100)  # test_cuda_nvrtc.py compiles their kernels
EMU_PROGRAMS = range(40)


@pytest.mark.skipif(EMU is not None, reason=f"no CPU emulation: {EMU}")
def test_random_programs_emulated() -> None:
    from test_cuda_ops import emulator

    progs = programs(EMU_PROGRAMS)
    dev = emulator([fn for _, _, fn, _ in progs])
    bad = []
    for seed, label, fn, args in progs:
        msg = compare(fn, args, cuda.compile(fn, device=dev))
        if msg:
            bad.append(f"seed {seed} ({label}): {msg}\n{fn}")
    assert not bad, f"{len(bad)} mismatches; first:\n" + bad[0]


GPU = cuda.unavailable() if NVRTC is None else NVRTC


@pytest.mark.skipif(GPU is not None, reason=f"needs a CUDA GPU: {GPU}")
def test_random_programs_on_gpu() -> None:
    bad = []
    progs = programs(range(100))
    for (seed, label, fn, args), exe in zip(progs, cuda.compile_many([p[2] for p in progs]),
                                            strict=True):
        msg = compare(fn, args, exe, lambda x: x.get())
        if msg:
            bad.append(f"seed {seed} ({label}): {msg}")
    assert not bad, f"{len(bad)} mismatches; first:\n" + bad[0]
