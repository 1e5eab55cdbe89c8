"""A loss in a package module, with its example arguments."""

import numpy as np


def l2(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return np.sum((x @ w) ** 2)


def example(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.standard_normal(3), rng.standard_normal((4, 3))
