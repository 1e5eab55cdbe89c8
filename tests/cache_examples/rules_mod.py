"""A primitive and its derivative rule (the cache must see an edited rule)."""

import numpy as np

import yota


@yota.primitive
def softplus(x):
    return np.log1p(np.exp(x))


@yota.diffrule(softplus, "x")
def _(x, *, y, dy):
    return dy / (1.0 + np.exp(-x))
