"""Benchmark suite: Yota against a hand-written NumPy gradient, HIPS autograd, JAX and PyTorch.

Every system computes the value and the gradient of the same scalar loss on the same inputs,
in one process. Each system's answer is checked against the hand-written NumPy gradient
before it is timed (a mismatch is reported, not timed). Timing: first call (trace +
compile + run) separately, then warm-up, then interleaved rounds (every system once per
round, the order rotating, each sample started once no thread of the process still runs:
``--settle``), reported as median and quartiles. The machine's memory
bandwidth (a STREAM-style triad) and BLAS rate are measured in the same run, and each
workload's time is also given as a multiple of its physical bound.

    python tools/bench.py                       # full run: Markdown on stdout, JSON file
    python tools/bench.py --quick               # smoke run on tiny sizes
    python tools/bench.py --only W3,W5 --systems numpy,yota,jax --backend interp
    python tools/bench.py --load 2              # the same with 2 busy processes running
    python tools/bench.py --transforms          # jvp, vmap, hessian vs JAX (bench_transforms.py)

Peers are used when importable (``pip install -e '.[bench]'`` gives jax and autograd;
``pip install torch==2.13.0`` the CPU build of PyTorch); a missing one is skipped with
its reason. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import atexit
import concurrent.futures
import dataclasses
import datetime
import gc
import json
import math
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

Grads = dict[str, np.ndarray]
Result = tuple[float, Grads]

# -- the losses, written once against an array namespace ``xp`` --------------------------


def logistic(xp: Any, x: Any) -> Any:
    return 1 / (1 + xp.exp(-x))


def logsumexp_rows(xp: Any, z: Any) -> Any:
    """log(sum(exp(z), axis=1)), shifted by the row maximum."""
    m = xp.max(z, axis=1, keepdims=True)
    return xp.log(xp.sum(xp.exp(z - m), axis=1)) + m[:, 0]


def loss_w1(xp: Any) -> Callable[..., Any]:
    return lambda x: xp.sum(logistic(xp, x))


def loss_w2(xp: Any) -> Callable[..., Any]:
    return lambda x, y: xp.sum(xp.tanh(x) * logistic(xp, y) + xp.exp(-x * x) * y)


@dataclass
class MLP:
    """The W3 parameters: Yota receives this dataclass; its gradient is a dict by field."""

    W1: Any
    b1: Any
    W2: Any
    b2: Any
    W3: Any
    b3: Any


def loss_w3(xp: Any) -> Callable[..., Any]:
    def loss(p: MLP, X: Any, labels: Any) -> Any:
        h = xp.tanh(X @ p.W1 + p.b1)
        h = xp.tanh(h @ p.W2 + p.b2)
        z = h @ p.W3 + p.b3
        n = z.shape[0]
        return xp.sum(logsumexp_rows(xp, z) - z[xp.arange(n), labels]) / n
    return loss


def loss_w4(xp: Any) -> Callable[..., Any]:
    def loss(W: Any, U: Any, b: Any, xs: Any) -> Any:
        h = xp.tanh(xs[0] @ U.T + b)  # h_0 = 0, so the first step has no W h term
        for t in range(1, xs.shape[0]):
            h = xp.tanh(h @ W.T + xs[t] @ U.T + b)
        return xp.sum(h ** 2)
    return loss


def loss_w7(xp: Any) -> Callable[..., Any]:
    """W7: the RNN of W4 written as a hand-written NumPy RNN often is, filling a
    preallocated state buffer step by step (``states[:, t+1] = ...``). Systems whose arrays
    cannot be written in place (JAX, autograd, torch autograd) run the same recurrence with
    the states kept in a list (the state h_0 = 0 contributes nothing)."""
    def loss(W: Any, U: Any, b: Any, xs: Any) -> Any:
        T, B = xs.shape[0], xs.shape[1]
        H = U.shape[0]
        if xp is np:
            states = np.zeros((B, T + 1, H), dtype=xs.dtype)
            for t in range(T):
                states[:, t + 1] = np.tanh(xs[t] @ W + states[:, t] @ U + b)
            return np.sum(states ** 2)
        h = xp.tanh(xs[0] @ W + b)
        total = xp.sum(h ** 2)
        for t in range(1, T):
            h = xp.tanh(xs[t] @ W + h @ U + b)
            total = total + xp.sum(h ** 2)
        return total
    return loss


def loss_w5(xp: Any) -> Callable[..., Any]:
    return lambda X, b: xp.sum(logsumexp_rows(xp, X + b))


def im2col_indices(h: int, w: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Row and column indices into the padded image of every k x k patch: (h*w, k*k)."""
    oy, ox = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    dy, dx = np.meshgrid(np.arange(k), np.arange(k), indexing="ij")
    return ((oy.reshape(-1, 1) + dy.reshape(1, -1)),
            (ox.reshape(-1, 1) + dx.reshape(1, -1)))


