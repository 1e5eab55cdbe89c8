"""``yota.distributed``: data-parallel gradients over MPI.

Each process (an MPI *rank*) computes the value and gradients of its own shard of the
data; the ranks then average them, so every rank holds the same result and applies the
same update (PyTorch DDP and Horovod work this way)::

    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    yota.distributed.broadcast_(params, root=0, comm=comm)   # one starting point
    for step in range(steps):
        X, y = shard(step, comm.rank, comm.size)               # this rank's part of the batch
        loss, g = yota.grad(loss_fn, params, X, y, comm=comm)   # mean over the ranks
        yota.update_(params, g[0], lambda w, gw: w - lr * gw)

run with ``mpiexec -n 2 python train.py`` (``pip install 'yota[mpi]'`` installs mpi4py and
MPICH, whose ``mpiexec`` lands in the environment's ``bin/``).

``comm=`` takes an ``mpi4py`` communicator, or a :class:`DataParallel` naming which
arguments' gradients to average (the gradient of a data shard is usually not wanted
averaged: ``DataParallel(comm, argnums=(0,))``), the bucket size and the overlap mode.
:func:`allreduce_` averages an existing :class:`yota.GradientResult` in place;
:func:`broadcast_` copies every array of a structure from one rank to the others.

**How gradients travel.** Gradient arrays smaller than the bucket size (``BUCKET_BYTES``,
25 MiB as DDP's default ``bucket_cap_mb``) are copied into contiguous buckets, one per
dtype, each reduced by one ``MPI_Allreduce`` with ``MPI_IN_PLACE``; larger arrays are
reduced where they lie. The buckets are allocated once per gradient structure and reused
on every step: a step allocates nothing but its outputs. The sum is divided by the number
of ranks; MPICH's allreduce gives every rank the same bits, so parameters updated from
the mean stay bit-identical across ranks.

**Failures.** Before anything is exchanged, the ranks compare a 64-bit digest of their
gradient structure (argument, field path, dtype, shape, in order) and an ok flag in one
16-byte ``MPI_Allgather``. A rank whose step raised (a ``YotaError`` on its shard, an
error in ``f``), a structure that differs (a shape, a dtype, a parameter one rank's branch
did not use), each becomes a :class:`yota.ir.errors.DistributedError` on *every* rank,
naming the ranks and their errors: no rank waits forever in a collective, and no buffer
holds another structure's numbers. (A rank that dies outright or never calls the step
cannot be detected this way: run under ``mpiexec ... python -m mpi4py script.py``, which
aborts every rank when one exits on an uncaught exception.)

**Overlap.** Yota's gradient program runs as one native call, so no bucket is known to be
final before the whole backward pass has ended: there is no backward computation left to
overlap the reduction with. What remains is to overlap the reduction of one bucket with
the copying of the others (``overlap=True``: ``MPI_Iallreduce`` per bucket as soon as it
is packed, unpacked in order). Measured on a 2-core machine with two ranks
(``mpiexec -n 2 python tools/train_dp.py --bench-allreduce``, see the README) it does not
pay: MPICH progresses a nonblocking collective only inside MPI calls, and both cores are
busy with the two ranks, so the copies and the reductions run one after the other either
way. The default is the blocking path.

**CuPy arrays.** Gradients on the GPU are bucketed on the device and reduced by NCCL
(``cupy.cuda.nccl``) when it is available and every rank has a GPU of its own (decided
once per communicator, the same on every rank; ``YOTA_NCCL=0`` turns NCCL off); otherwise
each bucket goes through a preallocated host copy and MPI.

**Cost on N machines.** A ring allreduce moves about ``2 (N - 1) / N × B`` bytes in and out
of each rank per step for ``B`` bytes of gradients, plus a latency ``α`` per bucket (a few
microseconds in shared memory, 5-50 µs across a network, times ``2 (N - 1)`` ring steps):
``t ≈ 2 (N - 1) / N × B / β + n_buckets × 2 (N - 1) α``. Buckets pay when the latency term
of many small arrays would dominate; one bucket of the whole gradient is optimal without
overlap; with overlap, buckets of a few MB keep the latency term under a few percent at
10 GB/s links. The README's "Data-parallel training on MPI" has the numbers measured here.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from yota.ir.errors import DistributedError, YotaError

from . import structs

__all__ = ["BUCKET_BYTES", "DataParallel", "DistributedError", "allreduce_", "broadcast_",
           "step"]

BUCKET_BYTES = 25 * 2**20  # like DDP's bucket_cap_mb=25
MAX_PLANS = 8  # gradient structures whose buckets are kept per communicator


def _mpi() -> Any:
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise YotaError(
            "yota.distributed needs mpi4py and an MPI library: pip install 'yota[mpi]' "
            "(mpi4py and MPICH from PyPI; mpiexec is then in the environment's bin/)"
        ) from e
    return MPI


@dataclass(frozen=True)
class DataParallel:
    """What ``yota.grad(..., comm=DataParallel(...))`` averages and how.

    - ``comm``: an ``mpi4py`` intracommunicator (None: ``MPI.COMM_WORLD``).
    - ``argnums``: the arguments whose gradients are averaged (None: all). The others keep
      this rank's own gradient and may differ in shape between ranks (data shards).
    - ``average``: False sums over the ranks instead of averaging.
    - ``bucket_bytes``: gradients smaller than this are packed into buckets of about this
      size (None: ``BUCKET_BYTES``).
    - ``overlap``: reduce each bucket with ``MPI_Iallreduce`` while the next is packed.
    """

    comm: Any = None
    argnums: Sequence[int] | None = None
    average: bool = True
    bucket_bytes: int | None = None
    overlap: bool = False


def step(comm: Any, run: Callable[[], tuple[Any, Any]], args: Sequence[Any]
         ) -> tuple[Any, Any]:
    """``yota.grad(..., comm=comm)``: ``run()`` computes this rank's ``(value, gradients)``;
    returns their mean over the ranks (the same on every rank). An exception in ``run`` on
    any rank is a ``DistributedError`` on every rank (a ``BaseException`` such as
    ``KeyboardInterrupt`` is re-raised as itself on its own rank)."""
    spec = _spec(comm)
    red = _reducer(spec.comm)
    error: BaseException | None = None
    value: Any = None
    g: Any = None
    try:
        value, g = run()
    except BaseException as e:  # noqa: B036 - told to the other ranks, then re-raised
        error = e
    protect = _input_ids(args) if error is None else set()
    value = red.reduce(value, g, spec, protect, error, with_value=True)
    return value, g


def allreduce_(g: Any, comm: Any = None, average: bool = True, *,
               argnums: Sequence[int] | None = None, bucket_bytes: int | None = None,
               overlap: bool = False, args: Sequence[Any] | None = None) -> Any:
    """Average (``average=False``: sum) the gradients of a :class:`yota.GradientResult`
    over the ranks of ``comm`` (None: ``MPI.COMM_WORLD``), in place; returns ``g``.

    Every rank must call it with a result of the same structure; otherwise every rank
    raises a ``DistributedError``. ``argnums`` limits the averaging to those arguments.
    Arrays are overwritten where that is safe; a gradient that is a view, read-only, or
    one of the arrays in ``args`` (pass the ``grad`` call's arguments: the reference
    interpreter can hand an input back as a gradient) is replaced by a new array."""
    if not (hasattr(g, "_grads") and hasattr(g, "_argnames")):
        raise YotaError(f"allreduce_ takes the GradientResult of yota.grad, got a "
                        f"{type(g).__name__}")
    spec = _spec(DataParallel(comm, argnums, average, bucket_bytes, overlap))
    red = _reducer(spec.comm)
    protect = _input_ids(args) if args is not None else set()
    red.reduce(None, g, spec, protect, None, with_value=False)
    return g


def broadcast_(obj: Any, root: int = 0, comm: Any = None) -> Any:
    """Copy every array (and float field) of structure ``obj`` from rank ``root`` to the
    other ranks of ``comm``, in place; returns ``obj`` (for a bare float: root's float).

    Used to start every rank from the same initial parameters. The structures must
    match on every rank (same fields, dtypes and shapes); otherwise every rank raises a
    ``DistributedError`` before anything is copied."""
    red = _reducer(_spec(comm).comm)
    if not isinstance(root, (int, np.integer)) or not 0 <= root < red.size:
        raise YotaError(f"broadcast_: root must be a rank from 0 to {red.size - 1}, got "
                        f"{root!r}")
    leaves: list[tuple[tuple[Any, ...], Any]] = []
    error: BaseException | None = None
    try:
        _walk(obj, (), leaves)
        for path, x in leaves:
            _check_overwritable(obj, path, x)
    except Exception as e:
        error = e
    layout = tuple((0, path, *_describe_leaf(x)) for path, x in leaves)
    red.check(layout if error is None else None, error, ["obj"], "broadcast_")
    floats = [(p, x) for p, x in leaves if _kind(x) in "fs"]
    for _, x in leaves:
        if _kind(x) in "ac":
            red.bcast_array(x, int(root))
    if floats:
        values = red.comm.bcast([x for _, x in floats], root=int(root))
        if floats[0][0] == ():
            return values[0]
        for (path, _), v in zip(floats, values, strict=True):
            parent = structs.get_path(obj, path[:-1])
            if isinstance(parent, (list, dict)):
                parent[path[-1]] = v
            else:
                setattr(parent, path[-1], v)
    return obj


# -- the reducer of one communicator ---------------------------------------------------------
@dataclass
class _Bucket:
    """Items packed into one contiguous buffer (``buf``, with a view per item), or one
    large item reduced where it lies (``direct``)."""

    items: list[int]
    views: list[Any]
    buf: Any = None
    host: np.ndarray | None = None  # staging for a device buffer reduced through MPI
    device: bool = False
    direct: bool = False  # one large array: no copy into a buffer


@dataclass
class _Plan:
    digest: int
    buckets: list[_Bucket] = field(default_factory=list)


class _Reducer:
    """Per communicator: the signature exchange buffers and the bucket plans."""

    def __init__(self, comm: Any) -> None:
        self.MPI = _mpi()
        self.comm = comm
        self.size = comm.Get_size()
        self.rank = comm.Get_rank()
        self.sig = np.zeros(2, np.int64)
        self.sigs = np.zeros((self.size, 2), np.int64)
        self.plans: OrderedDict[tuple[Any, ...], _Plan] = OrderedDict()
        self.nccl: Any = None  # None: not asked yet; False: not usable

    # the exchange before every collective that follows
    def check(self, layout: tuple[Any, ...] | None, error: BaseException | None,
              argnames: Sequence[str], api: str, digest: int | None = None) -> None:
        """Raise ``DistributedError`` on every rank unless every rank is ok with one layout
        (``digest``: the layout's, when known)."""
        self.sig[0] = 1 if error is None and layout is not None else 0
        if digest is None:
            digest = _digest(layout) if layout is not None else 0
        self.sig[1] = digest
        self.comm.Allgather(self.sig, self.sigs)
        if self.sigs[:, 0].all() and (self.sigs[:, 1] == self.sigs[0, 1]).all():
            return
        mine = None if error is None else f"{type(error).__name__}: {error}"
        reports = self.comm.allgather((mine, layout))
        message = _failure_message(reports, argnames, api, self.size)
        if error is not None and not isinstance(error, Exception):
            raise error  # KeyboardInterrupt, SystemExit: the others got the message
        raise DistributedError(message) from error

    def reduce(self, value: Any, g: Any, spec: DataParallel, protect: set[int],
               error: BaseException | None, with_value: bool) -> Any:
        items: list[tuple[int, Any, Any]] = []
        layout: tuple[Any, ...] | None = None
        argnames: Sequence[str] = getattr(g, "_argnames", ())
        plan: _Plan | None = None
        if error is None:
            try:
                loss = value[0] if with_value and isinstance(value, tuple) else value
                items = _items(loss, g._grads, spec.argnums, with_value)
                layout = tuple((a, p, *_describe_leaf(x)) for a, p, x in items)
                plan = self.plan(layout, items, spec.bucket_bytes or BUCKET_BYTES)
            except Exception as e:
                error = e
        self.check(layout, error, argnames, "yota.grad" if with_value else "allreduce_",
                   plan.digest if plan is not None else None)
        assert plan is not None
        if self.size == 1:  # the mean over one rank: its own result, nothing to copy
            return value
        outs = self.run(plan, items, spec, protect)
        for (argnum, path, _), new in zip(items, outs, strict=True):
            if argnum < 0:
                value = (new, *value[1:]) if isinstance(value, tuple) else new
            elif path is None:
                g._grads[argnum] = new
            else:
                g._grads[argnum][path] = new
        return value

    def plan(self, layout: tuple[Any, ...], items: list[tuple[int, Any, Any]],
             bucket_bytes: int) -> _Plan:
        key = (layout, bucket_bytes)
        plan = self.plans.get(key)
        if plan is not None:
            self.plans.move_to_end(key)
            return plan
        plan = _Plan(_digest(layout))
        open_: dict[tuple[bool, str], _Bucket] = {}
        sizes: dict[int, int] = {}
        for i, (_, _, x) in enumerate(items):
            kind = _kind(x)
            if kind == "n":
                continue
            nbytes = _nbytes(x)
            device = kind == "c"
            if nbytes >= bucket_bytes:
                host = np.empty(x.shape, x.dtype) if device else None
                plan.buckets.append(_Bucket([i], [], host=host, device=device, direct=True))
                continue
            dkey = (device, _dtype(x).str)
            b = open_.get(dkey)
            if b is None or sizes[id(b)] + nbytes > bucket_bytes:
                b = open_[dkey] = _Bucket([], [], device=device)
                sizes[id(b)] = 0
                plan.buckets.append(b)
            b.items.append(i)
            sizes[id(b)] += nbytes
        for b in plan.buckets:
            if not b.direct:
                _allocate(b, items)
        self.plans[key] = plan
        while len(self.plans) > MAX_PLANS:
            self.plans.popitem(last=False)
        return plan

    def run(self, plan: _Plan, items: list[tuple[int, Any, Any]], spec: DataParallel,
            protect: set[int]) -> list[Any]:
        outs = [x for _, _, x in items]
        seen: set[int] = set()
        pending = []
        for b in plan.buckets:
            if b.direct:  # one large array, reduced where it lies (or in a copy)
                i = b.items[0]
                outs[i] = x = _owned(items[i][2], protect, seen)
                pending.append((b, self.start(x, b, spec.overlap)))
                continue
            for i, view in zip(b.items, b.views, strict=True):
                view[...] = items[i][2]
            pending.append((b, self.start(b.buf, b, spec.overlap)))
        for b, req in pending:
            if req is not None:
                req.Wait()
            n = self.size if spec.average else 1
            if b.direct:
                self.finish(outs[b.items[0]], b)
                if n > 1:
                    outs[b.items[0]] /= n
                continue
            self.finish(b.buf, b)
            for i, view in zip(b.items, b.views, strict=True):  # the mean, copied out
                outs[i] = _unpack(items[i][2], view, n, protect, seen)
        return outs

    def start(self, buf: Any, b: _Bucket, overlap: bool) -> Any:
        """Begin the sum of ``buf`` over the ranks; a request to wait for, or None."""
        if self.size == 1:
            return None
        if b.device:
            nccl = self.nccl_comm()
            if nccl is not None:
                _nccl_allreduce(nccl, buf)
                return None
            buf.get(out=b.host)
            buf = b.host
        if overlap and not b.device:
            return self.comm.Iallreduce(self.MPI.IN_PLACE, buf, op=self.MPI.SUM)
        self.comm.Allreduce(self.MPI.IN_PLACE, buf, op=self.MPI.SUM)
        return None

    def finish(self, buf: Any, b: _Bucket) -> None:
        """The sum is in ``buf`` (a device buffer reduced on the host gets it back)."""
        if b.device and self.size > 1 and self.nccl is False:
            assert b.host is not None
            buf.set(b.host)

    def nccl_comm(self) -> Any:
        """NCCL over this communicator when every rank has a GPU of its own, else None
        (decided once, collectively: every rank reaches it with the same plan)."""
        if self.nccl is None:
            self.nccl = _nccl_setup(self.comm, self.size, self.rank) or False
        return self.nccl or None

    def bcast_array(self, x: Any, root: int) -> None:
        if _kind(x) == "c":
            host = x.get()
            self.comm.Bcast(host, root=root)
            x.set(host)
        elif x.flags.c_contiguous:
            self.comm.Bcast(x, root=root)
        else:
            tmp = np.ascontiguousarray(x)
            self.comm.Bcast(tmp, root=root)
            x[...] = tmp


# per communicator object (held, so its id stays its own): a new communicator, even one
# that reuses a freed one's handle, gets new buffers and a new NCCL communicator
_reducers: OrderedDict[int, _Reducer] = OrderedDict()
MAX_COMMS = 16


def _spec(comm: Any) -> DataParallel:
    spec = comm if isinstance(comm, DataParallel) else DataParallel(comm)
    MPI = _mpi()
    c = MPI.COMM_WORLD if spec.comm is None else spec.comm
    if not isinstance(c, MPI.Intracomm):
        raise YotaError(f"comm must be an mpi4py intracommunicator (MPI.COMM_WORLD, or one "
                        f"made by comm.Split) or a yota.distributed.DataParallel, got a "
                        f"{type(c).__name__}")
    if spec.argnums is not None and not all(isinstance(a, int) for a in spec.argnums):
        raise YotaError(f"DataParallel.argnums must be argument positions (ints), got "
                        f"{spec.argnums!r}")
    if spec.bucket_bytes is not None and spec.bucket_bytes < 1:
        raise YotaError(f"bucket_bytes must be positive, got {spec.bucket_bytes}")
    return DataParallel(c, spec.argnums, spec.average, spec.bucket_bytes, spec.overlap)


def _reducer(comm: Any) -> _Reducer:
    red = _reducers.get(id(comm))
    if red is None or red.comm is not comm:
        red = _reducers[id(comm)] = _Reducer(comm)
        while len(_reducers) > MAX_COMMS:
            _reducers.popitem(last=False)
    return red


# -- leaves, layouts, digests ------------------------------------------------------------
def _kind(x: Any) -> str:
    """n: no gradient, f: Python float, s: NumPy scalar, a: NumPy array, c: CuPy array."""
    if x is None:
        return "n"
    if type(x) is float:
        return "f"
    if isinstance(x, np.generic):
        return "s"
    if isinstance(x, np.ndarray):
        return "a"
    if type(x).__module__.startswith("cupy"):
        return "c"
    return "?"


def _dtype(x: Any) -> np.dtype:
    return np.dtype(np.float64) if type(x) is float else np.dtype(x.dtype)


def _nbytes(x: Any) -> int:
    return 8 if type(x) is float else int(x.nbytes)


def _describe_leaf(x: Any) -> tuple[str, str, tuple[int, ...]]:
    kind = _kind(x)
    if kind == "?" and structs.is_traced(x):
        raise YotaError("yota.grad(..., comm=...) was called inside a function Yota is "
                        "tracing: the ranks can only average concrete gradients; take the "
                        "data-parallel gradient outside the traced function")
    if kind == "?":
        raise YotaError(f"a gradient is a {type(x).__name__}, which yota.distributed cannot "
                        "reduce (arrays, floats and None only)")
    if kind == "n":
        return ("n", "", ())
    return (kind, _dtype(x).str, tuple(getattr(x, "shape", ())))


def _items(value: Any, grads: list[Any], argnums: Sequence[int] | None,
           with_value: bool) -> list[tuple[int, Any, Any]]:
    """(argument or -1 for the value, field path or None, leaf) in a fixed order."""
    items: list[tuple[int, Any, Any]] = [(-1, None, value)] if with_value else []
    wanted = range(len(grads)) if argnums is None else argnums
    for a in wanted:
        if not -len(grads) <= a < len(grads):
            raise YotaError(f"argnums: there is no argument {a} (the function has "
                            f"{len(grads)})")
        a %= len(grads)
        ga = grads[a]
        if isinstance(ga, dict):
            items.extend((a, path, v) for path, v in ga.items())
        else:
            items.append((a, None, ga))
    return items


def _digest(layout: tuple[Any, ...]) -> int:
    h = hashlib.blake2b(repr(layout).encode(), digest_size=8).digest()
    return int.from_bytes(h, "little", signed=True)


def _walk(x: Any, path: tuple[Any, ...], out: list[tuple[tuple[Any, ...], Any]]) -> None:
    kind = _kind(x)
    if kind in "fsac":
        out.append((path, x))
        return
    for k, v in structs.children(x) or ():
        _walk(v, path + (k,), out)


def _check_overwritable(obj: Any, path: tuple[Any, ...], x: Any) -> None:
    """Raise unless broadcast_ can overwrite leaf ``x`` of ``obj`` (checked on every rank
    before anything is copied)."""
    where = structs.format_path(path, "obj")
    if _kind(x) in "ac":
        if not x.flags.writeable:
            raise YotaError(f"broadcast_: {where} is a read-only array; make it writeable "
                            "(np.array(x)) so it can be overwritten")
        return
    if path == ():
        return  # a bare float: the root's value is returned
    parent = structs.get_path(obj, path[:-1])
    frozen = getattr(getattr(parent, "__dataclass_params__", None), "frozen", False)
    if isinstance(parent, tuple) or frozen:
        raise YotaError(f"broadcast_: {where} is a number inside an immutable "
                        f"{type(parent).__name__}, which cannot be assigned in place; store "
                        "it in an array or a mutable structure (a list, dict or dataclass)")


def _input_ids(args: Sequence[Any]) -> set[int]:
    """The ids of the arrays among the arguments (a gradient must not overwrite them)."""
    out: list[tuple[tuple[Any, ...], Any]] = []
    for a in args:
        _walk(a, (), out)
    return {id(x) for _, x in out if _kind(x) in "ac"}


# -- buffers ----------------------------------------------------------------------------------
def _allocate(b: _Bucket, items: list[tuple[int, Any, Any]]) -> None:
    first = items[b.items[0]][2]
    xp = _cupy() if b.device else np
    n = sum(int(np.prod(np.shape(items[i][2]))) for i in b.items)
    b.buf = xp.empty(n, _dtype(first))
    if b.device:
        b.host = np.empty(n, _dtype(first))
    off = 0
    for i in b.items:
        shape = np.shape(items[i][2])
        size = int(np.prod(shape))
        b.views.append(b.buf[off:off + size].reshape(shape))
        off += size


def _writable(x: Any) -> bool:
    if _kind(x) == "c":
        return bool(x.flags.c_contiguous and x.base is None)
    return bool(x.flags.writeable and x.flags.c_contiguous and x.base is None)


def _owned(x: Any, protect: set[int], seen: set[int]) -> Any:
    """``x`` itself when it may be overwritten (a contiguous array owning its memory that
    is no input and no other gradient), else a copy."""
    if _writable(x) and id(x) not in protect and id(x) not in seen:
        seen.add(id(x))
        return x
    return x.copy()


def _unpack(x: Any, view: Any, n: int, protect: set[int], seen: set[int]) -> Any:
    """The sum in ``view`` divided by ``n``, written over ``x`` where that is safe (one
    pass: the division is the copy), else into a new array."""
    kind = _kind(x)
    if kind == "f":
        return float(view[()]) / n
    if kind == "s":
        return x.dtype.type(view[()] / n)
    if _writable(x) and id(x) not in protect and id(x) not in seen:
        seen.add(id(x))
        np.divide(view, n, out=x)
        return x
    return view / n


# -- CuPy / NCCL --------------------------------------------------------------------------------
def _cupy() -> Any:
    import cupy

    return cupy


def _nccl_setup(comm: Any, size: int, rank: int) -> Any:
    """An NCCL communicator over ``comm``'s ranks, or None when a rank lacks NCCL or two
    ranks share a GPU (NCCL refuses that); every rank learns the same answer."""
    mine: Any = None
    if os.environ.get("YOTA_NCCL", "1") != "0":
        try:
            from cupy.cuda import nccl

            if nccl.available:
                mine = _cupy().cuda.Device().pci_bus_id
        except Exception:  # no NCCL, no device: MPI on host copies
            mine = None
    ids = comm.allgather(mine)
    if size < 2 or None in ids or len(set(ids)) < size:
        return None
    from cupy.cuda import nccl

    uid = comm.bcast(nccl.get_unique_id() if rank == 0 else None, root=0)
    return nccl.NcclCommunicator(size, uid, rank)


def _nccl_allreduce(nccl_comm: Any, buf: Any) -> None:
    from cupy.cuda import nccl

    types = {"float16": nccl.NCCL_FLOAT16, "float32": nccl.NCCL_FLOAT32,
             "float64": nccl.NCCL_FLOAT64}
    stream = _cupy().cuda.get_current_stream().ptr
    nccl_comm.allReduce(buf.data.ptr, buf.data.ptr, buf.size, types[buf.dtype.name],
                        nccl.NCCL_SUM, stream)


# -- the message when a step fails ------------------------------------------------------------
def _failure_message(reports: list[tuple[str | None, Any]], argnames: Sequence[str],
                     api: str, size: int) -> str:
    errors = [(r, e) for r, (e, _) in enumerate(reports) if e is not None]
    nothing = "nothing was copied" if api == "broadcast_" else "no gradient was exchanged"
    tail = (f" Every rank raises this error; {nothing}, so the ranks are still in step and "
            "may go on (or stop) together.")
    if len(errors) == size and len({e for _, e in errors}) == 1:
        return f"{api} failed on every rank: {errors[0][1]}.{tail}"
    if errors:
        lines = "; ".join(f"rank {r}: {e}" for r, e in errors)
        return f"{api} failed on {len(errors)} of {size} ranks ({lines}).{tail}"
    diff = _first_difference([lay for _, lay in reports], argnames, api)
    if api == "broadcast_":
        return (f"{api}: the structures differ between the ranks, so nothing was copied: "
                f"{diff}. Call broadcast_ with the same fields, dtypes and shapes on every "
                f"rank.{tail}")
    return (f"{api}: the ranks' gradients differ in structure, so they cannot be averaged: "
            f"{diff}. Every rank must produce gradients of the same arguments, fields, "
            "dtypes and shapes: give the ranks shards of one shape and the same parameters, "
            "and use every parameter on every rank (a branch on the data that skips a "
            f"parameter gives it no gradient on that rank).{tail}")


def _first_difference(layouts: list[Any], argnames: Sequence[str], api: str) -> str:
    base = {(a, p): rest for a, p, *rest in layouts[0]}
    for r, lay in enumerate(layouts[1:], start=1):
        here = {(a, p): rest for a, p, *rest in lay}
        for key in list(base) + [k for k in here if k not in base]:
            if base.get(key) != here.get(key):
                name = _name(key, argnames, api)
                return (f"{name} is {_show(base.get(key), api)} on rank 0 and "
                        f"{_show(here.get(key), api)} on rank {r}")
        if list(base) != list(here):
            return f"the gradients come in another order on rank {r} than on rank 0"
    return "their gradient structures hash differently"


def _name(key: tuple[int, Any], argnames: Sequence[str], api: str) -> str:
    a, path = key
    if a < 0:
        return "the value of f"
    root = argnames[a] if a < len(argnames) else f"argument {a}"
    if api == "broadcast_":
        return structs.format_path(path, "obj")
    if path is None:
        return f"the gradient of {root}"
    return f"the gradient of {structs.format_path(path, root)}"


def _show(rest: Any, api: str) -> str:
    if rest is None:
        return "missing" if api == "broadcast_" else "missing (f does not use it there)"
    kind, dtype, shape = rest
    if kind == "n":
        return "None (no gradient)"
    what = {"f": "a float", "s": "a scalar", "a": "an array", "c": "a CuPy array"}[kind]
    return f"{what} {np.dtype(dtype).name}{list(shape)}"
