"""The CUDA backend on random programs (``irgen``), as generated and after the default pass
pipeline (fusion, batching, memory plan):

- every kernel of 100 programs (200 functions) compiles with NVRTC for sm_80 and sm_90
  (``test_cuda_nvrtc.py``);
- on the CPU emulation of the kernels, results match the interpreter (float32 programs
  within a float32 tolerance, as for the llvm backend; errors must be the same error);
- on a GPU (skipped without one), the same; ``tools/gpu_check.py`` runs hundreds.

The programs and ``compare`` are in ``support/cuda_cases.py`` (``tools/gpu_check.py`` uses
them too).
"""

from __future__ import annotations

import pytest
from support.cuda_cases import compare, emulator, programs
from yota.backends import cuda
from yota.backends.cuda.emulate import emulation_available

NVRTC = cuda.nvrtc_available()
EMU = emulation_available()
EMU_PROGRAMS = range(40)


@pytest.mark.skipif(EMU is not None, reason=f"no CPU emulation: {EMU}")
def test_random_programs_emulated() -> None:
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
