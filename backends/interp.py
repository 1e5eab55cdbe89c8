"""The reference-interpreter backend: runs IR with NumPy, op by op.

``compile(fn, profile=True)`` gives the profiled variant: the same interpreter with the
clock read around each op (``yota.profile``); ``run_all`` returns every value of a run
(``yota.graph(..., values=True)``)."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from yota.ir.core import Function, Value
from yota.ir.interpreter import check_inputs, run, run_op

from .program import StepTimes


class InterpExecutable:
    """A compiled program for the ``interp`` backend."""

    backend = "interp"

    def __init__(self, fn: Function) -> None:
        self.fn = fn

    def __call__(self, *args: Any) -> list[np.ndarray]:
        return run(self.fn, *args)


class ProfiledInterpExecutable(InterpExecutable):
    """The interpreter timing each op but constants: ``steps[s]`` is the op index of step
    ``s``; ``timed(*arrays)`` returns the outputs and the call's ``StepTimes``."""

    def __init__(self, fn: Function) -> None:
        super().__init__(fn)
        self.steps = [i for i, op in enumerate(fn.ops) if op.name != "const"]
        self._step_of = {i: s for s, i in enumerate(self.steps)}

    def __call__(self, *args: Any) -> list[np.ndarray]:
        return self.timed(*args)[0]

    def timed(self, *args: Any) -> tuple[list[np.ndarray], StepTimes]:
        n = len(self.steps)
        starts, ends = np.zeros(n, np.int64), np.zeros(n, np.int64)
        t0 = time.monotonic_ns()
        try:
            fn = self.fn
            env: dict[Value, np.ndarray] = dict(zip(fn.inputs, check_inputs(fn, args),
                                                    strict=True))
            for i in range(len(fn.ops)):
                s = self._step_of.get(i)
                if s is not None:
                    starts[s] = time.monotonic_ns()
                run_op(fn, i, env)
                if s is not None:
                    ends[s] = time.monotonic_ns()
            outs = [env[v] for v in fn.outputs]
        finally:
            times = StepTimes(t0, time.monotonic_ns(), starts, ends)
        return outs, times


def run_all(fn: Function, *args: Any) -> dict[Value, np.ndarray]:
    """Run ``fn`` on ``args``; every value it has (inputs, every op's results)."""
    env: dict[Value, np.ndarray] = dict(zip(fn.inputs, check_inputs(fn, args), strict=True))
    for i in range(len(fn.ops)):
        run_op(fn, i, env)
    return env


def compile(fn: Function, *, profile: bool = False) -> InterpExecutable:
    return ProfiledInterpExecutable(fn) if profile else InterpExecutable(fn)
