"""A small tanh RNN written twice, as a Python loop (which ``roll`` folds into a loop) and
with ``yota.scan`` (the step traced once): ``loss = mean over t of sum((h_t @ wo)**2)``."""

from __future__ import annotations

from typing import Any

import numpy as np

import yota

H, B, N_IN = 5, 3, 4  # hidden, batch, input


def rnn_loss(wx: np.ndarray, wh: np.ndarray, wo: np.ndarray, xs: np.ndarray) -> Any:
    h = np.zeros((B, H))
    total = 0.0
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ wx + h @ wh)
        total = total + np.sum((h @ wo) ** 2)
    return total / xs.shape[0]


def rnn_scan(wx: Any, wh: Any, wo: Any, xs: Any) -> Any:
    def step(h: Any, x: Any) -> tuple[Any, Any]:
        h = np.tanh(x @ wx + h @ wh)
        return h, np.sum((h @ wo) ** 2)

    _, ys = yota.scan(step, np.zeros((B, H)), xs)
    return np.sum(ys) / xs.shape[0]


def rnn_args(steps: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((N_IN, H)) * 0.5, rng.standard_normal((H, H)) * 0.5,
            rng.standard_normal((H, 1)), rng.standard_normal((steps, B, N_IN))]
