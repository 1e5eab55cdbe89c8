"""``tools/bench.py --load N`` (``bench.load``): the busy processes run while the block
runs and are gone after it, whether it ends normally, by an exception or by
KeyboardInterrupt; a child whose parent dies exits by itself."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bench.cli import parse_args
from bench.load import BusyLoad
from support import ROOT

TOOLS = ROOT / "tools"


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _gone(pids: list[int], timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if not any(_running(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


pytestmark = pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")


def test_busy_processes_run_during_the_block_and_stop_after_it() -> None:
    with BusyLoad(2) as load:
        pids = [p.pid for p in load.procs]
        assert len(pids) == 2 and all(_running(p) for p in pids)
    assert _gone(pids) and load.procs == []


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_busy_processes_stop_on_an_exception(exc: type[BaseException]) -> None:
    pids: list[int] = []
    with pytest.raises(exc), BusyLoad(1) as load:
        pids = [p.pid for p in load.procs]
        raise exc("stop")
    assert pids and _gone(pids)


def test_zero_is_no_load() -> None:
    with BusyLoad(0) as load:
        assert load.procs == []


def test_a_spinner_exits_when_its_parent_is_killed() -> None:
    """A parent killed with SIGKILL runs no cleanup: its spinner exits by itself."""
    script = ("import time; from bench.load import BusyLoad; "
              "l = BusyLoad(1); l.__enter__(); print(l.procs[0].pid, flush=True); time.sleep(60)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(TOOLS), *filter(None, [os.environ.get("PYTHONPATH")])])}
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, env=env)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _running(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert _gone([child])
    finally:
        if parent.poll() is None:
            parent.kill()


def test_load_is_recorded_and_negative_is_refused() -> None:
    assert parse_args(["--load", "2"]).load == 2
    with pytest.raises(SystemExit):
        parse_args(["--load", "-1"])
