"""Checks of ``yota.distributed`` run under ``mpiexec -n N python tests/support/distributed_cases.py
CASE...`` (launched by tests/api/test_distributed.py; one launch runs many cases, since each
launch costs about a second).

Every rank runs every named case and prints one JSON line ``{"rank": r, "results":
{case: "ok" | "FAIL: why"}}``. A case that fails on one rank must not leave the others
hanging: the failure cases below check exactly that Yota turns such failures into a
``DistributedError`` on every rank, after which the next case runs normally.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from mpi4py import MPI

import yota
from yota.distributed import DataParallel, DistributedError, allreduce_, broadcast_

comm = MPI.COMM_WORLD
RANK, SIZE = comm.Get_rank(), comm.Get_size()
CASES: dict[str, Callable[[], None]] = {}


def case(fn: Callable[[], None]) -> Callable[[], None]:
    CASES[fn.__name__] = fn
    return fn


@dataclass
class MLP:
    W1: np.ndarray
    b1: np.ndarray
    W2: np.ndarray
    b2: np.ndarray
    scale: float


def mlp(seed: int, dtype: type = np.float64) -> MLP:
    r = np.random.default_rng(seed)
    return MLP(r.normal(size=(8, 5)).astype(dtype), r.normal(size=8).astype(dtype),
               r.normal(size=(1, 8)).astype(dtype), r.normal(size=1).astype(dtype), 0.7)


def mlp_loss(m: MLP, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    h = np.tanh(m.W1 @ X + m.b1[:, None])
    out = m.scale * (m.W2 @ h + m.b2[:, None])
    return np.mean((out[0] - y) ** 2)


def shards(n_per_rank: int, dtype: type = np.float64) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every rank's (X, y) shard, equal sizes, the same on every rank."""
    r = np.random.default_rng(42)
    X = r.normal(size=(5, n_per_rank * SIZE)).astype(dtype)
    y = r.normal(size=n_per_rank * SIZE).astype(dtype)
    return [(X[:, k * n_per_rank:(k + 1) * n_per_rank], y[k * n_per_rank:(k + 1) * n_per_rank])
            for k in range(SIZE)]


def close(a: object, b: object, rtol: float) -> None:
    np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64),
                               rtol=rtol, atol=rtol)


def expect_distributed_error(fn: Callable[[], object], *words: str) -> str:
    try:
        fn()
    except DistributedError as e:
        msg = str(e)
        for w in words:
            assert w in msg, f"{w!r} not in the message: {msg}"
        return msg
    raise AssertionError("no DistributedError")


def digest(*arrays: np.ndarray) -> str:
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def full_batch(backend: str, dtype: type, rtol: float) -> None:
    """Mean loss over equal shards: the mean of the shards' gradients is the full-batch
    gradient (the sums are only associated differently: rtol is a few ulps of the data)."""
    m = mlp(0, dtype)
    X, y = shards(6, dtype)[RANK]
    v, g = yota.grad(mlp_loss, m, X, y, backend=backend, comm=comm)
    Xall = np.concatenate([s[0] for s in shards(6, dtype)], axis=1)
    yall = np.concatenate([s[1] for s in shards(6, dtype)])
    v1, g1 = yota.grad(mlp_loss, m, Xall, yall, backend=backend)
    close(v, v1, rtol)
    assert type(v) is type(v1), (type(v), type(v1))
    assert set(g.flat[0]) == set(g1.flat[0]) == {("W1",), ("b1",), ("W2",), ("b2",), ("scale",)}
    for k in g1.flat[0]:
        close(g.flat[0][k], g1.flat[0][k], rtol)
        assert np.asarray(g.flat[0][k]).dtype == np.asarray(g1.flat[0][k]).dtype
    assert type(g.flat[0][("scale",)]) is float
    # the data gradients are averaged too (every gradient is): the mean of the shards'
    mean_gX = np.mean([yota.grad(mlp_loss, m, *s, backend=backend)[1][1] for s in shards(6, dtype)],
                      axis=0)
    close(g[1], mean_gX, rtol)
    same_on_all_ranks(v, *[g.flat[0][k] for k in sorted(g.flat[0])])


def same_on_all_ranks(*xs: object) -> None:
    d = digest(*[np.asarray(x) for x in xs])
    assert len(set(comm.allgather(d))) == 1, "the ranks hold different bits"


@case
def full_batch_llvm() -> None:
    full_batch("llvm", np.float64, 1e-12)


@case
def full_batch_interp() -> None:
    full_batch("interp", np.float64, 1e-12)


@case
def full_batch_float32() -> None:
    full_batch("llvm", np.float32, 2e-5)


