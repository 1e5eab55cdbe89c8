"""The CUDA backend, op by op: every op of the op table on float32 and float64 (and the
integer and bool dtypes it takes), over shapes that include 0-d, empty, size-1 and odd
lengths, with special values (0, -0.0, +-inf, NaN, denormals) among the inputs.

Levels, so that a machine without a GPU still checks most of it:

- NVRTC: every kernel generated for these programs compiles for sm_80 and sm_90
  (``test_cuda_nvrtc.py``: needs CuPy and the NVRTC wheel, not a GPU);
- emulation: the same kernels, compiled as C++ for the CPU (``emulate.EmuDevice``), run
  and match the reference interpreter (needs g++);
- device: on a real GPU (skipped without one; ``tools/gpu_check.py`` runs the full set).

``op_programs()`` (``support/cuda_cases.py``) is shared with ``tools/gpu_check.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
from support.cuda_cases import emulator, op_programs, run_case
from yota.backends import cuda
from yota.backends.cuda.emulate import emulation_available
from yota.ir import OPS, Builder, TensorType, run

# -- tests ---------------------------------------------------------------------------------------
CASES = op_programs()
NVRTC = cuda.nvrtc_available()
EMU = emulation_available()


def test_cases_cover_every_op() -> None:
    covered = {o for c in CASES for o in c.ops}
    assert set(OPS) - covered == set()


@pytest.fixture(scope="module")
def emu() -> object:
    if EMU:
        pytest.skip(EMU)
    return emulator([c.fn for c in CASES])


@pytest.mark.skipif(EMU is not None, reason=f"no CPU emulation: {EMU}")
def test_emulated_every_op_matches_interpreter(emu: object) -> None:
    bad = []
    for case in CASES:
        msg = run_case(cuda.compile(case.fn, device=emu), case)
        if msg:
            bad.append(f"{case.label}: {msg}")
    assert not bad, f"{len(bad)} mismatches:\n" + "\n".join(bad[:5])


def test_guard_and_index_failures_emulated(emu: object) -> None:
    if EMU:
        pytest.skip(EMU)
    from yota.ir.errors import GuardFailed

    case = next(c for c in CASES if c.label == "call_guard")
    exe = cuda.compile(case.fn, device=emu)
    for bad in (np.zeros((3, 2)), case.args[0] + 5):
        with pytest.raises(GuardFailed) as e1:
            exe(bad)
        with pytest.raises(GuardFailed) as e2:
            run(case.fn, bad)
        assert str(e1.value) == str(e2.value)
        assert e1.value.guard_index == e2.value.guard_index
    b = Builder("oob")
    x, i = b.input(TensorType("f32", (5,))), b.input(TensorType("i64", (3,)))
    exe = cuda.compile(b.build([b.gather(x, i, axis=0)]), device=emu)
    with pytest.raises(IndexError, match="index 5 is out of bounds for axis 0 with size 5"):
        exe(np.zeros(5, np.float32), np.array([0, 5, 1]))
    assert exe(np.arange(5, dtype=np.float32), np.array([-1, 0, 4]))[0].tolist() == [4, 0, 4]


GPU = cuda.unavailable() if NVRTC is None else NVRTC


@pytest.mark.skipif(GPU is not None, reason=f"needs a CUDA GPU: {GPU}")
def test_every_op_on_gpu() -> None:
    bad = []
    for case, exe in zip(CASES, cuda.compile_many([c.fn for c in CASES]), strict=True):
        msg = run_case(exe, case, lambda x: x.get())
        if msg:
            bad.append(f"{case.label}: {msg}")
    assert not bad, f"{len(bad)} mismatches:\n" + "\n".join(bad[:5])
