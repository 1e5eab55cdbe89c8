"""Primitives with user rules: one right, one deliberately wrong (for `yota-ir check`)."""

import numpy as np

import yota


@yota.primitive
def logistic(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


@yota.diffrule(logistic, "x")
def _(x: np.ndarray, *, y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    return y * (1 - y) * dy


@yota.primitive
def cube(x: np.ndarray) -> np.ndarray:
    return x * x * x


@yota.diffrule(cube, "x")
def _(x: np.ndarray, *, y: np.ndarray, dy: np.ndarray) -> np.ndarray:
    return 2 * x * x * dy  # wrong on purpose: d(x^3)/dx is 3 x^2


def good(x: np.ndarray) -> np.ndarray:
    return np.sum(logistic(x) * x)


def bad(x: np.ndarray) -> np.ndarray:
    return np.sum(cube(x))


def example() -> tuple[np.ndarray]:
    return (np.linspace(-1.0, 1.0, 5),)
