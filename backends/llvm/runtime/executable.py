"""The Python side of a compiled function: argument checks, output arrays, workspaces,
and turning failure codes into exceptions.

A call costs a few microseconds: each input is checked through one
``__array_interface__`` dictionary (dtype, shape, contiguity and address at once;
anything else takes the slow path, which converts or raises ``SignatureError``), outputs
are fresh ``np.empty`` arrays the caller owns (or the caller's own ``out=`` arrays), and
the workspace comes from a pool, so concurrent calls from several threads each get
their own. ctypes releases the GIL for the duration of the native call.
"""

from __future__ import annotations

import ctypes
import sys
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from yota.ir.core import Function
from yota.ir.errors import SignatureError, YotaError

from ...artifact import Artifact as BaseArtifact
from ...failures import raise_failure
from ...signature import check_arity, check_input
from ..abi import ENTRY, ENTRY_OBJ, packed
from .jit import Loaded, cfunc
from .target import ARRAY_ABI, Target

if TYPE_CHECKING:
    from ...program import StepTimes

WS_ALIGN = 64


def _array_abi_ok() -> bool:
    """Whether NumPy arrays have the field offsets the array entry point reads."""
    import ctypes

    try:
        for a in (np.zeros((3, 4)), np.zeros((4, 3)).T, np.zeros(0, np.float32)):
            base = id(a)
            data = ctypes.c_void_p.from_address(base + ARRAY_ABI["data"]).value or 0
            nd = ctypes.c_int.from_address(base + ARRAY_ABI["nd"]).value
            dims = ctypes.c_void_p.from_address(base + ARRAY_ABI["dims"]).value
            flags = ctypes.c_int.from_address(base + ARRAY_ABI["flags"]).value
            shape = tuple((ctypes.c_int64 * nd).from_address(dims or 0)) if nd else ()
            ok = bool(flags & 1) == a.flags.c_contiguous and bool(flags & 0x100)
            if data != a.ctypes.data or shape != a.shape or not ok:
                return False
        return True
    except (ValueError, OSError):  # pragma: no cover
        return False


ARRAY_ABI_OK = _array_abi_ok()


RECYCLE_MIN_BYTES = 1 << 20
GIL_BYTES = 1 << 16  # a native call on this many bytes of inputs and outputs frees the GIL


class Recycler:
    """Large output arrays handed out before and since released by the caller (nothing
    but this pool refers to them any more) are handed out again: their old contents are
    unobservable, and fresh large arrays cost page faults (about 1 ms per 8 MB)."""

    DEPTH = 2  # a caller typically still holds the previous result during a call

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.shape, self.dtype = shape, dtype
        self.arrays: list[np.ndarray] = []
        self.lock = threading.Lock()

    def take(self) -> np.ndarray:
        with self.lock:
            for a in self.arrays:
                if sys.getrefcount(a) == 3:  # this list, the loop variable, the argument
                    return a
            a = np.empty(self.shape, self.dtype)
            self.arrays.append(a)  # remember the latest few handed out
            if len(self.arrays) > self.DEPTH:
                del self.arrays[0]
            return a


class Artifact(BaseArtifact):
    """Everything needed to run a compiled function in another process: the object code
    and a JSON description (signature, workspace size, failure records, target)."""

    MAGIC = b"YOTAOBJ1"
    KIND = "Yota object"

    @staticmethod
    def describe(fn: Function, ws_bytes: int, failures: list[Any],
                 target_key: dict[str, Any]) -> dict[str, Any]:
        """The JSON description of ``fn``'s object code (format 1)."""
        return {
            "format": 1,
            "name": fn.name,
            "inputs": [[list(v.shape), v.dtype.str] for v in fn.inputs],
            "outputs": [[list(v.shape), v.dtype.str] for v in fn.outputs],
            "input_labels": list(fn.input_labels),
            "ws_bytes": ws_bytes,
            "failures": failures,
            "target": target_key,
        }