@case
def sgd_bit_identical() -> None:
    """Each rank starts from its own random parameters; broadcast_ copies rank 0's; 20 SGD
    steps on different shards keep them bit-identical on every rank."""
    m = mlp(100 + RANK)
    broadcast_(m, root=0, comm=comm)
    assert m.scale == 0.7 and digest(m.W1) == comm.bcast(digest(m.W1), root=0)
    r = np.random.default_rng(1000 + RANK)
    losses = []
    import yota.distributed as D

    buffers = []
    for _ in range(20):
        X, y = r.normal(size=(5, 16)), r.normal(size=16)
        v, g = yota.grad(mlp_loss, m, X, y, comm=comm)
        yota.update_(m, g.flat[0], lambda w, gw: w - 0.05 * gw)
        losses.append(float(v))
        plan = next(reversed(D._reducer(comm).plans.values()))  # this structure's
        buffers.append([id(b.buf) for b in plan.buckets])
    assert all(ids == buffers[0] for ids in buffers), "the buckets were not reused"
    same_on_all_ranks(m.W1, m.b1, m.W2, m.b2, np.float64(m.scale), np.array(losses))
    assert losses[-1] < losses[0], losses


@case
def buckets_and_overlap() -> None:
    """Tiny buckets (several per step, arrays bigger than a bucket reduced where they lie),
    with and without overlap, give the default path's result to the bit."""
    m = mlp(0)
    X, y = shards(4)[RANK]
    v0, g0 = yota.grad(mlp_loss, m, X, y, comm=comm)
    for bucket_bytes in (64, 200, 1 << 30):
        for overlap in (False, True):
            spec = DataParallel(comm, bucket_bytes=bucket_bytes, overlap=overlap)
            v, g = yota.grad(mlp_loss, m, X, y, comm=spec)
            assert v == v0
            for k in g0.flat[0]:
                assert np.array_equal(g.flat[0][k], g0.flat[0][k]), (bucket_bytes, overlap, k)
            assert np.array_equal(g[1], g0[1])


@case
def argnums_keep_local() -> None:
    """DataParallel(argnums=(0,)) averages the parameters' gradients only: the data
    gradients stay this rank's and may have another shape on each rank."""
    m = mlp(0)
    n = 3 + RANK  # unequal shards
    r = np.random.default_rng(RANK)
    X, y = r.normal(size=(5, n)), r.normal(size=n)
    v, g = yota.grad(mlp_loss, m, X, y, comm=DataParallel(comm, argnums=(0,)))
    vl, gl = yota.grad(mlp_loss, m, X, y)
    assert np.array_equal(g[1], gl[1]) and g[1].shape == (5, n)
    parts = comm.allgather((vl, gl.flat[0][("W1",)]))
    close(v, np.mean([p[0] for p in parts]), 1e-14)
    close(g.flat[0][("W1",)], np.mean([p[1] for p in parts], axis=0), 1e-14)


@case
def allreduce_in_place() -> None:
    m = mlp(0)
    X, y = shards(4)[RANK]
    _, g = yota.grad(mlp_loss, m, X, y)
    local = {k: np.copy(v) for k, v in g.flat[0].items()}
    W1 = g.flat[0][("W1",)]
    assert allreduce_(g, comm, average=False) is g
    assert g.flat[0][("W1",)] is W1  # a fresh output array: summed where it lies
    parts = comm.allgather(local)
    for k in local:
        close(g.flat[0][k], np.sum([p[k] for p in parts], axis=0), 1e-14)


@case
def inputs_never_overwritten() -> None:
    """The interpreter hands an input back as a gradient (d sum(x*w)/dx is w): averaging
    must give a new array, not overwrite the caller's parameters."""
    w = np.arange(4.0) + RANK
    w_before = w.copy()
    x = np.ones(4) * (RANK + 1)
    v, g = yota.grad(lambda x, w: np.sum(x * w), x, w, backend="interp", comm=comm)
    assert np.array_equal(w, w_before), "an input was overwritten"
    close(g.flat[0], np.mean([np.arange(4.0) + k for k in range(SIZE)], axis=0), 0)
    assert g.flat[0] is not w
    # a gradient that is a constant of the program (the interpreter hands out the same
    # read-only array at every call): averaged into a new array, the constant unchanged
    c = np.arange(4.0) * (RANK + 1)
    for _ in range(2):
        _, g = yota.grad(lambda x: np.sum(c * x), x, backend="interp", comm=comm)
        close(g.flat[0], np.mean([np.arange(4.0) * (k + 1) for k in range(SIZE)], axis=0), 0)


