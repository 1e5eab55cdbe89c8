"""``--load N``: busy processes beside the timed workloads, to measure under CPU contention;
stopped when the block ends, however it ends, and gone with their parent."""

from __future__ import annotations

import atexit
import os
import subprocess
import sys

from bench.log import log

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