class LLVMExecutable:
    """A function compiled by the ``llvm`` backend; call it with arrays.

    ``exe(*arrays)`` returns the list of outputs; ``exe(*arrays, out=[...])`` writes them
    into the given C-contiguous arrays instead. ``llvm_ir``/``optimized_ir`` hold the
    LLVM IR before and after optimization (when compiled in this process) and
    ``assembly()`` disassembles it.
    """

    backend = "llvm"
    packs = True  # many arguments are passed packed (abi.packed); the mlir backend's: never

    def __init__(self, artifact: Artifact, loaded: Loaded, target: Target,
                 fn: Any = None, llvm_ir: str | None = None,
                 optimized_ir: str | None = None) -> None:
        meta = artifact.meta
        self.artifact, self.target, self.fn = artifact, target, fn
        self.llvm_ir, self.optimized_ir = llvm_ir, optimized_ir
        self._loaded = loaded  # keeps the engine (and the code) alive
        self.name: str = meta["name"]
        self._in = [(tuple(s), np.dtype(d), np.dtype(d).str, np.dtype(d).itemsize)
                    for s, d in meta["inputs"]]
        self._out = [(tuple(s), np.dtype(d)) for s, d in meta["outputs"]]
        self._labels = meta.get("input_labels") or [None] * len(self._in)
        self._ws_bytes = int(meta["ws_bytes"])
        self._failures = meta["failures"]
        nargs = len(self._in) + len(self._out) + 1
        self._packed = packed(nargs) and self.packs  # one pointer to an array of them
        self._entry_addr = loaded.addresses[ENTRY]
        self._entry = cfunc(self._entry_addr, 1 if self._packed else nargs)
        self._entry_obj = cfunc(loaded.addresses[ENTRY_OBJ], 1 if self._packed else nargs)
        self._by_object = ARRAY_ABI_OK
        self._pool: list[tuple[np.ndarray, int]] = []
        self._recycle = {j: Recycler(s, d) for j, (s, d) in enumerate(self._out)
                         if int(np.prod(s)) * d.itemsize >= RECYCLE_MIN_BYTES}
        self._stub = self._make_stub() if ARRAY_ABI_OK else \
            (lambda *args, out=None: self._call(args, out))

    # -- calling --------------------------------------------------------------------
    def __call__(self, *args: Any, out: Sequence[np.ndarray] | None = None
                 ) -> list[np.ndarray]:
        return self._stub(*args, out=out)

    def _make_stub(self) -> Any:
        """A calling stub generated for this signature: the common case (arrays of the
        right dtypes, no ``out=``) in a few straight lines; anything else, and any
        nonzero return code, goes to ``_call``."""
        ins = [f"a{i}" for i in range(len(self._in))]
        outs = [f"o{j}" for j in range(len(self._out))]
        ns: dict[str, Any] = {"ndarray": np.ndarray, "empty": np.empty, "pool": self._pool,
                              "neww": self._workspace, "entry": self._entry_obj,
                              "general": self._call, "addressof": ctypes.addressof,
                              "argv_t": ctypes.c_void_p * (len(ins) + len(outs) + 1)}
        for i, (_, dt, _, _) in enumerate(self._in):
            ns[f"d{i}"] = dt
        for j, (shape, dt) in enumerate(self._out):
            ns[f"s{j}"], ns[f"od{j}"] = shape, dt
            if j in self._recycle:
                ns[f"take{j}"] = self._recycle[j].take
        checks = " and ".join(f"type({a}) is ndarray and {a}.dtype is d{i}"
                              for i, a in enumerate(ins)) or "True"
        unpack = f"        {', '.join(ins)}{',' if len(ins) == 1 else ''} = args" if ins else ""
        call = [f"            rc = entry({''.join(f'id({x}), ' for x in ins + outs)}ws[1])"]
        lines = ["def stub(*args, out=None):",
                 f"    if out is None and len(args) == {len(ins)}:",
                 unpack,
                 f"        if {checks}:",
                 *[f"            {o} = take{j}()" if j in self._recycle else
                   f"            {o} = empty(s{j}, od{j})" for j, o in enumerate(outs)],
                 "            ws = pool.pop() if pool else neww()",
                 *(call if not self._packed else [  # (the array lives through the call)
                     f"            argv = argv_t({''.join(f'id({x}), ' for x in ins + outs)}ws[1])",
                     "            rc = entry(addressof(argv))"]),
                 "            pool.append(ws)",
                 "            if not rc:",
                 f"                return [{', '.join(outs)}]",
                 "    return general(args, out)"]
        exec("\n".join(lines), ns)  # noqa: S102 - code generated from the signature
        return ns["stub"]

    # -- native entries (pyentry.py) ----------------------------------------------------
    @property
    def signature(self) -> tuple[list[tuple[tuple[int, ...], np.dtype]],
                                 list[tuple[tuple[int, ...], np.dtype]]]:
        """(shape, dtype) of each input and of each output."""
        return [(s, d) for s, d, *_ in self._in], list(self._out)

    def native_plan(self, nargs: int = 1) -> Any:
        """A ``pyentry.Plan`` to call this program from native code (a builtin function
        of ``nargs`` arguments), or None where that is not available. The caller adds the
        argument checks (loading input ``i``'s data into slot ``i``), then ``native_run``,
        then the result's ops."""
        if type(self) is not LLVMExecutable or not ARRAY_ABI_OK:
            return None  # (a profiled executable times its calls in Python)
        from . import pyentry

        nslots = len(self._in) + len(self._out) + 1
        if nslots > pyentry.MAX_ARGS or self._packed or not pyentry.available():
            return None
        return pyentry.Plan(nslots, nargs)

    def native_run(self, plan: Any, scratch: set[int]) -> None:
        """Add to ``plan`` the outputs (those in ``scratch``, 0-d ones the result reads
        as scalars, in a scratch buffer; large ones from their recycler; others new) and
        the call, with a workspace from the pool; the GIL is released around long calls."""
        n = len(self._in)
        for j, (shape, dt) in enumerate(self._out):
            if j in scratch:
                assert shape == () and dt.itemsize <= 16
                plan.out_scratch(n + j)
            elif j in self._recycle:
                plan.out_call(n + j, self._recycle[j].take)
            else:
                plan.out_new(n + j, dt, shape)
        size = sum(int(np.prod(s)) * d.itemsize for s, d, *_ in self._in + self._out)
        plan.run(self._entry_addr, n + len(self._out), self._pool, self._workspace,
                 release_gil=size >= GIL_BYTES)

    def _call(self, args: Sequence[Any], out: Sequence[np.ndarray] | None = None
              ) -> list[np.ndarray]:
        check_arity(self.name, len(self._in), args)
        arrs = list(args)
        for i, a in enumerate(arrs):
            if type(a) is not np.ndarray or a.dtype is not self._in[i][1]:
                arrs[i] = self._convert(i, a)
        outs = self._outputs(out, args)
        pool = self._pool
        ws = pool.pop() if pool else self._workspace()
        try:
            self._run(arrs, outs, ws)
        finally:
            pool.append(ws)
        return outs

    def _run(self, arrs: list[Any], outs: list[np.ndarray], ws: tuple[np.ndarray, int]
             ) -> None:
        """Run the native code on converted inputs, outputs and a workspace."""
        if self._by_object:
            ids = [id(a) for a in arrs] + [id(o) for o in outs]
            rc = self._call_entry(self._entry_obj, ids + [ws[1]])
            while rc < 0:  # input -rc-1 has another shape, or is not contiguous
                k = -rc - 1
                arrs[k] = self._convert(k, arrs[k])
                ids[k] = id(arrs[k])
                rc = self._call_entry(self._entry_obj, ids + [ws[1]])
        else:
            ptrs = [self._address(i, a) for i, a in enumerate(arrs)]
            ptrs += [o.__array_interface__["data"][0] for o in outs]
            status = [ws[1]] if self._packed else []  # (a packed entry takes the status too)
            rc = self._call_entry(self._entry, ptrs + [ws[1]] + status)
        if rc:
            self._fail(rc, ws)

    def _call_entry(self, entry: Any, args: list[int]) -> int:
        """``entry(*args)``, or for a packed entry ``entry(argv)`` (``abi.packed``)."""
        if not self._packed:
            return entry(*args)
        argv = (ctypes.c_void_p * len(args))(*args)
        return entry(ctypes.addressof(argv))

    def _address(self, i: int, a: np.ndarray) -> int:
        ai = a.__array_interface__
        shape, _, ts, size = self._in[i]
        if ai["strides"] is None and ai["typestr"] == ts and ai["shape"] == shape \
                and not ai["data"][0] % size:
            return ai["data"][0]
        return self._convert(i, a).__array_interface__["data"][0]

    def _convert(self, i: int, a: Any) -> np.ndarray:
        """The slow path: the interpreter's checks and messages, then a contiguous,
        aligned array of the right dtype (a copy only where needed)."""
        shape, dt, _, _ = self._in[i]
        arr = np.asarray(a)
        if arr.dtype is not dt and arr.dtype == dt:
            arr = arr.view(dt)
        check_input(self.name, self._labels[i] or f"input {i}", shape, dt, arr)
        return np.require(arr, dtype=dt, requirements=["C", "A"])

    def _outputs(self, out: Sequence[np.ndarray] | None, args: Sequence[Any]
                 ) -> list[np.ndarray]:
        if out is None:
            return [self._recycle[j].take() if j in self._recycle else np.empty(s, d)
                    for j, (s, d) in enumerate(self._out)]
        out = list(out)
        if len(out) != len(self._out):
            raise SignatureError(f"@{self.name} has {len(self._out)} outputs, out= gave "
                                 f"{len(out)}")
        for j, (o, (s, d)) in enumerate(zip(out, self._out, strict=True)):
            if not (isinstance(o, np.ndarray) and o.shape == s and o.dtype == d
                    and o.flags.c_contiguous and o.flags.writeable and o.flags.aligned):
                raise SignatureError(f"@{self.name}: out[{j}] must be a writeable C-contiguous "
                                     f"{d} array of shape {list(s)}")
            others = list(out[:j]) + [a for a in args if isinstance(a, np.ndarray)]
            if o.size and any(np.may_share_memory(o, x) for x in others):
                raise SignatureError(f"@{self.name}: out[{j}] overlaps an input or another "
                                     "output")
        return out

    def _workspace(self) -> tuple[np.ndarray, int]:
        buf = np.empty(self._ws_bytes + WS_ALIGN, np.uint8)
        addr = buf.__array_interface__["data"][0]
        start = -addr % WS_ALIGN
        view = buf[start:start + self._ws_bytes]
        return view, addr + start

    def _fail(self, rc: int, ws: tuple[np.ndarray, int]) -> None:
        raise_failure(self._failures[rc - 1], ws[0])

    # -- inspection ---------------------------------------------------------------------
    def assembly(self) -> str:
        """The host assembly of the optimized module."""
        from .jit import emit_assembly, optimize

        if self.optimized_ir is None:
            raise YotaError("assembly is only available for functions compiled in this "
                            "process (a loaded artifact has only object code)")
        return emit_assembly(optimize(self.optimized_ir, self.target, 0), self.target)

    def __repr__(self) -> str:
        return f"<LLVMExecutable @{self.name}: {len(self._in)} inputs, {len(self._out)} outputs>"


