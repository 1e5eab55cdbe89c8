"""A CPU stand-in for a CUDA device, for testing the backend on machines without a GPU.

The generated CUDA C is compiled as C++ by the host compiler (``g++``) against a small
header that supplies CUDA's built-ins: a block's threads run one after another on the
calling thread when the kernel never synchronizes them, else as fibers (``__syncthreads``
waits at the block's barrier, warp shuffles exchange through per-warp slots and wait at
the warp's barrier; a barrier lets its waiters go when its last thread arrives), blocks
run one after another, and ``__shared__`` variables are statics. Memory is host memory (NumPy arrays), matrix products are NumPy's.

It checks what the backend decides and renders (schedules, index arithmetic, memory plan,
reductions across warps and blocks, two-stage reductions, failure codes) against the
interpreter. It does not check what only a GPU shows: CUDA's math library (its ulps),
the memory model, speed. Use ``EmuDevice(Config(block=64, ...))``: a small block keeps
thread counts low and still has two warps.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from .kernel import Config
from .nvrtc import CudaUnavailable

HEADER = r"""
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <mutex>
#include <sys/mman.h>
#include <ucontext.h>
#include <vector>
struct dim3 { unsigned x = 1, y = 1, z = 1; };
static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static
// A block whose threads synchronize runs as fibers on the calling thread: a thread runs
// until it waits at a barrier (the block's, or its warp's for a shuffle) or ends; a barrier
// makes its waiters runnable when its last participant arrives; ended threads leave it.
struct yemu_bar { unsigned expected = 0, arrived = 0; std::vector<unsigned> waiters; };
struct yemu_fiber { ucontext_t ctx; int state = 0; };  // 0 run, 1 wait, 2 end
struct yemu_block {
  std::vector<yemu_fiber> fibers;
  ucontext_t sched;
  yemu_bar bar;
  std::vector<yemu_bar> warps;
  unsigned cur = 0;
  uint64_t xchg[1024];
};
static thread_local yemu_block* yemu_cur;
static std::mutex yemu_mu;  // atomics (launches may run in several threads)
// fibers' stacks, 1 MiB each below a guard page (an overflow faults, it does not write into
// other memory), mapped once per calling thread and reused by its later launches
static const size_t YEMU_STACK = 1 << 20, YEMU_GUARD = 1 << 12;
static thread_local std::vector<char*> yemu_stacks;
static char* yemu_stack(unsigned t) {
  while (yemu_stacks.size() <= t) {
    void* p = mmap(nullptr, YEMU_STACK + YEMU_GUARD, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    mprotect(p, YEMU_GUARD, PROT_NONE);  // stacks grow down, toward it
    yemu_stacks.push_back((char*)p + YEMU_GUARD);
  }
  return yemu_stacks[t];
}
static void yemu_release(yemu_block* b, yemu_bar& w) {
  if (w.arrived < w.expected) return;
  for (unsigned i : w.waiters) b->fibers[i].state = 0;
  w.waiters.clear();
  w.arrived = 0;
}
static void yemu_wait(yemu_bar& w) {
  yemu_block* b = yemu_cur;
  const unsigned me = b->cur;
  ++w.arrived;
  w.waiters.push_back(me);
  b->fibers[me].state = 1;
  yemu_release(b, w);
  swapcontext(&b->fibers[me].ctx, &b->sched);
}
static inline void __syncthreads() { yemu_wait(yemu_cur->bar); }
template <class T> static inline T __shfl_down_sync(unsigned, T v, int d) {
  const int t = threadIdx.x, lane = t & 31;
  yemu_bar& w = yemu_cur->warps[t >> 5];
  memcpy(&yemu_cur->xchg[t], &v, sizeof(T));
  yemu_wait(w);
  T r = v;
  if (lane + d < 32) memcpy(&r, &yemu_cur->xchg[t + d], sizeof(T));
  yemu_wait(w);
  return r;
}
static inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
static inline double __longlong_as_double(long long x) { double f; memcpy(&f, &x, 8); return f; }
#define __expf expf
#define __logf logf
#define __log2f log2f
#define __sinf sinf
#define __cosf cosf
#define __tanf tanf
#define __powf powf
template <class T> static inline T atomicAdd(T* p, T v) {
  std::lock_guard<std::mutex> g(yemu_mu); T o = *p; *p = o + v; return o;
}
static inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long c,
                                           unsigned long long v) {
  std::lock_guard<std::mutex> g(yemu_mu); unsigned long long o = *p; if (o == c) *p = v; return o;
}
"""

MAX_ARGS = 64  # kernel parameters the launcher passes (a fused kernel may take dozens)
LAUNCHER = r"""
typedef uint64_t u64;
static void yemu_call(void* f, int n, const u64* a) {
  switch (n) {
  case 0: ((void (*)())f)(); break;
  case 1: ((void (*)(u64))f)(a[0]); break;
  case 2: ((void (*)(u64, u64))f)(a[0], a[1]); break;
  case 3: ((void (*)(u64, u64, u64))f)(a[0], a[1], a[2]); break;
  case 4: ((void (*)(u64, u64, u64, u64))f)(a[0], a[1], a[2], a[3]); break;
  case 5: ((void (*)(u64, u64, u64, u64, u64))f)(a[0], a[1], a[2], a[3], a[4]); break;
  case 6: ((void (*)(u64, u64, u64, u64, u64, u64))f)(a[0], a[1], a[2], a[3], a[4], a[5]); break;
  case 7: ((void (*)(u64, u64, u64, u64, u64, u64, u64))f)(a[0], a[1], a[2], a[3], a[4], a[5], a[6]); break;
  case 8: ((void (*)(u64, u64, u64, u64, u64, u64, u64, u64))f)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]); break;
  default: {
#define U8 u64, u64, u64, u64, u64, u64, u64, u64
    typedef void (*F64)(U8, U8, U8, U8, U8, U8, U8, U8);
#undef U8
    u64 b[64] = {0};
    for (int i = 0; i < n && i < 64; ++i) b[i] = a[i];
#define B8(k) b[k], b[k + 1], b[k + 2], b[k + 3], b[k + 4], b[k + 5], b[k + 6], b[k + 7]
    ((F64)f)(B8(0), B8(8), B8(16), B8(24), B8(32), B8(40), B8(48), B8(56));
#undef B8
  }
  }
}
extern "C" int yemu_launch(void* f, int n, const u64* a, unsigned gx, unsigned gy, unsigned gz,
                           unsigned bx, int serial) {
  gridDim = {gx, gy, gz};
  blockDim = {bx, 1, 1};
  if (serial) {  // no barrier, no warp exchange: one thread after another is a valid schedule
    for (unsigned z = 0; z < gz; ++z)
      for (unsigned y = 0; y < gy; ++y)
        for (unsigned x = 0; x < gx; ++x)
          for (unsigned t = 0; t < bx; ++t) {
            threadIdx = {t, 0, 0};
            blockIdx = {x, y, z};
            yemu_call(f, n, a);
          }
    return 0;
  }
  static thread_local void* yemu_f;
  static thread_local int yemu_n;
  static thread_local const u64* yemu_a;
  yemu_f = f; yemu_n = n; yemu_a = a;
  for (unsigned z = 0; z < gz; ++z)
    for (unsigned y = 0; y < gy; ++y)
      for (unsigned x = 0; x < gx; ++x) {
        yemu_block blk;
        blk.fibers.resize(bx);
        blk.bar.expected = bx;
        for (unsigned w = 0; w < (bx + 31) / 32; ++w) {
          blk.warps.emplace_back();
          blk.warps.back().expected = bx - 32 * w < 32 ? bx - 32 * w : 32;
        }
        yemu_cur = &blk;
        blockIdx = {x, y, z};
        for (unsigned t = 0; t < bx; ++t) {
          yemu_fiber& fb = blk.fibers[t];
          char* stack = yemu_stack(t);
          if (!stack) return 2;
          getcontext(&fb.ctx);
          fb.ctx.uc_stack.ss_sp = stack;
          fb.ctx.uc_stack.ss_size = YEMU_STACK;
          fb.ctx.uc_link = &blk.sched;
          makecontext(&fb.ctx, (void (*)())+[] {
            yemu_block* b = yemu_cur;
            yemu_call(yemu_f, yemu_n, yemu_a);
            const unsigned me = b->cur;  // ended: it leaves its barriers
            b->fibers[me].state = 2;
            --b->bar.expected;
            yemu_release(b, b->bar);
            yemu_bar& w = b->warps[me >> 5];
            --w.expected;
            yemu_release(b, w);
          }, 0);
        }
        for (bool ran = true; ran;) {
          ran = false;
          for (unsigned t = 0; t < bx; ++t) {
            if (blk.fibers[t].state != 0) continue;
            ran = true;
            blk.cur = t;
            threadIdx = {t, 0, 0};
            swapcontext(&blk.sched, &blk.fibers[t].ctx);
          }
        }
        for (auto& fb : blk.fibers)
          if (fb.state != 2) return 1;  // threads left waiting at a barrier: a deadlock
      }
  return 0;
}
"""


def emulation_available() -> str | None:
    """None if the emulator can run here, else why not."""
    if shutil.which(os.environ.get("CXX", "g++")) is None:
        return "no C++ compiler (g++) to build the CPU emulation of the kernels"
    return None


# what makes a block's threads wait for each other (the helpers that reduce over a block or
# a warp use them): a kernel without any runs its threads one after another, not as threads
_SYNC = ("__syncthreads", "__shfl", "y_block_reduce", "y_warp_reduce")
_KERNEL = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(")


def _serial_kernels(source: str, names: Sequence[str]) -> dict[str, bool]:
    """For each kernel of ``source`` among ``names``: whether its text (to the next
    kernel) is free of block and warp synchronization."""
    found = list(_KERNEL.finditer(source))
    out = {}
    for i, m in enumerate(found):
        if m.group(1) in names:
            end = found[i + 1].start() if i + 1 < len(found) else len(source)
            out[m.group(1)] = not any(t in source[m.start():end] for t in _SYNC)
    return out


class _Lib:
    def __init__(self, path: str) -> None:
        self.lib = ctypes.CDLL(path)
        self.launch = self.lib.yemu_launch
        self.launch.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_uint64),
                                *[ctypes.c_uint] * 4, ctypes.c_int]
        self.addr: dict[str, int] = {}

    def function(self, name: str) -> int:
        if name not in self.addr:
            self.addr[name] = ctypes.cast(getattr(self.lib, name), ctypes.c_void_p).value or 0
        return self.addr[name]


class EmuDevice:
    """The device interface of ``runtime.CupyDevice``, on the CPU (see the module doc).

    ``max_blocks`` caps a launch's blocks along x (grid-stride loops make any grid
    correct; a small cap keeps runs fast and exercises the loops)."""

    name = "emulated"

    def __init__(self, cfg: Config | None = None, max_blocks: int = 2,
                 cache_dir: str | None = None) -> None:
        reason = emulation_available()
        if reason:
            raise CudaUnavailable(reason)
        self.cfg = cfg or Config(block=64, target_blocks=4, max_grid=4)
        self.max_blocks = max_blocks
        self.dir = cache_dir or tempfile.mkdtemp(prefix="yota-emu-")
        if cache_dir is None:
            atexit.register(shutil.rmtree, self.dir, True)
        self.libs: list[tuple[set[str], _Lib]] = []
        self.serial: dict[str, bool] = {}  # kernel -> its threads may run one after another
        self.launches = 0

    def key(self) -> dict[str, Any]:
        return {"arch": "emulated", "config": self.cfg.key()}

    # -- code -------------------------------------------------------------------------------
    def build(self, source: str, names: Sequence[str]) -> _Lib:
        """Compile ``source`` (a module's CUDA C, or several modules' kernels joined)."""
        text = HEADER + source + LAUNCHER
        h = hashlib.sha1(text.encode()).hexdigest()[:20]
        path = os.path.join(self.dir, f"k{h}.so")
        if not os.path.exists(path):
            src = os.path.join(self.dir, f"k{h}.cpp")
            with open(src, "w") as f:
                f.write(text)
            cmd = [os.environ.get("CXX", "g++"), "-std=c++20", "-O0", "-shared", "-fPIC",
                   "-pthread", "-w", "-o", path + ".tmp", src]
            res = subprocess.run(cmd, capture_output=True, text=True)
            if res.returncode:
                raise RuntimeError(f"emulation build failed:\n{res.stderr[-6000:]}")
            os.replace(path + ".tmp", path)
        lib = _Lib(path)
        self.libs.append((set(names), lib))
        self.serial.update(_serial_kernels(source, names))
        return lib

    def load(self, source: str, names: Sequence[str]) -> Any:
        for have, lib in self.libs:
            if set(names) <= have:
                return lib
        return self.build(source, names)

    def function(self, handle: _Lib, name: str) -> tuple[_Lib, int, bool]:
        return handle, handle.function(name), self.serial.get(name, False)

    def stream(self) -> None:
        return None

    def launch(self, f: tuple[_Lib, int, bool], grid: tuple[int, int, int],
               block: tuple[int, int, int], args: list[int], stream: Any) -> None:
        self.launches += 1
        if len(args) > MAX_ARGS:
            raise CudaUnavailable(f"the CPU emulation passes at most {MAX_ARGS} kernel "
                                  f"arguments; this kernel takes {len(args)}")
        lib, addr, serial = f
        arr = (ctypes.c_uint64 * max(1, len(args)))(*args)
        gx = min(grid[0], self.max_blocks)
        rc = lib.launch(addr, len(args), arr, gx, grid[1], grid[2], block[0], int(serial))
        if rc == 2:
            raise RuntimeError("emulated kernel: no memory for its threads' stacks")
        if rc:
            raise RuntimeError("emulated kernel: threads of a block were left waiting at a "
                               "barrier that the others never reached (a deadlock on a GPU)")

    # -- memory -------------------------------------------------------------------------------
    def empty(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        return np.empty(shape, dtype)

    def address(self, a: np.ndarray) -> int:
        return int(a.__array_interface__["data"][0])

    def memset(self, addr: int, nbytes: int) -> None:
        if nbytes:
            ctypes.memset(addr, 0, nbytes)

    def view(self, addr: int, shape: tuple[int, ...], strides: tuple[int, ...],
             dtype: np.dtype, owner: Any = None) -> np.ndarray:
        span = max(1, np.dtype(dtype).itemsize + sum((d - 1) * s for d, s in
                                                      zip(shape, strides, strict=True) if d))
        buf = (ctypes.c_char * span).from_address(addr)
        return np.ndarray(shape, dtype, buffer=memoryview(buf), strides=strides)

    def matmul(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        np.matmul(a, b, out=out)

    def linalg(self, name: str, attrs: dict[str, Any], ins: list[np.ndarray],
               outs: list[np.ndarray]) -> None:
        """A LAPACK-level op by its NumPy reference (``np.linalg`` raises NumPy's
        ``LinAlgError``, as ``cupyx.errstate(linalg="raise")`` does on a device)."""
        from yota.ir.ops import get_opdef

        res = get_opdef(name).impl(*ins, **attrs)
        for o, r in zip(outs, res if len(outs) > 1 else [res], strict=True):
            o[...] = r

    def read(self, addr: int, nbytes: int) -> bytes:
        return ctypes.string_at(addr, nbytes)

    def upload(self, a: np.ndarray) -> np.ndarray:
        return np.array(a, copy=True, order="C")

    def synchronize(self) -> None:
        pass

    def input(self, a: Any) -> np.ndarray:
        """Host arrays; objects with ``__cuda_array_interface__`` (the "device" memory is
        host memory here) are read in place."""
        cai = getattr(a, "__cuda_array_interface__", None)
        if cai is not None and type(a) is not np.ndarray:
            shape, dt = tuple(cai["shape"]), np.dtype(cai["typestr"])
            strides = cai.get("strides")
            if strides is None:
                strides = tuple(np.empty(shape, dt).strides) if shape else ()
            return self.view(int(cai["data"][0]), shape, tuple(strides), dt, owner=a)
        return np.asarray(a)

    def is_array(self, a: Any) -> bool:
        return type(a) is np.ndarray

    def contiguous(self, a: np.ndarray, dtype: np.dtype) -> np.ndarray:
        return np.ascontiguousarray(a, dtype=dtype)
