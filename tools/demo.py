"""The main job: a real gradient, traced, differentiated, optimized and run, with its tape.

    python tools/demo.py
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import yota.backends

import yota


@dataclass
class Linear:
    W: np.ndarray
    b: np.ndarray


def loss(m: Linear, X: np.ndarray) -> np.ndarray:
    return np.sum(np.tanh(m.W @ X + m.b[:, None]) ** 2)


def main() -> None:
    rng = np.random.default_rng(0)
    m = Linear(rng.standard_normal((3, 4)), rng.standard_normal(3))
    X = rng.standard_normal((4, 5))

    _, tape = yota.trace(loss, m, X)
    print("== the tape")
    print(tape)

    val, g = yota.grad(loss, m, X)
    print("\n== the gradient program (optimized IR)")
    print(g.tape)
    print(f"\n== value and gradients ({yota.backends.DEFAULT_BACKEND} backend)")
    print("loss =", val)
    print(g)

    eps = 1e-6
    u = rng.standard_normal(m.W.shape)
    up, down = Linear(m.W + eps * u, m.b), Linear(m.W - eps * u, m.b)
    fd = (loss(up, X) - loss(down, X)) / (2 * eps)
    print(f"\ncheck: d loss / dW along a random direction: yota {np.sum(g[0].W * u):.10f}"
          f", finite differences {fd:.10f}")

    for _ in range(3):
        val, g = yota.grad(loss, m, X)
        yota.update_(m, g[0], lambda x, gx: x - 0.1 * gx)
        print(f"after an SGD step: loss = {float(loss(m, X)):.6f}")


if __name__ == "__main__":
    main()
