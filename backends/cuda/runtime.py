"""The calling side of a compiled function: argument checks, output arrays, the workspace
(one allocation from CuPy's pool per call, laid out by the memory plan), replaying the
steps on the current stream, and turning failure codes into exceptions.

A device is anything with the small interface of ``CupyDevice`` (memory as integer
addresses, kernel launches, strided views for cuBLAS); ``emulate.EmuDevice`` runs the
same kernels on the CPU for tests on machines without a GPU.

Failures: a guard that does not hold, or an index out of range, writes its code into the
status words at the start of the workspace (the first one wins); after the steps, a
program that has failure records reads those 16 bytes back (one synchronization) and
raises what the interpreter raises. A program without guards or indexing never
synchronizes: its outputs are CuPy arrays whose values arrive in stream order.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..failures import linalg_failure, raise_failure
from ..program import STATUS, Call, Callback, FnPlan, Gemm, Launch, Linalg, Loop, Memset
from ..signature import check_arity, check_input
from .kernel import Config
from .lower import Module
from .nvrtc import CudaUnavailable, compile_cubin, nvrtc_version


def _cupy() -> Any:
    try:
        import cupy
    except ImportError as e:
        raise CudaUnavailable(f"the CUDA backend needs CuPy: pip install 'yota[cuda]' ({e})"
                              ) from None
    return cupy


def cupy_linalg(cp: Any, name: str, attrs: dict[str, Any], xs: list[Any], cxl: Any = None
                ) -> list[Any]:
    """The results of LAPACK-level op ``name`` on CuPy arrays (``yota.ir.ops.lapack``'s
    contract; batched ops loop over the batch where CuPy has no batched routine).
    ``cp``/``cxl``: the ``cupy`` and ``cupyx.scipy.linalg`` modules (tests hand NumPy
    stand-ins)."""
    if cxl is None:
        from cupyx.scipy import linalg as cupyx_linalg

        cxl = cupyx_linalg

    a = xs[0]
    if name == "cholesky":
        return [cp.linalg.cholesky(cp.tril(a))]
    if name == "solve":
        return [cp.linalg.solve(a, xs[1])]
    if name == "eigh":
        return list(cp.linalg.eigh(a, UPLO="L" if attrs["lower"] else "U"))
    if name == "svd":
        return list(cp.linalg.svd(a, full_matrices=attrs["full_matrices"]))
    if name == "svdvals":
        return [cp.linalg.svd(a, compute_uv=False)]
    if name == "pivots":  # integer bookkeeping, sequential: on the host
        from yota.ir.ops.lapack import pivots

        return [cp.asarray(pivots(cp.asnumpy(a)))]
    table: dict[str, Callable[..., Any]] = {
        "qr": lambda m: cp.linalg.qr(m, mode="reduced"),
        "lu": lambda m: _lu_perm(cp, *cxl.lu_factor(m)),
        "triangular_solve": lambda m, b: (cxl.solve_triangular(
            m, b, trans=1 if attrs["transpose"] else 0, lower=attrs["lower"],
            unit_diagonal=attrs["unit_diagonal"]),)}
    per = table[name]
    batch = a.shape[:-2]
    outs = [per(*(x[i] for x in xs)) for i in np.ndindex(*batch)] if batch else [per(*xs)]
    return [cp.stack([o[j] for o in outs]).reshape(batch + outs[0][j].shape)
            for j in range(len(outs[0]))]


def _lu_perm(cp: Any, lu: Any, piv: Any) -> tuple[Any, Any]:
    """``lu_factor``'s row interchanges (0-based) as the permutation ``a[perm] == L U``."""
    perm = np.arange(lu.shape[-1])
    for i, j in enumerate(cp.asnumpy(piv)):
        perm[[i, j]] = perm[[j, i]]
    return lu, cp.asarray(perm)


