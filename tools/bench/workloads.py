"""The benchmark workloads, each defined once: a scalar loss written against an array
namespace ``xp`` (NumPy, JAX's, autograd's, a torch shim), its hand-written NumPy value and
gradient (the no-AD baseline every system is checked against), how its inputs are made,
and its sizes (``workloads(quick)``: the W1..W10 of ``tools/bench.py``).

The tests and the other tools import these (``from bench.workloads import ...``, with
``tools/`` on ``sys.path``: a script's own folder, or pytest's ``pythonpath``) instead of
writing the models again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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


def find(name: str, quick: bool = False) -> Workload:
    """The workload called ``name`` (W3, W4-f32, W2-1e6) at full (or quick) sizes."""
    found = {w.name: w for w in workloads(quick)}
    if name not in found:
        raise KeyError(f"no workload {name!r}; choose from {', '.join(found)}")
    return found[name]
