"""A small tanh RNN, ``loss = mean over t of sum((h_t @ wo)**2)``, written as a Python loop
(which ``roll`` folds into a loop) and with ``yota.scan`` (the step traced once): the
compile-time benchmark's programs (``tools/bench_compile.py``), at test sizes."""

from __future__ import annotations

import inspect
from typing import Any

import numpy as np
from bench_compile import rnn_loss, rnn_scan_loss

H, B, N_IN = 5, 3, 4  # hidden, batch, input

rnn_scan = rnn_scan_loss


def rnn_args(steps: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((N_IN, H)) * 0.5, rng.standard_normal((H, H)) * 0.5,
            rng.standard_normal((H, 1)), rng.standard_normal((steps, B, N_IN))]


def source_line(f: Any, text: str) -> int:
    """The line number of the first line of ``f``'s source that holds ``text``."""
    lines, first = inspect.getsourcelines(f)
    return first + next(i for i, ln in enumerate(lines) if text in ln)


__all__ = ["rnn_loss", "rnn_scan", "rnn_args", "source_line", "H", "B", "N_IN"]
