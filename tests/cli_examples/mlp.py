"""A small MLP with softmax cross-entropy and integer labels (a yota-ir example)."""

from dataclasses import dataclass

import numpy as np


@dataclass
class MLP:
    W1: np.ndarray
    b1: np.ndarray
    W2: np.ndarray
    b2: np.ndarray


def loss(m: MLP, X: np.ndarray, labels: np.ndarray) -> np.ndarray:
    h = np.tanh(X @ m.W1 + m.b1)
    z = h @ m.W2 + m.b2
    z = z - np.max(z, axis=1, keepdims=True)
    logp = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
    return -np.mean(logp[np.arange(X.shape[0]), labels])


def example(rng: np.random.Generator) -> tuple[MLP, np.ndarray, np.ndarray]:
    m = MLP(rng.standard_normal((4, 8)) / 2, 0.1 * rng.standard_normal(8),
            rng.standard_normal((8, 3)) / 3, 0.1 * rng.standard_normal(3))
    return m, rng.standard_normal((5, 4)), rng.integers(0, 3, 5)


def example32(rng: np.random.Generator) -> tuple[MLP, np.ndarray, np.ndarray]:
    """The same model in float32 (``yota-ir check`` takes its differences in float64)."""
    m, X, labels = example(rng)
    f32 = [np.asarray(a, np.float32) for a in (m.W1, m.b1, m.W2, m.b2)]
    return MLP(*f32), X.astype(np.float32), labels
