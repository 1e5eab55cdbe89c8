"""The CUDA backend without a GPU: rendering is deterministic (a golden kernel), and every
kernel generated for the op programs (``support.cuda_cases.op_programs``) and for 100 random
programs, raw and optimized (``support.cuda_cases.programs``), compiles with NVRTC for
sm_80 and sm_90.

All of those kernels go into one translation unit per architecture, compiled in parallel
processes with ``--Ofast-compile=max`` (4x faster; the check is that they compile); an
evenly spread fifth of them is also compiled with exactly the options the backend uses.
The default run takes the op programs' kernels (every op) and those of the first 20
random programs, and a twentieth with the backend's options (half the time); the
whole set is ``-m slow``.
Needs CuPy and the NVRTC wheel (the ``cuda`` extra); skipped, saying so, without them.
``YOTA_UPDATE_GOLDEN=1`` rewrites the golden file.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from support import ROOT, TESTS
from support.cuda_cases import NVRTC_PROGRAMS, op_programs, programs
from yota.backends import cuda
from yota.backends.cuda.lower import module_source
from yota.ir import Builder, TensorType
from yota.ir.passes import optimize

CASES = op_programs()
NVRTC = cuda.nvrtc_available()
needs_nvrtc = pytest.mark.skipif(NVRTC is not None, reason=f"NVRTC unavailable: {NVRTC}")
GOLDEN = TESTS / "golden" / "cuda" / "tanh_mul_rowsum.cu"


def compile_archs(source: str, archs: tuple[str, ...], fast_compile: bool = False
                  ) -> dict[str, int]:
    cubins = cuda.compile_archs(source, archs, fast_compile=fast_compile)
    return {a: len(c) for a, c in cubins.items()}


def all_kernels(random_programs: range = NVRTC_PROGRAMS) -> dict[str, str]:
    kernels: dict[str, str] = {}
    for case in CASES:
        kernels.update(cuda.lower(case.fn).kernels)
    for _, _, fn, _ in programs(random_programs):
        kernels.update(cuda.lower(fn).kernels)
    return kernels


@needs_nvrtc
@pytest.mark.parametrize("random_programs, every", [
    pytest.param(range(20), 20, id="ops-and-20-programs"),
    pytest.param(NVRTC_PROGRAMS, 5, id="all", marks=pytest.mark.slow)])
def test_every_generated_kernel_compiles_for_sm80_and_sm90(random_programs: range,
                                                            every: int) -> None:
    kernels = all_kernels(random_programs)
    assert len(kernels) > 800
    names = list(kernels)
    sizes = compile_archs(module_source(kernels.values()), cuda.DEFAULT_ARCHS, True)
    assert all(n > 0 for n in sizes.values())
    sample = [kernels[n] for n in names[::every]]
    sizes = compile_archs(module_source(sample), cuda.DEFAULT_ARCHS)
    assert all(n > 0 for n in sizes.values())


def golden_program():
    b = Builder("golden")
    x = b.input(TensorType("f32", (4, 8)), "x")
    y = b.input(TensorType("f32", (8,)), "y")
    p = b.mul(b.tanh(x), b.broadcast(y, shape=(4, 8)))
    return optimize(b.build([p, b.sum(p, axes=(1,))]))


def test_golden_kernel() -> None:
    """One small fused kernel (an elementwise chain with a broadcast, and a row sum)."""
    mod = cuda.lower(golden_program())
    assert len(mod.kernels) == 1
    text = next(iter(mod.kernels.values())) + "\n"
    if os.environ.get("YOTA_UPDATE_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text)
    assert GOLDEN.exists(), f"missing golden file {GOLDEN}; run with YOTA_UPDATE_GOLDEN=1"
    assert text == GOLDEN.read_text()


def test_rendering_is_deterministic_across_processes() -> None:
    """Equal IR gives equal CUDA source (kernel names are hashes of their text), in this
    process and in a fresh one (no dependence on ids, hash seeds or dict order)."""
    fn = CASES[-1].fn
    here = cuda.cuda_source(fn)
    assert here == cuda.cuda_source(fn)
    code = ("import sys; from support.cuda_cases import op_programs; "
            "from yota.backends import cuda; sys.stdout.write(cuda.cuda_source(op_programs()[-1].fn))")
    env = dict(os.environ, PYTHONHASHSEED="123", PYTHONPATH="tests")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, env=env, check=True).stdout
    assert out == here


@needs_nvrtc
def test_compile_errors_carry_the_nvrtc_log() -> None:
    with pytest.raises(cuda.CudaCompileError, match="sm_90"):
        cuda.compile_cubin('extern "C" __global__ void k() { undefined_thing(); }', "sm_90")


@needs_nvrtc
def test_check_compiles_a_program_for_both_architectures() -> None:
    sizes = cuda.check(golden_program())
    assert set(sizes) == {"sm_80", "sm_90"} and all(sizes.values())


def test_importing_yota_does_not_import_cupy() -> None:
    code = ("import sys, yota, yota.backends.cuda, numpy as np; "
            "yota.backends.cuda.cuda_source(yota.ir.parse('func @f(%0: f32[2]) -> (f32[2]) "
            "{\\n %1 = exp %0 : f32[2]\\n return %1\\n}')); "
            "assert 'cupy' not in sys.modules, 'cupy imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_launch_shapes() -> None:
    """Schedules: big row reductions use one block per row, few rows split the reduced
    axis over blocks with a second stage, kept innermost axes reduce by columns."""
    from yota.backends.program import Launch

    def launches(shape: tuple[int, ...], axes: tuple[int, ...]) -> list[Launch]:
        steps = cuda.lower(_sum_fn(shape, axes)).plans["s"].steps
        return [s for s in steps if isinstance(s, Launch)]
    rows = launches((4096, 512), (1,))
    assert len(rows) == 1 and rows[0].grid[1] == 1
    total = launches((1 << 22,), (0,))
    assert len(total) == 2 and total[0].grid[1] > 1  # split, then the second stage
    cols = launches((100000, 64), (0,))
    assert len(cols) == 2 and cols[0].grid[1] > 1
    src = cuda.cuda_source(_sum_fn((100000, 64), (0,)))
    assert "kk = (int)blockIdx.x * 256 + threadIdx.x" in src  # a column reduction
    assert np.prod(rows[0].grid) >= 512


def _sum_fn(shape: tuple[int, ...], axes: tuple[int, ...]):
    b = Builder("s")
    return b.build([b.sum(b.input(TensorType("f32", shape)), axes=axes)])


def test_docstring_examples() -> None:
    import doctest

    import yota.backends.cuda as backend

    import yota.device as device

    for mod in (backend, device):
        assert doctest.testmod(mod).failed == 0
