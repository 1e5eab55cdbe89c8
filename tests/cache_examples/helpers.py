"""A function the model calls, defined in another file (the cache must see its edits)."""

import numpy as np


def activation(x):
    return np.tanh(x)
