"""Functions that fail, for yota-ir's error reporting."""

import numpy as np


def helper(x: np.ndarray) -> np.ndarray:
    raise ValueError("bad input from the user's code")


def raises(x: np.ndarray) -> np.ndarray:
    return np.sum(helper(x))


def mutates(x: np.ndarray) -> np.ndarray:
    x[0] = 1.0
    return np.sum(x)


def vector(x: np.ndarray) -> np.ndarray:
    return x * 2.0


def bad_example() -> tuple[np.ndarray]:
    return (np.ones(3) @ np.ones(4),)