@case
def float_args_and_aux() -> None:
    """Float arguments' gradients are averaged floats; with has_aux the loss is averaged
    and aux stays this rank's."""
    a = 1.5 + RANK
    (v, aux), g = yota.grad(lambda a, x: (np.sum(a * x), np.max(x)), a, np.ones(3) * RANK,
                            has_aux=True, comm=comm)
    assert type(g.flat[0]) is float
    close(g.flat[0], np.mean([3.0 * k for k in range(SIZE)]), 0)
    close(v, np.mean([(1.5 + k) * 3 * k for k in range(SIZE)]), 1e-15)
    close(aux, RANK, 0)


@case
def fail_yota_error_on_one_rank() -> None:
    """Rank 1's shard has a dtype Yota refuses: a TraceError there, a DistributedError
    naming it on every rank; the next step works."""
    m = mlp(0)
    X, y = shards(4)[RANK]
    if RANK == 1:
        X = X.astype(np.complex128)
    expect_distributed_error(lambda: yota.grad(mlp_loss, m, X, y, comm=comm),
                             "rank 1", "TraceError", "complex128")
    after_failure_still_in_step()


@case
def fail_exception_in_f() -> None:
    def f(x: np.ndarray) -> np.ndarray:
        if RANK == SIZE - 1:
            raise ValueError("bad shard on the last rank")
        return np.sum(x * x)

    expect_distributed_error(lambda: yota.grad(f, np.ones(3), comm=comm, dynamic=True),
                             f"rank {SIZE - 1}", "ValueError", "bad shard")
    after_failure_still_in_step()


@case
def fail_guard_changes_program_on_one_rank() -> None:
    """A branch on the data takes another path on rank 1 only: there parameter 'b' gets
    no gradient and 'a' one; the structures differ, which every rank reports."""
    def f(p: dict, x: np.ndarray) -> np.ndarray:
        if np.sum(x) > 0:
            return np.sum(p["a"] * x)
        return np.sum(p["b"] * x)

    p = {"a": np.ones(3), "b": np.ones(3)}
    x = np.ones(3) if RANK != 1 else -np.ones(3)
    msg = expect_distributed_error(lambda: yota.grad(f, p, x, comm=comm), "differ in structure",
                                   "rank 1")
    assert "p.a" in msg or "p.b" in msg, msg
    # a guard that changes the program but not the gradients' structure is fine
    def g_(w: np.ndarray, x: np.ndarray) -> np.ndarray:
        return np.sum(w * x) if np.sum(x) > 0 else np.sum(w * w)
    v, g = yota.grad(g_, np.ones(3), x, comm=DataParallel(comm, argnums=(0,)))
    local = [np.ones(3) if k != 1 else 2 * np.ones(3) for k in range(SIZE)]
    close(g.flat[0], np.mean(local, axis=0), 0)
    after_failure_still_in_step()


@case
def fail_shape_differs() -> None:
    W = np.ones((2, 3)) if RANK == 0 else np.ones((2, 4))
    X = np.ones((W.shape[1], 2))
    expect_distributed_error(lambda: yota.grad(lambda W, X: np.sum(W @ X), W, X, comm=comm),
                             "float64[2, 3] on rank 0", "float64[2, 4] on rank 1")
    after_failure_still_in_step()


@case
def fail_dtype_differs() -> None:
    w = np.ones(3, np.float32 if RANK == 1 else np.float64)
    expect_distributed_error(lambda: yota.grad(lambda w: np.sum(w * w), w, comm=comm),
                             "float32", "rank 1")


@case
def fail_allreduce_and_broadcast_structure() -> None:
    _, g = yota.grad(lambda w: np.sum(w * w), np.ones(3 + RANK))
    expect_distributed_error(lambda: allreduce_(g, comm), "allreduce_", "float64[3]")
    obj = {"w": np.zeros(2)} if RANK == 0 else {"w": np.zeros(2), "v": np.zeros(1)}
    expect_distributed_error(lambda: broadcast_(obj, comm=comm), "broadcast_", "obj.v",
                             "missing")
    after_failure_still_in_step()


@case
def cupy_arrays() -> None:
    """CuPy arguments: gradients bucketed on the device, reduced by NCCL (a GPU per rank)
    or through host copies and MPI; the same numbers as the NumPy path."""
    import cupy

    cupy.cuda.Device(RANK % cupy.cuda.runtime.getDeviceCount()).use()
    m = mlp(0)
    X, y = shards(4)[RANK]
    v0, g0 = yota.grad(mlp_loss, m, X, y, comm=comm)
    md = MLP(*(cupy.asarray(getattr(m, k)) for k in ("W1", "b1", "W2", "b2")), m.scale)
    for bucket_bytes in (None, 64):
        spec = DataParallel(comm, bucket_bytes=bucket_bytes)
        v, g = yota.grad(mlp_loss, md, cupy.asarray(X), cupy.asarray(y), comm=spec)
        close(cupy.asnumpy(v), v0, 1e-12)
        for k in g0.flat[0]:
            got = g.flat[0][k]
            close(cupy.asnumpy(got) if not isinstance(got, float) else got, g0.flat[0][k], 1e-12)
    broadcast_(md, root=0, comm=comm)
    same_on_all_ranks(cupy.asnumpy(md.W1))


