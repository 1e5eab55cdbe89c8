"""A seeded generator of random well-typed IR programs, built from the op table with
``Builder``: elementwise chains, constants (including 0, -0.0, 1, NaN, inf), broadcasts,
reductions, matmuls, shape ops, slices, gathers, concatenation, selects, converts, calls
and guards, plus deliberate redundancy (double negations, transposes of transposes,
repeated expressions) so that every pass has something to do.

    >>> import numpy as np
    >>> fn, args = random_program(np.random.default_rng(0))
    >>> len(args) == len(fn.inputs)
    True
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from yota.ir import Builder, Function, TensorType, Value

FLOAT_UNARY = ["exp", "log", "tanh", "sqrt", "sin", "cos", "neg", "abs", "square", "expm1",
               "log1p", "reciprocal", "floor", "sign"]
TAME_UNARY = ["tanh", "sin", "cos", "neg", "abs", "square"]
FLOAT_BINARY = ["add", "sub", "mul", "div", "maximum", "minimum"]
TAME_BINARY = ["add", "sub", "mul", "maximum", "minimum"]
INT_UNARY = ["neg", "abs", "square", "sign"]
INT_BINARY = ["add", "sub", "mul", "maximum", "minimum"]
SPECIAL = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 3.0, 0.25, float("nan"), float("inf")]
TAME_SPECIAL = [0.0, 1.0, -1.0, 2.0, 0.5, 3.0, 0.25]
SHAPES = [(), (1,), (3,), (2, 3), (3, 1), (1, 4), (2, 1, 3), (4, 3), (2, 2, 2), (0, 3)]


@dataclass
class Gen:
    """Generator state: the builder, the values made so far, and the inputs' data."""

    rng: np.random.Generator
    tame: bool
    dtype: np.dtype
    b: Builder = field(default_factory=lambda: Builder("random"))
    pool: list[Value] = field(default_factory=list)
    data: list[np.ndarray] = field(default_factory=list)

    def pick(self, pred: Callable[[Value], bool] = lambda v: True) -> Value | None:
        cands = [v for v in self.pool if pred(v)]
        if not cands:
            return None
        recent = cands[-6:]
        return recent[int(self.rng.integers(len(recent)))] if self.rng.random() < 0.7 \
            else cands[int(self.rng.integers(len(cands)))]

    def add(self, v: Value | None) -> Value | None:
        if v is not None:
            self.pool.append(v)
        return v

    def input(self, shape: tuple[int, ...]) -> Value:
        v = self.b.input(TensorType(self.dtype, shape), f"in{len(self.data)}")
        self.data.append(self.sample(shape))
        return v

    def sample(self, shape: tuple[int, ...]) -> np.ndarray:
        if self.dtype.kind in "iu":
            return self.rng.integers(-5, 6, shape).astype(self.dtype)
        x = self.rng.standard_normal(shape).astype(self.dtype)
        if not self.tame and x.size and self.rng.random() < 0.5:
            flat = x.reshape(-1)
            for s in self.rng.choice(SPECIAL, size=min(3, flat.size)):
                flat[int(self.rng.integers(flat.size))] = s
        return x

    def const_like(self, v: Value) -> Value:
        if self.dtype.kind in "iu":
            c = int(self.rng.choice([0, 1, -1, 2, 3]))
        else:
            c = float(self.rng.choice(TAME_SPECIAL if self.tame else SPECIAL))
        if self.rng.random() < 0.2 and v.shape:
            return self.b.broadcast(self.b.const(c, self.dtype), shape=v.shape)
        return self.b.const(c, self.dtype, v.shape)


# -- steps: each adds at most one value to the pool ---------------------------------------
def step_unary(g: Gen) -> Value | None:
    x = g.pick()
    if x is None:
        return None
    ops = INT_UNARY if g.dtype.kind in "iu" else TAME_UNARY if g.tame else FLOAT_UNARY
    return g.b.emit(str(g.rng.choice(ops)), x)


def step_binary(g: Gen) -> Value | None:
    x = g.pick()
    if x is None:
        return None
    y = g.pick(lambda v: v.type == x.type and v is not x)
    if y is None or g.rng.random() < 0.35:
        y = g.const_like(x)
    if g.rng.random() < 0.5:
        x, y = y, x
    ops = INT_BINARY if g.dtype.kind in "iu" else TAME_BINARY if g.tame else FLOAT_BINARY
    return g.b.emit(str(g.rng.choice(ops)), x, y)


