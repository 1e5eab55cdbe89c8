"""The host target: LLVM set-up, target machines, and how generated code's external
symbols are found *by name* (never by a baked-in address): the names Yota binds (BLAS and
LAPACK from OpenBLAS, ``blas.py``; the pool, ``pool.py``; callbacks), glibc's vector math
library (libmvec), and the process's own (libc's).

``host()`` describes the machine once per process; ``Target.key()`` is what a cache key
needs (object code built for one CPU can SIGILL on another).
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import json
import os
import sys
import threading
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import objload
from .blas import bind_libraries, blas_addresses, lapack_addresses

if TYPE_CHECKING:
    import llvmlite.binding as llvm

# CPython/NumPy ABI facts the array entry relies on (checked at import by the runtime):
# byte offsets of PyArrayObject's data, nd, dimensions and flags, and the flag bits
# C_CONTIGUOUS | ALIGNED.
ARRAY_ABI = {"data": 16, "nd": 24, "dims": 32, "flags": 64, "need": 0x1 | 0x100}
_lock = threading.Lock()
_ready = False


class Target:
    """What code generation needs to know about the host. Immutable, compared and hashed
    by its fields (a plain class: creating it as a frozen dataclass cost every new
    process ~1 ms on its first cache hit)."""

    __slots__ = ("triple", "cpu", "features", "vector_bits", "mvec_isas", "blas", "lapack",
                 "threads", "llvm_version", "llvmlite_version")
    triple: str
    cpu: str
    features: str
    vector_bits: int  # widest vector registers: 512 (AVX-512), 256 (AVX2) or 128
    mvec_isas: tuple[str, ...]  # libmvec ISA letters usable here, widest first ("e", "d", "b")
    blas: bool  # yota_sgemm / yota_dgemm are bound
    lapack: bool  # the LAPACK_SYMBOLS are bound
    threads: int  # cores this process may use
    llvm_version: str  # LLVM's and llvmlite's versions (what built the description)
    llvmlite_version: str

    def __init__(self, triple: str, cpu: str, features: str, vector_bits: int,
                 mvec_isas: tuple[str, ...], blas: bool, lapack: bool, threads: int,
                 llvm_version: str = "", llvmlite_version: str = "") -> None:
        values = (triple, cpu, features, vector_bits, mvec_isas, blas, lapack, threads,
                  llvm_version, llvmlite_version)
        for name, value in zip(self.__slots__, values, strict=True):
            object.__setattr__(self, name, value)

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, n) for n in self.__slots__)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Target is immutable: cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Target is immutable: cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        return type(other) is Target and self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:  # copy and pickle by the fields
        return Target, self._fields()

    def __repr__(self) -> str:
        return "Target(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__) + ")"

    def machine(self, opt: int = 3) -> llvm.TargetMachine:
        """A fresh target machine (an MCJIT engine takes ownership of the one it gets)."""
        init()
        import llvmlite.binding as llvm

        t = llvm.Target.from_triple(self.triple)
        return t.create_target_machine(cpu=self.cpu, features=self.features, opt=opt,
                                       codemodel="jitdefault")

    def key(self) -> dict[str, Any]:
        """The target's part of a cache key (with the NumPy array field offsets the
        array entry point reads)."""
        return {"triple": self.triple, "cpu": self.cpu, "features": self.features,
                "llvm": self.llvm_version, "llvmlite": self.llvmlite_version,
                "mvec": list(self.mvec_isas),
                "blas": self.blas, "lapack": self.lapack, "array_abi": dict(ARRAY_ABI)}


def init() -> None:
    """Import llvmlite's binding and initialize LLVM's native target once
    (``llvm.initialize()`` is gone in llvmlite 0.50), with the external symbols bound
    for MCJIT (``bind_symbol`` binds later ones in both loaders). Loading cached code
    with ``objload`` needs none of it."""
    global _ready
    if _ready:
        return
    with _lock:
        if not _ready:
            import llvmlite.binding as llvm

            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            llvm.initialize_native_asmparser()  # inline assembly (the pool's pause)
            name = _mvec_name()
            if name is not None:
                llvm.load_library_permanently(name)
            bind_libraries()
            with objload._lock:
                for sym, addr in objload.SYMBOLS.items():
                    llvm.add_symbol(sym, addr)
            _ready = True


def bind_symbol(name: str, addr: int) -> None:
    """Bind ``name`` to ``addr`` for generated code, in both loaders (objload's table,
    and LLVM's once it is initialized)."""
    with _lock:
        objload.bind(name, addr)
        if _ready:
            import llvmlite.binding as llvm

            llvm.add_symbol(name, addr)


def resolve(name: str) -> int | None:
    """The address an external symbol of generated code binds to, as MCJIT finds it: the
    bound names, then libmvec, then the process's global symbols (libc, libm)."""
    addr = objload.SYMBOLS.get(name)
    if addr is not None:
        return addr
    if name.startswith("_ZGV"):
        lib = _mvec()
        if lib is not None:
            with contextlib.suppress(AttributeError):
                return ctypes.cast(lib[name], ctypes.c_void_p).value
    return objload.process_symbol(name)


@cache
def host() -> Target:
    """The host, described once per process: from the memo of an earlier process on the
    same machine and llvmlite (``HOST_MEMO``) when there is one, else asked of LLVM."""
    desc = _host_description()
    flat = desc["features"]
    has = {f[1:] for f in flat.split(",") if f.startswith("+")}
    bits = 512 if "avx512f" in has else 256 if "avx2" in has else 128
    isas = tuple(i for i, need in (("e", "avx512f"), ("d", "avx2"), ("b", "sse4.1"))
                 if need in has and _mvec() is not None)
    try:
        ncpu = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - non-Linux
        ncpu = os.cpu_count() or 1
    bind_libraries()
    return Target(desc["triple"], desc["cpu"], flat, bits, isas, blas_addresses() is not None,
                  lapack_addresses() is not None, max(1, min(ncpu, 8)), desc["llvm"],
                  desc["llvmlite"])


# -- the host description without LLVM ------------------------------------------------------
# Asking LLVM for the host (triple, CPU name, features) means importing llvmlite's binding,
# which costs a new process more than loading a cached program. What LLVM answers is a
# function of the CPU and of the llvmlite build, so it is kept in the object cache
# (``jit.set_object_cache``) under a fingerprint of both: the first processor's entry of
# /proc/cpuinfo (vendor, family, model, stepping, microcode, feature flags: the kernel
# lists only features it enabled) without the lines that change while running, and the
# path, size, modification time and inode of llvmlite's shared library and version file.
# A different CPU or llvmlite is a different fingerprint, so LLVM is asked again.
HOST_MEMO = "host-{}.json"
_VOLATILE = ("cpu mhz", "bogomips", "processor", "apicid", "initial apicid", "core id",
             "physical id", "siblings", "cpu cores")


def _fingerprint() -> str | None:
    """The fingerprint of this CPU and llvmlite build, or None where it cannot be taken
    (no /proc/cpuinfo, llvmlite not found)."""
    if sys.platform != "linux":
        return None
    try:
        with open("/proc/cpuinfo", "rb") as f:
            head = f.read(16384).decode("utf-8", "replace")
        import importlib.util

        spec = importlib.util.find_spec("llvmlite")
        if spec is None or not spec.submodule_search_locations:
            return None
        root = Path(list(spec.submodule_search_locations)[0])
        files = [root / "_version.py",  # (listdir, not Path.glob: no pattern to compile)
                 *sorted(root / "binding" / n for n in os.listdir(root / "binding")
                         if n.startswith("libllvmlite"))]
        stats = [[str(p), st.st_size, st.st_mtime_ns, st.st_ino]
                 for p in files for st in [os.stat(p)]]
    except OSError:
        return None
    first = head.split("\n\n", 1)[0].splitlines()
    cpu = [ln for ln in first if ln.split(":", 1)[0].strip().lower() not in _VOLATILE]
    if len(stats) < 2 or not any(ln.lower().startswith(("flags", "features")) for ln in cpu):
        return None
    data = json.dumps([os.uname().machine, cpu, stats], sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()[:32]


def _memo_file() -> Path | None:
    from .objcache import object_cache_dir

    d = object_cache_dir()
    fp = _fingerprint() if d is not None else None
    return None if d is None or fp is None else d / HOST_MEMO.format(fp)


def _ask_llvm() -> dict[str, str]:
    init()
    import llvmlite
    import llvmlite.binding as llvm

    return {"triple": llvm.get_process_triple(), "cpu": llvm.get_host_cpu_name(),
            "features": llvm.get_host_cpu_features().flatten(),
            "llvm": ".".join(map(str, llvm.llvm_version_info)),
            "llvmlite": llvmlite.__version__}


def _host_description() -> dict[str, str]:
    from .objcache import read_record, write_record

    memo = _memo_file()
    if memo is not None:
        rec = read_record(memo)
        if rec is not None and all(isinstance(rec.get(k), str) for k in
                                   ("triple", "cpu", "features", "llvm", "llvmlite")):
            return {k: rec[k] for k in ("triple", "cpu", "features", "llvm", "llvmlite")}
    desc = _ask_llvm()
    if memo is not None:
        write_record(memo, desc)
    return desc


@cache
def _mvec_loaded() -> tuple[str, ctypes.CDLL] | None:
    """glibc's libmvec (its name and handle), or None."""
    for k, name in enumerate(("libmvec.so.1", None)):
        if k:  # ctypes.util's search runs programs (ldconfig, gcc): only if needed
            from ctypes.util import find_library

            name = find_library("mvec")
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
            lib._ZGVbN4v_expf  # noqa: B018 - probe one symbol
            return name, lib
        except (OSError, AttributeError):
            continue
    return None


def _mvec() -> ctypes.CDLL | None:
    """glibc's libmvec, whose symbols generated code calls, or None."""
    found = _mvec_loaded()
    return None if found is None else found[1]


def _mvec_name() -> str | None:
    found = _mvec_loaded()
    return None if found is None else found[0]


def mvec_has(symbol: str) -> bool:
    lib = _mvec()
    return lib is not None and hasattr(lib, symbol)
