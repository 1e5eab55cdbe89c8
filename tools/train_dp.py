"""Data-parallel training of an MLP on synthetic data with ``yota.grad(..., comm=comm)``.

    mpiexec -n 2 python tools/train_dp.py            # two ranks, half the batch each
    python tools/train_dp.py                         # one process (a one-rank world)

Every rank starts from rank 0's parameters (``yota.distributed.broadcast_``), draws its own
shard of each global batch, and takes the SGD step with the gradient averaged over the
ranks. Rank 0 prints the loss and the per-step time (median over the steps after the
first 10) of the whole step (gradient + averaging + update); each step also times the
gradient alone on the same shard (no communication), on its own and until the slowest
rank has it, so the difference is what the averaging costs under the same load. At the
end the ranks check that their parameters are bit-identical. ``--bench-allreduce``
times the averaging alone per bucket size, blocking and overlapped.

On a machine shared with other work, bind one rank per core (MPICH:
``mpiexec -n 2 -bind-to core ...``): Yota then runs each rank's kernels on one thread
instead of splitting them over cores the other rank needs.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from dataclasses import dataclass

# one BLAS thread per process: mpiexec runs one process per core (OpenBLAS's threads
# busy-wait, and two processes of two threads each on two cores slow everything down)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from mpi4py import MPI  # noqa: E402

import yota  # noqa: E402
from yota.distributed import DataParallel, allreduce_, broadcast_  # noqa: E402


@dataclass
class MLP:
    W1: np.ndarray
    b1: np.ndarray
    W2: np.ndarray
    b2: np.ndarray
    W3: np.ndarray
    b3: np.ndarray


def init(rng: np.random.Generator, sizes: list[int], dtype: type) -> MLP:
    ws = []
    for n_in, n_out in zip(sizes, sizes[1:], strict=False):
        ws += [(rng.normal(size=(n_out, n_in)) / np.sqrt(n_in)).astype(dtype),
               np.zeros(n_out, dtype)]
    return MLP(*ws)


def forward(m: MLP, X: np.ndarray) -> np.ndarray:
    h = np.tanh(m.W1 @ X + m.b1[:, None])
    h = np.tanh(m.W2 @ h + m.b2[:, None])
    return m.W3 @ h + m.b3[:, None]


def loss(m: MLP, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
    return np.mean((forward(m, X) - Y) ** 2)


def digest(m: MLP) -> str:
    h = hashlib.sha256()
    for a in (m.W1, m.b1, m.W2, m.b2, m.W3, m.b3):
        h.update(a.tobytes())
    return h.hexdigest()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=60, help="SGD steps (the first 10 untimed)")
    p.add_argument("--batch", type=int, default=512, help="global batch (split over ranks)")
    p.add_argument("--sizes", default="64,256,256,10", help="layer widths")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--bucket-mb", type=float, default=None,
                   help="bucket size in MiB (default: yota.distributed.BUCKET_BYTES, 25)")
    p.add_argument("--overlap", action="store_true",
                   help="MPI_Iallreduce each bucket while the next is packed")
    p.add_argument("--bench-allreduce", action="store_true",
                   help="instead of training: time allreduce_ of the MLP's gradient for "
                        "several bucket sizes, blocking and overlapped")
    a = p.parse_args()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if a.batch % size:
        sys.exit(f"--batch {a.batch} must be divisible by the {size} ranks")
    dtype = np.dtype(a.dtype).type
    sizes = [int(s) for s in a.sizes.split(",")]
    bucket = None if a.bucket_mb is None else int(a.bucket_mb * 2**20)
    # the data parameters' gradients only: the shard's own input gradient is not averaged
    dp = DataParallel(comm, argnums=(0,), bucket_bytes=bucket, overlap=a.overlap)

    if a.bench_allreduce:
        bench_allreduce(comm, init(np.random.default_rng(0), sizes, dtype), a.batch // size)
        return
    m = init(np.random.default_rng(1234 + rank), sizes, dtype)  # differs per rank...
    broadcast_(m, root=0, comm=comm)  # ...until rank 0's is copied everywhere
    teacher = init(np.random.default_rng(7), sizes, dtype)
    data = np.random.default_rng(100 + rank)  # each rank draws its own shard
    local = a.batch // size

    def batch() -> tuple[np.ndarray, np.ndarray]:
        X = data.normal(size=(sizes[0], local)).astype(dtype)
        return X, forward(teacher, X)

    times, losses, local_times, lockstep_times = [], [], [], []
    for step in range(a.steps):
        X, Y = batch()
        comm.Barrier()
        t0 = time.perf_counter()
        v, g = yota.grad(loss, m, X, Y, comm=dp)
        yota.update_(m, g[0], lambda w, gw: w - a.lr * gw)
        t1 = time.perf_counter()
        losses.append(float(v))
        del v, g  # hold no result across calls (a held result makes the next call slower)
        # the same gradient without communication, timed in the same conditions (the
        # machine may be shared): this rank's own time, and until the slowest rank is done
        comm.Barrier()
        t2 = time.perf_counter()
        yota.grad(loss, m, X, Y)
        t3 = time.perf_counter()
        comm.Barrier()
        if step >= 10:
            times.append(t1 - t0)
            local_times.append(t3 - t2)
            lockstep_times.append(time.perf_counter() - t2)
    same = len(set(comm.allgather(digest(m)))) == 1
    step_ms = np.median(comm.allgather(np.median(times))) * 1e3
    grad_ms = np.median(comm.allgather(np.median(local_times))) * 1e3
    slowest_ms = np.median(comm.allgather(np.median(lockstep_times))) * 1e3
    if rank == 0:
        n_params = sum(w.size for w in (m.W1, m.b1, m.W2, m.b2, m.W3, m.b3))
        print(f"ranks {size}, global batch {a.batch} ({local} per rank), MLP {a.sizes} "
              f"({n_params} {a.dtype} parameters, {n_params * np.dtype(dtype).itemsize / 1e6:.2f}"
              f" MB of gradients), {a.steps} steps")
        print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f}")
        print(f"per step: {step_ms:.3f} ms (gradient + average over ranks + SGD update, "
              f"{a.batch / step_ms:.0f} samples/ms)")
        print(f"gradient alone on a shard: {grad_ms:.3f} ms; until the slowest rank has its "
              f"own: {slowest_ms:.3f} ms; the averaging adds {step_ms - slowest_ms:.3f} ms")
        print("parameters bit-identical on every rank:", same)
    if not same:
        sys.exit(1)


def bench_allreduce(comm: MPI.Intracomm, m: MLP, local: int) -> None:
    """Median time of allreduce_ over the MLP's parameter gradients (repacked each call)."""
    X = np.ones((m.W1.shape[1], local), m.W1.dtype)
    _, g = yota.grad(loss, m, X, forward(m, X))
    sizes = [v.nbytes for v in g[0].values()]
    nbytes = sum(sizes)
    for bucket in (16 << 10, 64 << 10, 256 << 10, 25 << 20):
        row = []
        for overlap in (False, True):
            ts = []
            for _ in range(200):
                comm.Barrier()
                t0 = time.perf_counter()
                allreduce_(g, comm, argnums=(0,), bucket_bytes=bucket, overlap=overlap)
                ts.append(time.perf_counter() - t0)
            row.append(np.median(comm.allgather(np.median(ts[20:]))) * 1e6)
        if comm.Get_rank() == 0:
            small = sum(n for n in sizes if n < bucket)
            n_buckets = sum(n >= bucket for n in sizes) + -(-small // bucket)
            print(f"{comm.Get_size()} ranks, {nbytes / 1e6:.2f} MB of gradients in buckets of "
                  f"{bucket >> 10} KiB ({n_buckets} messages): blocking {row[0]:.0f} us, "
                  f"overlapped {row[1]:.0f} us")


if __name__ == "__main__":
    main()