@case
def broadcast_leaves() -> None:
    """broadcast_ copies arrays in place (also non-contiguous views), float fields of
    mutable parents, returns the root's value for a bare float; a float inside a tuple is
    refused on every rank before anything is copied."""
    x = (np.arange(6.0).reshape(2, 3) * (RANK + 1)).T
    d = {"w": np.ones(2) * RANK, "lr": 0.1 * (RANK + 1), "n": [np.float32(RANK)]}
    broadcast_([x, d], root=SIZE - 1, comm=comm)
    root = SIZE
    assert np.array_equal(x, (np.arange(6.0).reshape(2, 3) * root).T)
    assert np.array_equal(d["w"], np.ones(2) * (SIZE - 1)) and d["lr"] == 0.1 * root
    assert d["n"][0] == SIZE - 1 and type(d["n"][0]) is np.float32
    assert broadcast_(2.0 + RANK, comm=comm) == 2.0
    keep = np.ones(2) * RANK
    expect_distributed_error(lambda: broadcast_((keep, 1.0 + RANK), comm=comm),
                             "failed on every rank", "obj[1]", "immutable tuple",
                             "nothing was copied")
    assert np.array_equal(keep, np.ones(2) * RANK)


class HostStandIn(np.ndarray):
    """A NumPy array with CuPy's transfer methods (``get(out=)``, ``set``): stands in for
    device arrays, to run the device path (device buckets, the collective NCCL decision,
    host staging) where there is no GPU."""

    def get(self, out: np.ndarray | None = None) -> np.ndarray:
        host = np.asarray(self).copy() if out is None else out
        if out is not None:
            out[...] = np.asarray(self)
        return host

    def set(self, host: np.ndarray) -> None:
        np.asarray(self)[...] = host


@case
def device_path_with_host_stand_in() -> None:
    """The device path of yota.distributed on stand-in arrays: buckets allocated as
    'device' arrays, NCCL found unusable by every rank alike (no NCCL here), each bucket
    and each large array reduced through its host copy; the numbers equal the host path."""
    import yota.distributed as D

    kind, cupy_mod = D._kind, D._cupy
    fake = type("xp", (), {"empty": staticmethod(lambda n, dt: HostStandIn((n,), dt))})
    D._kind = lambda x: "c" if isinstance(x, HostStandIn) else kind(x)
    D._cupy = lambda: fake
    try:
        m = mlp(0)
        X, y = shards(4)[RANK]
        _, g0 = yota.grad(mlp_loss, m, X, y)
        local = {k: np.copy(v) for k, v in g0.flat[0].items() if not isinstance(v, float)}
        for bucket_bytes in (None, 100):
            _, g = yota.grad(mlp_loss, m, X, y)
            for k, v in local.items():
                dev = HostStandIn(v.shape, v.dtype)
                dev[...] = v
                g.flat[0][k] = dev
            allreduce_(g, comm, argnums=(0,), bucket_bytes=bucket_bytes)
            parts = comm.allgather(local)
            for k in local:
                assert isinstance(g.flat[0][k], HostStandIn)
                close(g.flat[0][k], np.mean([p[k] for p in parts], axis=0), 1e-14)
        red = D._reducer(comm)
        assert red.nccl is False  # decided once, the same on every rank
    finally:
        D._kind, D._cupy = kind, cupy_mod


def after_failure_still_in_step() -> None:
    """A correct step right after a failed one: the ranks are in step, the buffers hold
    this step's numbers."""
    w = np.arange(3.0) * (RANK + 1)
    v, g = yota.grad(lambda w: np.sum(w * w), w, comm=comm)
    close(g.flat[0], np.mean([2 * np.arange(3.0) * (k + 1) for k in range(SIZE)], axis=0), 1e-15)


def main() -> None:
    """``distributed_cases.py [--out DIR] [CASE...]``: results to DIR/rank<r>.json (else
    stdout)."""
    args = sys.argv[1:]
    out = None
    if args[:1] == ["--out"]:
        out, args = args[1], args[2:]
    names = args or list(CASES)
    results = {}
    for name in names:
        try:
            CASES[name]()
            results[name] = "ok"
        except Exception as e:
            results[name] = f"FAIL: {type(e).__name__}: {e}\n{traceback.format_exc()}"
    report = json.dumps({"rank": RANK, "size": SIZE, "results": results})
    if out is None:
        print(report, flush=True)
    else:
        with open(os.path.join(out, f"rank{RANK}.json"), "w") as fh:
            fh.write(report)


if __name__ == "__main__":
    main()
