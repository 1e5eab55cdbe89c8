"""The 784-512-256-10 MLP (batch 128, float32, tanh, softmax cross-entropy) that
measure_mlp.py times."""

from dataclasses import dataclass

import numpy as np


@dataclass
class MLP:
    W1: np.ndarray
    b1: np.ndarray
    W2: np.ndarray
    b2: np.ndarray
    W3: np.ndarray
    b3: np.ndarray

def loss(p, X, labels):
    h = np.tanh(X @ p.W1 + p.b1)
    h = np.tanh(h @ p.W2 + p.b2)
    z = h @ p.W3 + p.b3
    m = np.max(z, axis=1, keepdims=True)
    lse = np.log(np.sum(np.exp(z - m), axis=1)) + m[:, 0]
    n = z.shape[0]
    return np.sum(lse - z[np.arange(n), labels]) / n

def example(sizes=(784, 512, 256, 10), batch=128):
    rng = np.random.default_rng(1)
    f32 = np.float32
    ps = []
    for m, k in zip(sizes, sizes[1:], strict=False):
        ps += [(rng.standard_normal((m, k)) / np.sqrt(m)).astype(f32), np.zeros(k, f32)]
    X = rng.standard_normal((batch, sizes[0])).astype(f32)
    labels = rng.integers(0, sizes[-1], batch)
    return MLP(*ps), X, labels
