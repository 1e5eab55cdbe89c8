"""The profiled variant of a CUDA program (``compile(fn, profile=True)``, for
``yota.profile``): the same module and steps, with the top function's steps run one op at
a time (the launches, memsets, GEMMs, LAPACK calls and calls the lowering emitted for
each op) between two device synchronizations, timed on the host clock. Synchronizing
around every op serializes the stream, so the times are each op's own (launch latency
included); the normal program never synchronizes between steps."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ..program import FnPlan, StepTimes
from .runtime import CudaExecutable


class ProfiledCudaExecutable(CudaExecutable):
    """``steps[s]``: the op index of timed group ``s`` (-1: the output copies);
    ``timed(*arrays)`` returns the outputs and the call's ``StepTimes``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        main = self._main
        ops = main.step_ops if len(main.step_ops) == len(main.steps) else \
            [-2] * len(main.steps)  # a plan without op records: each step apart
        self.steps: list[int] = []
        self._groups: list[FnPlan] = []
        start = 0
        for k in range(1, len(ops) + 1):
            if k == len(ops) or ops[k] != ops[start] or ops[k] == -2:
                self.steps.append(max(ops[start], -1))
                self._groups.append(FnPlan(f"{main.name}#{len(self._groups)}", main.storages,
                                           main.steps[start:k], main.ws_bytes))
                start = k

    def __call__(self, *args: Any) -> list[Any]:
        return self.timed(*args)[0]

    def timed(self, *args: Any) -> tuple[list[Any], StepTimes]:
        dev = self.device
        n = len(self.steps)
        starts, ends = np.zeros(n, np.int64), np.zeros(n, np.int64)
        t0 = time.monotonic_ns()
        try:
            arrs, outs, ws, ws_addr = self._buffers(args)
            ins, outa = [dev.address(a) for a in arrs], [dev.address(o) for o in outs]
            dev.synchronize()
            for s, plan in enumerate(self._groups):
                starts[s] = time.monotonic_ns()
                self._run(plan, ins, outa, ws_addr, ws_addr, keep=(arrs, ws))
                dev.synchronize()
                ends[s] = time.monotonic_ns()
            if self.module.failures:
                self._check(dev.read(ws_addr, 16))
        finally:
            times = StepTimes(t0, time.monotonic_ns(), starts, ends)
        return outs, times