class CupyDevice:
    """The current CUDA device through CuPy: memory from CuPy's pool, kernels from a
    cubin compiled for the device's compute capability, launches on the current stream."""

    name = "cuda"

    def __init__(self, cfg: Config | None = None, arch: str | None = None) -> None:
        cp = _cupy()
        self.cp = cp
        try:
            dev = cp.cuda.Device()
            cc = dev.compute_capability
            self.device_id = dev.id
        except Exception as e:  # noqa: BLE001 - no driver, no device
            raise CudaUnavailable(f"no usable CUDA device: {e}") from None
        self.arch = arch or f"sm_{cc}"
        self.cfg = cfg or Config()
        self._loaded: dict[str, Any] = {}

    def key(self) -> dict[str, Any]:
        """What a cubin depends on (for cache keys)."""
        rt = self.cp.cuda.runtime
        return {"arch": self.arch, "nvrtc": list(nvrtc_version()),
                "driver": rt.driverGetVersion(), "cupy": self.cp.__version__,
                "config": self.cfg.key()}

    # -- code -------------------------------------------------------------------------
    def load(self, source: str, names: Sequence[str]) -> Any:
        """The loaded module of ``source`` (compiled once per process per source)."""
        key = hashlib.sha1(source.encode()).hexdigest()
        handle = self._loaded.get(key)
        if handle is None:
            cubin = compile_cubin(source, self.arch, fast_math=self.cfg.fast_math)
            handle = self._loaded[key] = self.load_cubin(cubin)
        return handle

    def load_cubin(self, cubin: bytes) -> Any:
        mod = self.cp.cuda.function.Module()
        mod.load(cubin)
        return {"module": mod, "functions": {}, "cubin": cubin}  # the cubin: for a cache

    def function(self, handle: Any, name: str) -> Any:
        """Kernel ``name`` of a loaded module, ready for ``launch``."""
        fns = handle["functions"]
        if name not in fns:
            fns[name] = handle["module"].get_function(name)
        return fns[name]

    def stream(self) -> Any:
        return self.cp.cuda.get_current_stream()

    def launch(self, f: Any, grid: tuple[int, int, int], block: tuple[int, int, int],
               args: list[int], stream: Any) -> None:
        f(grid, block, tuple(args), stream=stream)

    # -- memory -----------------------------------------------------------------------
    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> Any:
        return self.cp.empty(shape, dtype)

    def address(self, a: Any) -> int:
        return int(a.data.ptr)

    def memset(self, addr: int, nbytes: int) -> None:
        if nbytes:
            stream = self.cp.cuda.get_current_stream()
            self.cp.cuda.runtime.memsetAsync(addr, 0, nbytes, stream.ptr)

    def view(self, addr: int, shape: tuple[int, ...], strides: tuple[int, ...],
             dtype: np.dtype, owner: Any = None) -> Any:
        cp = self.cp
        span = max(1, np.dtype(dtype).itemsize + sum((d - 1) * s for d, s in
                                                      zip(shape, strides, strict=True) if d))
        mem = cp.cuda.UnownedMemory(addr, span, owner, self.device_id)
        return cp.ndarray(shape, dtype, cp.cuda.MemoryPointer(mem, 0), strides)

    def matmul(self, a: Any, b: Any, out: Any) -> None:
        self.cp.matmul(a, b, out=out)

    def linalg(self, name: str, attrs: dict[str, Any], ins: list[Any], outs: list[Any]
               ) -> None:
        """LAPACK-level op ``name`` through ``cupy.linalg``/``cupyx.scipy.linalg``
        (cuSOLVER), in float64 as ``np.linalg``, into the ``outs`` views; a failure on
        the values raises NumPy's ``LinAlgError`` (``cupyx.errstate(linalg="raise")``,
        which synchronizes)."""
        import cupyx

        cp = self.cp
        with cupyx.errstate(linalg="raise"):
            res = cupy_linalg(cp, name, attrs, [a.astype(cp.float64) for a in ins])
        for o, r in zip(outs, res, strict=True):
            o[...] = r

    def read(self, addr: int, nbytes: int) -> bytes:
        return self.view(addr, (nbytes,), (1,), np.dtype(np.uint8)).get().tobytes()

    def upload(self, a: np.ndarray) -> Any:
        return self.cp.asarray(np.ascontiguousarray(a))

    def synchronize(self) -> None:
        self.cp.cuda.get_current_stream().synchronize()

    def input(self, a: Any) -> Any:
        """A device array for argument ``a``: CuPy arrays as they are, objects with
        ``__cuda_array_interface__`` without a copy, anything else copied from the host."""
        cp = self.cp
        if isinstance(a, cp.ndarray):
            return a
        cai = getattr(a, "__cuda_array_interface__", None)
        if cai is not None:
            shape, dt = tuple(cai["shape"]), np.dtype(cai["typestr"])
            strides = cai.get("strides") or _dense_bytes(shape, dt.itemsize)
            return self.view(int(cai["data"][0]), shape, tuple(strides), dt, owner=a)
        return cp.asarray(np.asarray(a))

    def is_array(self, a: Any) -> bool:
        return isinstance(a, self.cp.ndarray)

    def contiguous(self, a: Any, dtype: np.dtype) -> Any:
        if a.dtype != dtype:
            a = a.astype(dtype)
        return self.cp.ascontiguousarray(a)