class ProfiledExecutable(LLVMExecutable):
    """The profiled variant of a compiled function (``compile(fn, profile=True)``): the
    same code with the clock read before and after each step of the top function (a
    kernel, a GEMM, a call, a guard, a copy), written to the end of the workspace.

    ``steps[s]`` is the op index of step ``s`` in ``fn.ops`` (-1: the copies into the
    output arrays); ``timed(*arrays)`` returns the outputs and ``StepTimes`` of that call.
    Calling it as a function works too (the times are dropped)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        prof = self.artifact.meta["profile"]
        self.steps: list[int] = list(prof["steps"])
        self._ev = (int(prof["offset"]), int(prof["offset"]) + 16 * len(self.steps))
        self._stub = lambda *args, out=None: self.timed(*args, out=out)[0]

    def timed(self, *args: Any, out: Sequence[np.ndarray] | None = None
              ) -> tuple[list[np.ndarray], StepTimes]:
        """Run, and return the outputs and the clock readings of the call and its steps."""
        check_arity(self.name, len(self._in), args)
        arrs = [a if type(a) is np.ndarray and a.dtype is self._in[i][1] else
                self._convert(i, a) for i, a in enumerate(args)]
        outs = self._outputs(out, args)
        ws = self._pool.pop() if self._pool else self._workspace()
        ev = ws[0][self._ev[0]:self._ev[1]].view(np.int64)
        ev.fill(0)
        t0 = time.monotonic_ns()
        try:
            self._run(arrs, outs, ws)
        finally:
            t1 = time.monotonic_ns()
            got = ev.copy()
            from ...program import StepTimes  # (profiling only: not imported to load)

            times = StepTimes(t0, t1, got[0::2], got[1::2])
            self._pool.append(ws)
        return outs, times

