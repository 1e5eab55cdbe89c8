"""A small model for the cache's subprocess tests: a matmul, a helper from another file,
a primitive with a user rule, an integer static argument and a gather."""

from dataclasses import dataclass

import numpy as np
from helpers import activation
from rules_mod import softplus


@dataclass
class Params:
    W: np.ndarray
    b: np.ndarray


def loss(p, X, labels, power):
    h = activation(X @ p.W + p.b)
    z = softplus(h) ** power
    return np.sum(z) - np.sum(z[np.arange(z.shape[0]), labels])


def example(power=2):
    rng = np.random.default_rng(0)
    p = Params(rng.standard_normal((6, 4)), rng.standard_normal(4))
    X = rng.standard_normal((5, 6))
    labels = rng.integers(0, 4, 5)
    return p, X, labels, power