def step_broadcast(g: Gen) -> Value | None:
    x = g.pick(lambda v: v.ndim < 3)
    if x is None:
        return None
    shape = [int(g.rng.integers(2, 4)) if s == 1 else s for s in x.shape]
    if g.rng.random() < 0.6 or not shape:
        shape = [int(g.rng.integers(1, 4))] + shape
    y = g.b.broadcast(x, shape=tuple(shape))
    if g.rng.random() < 0.3:  # and sum it back: the gradient of a broadcast
        return g.b.sum_to(y, shape=x.shape)
    return y


def step_reduce(g: Gen) -> Value | None:
    x = g.pick(lambda v: v.ndim > 0)
    if x is None:
        return None
    axes = tuple(a for a in range(x.ndim) if g.rng.random() < 0.5) or (0,)
    name = str(g.rng.choice(["sum", "sum", "max", "min"]))
    if name != "sum" and any(x.shape[a] == 0 for a in axes):
        name = "sum"
    return g.b.emit(name, x, axes=axes)


def step_shape(g: Gen) -> Value | None:
    x = g.pick(lambda v: v.ndim > 0)
    if x is None:
        return None
    kind = str(g.rng.choice(["reshape", "transpose", "flip", "slice", "pad", "double"]))
    if kind == "reshape":
        return g.b.reshape(x, shape=_factor(g, x.type.size))
    if kind == "transpose":
        return g.b.transpose(x, perm=tuple(int(p) for p in g.rng.permutation(x.ndim)))
    if kind == "flip":
        return g.b.flip(x, axes=(int(g.rng.integers(x.ndim)),))
    if kind == "slice":
        start = tuple(int(g.rng.integers(0, s + 1)) for s in x.shape)
        stop = tuple(int(g.rng.integers(a, s + 1)) for a, s in zip(start, x.shape, strict=True))
        step = tuple(int(g.rng.integers(1, 3)) for _ in x.shape)
        return g.b.slice(x, start=start, stop=stop, step=step)
    if kind == "pad":
        lo = tuple(int(g.rng.integers(0, 2)) for _ in x.shape)
        return g.b.pad(x, low=lo, high=lo[::-1], interior=(0,) * x.ndim)
    return _double(g, x)


def _double(g: Gen, x: Value) -> Value:
    """neg(neg x), or transpose(transpose x), or a repeated expression."""
    if x.ndim >= 2 and g.rng.random() < 0.5:
        p = tuple(int(v) for v in g.rng.permutation(x.ndim))
        return g.b.transpose(g.b.transpose(x, perm=p), perm=tuple(int(v) for v in np.argsort(p)))
    if g.dtype.kind == "f" and g.rng.random() < 0.5:
        return g.b.emit("add", g.b.mul(x, x), g.b.mul(x, x))
    return g.b.neg(g.b.neg(x))