def loss_w6(xp: Any) -> Callable[..., Any]:
    """A 3x3 'same' convolution in im2col form (pad, gather the patches, one matmul),
    bias, tanh, and the mean of squares; the images are a constant input."""
    def loss(Wc: Any, bc: Any, X: Any) -> Any:
        B, C, H, W = X.shape
        k = Wc.shape[-1]
        rows, cols = im2col_indices(H, W, k)
        P = xp.pad(X, ((0, 0), (0, 0), (k // 2, k // 2), (k // 2, k // 2)))
        patches = P[:, :, rows, cols]  # (B, C, H*W, k*k)
        patches = xp.transpose(patches, (0, 2, 1, 3)).reshape(B, H * W, C * k * k)
        out = patches @ Wc.reshape(Wc.shape[0], -1).T + bc  # (B, H*W, F)
        return xp.sum(xp.tanh(out) ** 2) / B
    return loss


def loss_w8(xp: Any) -> Callable[..., Any]:
    """The negative log marginal likelihood of a Gaussian process with an RBF kernel:
    K = variance * exp(-|xi - xj|^2 / (2 ell^2)) + noise * I, L = cholesky(K),
    alpha = K^-1 y by two solves with L, nll = y.alpha / 2 + sum(log(diag(L))) +
    n log(2 pi) / 2. Plain np.linalg: cholesky and solve."""
    def loss(ell: Any, variance: Any, noise: Any, X: Any, y: Any) -> Any:
        n = X.shape[0]
        diff = X[:, None, :] - X[None, :, :]
        K = variance * xp.exp(xp.sum(diff * diff, axis=-1) * (-0.5 / (ell * ell)))
        K = K + noise * xp.eye(n)
        L = xp.linalg.cholesky(K)
        alpha = xp.linalg.solve(L.T, xp.linalg.solve(L, y))
        return (0.5 * xp.sum(y * alpha) + xp.sum(xp.log(xp.diagonal(L)))
                + 0.5 * n * math.log(2 * math.pi))
    return loss


GELU_C = math.sqrt(2 / math.pi)  # the tanh form of GELU: 0.5 z (1 + tanh(c (z + a z^3)))
GELU_A = 0.044715
LN_EPS = 1e-5


def loss_w9(xp: Any) -> Callable[..., Any]:
    """A transformer-style block: LayerNorm over the features, x @ W + b, GELU (tanh form,
    with z**3), summed."""
    def loss(W: Any, b: Any, gamma: Any, beta: Any, x: Any) -> Any:
        n = x.shape[-1]
        xc = x - xp.sum(x, axis=-1, keepdims=True) / n
        var = xp.sum(xc * xc, axis=-1, keepdims=True) / n
        y = xc * (var + LN_EPS) ** -0.5 * gamma + beta
        z = y @ W + b
        return xp.sum(0.5 * z * (1 + xp.tanh(GELU_C * (z + GELU_A * z**3))))
    return loss


def loss_w10(xp: Any) -> Callable[..., Any]:
    """Batched attention: softmax(q k^T / sqrt(d)) over the last axis, times v, per head;
    the loss is the sum of squares of the output."""
    def loss(q: Any, k: Any, v: Any) -> Any:
        s = q @ xp.transpose(k, (0, 2, 1)) * (1 / math.sqrt(q.shape[-1]))
        e = xp.exp(s - xp.max(s, axis=-1, keepdims=True))
        o = (e / xp.sum(e, axis=-1, keepdims=True)) @ v
        return xp.sum(o * o)
    return loss


# -- the hand-written NumPy gradients (the no-AD baseline) --------------------------------


def hand_w1(x: np.ndarray) -> Result:
    s = 1 / (1 + np.exp(-x))
    return float(s.sum()), {"x": s * (1 - s)}


def hand_w2(x: np.ndarray, y: np.ndarray) -> Result:
    t, e = np.tanh(x), np.exp(-x * x)
    s = 1 / (1 + np.exp(-y))
    ts = t * s
    val = float(np.sum(ts + e * y))
    gx = (1 - t * t) * s - 2 * x * e * y
    gy = ts * (1 - s) + e
    return val, {"x": gx, "y": gy}


def hand_w3(W1: np.ndarray, b1: np.ndarray, W2: np.ndarray, b2: np.ndarray, W3: np.ndarray,
            b3: np.ndarray, X: np.ndarray, labels: np.ndarray) -> Result:
    h1 = np.tanh(X @ W1 + b1)
    h2 = np.tanh(h1 @ W2 + b2)
    z = h2 @ W3 + b3
    n, rows = z.shape[0], np.arange(z.shape[0])
    m = z.max(axis=1, keepdims=True)
    e = np.exp(z - m)
    s = e.sum(axis=1, keepdims=True)
    val = float(np.sum(np.log(s[:, 0]) + m[:, 0] - z[rows, labels]) / n)
    dz = e / s
    dz[rows, labels] -= 1
    dz /= n
    dh2 = (dz @ W3.T) * (1 - h2 * h2)
    dh1 = (dh2 @ W2.T) * (1 - h1 * h1)
    return val, {"W1": X.T @ dh1, "b1": dh1.sum(0), "W2": h1.T @ dh2, "b2": dh2.sum(0),
                 "W3": h2.T @ dz, "b3": dz.sum(0)}


def hand_w4(W: np.ndarray, U: np.ndarray, b: np.ndarray, xs: np.ndarray) -> Result:
    """Backpropagation through time with the input projections and the weight gradients of
    all steps merged into single large GEMMs."""
    T, B, n_in = xs.shape
    H = W.shape[0]
    hs = (xs.reshape(T * B, n_in) @ U.T).reshape(T, B, H)
    hs += b
    np.tanh(hs[0], out=hs[0])
    for t in range(1, T):
        hs[t] += hs[t - 1] @ W.T
        np.tanh(hs[t], out=hs[t])
    val = float(np.sum(hs[-1] ** 2))
    dpre = np.empty_like(hs)
    dh = 2 * hs[-1]
    for t in range(T - 1, -1, -1):
        np.multiply(dh, 1 - hs[t] * hs[t], out=dpre[t])
        if t:
            dh = dpre[t] @ W
    dW = dpre[1:].reshape(-1, H).T @ hs[:-1].reshape(-1, H)
    dU = dpre.reshape(-1, H).T @ xs.reshape(-1, n_in)
    return val, {"W": dW, "U": dU, "b": dpre.sum(axis=(0, 1))}


def hand_w7(W: np.ndarray, U: np.ndarray, b: np.ndarray, xs: np.ndarray) -> Result:
    """The state-buffer RNN by hand: the input projections of all steps as one GEMM, the
    states written into the buffer, backpropagation through time accumulating into the
    buffer's gradient in place, the weight gradients as single large GEMMs."""
    T, B, n_in = xs.shape
    H = U.shape[0]
    states = np.zeros((B, T + 1, H), dtype=xs.dtype)
    px = (xs.reshape(T * B, n_in) @ W).reshape(T, B, H)
    px += b
    for t in range(T):
        h = px[t] + states[:, t] @ U
        states[:, t + 1] = np.tanh(h, out=h)
    val = float(np.sum(states ** 2))
    dS = 2 * states
    dpre = np.empty((T, B, H), dtype=xs.dtype)
    for t in range(T - 1, -1, -1):
        h = states[:, t + 1]
        np.multiply(dS[:, t + 1], 1 - h * h, out=dpre[t])
        dS[:, t] += dpre[t] @ U.T
    flat = dpre.reshape(T * B, H)
    dW = xs.reshape(T * B, n_in).T @ flat
    dU = states[:, :T].transpose(1, 0, 2).reshape(T * B, H).T @ flat
    return val, {"W": dW, "U": dU, "b": flat.sum(axis=0)}


def hand_w6(Wc: np.ndarray, bc: np.ndarray, X: np.ndarray) -> Result:
    B, C, H, W = X.shape
    F, k = Wc.shape[0], Wc.shape[-1]
    rows, cols = im2col_indices(H, W, k)
    P = np.pad(X, ((0, 0), (0, 0), (k // 2, k // 2), (k // 2, k // 2)))
    patches = P[:, :, rows, cols].transpose(0, 2, 1, 3).reshape(B * H * W, C * k * k)
    t = np.tanh(patches @ Wc.reshape(F, -1).T + bc)
    dout = (2.0 / B) * t * (1 - t * t)  # d/d(out) of sum(tanh(out)**2) / B
    return (float(np.sum(t * t) / B),
            {"Wc": (dout.T @ patches).reshape(Wc.shape), "bc": dout.sum(axis=0)})


def hand_w8(ell: np.ndarray, variance: np.ndarray, noise: np.ndarray, X: np.ndarray,
            y: np.ndarray) -> Result:
    """dnll/dK = (K^-1 - alpha alpha^T) / 2, with K^-1 from the Cholesky factor (SciPy's
    LAPACK potrs/potri when SciPy is installed, else NumPy's solve), then the chain rule
    through the kernel by hand."""
    n = X.shape[0]
    diff = X[:, None, :] - X[None, :, :]
    d2 = np.einsum("ijk,ijk->ij", diff, diff)
    Kf = variance * np.exp(d2 * (-0.5 / (ell * ell)))
    L = np.linalg.cholesky(Kf + noise * np.eye(n))
    try:
        from scipy.linalg import cho_solve, lapack
        alpha = cho_solve((L, True), y)
        Kinv, _ = lapack.dpotri(L, lower=1)
        Kinv = np.tril(Kinv) + np.tril(Kinv, -1).T
    except ImportError:
        Linv = np.linalg.solve(L, np.eye(n))
        Kinv = Linv.T @ Linv
        alpha = Kinv @ y
    val = float(0.5 * y @ alpha + np.sum(np.log(np.diagonal(L))) + 0.5 * n * math.log(2 * math.pi))
    G = 0.5 * (Kinv - np.outer(alpha, alpha))
    M = G * Kf
    gX = (-2 / (ell * ell)) * (M.sum(axis=1)[:, None] * X - M @ X)
    return val, {"ell": np.asarray(np.sum(M * d2) / ell ** 3),
                 "variance": np.asarray(np.sum(M) / variance),
                 "noise": np.asarray(np.trace(G)), "X": gX}


def hand_w5(X: np.ndarray, b: np.ndarray) -> Result:
    P = X + b
    m = P.max(axis=1, keepdims=True)
    P -= m
    np.exp(P, out=P)
    s = P.sum(axis=1, keepdims=True)
    val = float(np.sum(np.log(s)) + np.sum(m))
    P /= s
    return val, {"X": P, "b": P.sum(axis=0)}


def hand_w9(W: np.ndarray, b: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
            x: np.ndarray) -> Result:
    n = x.shape[-1]
    xc = x - x.mean(axis=-1, keepdims=True)
    rstd = 1 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + LN_EPS)
    xhat = xc * rstd
    y = xhat * gamma + beta
    z = y @ W + b
    t = np.tanh(GELU_C * (z + GELU_A * z * z * z))
    val = float(np.sum(0.5 * z * (1 + t)))
    dz = 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * GELU_C * (1 + 3 * GELU_A * z * z)
    dy = dz @ W.T
    dxhat = dy * gamma
    dx = rstd * (dxhat - dxhat.sum(axis=-1, keepdims=True) / n
                 - xhat * (dxhat * xhat).sum(axis=-1, keepdims=True) / n)
    return val, {"W": y.T @ dz, "b": dz.sum(axis=0), "gamma": (dy * xhat).sum(axis=0),
                 "beta": dy.sum(axis=0), "x": dx}


def hand_w10(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> Result:
    scale = 1 / math.sqrt(q.shape[-1])
    s = q @ k.transpose(0, 2, 1) * scale
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    o = p @ v
    do = 2 * o
    dp = do @ v.transpose(0, 2, 1)
    ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True)) * scale
    return float(np.sum(o * o)), {"q": ds @ k, "k": ds.transpose(0, 2, 1) @ q,
                                  "v": p.transpose(0, 2, 1) @ do}


# -- workloads ---------------------------------------------------------------------------


@dataclass
class Workload:
    """A scalar loss, its inputs, and which of them are differentiated.

    ``params`` are the differentiated leaves (in order), ``consts`` the other inputs. With
    ``struct`` set, the params are passed as one structure argument of that class."""

    name: str
    desc: str
    dtype: type
    loss: Callable[[Any], Callable[..., Any]]
    hand: Callable[..., Result]
    make: Callable[[np.random.Generator], dict[str, np.ndarray]]
    params: tuple[str, ...]
    consts: tuple[str, ...] = ()
    struct: type | None = None
    flops: int = 0

    def pack(self, leaves: dict[str, Any]) -> list[Any]:
        """The differentiated leaves as the loss's leading positional arguments."""
        if self.struct is not None:
            return [self.struct(**leaves)]
        return [leaves[n] for n in self.params]

    def call_args(self, inputs: dict[str, Any]) -> tuple[list[Any], list[Any]]:
        return self.pack({n: inputs[n] for n in self.params}), [inputs[n] for n in self.consts]


def _normal(rng: np.random.Generator, shape: Any, dtype: type, scale: float = 1.0) -> np.ndarray:
    return (scale * rng.standard_normal(shape)).astype(dtype)


def w1(dtype: type) -> Workload:
    tag = np.dtype(dtype).name.replace("float", "f")
    return Workload(f"W1-{tag}", f"sum(logistic(x)), x[5] {tag}", dtype, loss_w1, hand_w1,
                    lambda r: {"x": _normal(r, 5, dtype)}, ("x",))


def w2(n: int, label: str) -> Workload:
    f32 = np.float32
    return Workload(f"W2-{label}", f"sum(tanh(x)*logistic(y) + exp(-x*x)*y), N={n} f32", f32,
                    loss_w2, hand_w2, lambda r: {"x": _normal(r, n, f32), "y": _normal(r, n, f32)},
                    ("x", "y"))


def w3(sizes: Sequence[int], batch: int) -> Workload:
    f32 = np.float32

    def make(r: np.random.Generator) -> dict[str, np.ndarray]:
        d: dict[str, np.ndarray] = {}
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True), 1):
            d[f"W{i}"] = _normal(r, (a, b), f32, 1 / math.sqrt(a))
            d[f"b{i}"] = _normal(r, b, f32, 0.1)
        d["X"] = _normal(r, (batch, sizes[0]), f32)
        d["labels"] = r.integers(0, sizes[-1], batch)
        return d

    pairs = [a * b for a, b in zip(sizes[:-1], sizes[1:], strict=True)]
    flops = 2 * batch * (2 * sum(pairs) + sum(pairs[1:]))  # forward, weight grads, input grads
    desc = f"MLP {'-'.join(map(str, sizes))}, batch {batch}, tanh, softmax x-entropy, f32"
    return Workload("W3", desc, f32, loss_w3, hand_w3, make,
                    ("W1", "b1", "W2", "b2", "W3", "b3"), ("X", "labels"), MLP, flops)


def w4(dtype: type, T: int, H: int, B: int, n_in: int) -> Workload:
    tag = np.dtype(dtype).name.replace("float", "f")

    def make(r: np.random.Generator) -> dict[str, np.ndarray]:
        return {"W": _normal(r, (H, H), dtype, 1 / math.sqrt(H)),
                "U": _normal(r, (H, n_in), dtype, 1 / math.sqrt(n_in)),
                "b": _normal(r, H, dtype, 0.1), "xs": _normal(r, (T, B, n_in), dtype)}

    flops = 2 * B * (2 * T * H * n_in + 3 * (T - 1) * H * H)
    desc = f"RNN {T} steps, hidden {H}, batch {B}, input {n_in}, {tag}"
    return Workload(f"W4-{tag}", desc, dtype, loss_w4, hand_w4, make, ("W", "U", "b"),
                    ("xs",), flops=flops)


def w5(rows: int, cols: int) -> Workload:
    f32 = np.float32
    return Workload("W5", f"sum(logsumexp(X + b, axis=1)), X {rows}x{cols} f32", f32, loss_w5,
                    hand_w5, lambda r: {"X": _normal(r, (rows, cols), f32),
                                        "b": _normal(r, cols, f32)}, ("X", "b"))


def w6(B: int, C: int, F: int, S: int, k: int = 3) -> Workload:
    f32 = np.float32

    def make(r: np.random.Generator) -> dict[str, np.ndarray]:
        return {"Wc": _normal(r, (F, C, k, k), f32, 1 / math.sqrt(C * k * k)),
                "bc": _normal(r, F, f32, 0.1), "X": _normal(r, (B, C, S, S), f32)}

    flops = 2 * 2 * B * S * S * C * k * k * F  # forward and weight gradient matmuls
    desc = f"conv {k}x{k} 'same' in im2col form, batch {B}, {C}->{F} channels, {S}x{S}, f32"
    return Workload("W6", desc, f32, loss_w6, hand_w6, make, ("Wc", "bc"), ("X",), flops=flops)


def w7(dtype: type, T: int, H: int, B: int, n_in: int) -> Workload:
    def make(r: np.random.Generator) -> dict[str, np.ndarray]:
        return {"W": _normal(r, (n_in, H), dtype, 1 / math.sqrt(n_in)),
                "U": _normal(r, (H, H), dtype, 1 / math.sqrt(H)),
                "b": _normal(r, H, dtype, 0.1), "xs": _normal(r, (T, B, n_in), dtype)}

    flops = 2 * B * (2 * T * H * n_in + 3 * T * H * H)
    desc = (f"RNN into a preallocated state buffer (states[:, t+1] = tanh(...)), {T} steps, "
            f"hidden {H}, batch {B}, input {n_in}, {np.dtype(dtype).name}")
    return Workload("W7", desc, dtype, loss_w7, hand_w7, make, ("W", "U", "b"), ("xs",),
                    flops=flops)


def w8(n: int, d: int) -> Workload:
    f64 = np.float64

    def make(r: np.random.Generator) -> dict[str, np.ndarray]:
        X = r.uniform(-2, 2, (n, d))
        y = np.sin(2 * X[:, 0]) + 0.1 * r.standard_normal(n)
        return {"ell": np.asarray(0.7), "variance": np.asarray(1.3), "noise": np.asarray(0.05),
                "X": X.astype(f64), "y": y.astype(f64)}

    desc = f"GP neg. log marginal likelihood, RBF kernel, {n} points in {d}-D, f64"
    return Workload("W8", desc, f64, loss_w8, hand_w8, make,
                    ("ell", "variance", "noise", "X"), ("y",))


def w9(batch: int, feat: int) -> Workload:
    f32 = np.float32

    def make(r: np.random.Generator) -> dict[str, np.ndarray]:
        return {"W": _normal(r, (feat, feat), f32, feat ** -0.5), "b": _normal(r, feat, f32, 0.1),
                "gamma": (1 + 0.1 * r.standard_normal(feat)).astype(f32),
                "beta": _normal(r, feat, f32, 0.1), "x": _normal(r, (batch, feat), f32)}
    desc = f"LayerNorm -> x @ W ({feat}x{feat}) + b -> GELU (tanh, z**3), batch {batch}, f32"
    return Workload("W9", desc, f32, loss_w9, hand_w9, make, ("W", "b", "gamma", "beta", "x"),
                    flops=3 * 2 * batch * feat * feat)


def w10(heads: int, seq: int, d: int) -> Workload:
    f32 = np.float32

    def make(r: np.random.Generator) -> dict[str, np.ndarray]:
        return {n: _normal(r, (heads, seq, d), f32) for n in "qkv"}
    desc = f"attention, {heads} heads, {seq}x{d}, softmax over the last axis, sum(o**2), f32"
    return Workload("W10", desc, f32, loss_w10, hand_w10, make, ("q", "k", "v"),
                    flops=6 * 2 * heads * seq * seq * d)


def workloads(quick: bool) -> list[Workload]:
    if quick:
        return [w1(np.float64), w1(np.float32), w2(1000, "1e3"), w2(10_000, "1e4"),
                w3([20, 16, 8, 4], 6), w4(np.float64, 3, 8, 4, 5), w4(np.float32, 3, 8, 4, 5),
                w5(64, 32), w6(2, 3, 4, 6), w7(np.float64, 3, 8, 4, 5), w8(24, 2), w9(6, 16),
                w10(2, 8, 4)]
    return [w1(np.float64), w1(np.float32), w2(10**6, "1e6"), w2(10**7, "1e7"),
            w3([784, 512, 256, 10], 128), w4(np.float64, 20, 256, 32, 256),
            w4(np.float32, 20, 256, 32, 256), w5(4096, 1024), w6(32, 3, 16, 32),
            w7(np.float64, 20, 256, 32, 256), w8(512, 2), w9(256, 512), w10(8, 128, 64)]


# -- systems -----------------------------------------------------------------------------


class Unavailable(Exception):
    """A system that cannot run here (not installed, or not working); the message says why."""


Step = Callable[[], Any]


@dataclass
class System:
    """One way of computing value and gradient.

    ``prepare(workload, inputs)`` returns ``(step, read)``: ``step()`` computes value and
    gradient in the system's own array types, ``read(step())`` converts them to NumPy."""

    name: str
    load: Callable[[], Any]
    prepare: Callable[[Any, Workload, dict[str, np.ndarray]], tuple[Step, Callable[[Any], Result]]]
    numpy_based: bool = False  # its arrays are NumPy arrays, so tracemalloc sees them
    dist: str = ""  # the distribution whose version is reported
    module: Any = None
    version: str = ""

    def setup(self) -> None:
        """Import the system; raise Unavailable with the reason if it cannot be used."""
        if self.module is None:
            try:
                self.module = self.load()
            except Exception as e:
                raise Unavailable(f"not installed or not importable ({_why(e)})") from e
            self.version = _dist_version(self.dist) if self.dist else ""


def _why(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:300]


def _leaves(inputs: dict[str, np.ndarray], w: Workload) -> dict[str, np.ndarray]:
    return {n: inputs[n] for n in w.params}


def prepare_numpy(_: Any, w: Workload, inputs: dict[str, np.ndarray]) -> tuple[Step, Any]:
    return (lambda: w.hand(**inputs)), (lambda out: out)


def prepare_yota(backend: str) -> Callable[..., tuple[Step, Any]]:
    def prepare(yota: Any, w: Workload, inputs: dict[str, np.ndarray]) -> tuple[Step, Any]:
        loss = w.loss(np)
        args, consts = w.call_args(inputs)

        def f(*a: Any) -> Any:  # a fresh function per workload: Yota's cache starts empty
            return loss(*a, *consts)  # the consts are closure arrays, not differentiated

        def read(out: Any) -> Result:
            val, g = out
            if w.struct is not None:
                return float(val), {k[0]: v for k, v in g.flat[0].items()}
            return float(val), {n: g[i] for i, n in enumerate(w.params)}

        return (lambda: yota.grad(f, *args, backend=backend)), read
    return prepare


def load_yota() -> Any:
    import yota
    return yota


def load_autograd() -> Any:
    import autograd
    import autograd.numpy  # noqa: F401
    return autograd


def prepare_autograd(ag: Any, w: Workload, inputs: dict[str, np.ndarray]) -> tuple[Step, Any]:
    loss = w.loss(ag.numpy)
    consts = [inputs[n] for n in w.consts]
    vg = ag.value_and_grad(lambda d: loss(*w.pack(d), *consts))
    leaves = _leaves(inputs, w)
    return (lambda: vg(leaves)), (lambda out: (float(out[0]), dict(out[1])))


def load_jax() -> Any:
    import jax
    jax.config.update("jax_enable_x64", True)  # for the float64 workloads; f32 stays f32
    return jax


def prepare_jax(jax: Any, w: Workload, inputs: dict[str, np.ndarray]) -> tuple[Step, Any]:
    jnp = jax.numpy
    loss = w.loss(jnp)
    vg = jax.jit(jax.value_and_grad(lambda d, *c: loss(*w.pack(d), *c)))
    leaves = {n: jnp.asarray(v) for n, v in _leaves(inputs, w).items()}
    consts = [jnp.asarray(inputs[n]) for n in w.consts]

    def read(out: Any) -> Result:
        return float(out[0]), {n: np.asarray(v) for n, v in out[1].items()}

    return (lambda: jax.block_until_ready(vg(leaves, *consts))), read


def load_torch() -> Any:
    """PyTorch, with Inductor's on-disk cache in a fresh directory, so that torch.compile's
    first call is a cold compile as everyone else's is, not a hit from an earlier run."""
    if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench-inductor-")
        atexit.register(shutil.rmtree, os.environ["TORCHINDUCTOR_CACHE_DIR"], True)
    import torch
    return torch


def torch_namespace(torch: Any) -> Any:
    """The few NumPy-named functions the losses use, over torch tensors."""
    def tsum(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return x.sum() if axis is None else x.sum(dim=axis, keepdim=keepdims)

    def tmax(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        return x.amax() if axis is None else x.amax(dim=axis, keepdim=keepdims)

    def tpad(x: Any, widths: Any) -> Any:  # NumPy's ((before, after), ...) per axis
        flat = [int(v) for pair in reversed(widths) for v in pair]
        return torch.nn.functional.pad(x, flat)

    return types.SimpleNamespace(sum=tsum, max=tmax, exp=torch.exp, log=torch.log,
                                 tanh=torch.tanh, arange=torch.arange, pad=tpad,
                                 transpose=lambda x, axes: x.permute(*axes))


def prepare_torch(compiled: bool) -> Callable[..., tuple[Step, Any]]:
    def prepare(torch: Any, w: Workload, inputs: dict[str, np.ndarray]) -> tuple[Step, Any]:
        loss = w.loss(torch_namespace(torch))
        leaves = {n: torch.from_numpy(v).requires_grad_() for n, v in _leaves(inputs, w).items()}
        consts = [torch.from_numpy(inputs[n]) for n in w.consts]
        tensors = list(leaves.values())
        names = list(leaves)

        def fwd(*ts: Any) -> Any:
            return loss(*w.pack(dict(zip(names, ts, strict=True))), *consts)

        if compiled:
            torch._dynamo.reset()  # one compiled graph per workload, never a recompile limit
            fwd = torch.compile(fwd)

        def step() -> Any:
            out = fwd(*tensors)
            return out.detach(), torch.autograd.grad(out, tensors)

        def read(out: Any) -> Result:
            return float(out[0]), {n: g.numpy() for n, g in zip(names, out[1], strict=True)}

        return step, read
    return prepare


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version(name)
    except PackageNotFoundError:
        return ""


def all_systems(backends: Sequence[str]) -> list[System]:
    """NumPy first (the reference), then Yota per backend, then the peers."""
    systems = [System("numpy", lambda: np, prepare_numpy, True, "numpy")]
    systems += [System(f"yota[{b}]", load_yota, prepare_yota(b), True, "yota")
                for b in backends]
    return systems + [
        System("autograd", load_autograd, prepare_autograd, True, "autograd"),
        System("jax", load_jax, prepare_jax, False, "jax"),
        System("torch", load_torch, prepare_torch(False), False, "torch"),
        System("torch.compile", load_torch, prepare_torch(True), False, "torch"),
    ]


def yota_backends() -> tuple[list[str], str]:
    """Every backend Yota lists, and its default."""
    from yota.backends import BACKENDS, DEFAULT_BACKEND
    return list(BACKENDS), DEFAULT_BACKEND


# -- checking ----------------------------------------------------------------------------


def tolerance(dtype: type) -> float:
    return 2e-3 if np.dtype(dtype) == np.float32 else 1e-8


def rel_err(a: Any, b: Any) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / max(float(np.linalg.norm(b)), 1e-30))


def compare(got: Result, ref: Result, w: Workload) -> tuple[float, str]:
    """Largest relative error (2-norm) over value and gradients, and what is wrong if any."""
    (val, grads), (rval, rgrads) = got, ref
    if set(grads) != set(rgrads):
        return math.inf, f"gradients for {sorted(grads)}, expected {sorted(rgrads)}"
    errs = {"value": rel_err(val, rval)}
    for n, g in rgrads.items():
        a = np.asarray(grads[n])
        if a.shape != g.shape or a.dtype != g.dtype:
            return math.inf, f"d{n}: {a.dtype}{list(a.shape)}, expected {g.dtype}{list(g.shape)}"
        errs[f"d{n}"] = rel_err(a, g)
    worst = max(errs, key=lambda k: errs[k])
    if not errs[worst] <= tolerance(w.dtype):
        return errs[worst], f"{worst} differs: relative error {errs[worst]:.2e}"
    return errs[worst], ""


# -- timing ------------------------------------------------------------------------------


@dataclass
class Outcome:
    """One system on one workload."""

    system: str
    status: str = "ok"  # ok | skipped | failed | mismatch
    reason: str = ""
    first_call_s: float | None = None
    max_rel_err: float | None = None
    samples: list[float] = field(default_factory=list)
    calls_per_sample: int = 0
    peak_tracemalloc_bytes: int | None = None
    peak_rss_delta_bytes: int | None = None

    def quartiles(self) -> tuple[float, float, float] | None:
        if not self.samples:
            return None
        q1, med, q3 = np.percentile(self.samples, [25, 50, 75])
        return float(q1), float(med), float(q3)


def timed(step: Step, n: int) -> float:
    """Seconds per call, over n back-to-back calls with the garbage collector off."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        return (time.perf_counter() - t0) / n
    finally:
        if enabled:
            gc.enable()


@dataclass
class Timing:
    budget_s: float  # stop the rounds after this long ...
    min_rounds: int  # ... but only once this many are done
    max_rounds: int
    batch_s: float  # calls per sample are chosen so that one sample takes about this long
    warmup: int = 2
    settle_s: float = 0.25  # before a sample, wait up to this long for the process to rest


def calibrate(step: Step, timing: Timing) -> int:
    """Warm up, then choose how many calls make one sample."""
    t = min(timed(step, 1) for _ in range(timing.warmup))
    return max(1, min(100_000, math.ceil(timing.batch_s / max(t, 1e-9))))


def settle(limit_s: float, window_s: float = 0.01, idle: float = 0.1) -> float:
    """Wait until no thread of this process is still running: until, over a window, the
    process used less than ``idle`` of one core (the calling thread sleeps meanwhile), or
    ``limit_s`` passed. Returns the seconds waited.

    Libraries return before their worker threads rest: NumPy's OpenBLAS workers spin
    about 0.1 s after a call (measured here: a 128x784x512 product, then ~105 ms of one
    core busy), XLA's pool briefly. Without this wait the next system's sample runs beside
    the previous one's spinning threads, so each system would be timed partly against
    another's leftovers (the rotation keeps the cyclic order, so always the same one)."""
    t0 = time.perf_counter()
    if limit_s <= 0:
        return 0.0
    while True:
        w0, c0 = time.perf_counter(), time.process_time()
        time.sleep(window_s)
        w1, c1 = time.perf_counter(), time.process_time()
        if (c1 - c0) < idle * (w1 - w0) or w1 - t0 >= limit_s:
            return w1 - t0


def run_rounds(steps: dict[str, Step], counts: dict[str, int], timing: Timing,
               outcomes: dict[str, Outcome]) -> None:
    """Every system once per round, the order rotating by one each round; each sample
    starts once the process is at rest (``settle``), and the budget counts only samples."""
    names = list(steps)
    spent, r = 0.0, 0
    while names and r < timing.max_rounds and (r < timing.min_rounds or spent < timing.budget_s):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            settle(timing.settle_s)
            t0 = time.perf_counter()
            outcomes[name].samples.append(timed(steps[name], counts[name]))
            spent += time.perf_counter() - t0
            outcomes[name].calls_per_sample = counts[name]
        r += 1


def _proc_status_kb(key: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def peak_rss_delta(step: Step) -> int | None:
    """Resident memory high-water mark during one call, above the resident size before it
    (Linux: reset through /proc/self/clear_refs). Memory an allocator reuses from its own
    cache is not seen, so this is a lower bound."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        return None
    before = _proc_status_kb("VmRSS")
    out = step()
    peak = _proc_status_kb("VmHWM")
    del out
    return None if before is None or peak is None else max(0, peak - before)


def peak_tracemalloc(step: Step) -> int:
    """Peak traced allocation (NumPy array data included) during one call, outputs kept."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        out = step()
        peak = tracemalloc.get_traced_memory()[1]
        del out
        return peak - base
    finally:
        tracemalloc.stop()


# -- machine limits ----------------------------------------------------------------------


def triad_bandwidth(n: int, threads: int, reps: int = 5) -> float:
    """Bytes per second of a = b + s*c over float64 arrays of n elements (24 bytes per
    element: two reads, one write). Each thread walks its share in blocks small enough that
    the second ufunc pass over a block hits the cache, so memory sees one triad."""
    a, b, c = np.empty(n), np.ones(n), np.full(n, 2.0)
    a.fill(0.0)
    block = 1 << 15

    def part(lo: int, hi: int) -> None:
        for i in range(lo, hi, block):
            j = min(i + block, hi)
            np.multiply(c[i:j], 3.0, out=a[i:j])
            np.add(a[i:j], b[i:j], out=a[i:j])

    bounds = np.linspace(0, n, threads + 1).astype(int)
    best = math.inf
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for _ in range(reps):
            t0 = time.perf_counter()
            list(pool.map(lambda k: part(bounds[k], bounds[k + 1]), range(threads)))
            best = min(best, time.perf_counter() - t0)
    return 24 * n / best


def gemm_rate(n: int, dtype: type, reps: int = 10) -> float:
    """FLOP/s of an n x n x n matrix product through NumPy's BLAS, best of reps."""
    A, B = np.ones((n, n), dtype), np.ones((n, n), dtype)
    C = np.empty((n, n), dtype)
    np.matmul(A, B, out=C)
    best = min(_once(lambda: np.matmul(A, B, out=C)) for _ in range(reps))
    return 2 * n**3 / best


def _once(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def measure_limits(quick: bool, threads: int) -> dict[str, Any]:
    """Bandwidth and BLAS rate with as many threads as the systems may use."""
    n = 1 << (21 if quick else 23)  # 3 x 64 MiB in the full run: twice the L3 of these CPUs
    bw = {k: triad_bandwidth(n, k) for k in sorted({1, threads})}
    size = 256 if quick else 1024
    return {
        "triad_array_bytes": 8 * n,
        "threads": threads,
        "bandwidth_by_threads_Bps": bw,
        "bandwidth_Bps": max(bw.values()),
        "gemm_size": size,
        "flops": {"float32": gemm_rate(size, np.float32), "float64": gemm_rate(size, np.float64)},
    }


def bound(w: Workload, inputs: dict[str, np.ndarray], limits: dict[str, Any]) -> dict[str, Any]:
    """The physical lower bound: every input read once and every gradient written once at
    the measured bandwidth, or the matrix-product FLOPs at the measured BLAS rate."""
    nbytes = sum(v.nbytes for v in inputs.values()) + sum(inputs[n].nbytes for n in w.params)
    t_mem = nbytes / limits["bandwidth_Bps"]
    t_flop = w.flops / limits["flops"][np.dtype(w.dtype).name]
    return {"bytes": nbytes, "flops": w.flops, "memory_s": t_mem, "compute_s": t_flop,
            "bound_s": max(t_mem, t_flop), "kind": "FLOPs" if t_flop > t_mem else "bytes"}


# -- one workload ------------------------------------------------------------------------


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def first_call(system: System, w: Workload, inputs: dict[str, np.ndarray], ref: Result,
               out: Outcome) -> Step | None:
    """Prepare, call once (timed: trace + compile + run), check against the reference.
    Returns the step to time, or None with the outcome saying why not."""
    try:
        step, read = system.prepare(system.module, w, inputs)
        t0 = time.perf_counter()
        result = step()
        out.first_call_s = time.perf_counter() - t0
        got = read(result)
    except Exception as e:
        out.status, out.reason = "failed", _why(e)
        return None
    err, problem = compare(got, ref, w)
    out.max_rel_err = err if math.isfinite(err) else None
    if problem:
        out.status, out.reason = "mismatch", problem
        return None
    return step


def run_workload(w: Workload, systems: Sequence[System], timing: Timing,
                 limits: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    inputs = w.make(np.random.default_rng(seed))
    ref = w.hand(**inputs)
    outcomes = {s.name: Outcome(s.name) for s in systems}
    steps: dict[str, Step] = {}
    counts: dict[str, int] = {}
    for s in systems:
        o = outcomes[s.name]
        try:
            s.setup()
        except Unavailable as e:
            o.status, o.reason = "skipped", str(e)
            continue
        step = first_call(s, w, inputs, ref, o)
        if step is None:
            log(f"  {w.name} {s.name}: {o.status}: {o.reason}")
            continue
        counts[s.name] = calibrate(step, timing)
        steps[s.name] = step
    run_rounds(steps, counts, timing, outcomes)
    for s in systems:
        if s.name in steps:
            measure_memory(s, steps[s.name], outcomes[s.name])
    res = {"name": w.name, "description": w.desc, "dtype": np.dtype(w.dtype).name,
           "bound": bound(w, inputs, limits), "results": [dataclasses.asdict(o) for o in
                                                           outcomes.values()]}
    for r, o in zip(res["results"], outcomes.values(), strict=True):
        q = o.quartiles()
        r.update(q1_s=q and q[0], median_s=q and q[1], q3_s=q and q[2], rounds=len(o.samples))
    add_ratios(res)
    return res


def measure_memory(s: System, step: Step, o: Outcome) -> None:
    try:
        if s.numpy_based:
            o.peak_tracemalloc_bytes = peak_tracemalloc(step)
        o.peak_rss_delta_bytes = peak_rss_delta(step)
    except Exception as e:  # memory is a side measurement: never lose the timings to it
        log(f"  memory of {s.name}: {_why(e)}")


def reference_system(results: Sequence[dict[str, Any]], default: str) -> str | None:
    """Ratios are to Yota's default backend, else to the first Yota backend that ran."""
    ran = [r["system"] for r in results if r["median_s"] is not None]
    preferred = f"yota[{default}]"
    if preferred in ran:
        return preferred
    return next((n for n in ran if n.startswith("yota[")), None)


def add_ratios(res: dict[str, Any], default_backend: str | None = None) -> None:
    if default_backend is None:
        default_backend = _default_backend()
    ref = reference_system(res["results"], default_backend)
    t_ref = next((r["median_s"] for r in res["results"] if r["system"] == ref), None)
    res["ratio_reference"] = ref
    for r in res["results"]:
        med = r["median_s"]
        r["ratio_to_yota"] = med / t_ref if med is not None and t_ref else None
        r["ratio_to_bound"] = med / res["bound"]["bound_s"] if med is not None else None


def _default_backend() -> str:
    try:
        return yota_backends()[1]
    except Exception:
        return "interp"


# -- reporting ---------------------------------------------------------------------------


def fmt_time(s: float | None) -> str:
    if s is None:
        return "—"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def fmt_ratio(x: float | None) -> str:
    return "—" if x is None else f"{_num(x)}×"


def fmt_mib(b: int | None) -> str:
    return "—" if b is None else f"{b / 2**20:.3g}"


def machine_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return platform.processor() or platform.machine()


def run_meta(argv: Sequence[str], tool: str) -> dict[str, Any]:
    """The date, machine, cores, command line and load of a run of ``tool`` (for the JSON
    of bench_compile.py and bench_transforms.py; docs/hooks/performance.py shows it)."""
    return {"date": datetime.date.today().isoformat(), "machine": machine_name(),
            "cores": os.cpu_count(), "command": shlex.join(["python", tool, *argv]),
            "load_start": _load()}


def markdown(report: dict[str, Any]) -> str:
    meta, lim = report["meta"], report["limits"]
    systems = meta["systems"]
    lines = [f"Measured {meta['date']} on {meta['machine']} ({meta['cores']} cores; threads: "
             f"{meta['threads']}), `{meta['command']}`.", "",
             f"Machine limits measured in the same run: memory bandwidth "
             f"{lim['bandwidth_Bps'] / 1e9:.3g} GB/s (triad over 3 × "
             f"{lim['triad_array_bytes'] / 2**20:.0f} MiB arrays, up to {lim['threads']} "
             f"thread(s)); BLAS {lim['gemm_size']}³ matrix product "
             f"{lim['flops']['float32'] / 1e9:.3g} GFLOP/s float32, "
             f"{lim['flops']['float64'] / 1e9:.3g} GFLOP/s float64.", "",
             f"Load average (1 min) at start and end: {meta['load_start']} and "
             f"{meta['load_end']}" + (f"; {meta['load']} busy process(es) ran during the "
                                      "workloads (--load)" if meta.get("load") else "")
             + ".", "",
             f"Each cell: median time per value-and-gradient call (its ratio to "
             f"{_ref_label(report)}, its ratio to the workload's physical bound):", "",
             "| workload | bound | " + " | ".join(systems) + " |",
             "|---|---|" + "---|" * len(systems)]
    for w in report["workloads"]:
        by = {r["system"]: r for r in w["results"]}
        cells = [_summary_cell(by.get(s)) for s in systems]
        b = w["bound"]
        lines.append(f"| {w['name']} | {fmt_time(b['bound_s'])} ({b['kind']}) | "
                     + " | ".join(cells) + " |")
    lines += ["", "First call (trace + compile + one run, before any warm-up):", "",
              "| workload | " + " | ".join(systems) + " |", "|---|" + "---|" * len(systems)]
    for w in report["workloads"]:
        by = {r["system"]: r for r in w["results"]}
        cells = [fmt_time(by[s]["first_call_s"]) if s in by else "—" for s in systems]
        lines.append(f"| {w['name']} | " + " | ".join(cells) + " |")
    lines += ["", "Details (× Yota = system time / Yota time, so above 1 means Yota is faster; "
              "peak memory: tracemalloc for NumPy-based systems, RSS high-water delta for "
              "all, a lower bound):", "",
              "| workload | system | median | q1–q3 | first call | × Yota | × bound | "
              "peak MiB (tracemalloc) | peak MiB (RSS Δ) | rounds × calls |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for w in report["workloads"]:
        for r in w["results"]:
            if r["median_s"] is not None:
                lines.append(_detail_row(w, r))
    problems = [f"- {w['name']} {r['system']}: {r['status']}: {r['reason']}"
                for w in report["workloads"] for r in w["results"] if r["status"] != "ok"]
    if problems:
        lines += ["", "Not timed:", "", *_collapse(problems)]
    return "\n".join(lines) + "\n"


def _summary_cell(r: dict[str, Any] | None) -> str:
    if r is None or r["median_s"] is None:
        return "—" if r is None else r["status"]
    return (f"{fmt_time(r['median_s'])} ({_num(r['ratio_to_yota'])}, "
            f"{_num(r['ratio_to_bound'])})")


def _num(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{float(f'{x:.3g}'):,.0f}" if x >= 1000 else f"{x:.3g}"


def _ref_label(report: dict[str, Any]) -> str:
    refs = sorted({w["ratio_reference"] for w in report["workloads"]} - {None})
    return " / ".join(refs) if refs else "Yota"


def _detail_row(w: dict[str, Any], r: dict[str, Any]) -> str:
    return (f"| {w['name']} | {r['system']} | {fmt_time(r['median_s'])} | "
            f"{fmt_time(r['q1_s'])}–{fmt_time(r['q3_s'])} | {fmt_time(r['first_call_s'])} | "
            f"{fmt_ratio(r['ratio_to_yota'])} | {fmt_ratio(r['ratio_to_bound'])} | "
            f"{fmt_mib(r['peak_tracemalloc_bytes'])} | {fmt_mib(r['peak_rss_delta_bytes'])} | "
            f"{r['rounds']} × {r['calls_per_sample']} |")


def _collapse(problems: list[str]) -> list[str]:
    """One line per skipped system instead of one per workload."""
    out: list[str] = []
    for p in problems:
        if ": skipped: " in p:
            system = p.split(": skipped:")[0].split(" ", 2)[2]
            line = f"- {system}: skipped: {p.split(': skipped: ', 1)[1]}"
            if line not in out:
                out.append(line)
        else:
            out.append(p)
    return out


# -- main --------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes and short rounds (smoke run)")
    p.add_argument("--only", default="", help="workloads by name or prefix, comma-separated "
                   "(W3, W1-f32, W2)")
    p.add_argument("--systems", default="", help="systems by name or prefix, comma-separated "
                   "(numpy, yota, autograd, jax, torch, torch.compile); default all")
    p.add_argument("--backend", default="", help="Yota backends, comma-separated; default every "
                   "backend in yota.backends.BACKENDS")
    p.add_argument("--budget", type=float, default=None, help="seconds of timed rounds per "
                   "workload (default 12, quick 0.3)")
    p.add_argument("--json", default="build/bench.json", help="where to write the JSON report")
    p.add_argument("--md", default="", help="also write the Markdown table to this file")
    p.add_argument("--threads", type=int, default=0, help="threads for every system's thread "
                   "pool (OpenBLAS, OpenMP/MKL, XLA when 1; run as a script only); default: each "
                   "library's own default")
    p.add_argument("--load", type=int, default=0, metavar="N", help="run N busy processes "
                   "(an endless Python loop each, like `yes > /dev/null`) during the timed "
                   "workloads, to measure under CPU contention; stopped at the end, on error "
                   "and on Ctrl-C")
    p.add_argument("--settle", type=float, default=0.25, metavar="S", help="before each "
                   "timed sample, wait up to S seconds until no thread of this process runs "
                   "(other libraries' workers still spinning from their own sample); 0: don't")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.load < 0:
        p.error("--load takes a number of processes, 0 or more")
    return args


# The busy child: spins, and exits when its parent goes away (PR_SET_PDEATHSIG on Linux,
# and a periodic parent check everywhere), so a killed benchmark leaves no spinner behind.
_SPIN = """
import os, sys
parent = int(sys.argv[1])
try:
    import ctypes, signal
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
except Exception:
    pass
while os.getppid() == parent:
    for _ in range(2_000_000):
        pass
"""


class BusyLoad:
    """``with BusyLoad(n):`` runs n busy processes for the block's duration and stops
    them on leaving it, whatever the reason (an exception, KeyboardInterrupt); an atexit
    hook stops any left over if the block never unwinds."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.procs: list[subprocess.Popen[bytes]] = []

    def __enter__(self) -> BusyLoad:
        atexit.register(self.stop)
        try:
            for _ in range(self.n):
                self.procs.append(subprocess.Popen(
                    [sys.executable, "-c", _SPIN, str(os.getpid())],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL))
        except BaseException:
            self.stop()
            raise
        if self.n:
            log(f"load: {self.n} busy process(es) running: "
                + ", ".join(str(p.pid) for p in self.procs))
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        procs, self.procs = self.procs, []
        for p in procs:
            if p.poll() is None:
                p.kill()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - a stuck kill
                log(f"load: process {p.pid} did not stop")
        if procs:
            log(f"load: stopped {len(procs)} busy process(es)")
        atexit.unregister(self.stop)


def _select(items: Sequence[Any], spec: str, what: str) -> list[Any]:
    if not spec:
        return list(items)
    keys = [k.strip() for k in spec.split(",") if k.strip()]
    chosen = [x for x in items if any(x.name == k or x.name.startswith(k + "-")
                                      or x.name.startswith(k + "[") for k in keys)]
    if not chosen:
        raise SystemExit(f"--{what} {spec!r} selects nothing; choose from "
                         + ", ".join(x.name for x in items))
    return chosen


def choose_systems(args: argparse.Namespace) -> list[System]:
    try:
        backends, _ = yota_backends()
    except Exception as e:
        log(f"yota: cannot list backends ({_why(e)})")
        backends = []
    if args.backend:
        wanted = [b.strip() for b in args.backend.split(",") if b.strip()]
        for b in wanted:
            if b not in backends:
                log(f"yota[{b}]: not in yota.backends.BACKENDS ({', '.join(backends)})")
        backends = wanted
    return _select(all_systems(backends), args.systems, "systems")


def versions(systems: Sequence[System]) -> dict[str, str]:
    v = {"python": platform.python_version()}
    for s in systems:
        if s.module is not None:
            v[s.dist] = s.version
    if "jax" in v:
        v["jaxlib"] = _dist_version("jaxlib")
    return v


THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def limit_threads(n: int) -> None:
    """Keep the process on n cores (sched_setaffinity, which also sizes thread pools that
    count usable cores, such as Yota's) and set the libraries' thread variables. Thread
    pools are sized when a library loads, so start again with them set."""
    if os.environ.get("YOTA_BENCH_THREADS") == str(n):
        return
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:n])
    env = dict(os.environ, YOTA_BENCH_THREADS=str(n), **{v: str(n) for v in THREAD_VARS})
    if n == 1:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false "
                            "intra_op_parallelism_threads=1").strip()
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]], env)


def run(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the suite; print Markdown on stdout, write the JSON report, and return it."""
    args = parse_args(argv)
    if args.threads:
        if argv is not None:
            raise SystemExit("--threads works only when bench.py runs as a script")
        limit_threads(args.threads)
    timing = (Timing(args.budget if args.budget is not None else 0.3, 2, 20, 0.002,
                     settle_s=0.0)
              if args.quick else
              Timing(args.budget if args.budget is not None else 12.0, 5, 1000, 0.02,
                     settle_s=args.settle))
    chosen = _select(workloads(args.quick), args.only, "only")
    systems = choose_systems(args)
    for s in systems:
        try:
            s.setup()
        except Unavailable as e:
            log(f"{s.name}: skipped: {e}")
    load_start = _load()
    log("measuring the machine's limits ...")
    limits = measure_limits(args.quick, args.threads or os.cpu_count() or 1)
    results = []
    with BusyLoad(args.load):
        for w in chosen:
            log(f"{w.name}: {w.desc}")
            t0 = time.perf_counter()
            results.append(run_workload(w, systems, timing, limits, args.seed))
            log(f"  done in {time.perf_counter() - t0:.1f} s")
    command = shlex.join(["python", "tools/bench.py",
                          *(sys.argv[1:] if argv is None else argv)])
    report = {"meta": {"date": datetime.date.today().isoformat(), "machine": machine_name(),
                       "cores": os.cpu_count(), "command": command, "quick": args.quick,
                       "threads": args.threads or "library defaults", "load": args.load,
                       "load_start": load_start, "load_end": _load(),
                       "systems": [s.name for s in systems], "versions": versions(systems),
                       "timing": dataclasses.asdict(timing)},
              "limits": limits, "workloads": results}
    report["markdown"] = markdown(report)
    print(report["markdown"])
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=_jsonable)
        log(f"JSON written to {args.json}")
    if args.md:
        with open(args.md, "w") as f:
            f.write(report["markdown"])
    return report


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def _jsonable(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    return str(x)


if __name__ == "__main__":
    if "--compile" in sys.argv[1:]:  # compile times: tools/bench_compile.py
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import bench_compile

        bench_compile.main([a for a in sys.argv[1:] if a != "--compile"])
    elif "--transforms" in sys.argv[1:]:  # jvp, vmap, hessian vs JAX: bench_transforms.py
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import bench_transforms

        bench_transforms.main([a for a in sys.argv[1:] if a != "--transforms"])
    else:
        run()
