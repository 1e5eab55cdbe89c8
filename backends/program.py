"""The lowered program as data: what a function becomes when its kernels run as
separate launches (the cuda backend), a list of *steps* a runtime replays in order:

- ``Launch``: a kernel with a grid, a block and pointer arguments (copies, fills and
  guards are kernels too);
- ``Memset``: zero bytes (outputs of ``scatter_add`` and of an empty matrix product);
- ``Gemm``: a matrix product through the target's BLAS on strided views;
- ``Call``: another function's steps, on its operands' memory;
- ``Loop``: another function's steps, once per step of a ``loop`` op: the carried
  values alternate between two buffers, stacked operands and results advance one slab
  per step;
- ``Linalg``: a LAPACK-level op (``yota.ir.ops.lapack``) through the device's solver
  library (cuSOLVER through ``cupy.linalg``) on strided views;
- ``Callback``: an opaque primitive's Python function (``yota.ir.ops.callback``) on host
  copies of its operands, its results copied back to the device.

``StepTimes`` is what a profiled variant of any backend reports for one call: the clock
at the call's start and end and around each of its steps (``yota.profile``).

Pointer arguments are ``(storage, byte offset)`` pairs (``Ref``), resolved at call time
against the call's inputs, outputs, workspace and constants (storage ``STATUS``: the
failure status words). Nothing here runs on a device: steps can be built, stored as JSON
(``cuda/artifact.py``) and inspected anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

STATUS = -2  # the storage number of the status words
Ref = tuple[int, int]  # (storage, byte offset)


@dataclass(frozen=True)
class Launch:
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple[Ref, ...]
    scalars: tuple[int, ...] = ()  # integer parameters after the pointers


@dataclass(frozen=True)
class Memset:
    ref: Ref
    nbytes: int


@dataclass(frozen=True)
class View:
    ref: Ref
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # bytes
    dtype: np.dtype


@dataclass(frozen=True)
class Gemm:
    a: View
    b: View
    out: View


@dataclass(frozen=True)
class Call:
    callee: str
    ins: tuple[Ref, ...]
    outs: tuple[Ref, ...]
    ws: Ref


@dataclass(frozen=True)
class Loop:
    """The steps of ``callee``, ``length`` times (last to first if ``reverse``). Step
    ``t`` reads carried value ``k`` from ``carries[k][t % 2]`` and writes it to the other
    buffer (the first buffer holds the initial value); stacked operand ``j`` is read at
    ``stacked[j][0]`` plus ``i * stacked[j][1]`` bytes for step ``i``, and so are the
    stacked results written; the invariants are read whole."""

    callee: str
    length: int
    reverse: bool
    carries: tuple[tuple[Ref, Ref], ...]
    stacked: tuple[tuple[Ref, int], ...]
    invariants: tuple[Ref, ...]
    outs: tuple[tuple[Ref, int], ...]
    ws: Ref


@dataclass(frozen=True)
class Linalg:
    op: str  # cholesky, solve, eigh, svd...
    attrs: tuple[tuple[str, bool], ...]
    ins: tuple[View, ...]
    outs: tuple[View, ...]
    failure: int  # the failure code raised when the op fails on its values (0: none)


@dataclass(frozen=True)
class Callback:
    fn: str  # the registered function and the call's constant arguments (op attributes)
    static: str
    ins: tuple[View, ...]
    outs: tuple[View, ...]
    loc: str | None  # the user's line, for errors


Step = Launch | Memset | Gemm | Call | Loop | Linalg | Callback


@dataclass
class FnPlan:
    """One function's storages (``layout.Storage``), steps and workspace bytes;
    ``step_ops[s]``: the op whose code step ``s`` is (-1: a copy into an output array),
    for ``yota.profile`` (not stored in artifacts, so not compared)."""

    name: str
    storages: list[Any]
    steps: list[Step]
    ws_bytes: int
    step_ops: list[int] = field(default_factory=list, compare=False)


class StepTimes:
    """One call of a profiled executable (``compile(fn, profile=True)``): its start and end
    and each step's ``starts[s]``, ``ends[s]`` (``time.monotonic_ns`` clock; 0 for a step
    that did not run, after a failure). Step ``s`` is op ``exe.steps[s]`` of ``exe.fn``
    (-1: the copies into the output arrays)."""

    __slots__ = ("start", "end", "starts", "ends")

    def __init__(self, start: int, end: int, starts: np.ndarray, ends: np.ndarray) -> None:
        self.start, self.end, self.starts, self.ends = start, end, starts, ends