def _dense_bytes(shape: tuple[int, ...], item: int) -> tuple[int, ...]:
    out, s = [], item
    for d in reversed(shape):
        out.append(s)
        s *= max(d, 1)
    return tuple(reversed(out))


class CudaExecutable:
    """A function compiled by the ``cuda`` backend; call it with CuPy arrays (or anything
    with ``__cuda_array_interface__``, or host arrays, which are copied over); returns
    the list of outputs as new device arrays the caller owns.

    ``source`` is the module's CUDA C; ``module`` the lowered module (kernels, steps).
    """

    backend = "cuda"

    def __init__(self, module: Module, device: Any, fn: Any = None,
                 handle: Any = None) -> None:
        self.module, self.device, self.fn = module, device, fn
        self.source = module.source()
        self.name = module.name
        self.handle = handle if handle is not None else device.load(self.source,
                                                                    list(module.kernels))
        self._consts = [device.upload(c) for c in module.consts]
        self._const_addr = [device.address(c) for c in self._consts]
        self._in = [(tuple(t.shape), np.dtype(t.dtype)) for t in module.inputs]
        self._out = [(tuple(t.shape), np.dtype(t.dtype)) for t in module.outputs]
        self._labels = list(module.labels) or [None] * len(self._in)
        self._main = module.plans[module.main]
        self._programs: dict[str, list[tuple[Any, ...]]] = {}

    def _buffers(self, args: tuple[Any, ...]) -> tuple[list[Any], list[Any], Any, int]:
        """A call's inputs on the device, its fresh outputs, and its workspace with its
        address (the failure words zeroed)."""
        dev = self.device
        check_arity(self.name, len(self._in), args)
        arrs = [self._input(i, a) for i, a in enumerate(args)]
        outs = [dev.empty(s, d) for s, d in self._out]
        ws = dev.empty((max(self._main.ws_bytes, 1),), np.dtype(np.uint8))
        ws_addr = dev.address(ws)
        if self.module.failures:
            dev.memset(ws_addr, 16)
        return arrs, outs, ws, ws_addr

    def __call__(self, *args: Any) -> list[Any]:
        dev = self.device
        arrs, outs, ws, ws_addr = self._buffers(args)
        try:
            self._run(self._main, [dev.address(a) for a in arrs],
                      [dev.address(o) for o in outs], ws_addr, ws_addr, keep=(arrs, ws))
        except _InLoop as e:  # a failure in a loop's body: the status words and the steps
            self._check(e.raw + np.asarray(e.steps, np.int64).tobytes())
        if self.module.failures:
            self._check(dev.read(ws_addr, 16))
        return outs

    def _input(self, i: int, a: Any) -> Any:
        shape, dt = self._in[i]
        dev = self.device
        arr = a if dev.is_array(a) else dev.input(a)
        check_input(self.name, self._labels[i] or f"input {i}", shape, dt, arr)
        if arr.dtype != dt or not arr.flags.c_contiguous:
            arr = dev.contiguous(arr, dt)
        return arr

    def _compiled(self, plan: FnPlan) -> list[tuple[Any, ...]]:
        """``plan``'s steps with kernels resolved and every pointer argument as (slot,
        byte offset) into the per-call address list: storages, then status, then 0."""
        prog = self._programs.get(plan.name)
        if prog is not None:
            return prog
        n = len(plan.storages)
        slot = lambda ref: (n if ref[0] == STATUS else ref[0] if ref[0] >= 0 else n + 1,  # noqa: E731
                            ref[1])
        prog = []
        for step in plan.steps:
            if type(step) is Launch:
                fn = self.device.function(self.handle, step.name)
                prog.append((Launch, fn, step.grid, step.block,
                             tuple(slot(r) for r in step.args), tuple(step.scalars)))
            elif type(step) is Memset:
                prog.append((Memset, slot(step.ref), step.nbytes))
            elif type(step) is Gemm:
                prog.append((Gemm, *((slot(v.ref), v.shape, v.strides, v.dtype)
                                     for v in (step.a, step.b, step.out))))
            elif type(step) is Linalg:
                views = lambda vs: tuple((slot(v.ref), v.shape, v.strides, v.dtype)  # noqa: E731
                                         for v in vs)
                prog.append((Linalg, step.op, dict(step.attrs), views(step.ins),
                             views(step.outs), step.failure))
            elif type(step) is Callback:
                views = lambda vs: tuple((slot(v.ref), v.shape, v.strides, v.dtype)  # noqa: E731
                                         for v in vs)
                prog.append((Callback, step.fn, step.static, views(step.ins), views(step.outs),
                             step.loc))
            elif type(step) is Loop:
                prog.append((Loop, self.module.plans[step.callee], step.length, step.reverse,
                             tuple((slot(a), slot(b)) for a, b in step.carries),
                             tuple((slot(r), n) for r, n in step.stacked),
                             tuple(map(slot, step.invariants)),
                             tuple((slot(r), n) for r, n in step.outs), slot(step.ws)))
            else:
                assert isinstance(step, Call)
                prog.append((Call, self.module.plans[step.callee], tuple(map(slot, step.ins)),
                             tuple(map(slot, step.outs)), slot(step.ws)))
        self._programs[plan.name] = prog
        return prog

    def _run(self, plan: FnPlan, ins: list[int], outs: list[int], ws: int, status: int,
             keep: Any = None) -> None:
        dev = self.device
        consts = self._const_addr
        addrs = [ins[st.index] if st.kind == "in" else outs[st.index] if st.kind == "out"
                 else ws + st.index if st.kind == "ws" else consts[st.index]
                 for st in plan.storages] + [status, 0]
        launch, stream = dev.launch, dev.stream()
        for step in self._compiled(plan):
            kind = step[0]
            if kind is Launch:
                _, fn, grid, block, args, scalars = step
                launch(fn, grid, block, [addrs[i] + o for i, o in args] + list(scalars), stream)
            elif kind is Memset:
                (i, o), nbytes = step[1], step[2]
                dev.memset(addrs[i] + o, nbytes)
            elif kind is Gemm:
                dev.matmul(*(dev.view(addrs[i] + o, shape, strides, dt)
                             for (i, o), shape, strides, dt in step[1:]))
            elif kind is Linalg:
                self._linalg(step, addrs)
            elif kind is Callback:
                self._callback(step, addrs)
            elif kind is Loop:
                self._loop(step, addrs, status)
            else:
                _, callee, cins, couts, (wi, wo) = step
                self._run(callee, [addrs[i] + o for i, o in cins],
                          [addrs[i] + o for i, o in couts], addrs[wi] + wo, status)

    def _loop(self, step: tuple[Any, ...], addrs: list[int], status: int) -> None:
        """A ``Loop`` step: the body's steps once per step. Where a failure inside the body
        can name its step, the status words are read after each step (a synchronization:
        only for loops whose body can fail)."""
        _, callee, n, reverse, carries, stacked, inv, outs, (wi, wo) = step
        at = lambda r: addrs[r[0]] + r[1]  # noqa: E731
        bufs = [(at(a), at(b)) for a, b in carries]
        ws, fixed = addrs[wi] + wo, [at(r) for r in inv]
        watch = any(rec.get("loops") for rec in self.module.failures)
        for t in range(n):
            i = n - 1 - t if reverse else t
            ins = [b[t % 2] for b in bufs] + [at(r) + i * m for r, m in stacked] + fixed
            res = [b[1 - t % 2] for b in bufs] + [at(r) + i * m for r, m in outs]
            try:
                self._run(callee, ins, res, ws, status)
            except _InLoop as e:
                raise _InLoop(e.raw, [i, *e.steps]) from None
            if watch:
                raw = self.device.read(status, 16)
                if int(np.frombuffer(raw, np.uint64, count=1)[0]):
                    raise _InLoop(raw, [i])

    def _linalg(self, step: tuple[Any, ...], addrs: list[int]) -> None:
        """A LAPACK-level op on the device (``dev.linalg``); NumPy's ``LinAlgError`` (a
        matrix that is singular or not positive definite...) becomes the op's record."""
        _, name, attrs, ins, outs, code = step
        dev = self.device
        views = lambda vs: [dev.view(addrs[i] + o, shape, strides, dt)  # noqa: E731
                            for (i, o), shape, strides, dt in vs]
        try:
            dev.linalg(name, attrs, views(ins), views(outs))
        except np.linalg.LinAlgError as e:
            if not code:
                raise
            raise linalg_failure(self.module.failures[code - 1], 1) from e

    def _callback(self, step: tuple[Any, ...], addrs: list[int]) -> None:
        """An opaque primitive: operands copied to the host, the function called there,
        its results copied into their places on the device."""
        from yota.ir.ops.callback import CallbackError, invoke
        from yota.ir.types import TensorType

        _, fn, static, ins, outs, loc = step
        dev = self.device
        dev.synchronize()
        views = lambda vs: [dev.view(addrs[i] + o, shape, strides, dt)  # noqa: E731
                            for (i, o), shape, strides, dt in vs]
        host = [x.get() if hasattr(x, "get") else np.array(x) for x in views(ins)]
        try:
            got = invoke(fn, static, host, [TensorType(dt, shape) for _, shape, _, dt in outs])
        except CallbackError as e:
            raise CallbackError(f"{e} (at {loc})" if loc else str(e)) from (e.__cause__ or e)
        for v, r in zip(views(outs), got, strict=True):
            if r.size:
                v[...] = dev.upload(r)

    def _check(self, raw: bytes) -> None:
        code = int(np.frombuffer(raw, np.uint64, count=1)[0])
        if not code:
            return
        raise_failure(self.module.failures[code - 1], raw)

    def __repr__(self) -> str:
        return (f"<CudaExecutable @{self.name}: {len(self._in)} inputs, {len(self._out)} "
                f"outputs, {len(self.module.kernels)} kernels on {self.device.name}>")


class _InLoop(Exception):
    """A failure inside a loop's body: the status words and the step of each loop around
    it, outermost first."""

    def __init__(self, raw: bytes, steps: list[int]) -> None:
        super().__init__("a failure inside a loop")
        self.raw, self.steps = raw, steps