def _factor(g: Gen, n: int) -> tuple[int, ...]:
    if n == 0:
        return (0,)
    divs = [d for d in range(1, n + 1) if n % d == 0]
    d = int(g.rng.choice(divs))
    return (d, n // d) if g.rng.random() < 0.5 else (n // d, d) if n // d > 1 else (n,)


def step_matmul(g: Gen) -> Value | None:
    a = g.pick(lambda v: v.ndim == 2)
    if a is None:
        return None
    k = a.shape[1]
    b = g.pick(lambda v: v.ndim == 2 and v.shape[0] == k and v is not a)
    if b is None:
        b = g.input((k, int(g.rng.integers(1, 4))))
    return g.b.matmul(a, b)


def step_gather(g: Gen) -> Value | None:
    x = g.pick(lambda v: v.ndim > 0 and v.shape[0] > 0)
    if x is None:
        return None
    idx = g.rng.integers(-x.shape[0], x.shape[0], size=int(g.rng.integers(1, 4)))
    return g.b.gather(x, g.b.const(idx, np.int64), axis=0)


def step_concat(g: Gen) -> Value | None:
    x = g.pick(lambda v: v.ndim > 0)
    if x is None:
        return None
    y = g.pick(lambda v: v.type == x.type) or x
    return g.b.concatenate(x, y, g.const_like(x), axis=int(g.rng.integers(x.ndim)))


def step_select(g: Gen) -> Value | None:
    x = g.pick()
    y = g.pick(lambda v: x is not None and v.type == x.type)
    if x is None or y is None:
        return None
    if g.rng.random() < 0.3:
        c = g.b.const(bool(g.rng.random() < 0.5), np.bool_, x.shape)
    else:
        c = g.b.gt(x, y)
    return g.b.select(c, x, y)


def step_convert(g: Gen) -> Value | None:
    x = g.pick()
    if x is None or g.dtype.kind != "f":
        return None
    other = np.float64 if g.dtype == np.float32 else np.float32
    there = g.b.convert(x, dtype=other)
    if g.rng.random() < 0.5:
        return g.b.convert(there, dtype=g.dtype)
    return g.b.convert(g.b.tanh(there) if not g.tame else there, dtype=g.dtype)


def step_call(g: Gen) -> Value | None:
    x = g.pick()
    if x is None:
        return None
    sub = Builder(f"sub{len(g.b.callees)}")
    a = sub.input(x.type)
    body = sub.build([sub.emit("add", sub.neg(a), sub.mul(a, a))])
    return g.b.call(body, x)[0]


def step_guard(g: Gen) -> Value | None:
    one = g.b.const(1, g.dtype)
    g.b.guard(g.b.ge(one, g.b.const(0, g.dtype)), expected=True, kind="bool")
    return None


STEPS: list[tuple[Callable[[Gen], Value | None], float]] = [
    (step_unary, 4), (step_binary, 6), (step_broadcast, 2), (step_reduce, 2),
    (step_shape, 2), (step_matmul, 1), (step_gather, 0.7), (step_concat, 0.5),
    (step_select, 1), (step_convert, 0.7), (step_call, 0.4), (step_guard, 0.2),
]


def random_program(rng: np.random.Generator, *, tame: bool = False,
                   n_steps: int | None = None) -> tuple[Function, list[np.ndarray]]:
    """A random program and inputs for it. ``tame``: finite inputs and constants and no
    op that makes NaN or inf from finite values (for fast-math comparisons)."""
    dtype = np.dtype(rng.choice([np.float32, np.float64, np.float64, np.int32])) \
        if not tame else np.dtype(rng.choice([np.float32, np.float64]))
    g = Gen(rng, tame, dtype)
    base = SHAPES[int(rng.integers(len(SHAPES)))]
    for _ in range(int(rng.integers(1, 4))):
        g.add(g.input(base if rng.random() < 0.6 else _related(rng, base)))
    fns, weights = zip(*STEPS, strict=True)
    p = np.array(weights) / sum(weights)
    for _ in range(n_steps or int(rng.integers(4, 20))):
        g.add(fns[int(rng.choice(len(fns), p=p))](g))
    return g.b.build(_outputs(g)), g.data


def _related(rng: np.random.Generator, base: tuple[int, ...]) -> tuple[int, ...]:
    """A shape that broadcasts to ``base`` or is ``base`` transposed."""
    if base and rng.random() < 0.5:
        return tuple(1 if rng.random() < 0.5 else s for s in base)
    return base[::-1]


def _outputs(g: Gen) -> list[Value]:
    """The values nothing reads (so that most ops stay live), and a few others."""
    made = [v for v in g.pool if v not in g.b.inputs]
    if not made:
        return [g.pool[0]]
    read = {v for op in g.b.ops for v in op.operands}
    sinks = [v for v in made if v not in read]
    extra = [made[int(i)] for i in g.rng.choice(len(made), min(2, len(made)), replace=False)]
    return list(dict.fromkeys(sinks[-4:] + extra))


def same_results(a: list[np.ndarray], b: list[np.ndarray]) -> str | None:
    """None if ``a`` and ``b`` are bit for bit equal (any NaN equals any NaN), else why."""
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x.dtype != y.dtype or x.shape != y.shape:
            return f"output {i}: {x.dtype}{x.shape} vs {y.dtype}{y.shape}"
        if x.dtype.kind == "f":
            nan = np.isnan(x)
            if not (nan == np.isnan(y)).all():
                return f"output {i}: NaN positions differ"
            x, y = np.where(nan, 0, x), np.where(nan, 0, y)
            if not np.array_equal(np.signbit(x), np.signbit(y)):
                return f"output {i}: signs differ\n{x}\n{y}"
        if not np.array_equal(x, y):
            return f"output {i}: values differ\n{x}\n{y}"
    return None


def close_results(a: list[np.ndarray], b: list[np.ndarray]) -> str | None:
    """None if ``a`` and ``b`` agree within a float tolerance, with NaN and inf in the
    same places."""
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        if x.shape != y.shape or x.dtype != y.dtype:
            return f"output {i}: {x.dtype}{x.shape} vs {y.dtype}{y.shape}"
        tol = 1e-4 if x.dtype == np.float32 else 1e-9
        scale = max(1.0, float(np.max(np.abs(x[np.isfinite(x)]), initial=0)))
        if not np.allclose(x, y, rtol=tol, atol=tol * scale, equal_nan=True):
            return f"output {i}: not close\n{x}\n{y}"
    return None


# -- example programs (the benchmarks) ---------------------------------------------
def w2_loss(n: int, dtype: str = "f32") -> Function:
    """``sum(tanh(x)*logistic(y) + exp(-x*x)*y)``, logistic written as 1/(1+exp(-y))."""
    b = Builder("w2")
    x = b.input(TensorType(dtype, (n,)), "x")
    y = b.input(TensorType(dtype, (n,)), "y")
    one = b.const(1.0, dtype, (n,))
    logistic = b.div(one, b.emit("add", one, b.exp(b.neg(y))))
    p = b.mul(b.tanh(x), logistic)
    q = b.mul(b.exp(b.neg(b.mul(x, x))), y)
    return b.build([b.sum(b.emit("add", p, q), axes=(0,))])


def mlp_loss(batch: int = 128, sizes: tuple[int, ...] = (784, 512, 256, 10),
             dtype: str = "f32") -> Function:
    """Softmax cross-entropy (logsumexp form, integer labels) of a tanh MLP."""
    b = Builder("mlp")
    ws = []
    for i, (m, n) in enumerate(zip(sizes, sizes[1:], strict=False)):
        ws.append((b.input(TensorType(dtype, (m, n)), f"W{i + 1}"),
                   b.input(TensorType(dtype, (n,)), f"b{i + 1}")))
    h = b.input(TensorType(dtype, (batch, sizes[0])), "x")
    labels = b.input(TensorType("i64", (batch,)), "labels")
    for i, (w, bias) in enumerate(ws):
        z = b.emit("add", b.matmul(h, w), b.broadcast(bias, shape=(batch, w.shape[1])))
        h = b.tanh(z) if i < len(ws) - 1 else z
    k = sizes[-1]
    zmax = b.reshape(b.max(h, axes=(1,)), shape=(batch, 1))
    e = b.exp(b.sub(h, b.broadcast(zmax, shape=(batch, k))))
    lse = b.emit("add", b.log(b.sum(e, axes=(1,))), b.reshape(zmax, shape=(batch,)))
    picked = b.gather(h, b.const(np.arange(batch), np.int64), labels, axis=0)
    total = b.sum(b.sub(lse, picked), axes=(0,))
    return b.build([b.div(total, b.const(float(batch), dtype))])


def rnn_loss(steps: int = 20, hidden: int = 256, batch: int = 32, inp: int = 256,
             dtype: str = "f64") -> Function:
    """``h = tanh(h @ W.T + x_t @ U.T + b)`` unrolled, loss ``sum(h_T**2)``."""
    b = Builder("rnn")
    w = b.input(TensorType(dtype, (hidden, hidden)), "W")
    u = b.input(TensorType(dtype, (hidden, inp)), "U")
    bias = b.input(TensorType(dtype, (hidden,)), "b")
    xs = b.input(TensorType(dtype, (steps, batch, inp)), "x")
    h = b.const(0.0, dtype, (batch, hidden))
    for t in range(steps):
        x_t = b.reshape(b.slice(xs, start=(t, 0, 0), stop=(t + 1, batch, inp),
                                step=(1, 1, 1)), shape=(batch, inp))
        z = b.emit("add", b.matmul(h, b.transpose(w, perm=(1, 0))),
                   b.matmul(x_t, b.transpose(u, perm=(1, 0))))
        h = b.tanh(b.emit("add", z, b.broadcast(bias, shape=(batch, hidden))))
    return b.build([b.sum(b.square(h), axes=(0, 1))])


def gemm_shapes(fn: Function) -> list[str]:
    """``m x k x n`` of every matrix product in ``fn``."""
    return [f"{op.operands[0].shape[-2]}x{op.operands[0].shape[-1]}x{op.result.shape[-1]}"
            for op in fn.ops if op.name == "matmul"]


def example_inputs(fn: Function, rng: np.random.Generator) -> list[np.ndarray]:
    """Inputs for ``fn``: small normal floats, integer labels in range."""
    out = []
    for v in fn.inputs:
        if v.dtype.kind == "f":
            scale = 1 / math.sqrt(max(v.shape[0], 1)) if v.ndim == 2 else 1.0
            out.append((rng.standard_normal(v.shape) * scale).astype(v.dtype))
        else:
            out.append(rng.integers(0, 10, v.shape).astype(v.dtype))
    return out
