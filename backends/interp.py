"""The reference-interpreter backend: runs IR with NumPy, op by op."""

from __future__ import annotations

from typing import Any

import numpy as np
from yota.ir.core import Function
from yota.ir.interpreter import run


class InterpExecutable:
    """A compiled program for the ``interp`` backend."""

    backend = "interp"

    def __init__(self, fn: Function) -> None:
        self.fn = fn

    def __call__(self, *args: Any) -> list[np.ndarray]:
        return run(self.fn, *args)


def compile(fn: Function) -> InterpExecutable:
    return InterpExecutable(fn)
