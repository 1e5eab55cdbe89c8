"""Compile feedback: how long each phase of a compile takes, one log line per compile, and
a notice when a compile runs long.

A compile (the first ``yota.grad`` or ``yota.compile`` call for a signature; ``yota-ir``
with ``--timings``) opens a ``Record`` with ``compiling``; each stage times itself where
it runs with ``phase(name)``, so a new stage is timed by one ``with`` line. The phases are
the stages' own names: ``trace``, ``to_ir``, ``vjp``, ``passes`` (one sub-phase per pass),
``lower`` (the backend), ``codegen`` (LLVM O3 and object code: the llvm backend marks
where its lowering ends through its ``on_phase`` hook), ``cache`` (``key``, ``load``,
``store``), ``run`` (the first call of the program just built).

When the compile ends, one line goes to the ``yota.compile`` logger at INFO::

    yota: compiled loss (grad, llvm): 1,234 ops traced -> 456 ops; trace 210 ms,
    to_ir 50 ms, vjp 30 ms, passes 400 ms (fuse 310 ms), lower 120 ms, codegen 780 ms,
    run 2.1 ms; total 1.62 s

(one line; in parentheses the slowest part of a phase that has parts), and at DEBUG a
second line with every part. ``YOTA_LOG=compile`` prints it on stderr without any
``logging`` configuration. A compile still running after ``YOTA_COMPILE_NOTICE_S``
seconds (default 2; ``0`` or ``off``: never) says so once, as a WARNING of the same
logger (which Python prints on stderr when nothing is configured)::

    yota: still compiling loss (grad, llvm): 12,000 ops traced, in fuse (passes), 2.0 s
    so far; its phase times follow when it is done

and its summary line then comes at WARNING too, so whoever saw the notice sees the end.
The notice comes from one watcher thread per process, not from phase boundaries: a
boundary check could not speak during one long phase (30 s in one pass, or in LLVM),
which is when it matters; the thread wakes only when a compile's notice time comes.

Cost: a phase outside any compile is a thread-local lookup; inside, two clock reads and
a list append. The log line is formatted only when someone listens.

>>> with compiling("loss", "grad", "llvm") as rec:
...     with phase("trace"):
...         pass
...     with phase("passes.fuse"):
...         pass
>>> [name for name, _ in rec.totals()]
['trace', 'passes', 'passes.fuse']
>>> summary(rec).startswith("yota: compiled loss (grad, llvm): trace ")
True
"""

from __future__ import annotations

import gc
import heapq
import itertools
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from time import perf_counter
from typing import Any

LOGGER = "yota.compile"
NOTICE_S = 2.0  # default of YOTA_COMPILE_NOTICE_S


class Record:
    """The phases of one compile: ``entries`` are ``[dotted phase path, seconds]`` in the
    order the phases began; ``traced`` and ``ops`` the op counts of the traced and of the
    compiled program (None until known); ``cache``: ``"loaded"`` (the whole program came
    from the on-disk cache), ``"object"`` (its object code did) or None."""

    def __init__(self, name: str, kind: str = "", backend: str = "") -> None:
        self.name, self.kind, self.backend = name, kind, backend
        self.start = perf_counter()
        self.total: float | None = None
        self.entries: list[list[Any]] = []
        self.stack: list[tuple[int, float]] = []  # (entry index, start) of the open phases
        self.current = ""  # the innermost open phase (read by the notice thread)
        self.traced: int | None = None
        self.ops: int | None = None
        self.cache: str | None = None
        self.quiet = False  # not a compile after all (nothing is logged)
        self.noticed = False
        self.lock = threading.Lock()

    def push(self, name: str) -> None:
        parent = self.entries[self.stack[-1][0]][0] + "." if self.stack else ""
        self.entries.append([parent + name, 0.0])
        self.stack.append((len(self.entries) - 1, perf_counter()))
        self.current = parent + name

    def pop(self) -> None:
        i, t0 = self.stack.pop()
        self.entries[i][1] = perf_counter() - t0
        self.current = self.entries[self.stack[-1][0]][0] if self.stack else ""

    def split(self, name: str) -> None:
        """End the innermost open phase here; a sibling ``name`` runs on in its place."""
        if not self.stack:
            return
        self.pop()
        self.push(name)

    def elapsed(self) -> float:
        return perf_counter() - self.start if self.total is None else self.total

    def totals(self) -> list[tuple[str, float]]:
        """Seconds per phase path, repeats summed, in the order the phases first began;
        a group that was never timed itself (``cache`` of ``cache.key``) is the sum of
        its parts."""
        out: dict[str, float] = {}
        timed: set[str] = set()
        for path, secs in self.entries:
            parts = path.split(".")
            for k in range(1, len(parts)):
                out.setdefault(".".join(parts[:k]), 0.0)
            out[path] = out.get(path, 0.0) + secs
            timed.add(path)
        for path in sorted(set(out) - timed, key=lambda p: -p.count(".")):
            out[path] = sum(s for p, s in out.items() if p.rpartition(".")[0] == path)
        return list(out.items())

    def notice(self) -> None:
        """Say once that this compile is still running (the watcher thread calls it)."""
        with self.lock:
            if self.total is not None or self.noticed or self.quiet:
                return
            self.noticed = True
            _logger().warning("%s", notice_text(self))


# -- the current compile of this thread ---------------------------------------------------------
_local = threading.local()


def current() -> Record | None:
    """The compile this thread is running, if any."""
    return getattr(_local, "record", None)


class _Phase:
    __slots__ = ("rec", "name")

    def __init__(self, rec: Record, name: str) -> None:
        self.rec, self.name = rec, name

    def __enter__(self) -> None:
        self.rec.push(self.name)

    def __exit__(self, *exc: object) -> None:
        self.rec.pop()


class _NoPhase:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_PHASE = _NoPhase()


def phase(name: str) -> _Phase | _NoPhase:
    """Time the ``with`` block as phase ``name`` of the current compile (nested in the
    phase open around it; a dotted name ``"cache.key"`` is a part of a group). Outside a
    compile it does nothing.

    >>> with phase("trace"):  # no compile is running: nothing is recorded
    ...     pass
    """
    rec = getattr(_local, "record", None)
    return _NO_PHASE if rec is None else _Phase(rec, name)


def importing(module: str) -> _Phase | _NoPhase:
    """Phase ``import`` around the first import of ``module`` (a compile's first use of
    a stage imports it; that costs the first compile of a process only)."""
    return _NO_PHASE if module in sys.modules else phase("import")


def split(name: str) -> None:
    """End phase ``lower`` of this thread's compile here and go on as phase ``name``: a
    backend's ``on_phase`` hook, marking where its lowering ends inside its ``compile``.
    A backend compile run elsewhere (a profiled variant built during a first run) splits
    nothing."""
    rec = getattr(_local, "record", None)
    if rec is not None and rec.current.rpartition(".")[2] == "lower":
        rec.split(name)


def hook(mod: Any) -> None:
    """Let backend module ``mod`` mark its phase boundaries (its ``on_phase`` hook)."""
    if getattr(mod, "on_phase", False) is None:
        mod.on_phase = split


def note(**facts: Any) -> None:
    """Set facts of the current compile (``traced=``, ``ops=``, ``cache=``)."""
    rec = getattr(_local, "record", None)
    if rec is not None:
        for k, v in facts.items():
            setattr(rec, k, v)


_last: list[Record] = []


def last() -> Record | None:
    """The last compile that finished (in any thread), for benchmarks and tests."""
    return _last[-1] if _last else None


@contextmanager
def compiling(name: Any, kind: str = "", backend: str | None = "") -> Iterator[Record]:
    """Record the compile run in the ``with`` block (``name``: a function or its name;
    ``kind``: ``"grad"``, ``"forward"``...; ``backend``: None for the default). Inside
    another compile of the same thread it joins that one (its phases nest under the
    phase open there). At the end the summary is logged (``summary``)."""
    rec = current()
    if rec is not None:
        yield rec
        return
    rec = Record(_name_of(name), kind, _backend_name(backend))
    _local.record = rec
    due = notice_seconds()
    if due is not None:
        _watcher.watch(rec, rec.start + due)
    _gc.hold()
    try:
        yield rec
    except BaseException:
        rec.quiet = True  # a compile that failed says so by its exception, not as compiled
        raise
    finally:
        _gc.release()
        _local.record = None
        _finish(rec)


class _GCPause:
    """Python's cyclic garbage collector paused while any compile runs. A compile makes
    a great many small objects (tape entries, IR values and ops) that live until it ends
    and hold no cycles worth collecting early; with the collector on, each collection of
    the oldest generation walks them all again (seconds for a trace of 100k ops). It is
    turned back on when the last compile ends, if it was on when the first began."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holds = 0
        self.was_enabled = False

    def hold(self) -> None:
        with self.lock:
            if self.holds == 0:
                self.was_enabled = gc.isenabled()
                gc.disable()
            self.holds += 1

    def release(self) -> None:
        with self.lock:
            self.holds -= 1
            if self.holds == 0 and self.was_enabled:
                gc.enable()


_gc = _GCPause()


def _name_of(f: Any) -> str:
    if isinstance(f, str):
        return f
    return str(getattr(f, "__name__", None) or type(f).__name__)


def _backend_name(backend: str | None) -> str:
    if backend is None:
        from yota.backends import DEFAULT_BACKEND

        return DEFAULT_BACKEND
    return backend


def _finish(rec: Record) -> None:
    with rec.lock:  # after a notice being written: the summary comes second
        rec.total = perf_counter() - rec.start
    _last[:] = [rec]
    if rec.quiet:
        return
    level = 30 if rec.noticed else 20  # logging.WARNING, logging.INFO
    if "compile" in log_topics():
        _stderr_handler()
    elif not rec.noticed and "logging" not in sys.modules:
        return  # nothing can listen: no line is formatted
    logger = _logger()
    if logger.isEnabledFor(level):
        logger.log(level, "%s", summary(rec))
    if logger.isEnabledFor(10):  # logging.DEBUG
        logger.debug("%s", detail(rec))


# -- settings ----------------------------------------------------------------------------------
def log_topics() -> set[str]:
    """``YOTA_LOG``: comma-separated topics printed on stderr without configuring
    ``logging``; ``compile`` is each compile's line."""
    raw = os.environ.get("YOTA_LOG", "")
    return {t.strip().lower() for t in raw.split(",") if t.strip()} if raw else set()


def notice_seconds() -> float | None:
    """``YOTA_COMPILE_NOTICE_S``: seconds after which a running compile says so (default
    ``NOTICE_S``, 2; ``0``, ``off`` or ``never``: no notice)."""
    raw = os.environ.get("YOTA_COMPILE_NOTICE_S", "").strip().lower()
    if not raw:
        return NOTICE_S or None
    if raw in ("off", "never", "no", "false"):
        return None
    try:
        secs = float(raw)
    except ValueError:
        secs = -1.0
    if not secs >= 0:  # (NaN too)
        if raw not in _warned:
            _warned.add(raw)
            _logger().warning("yota: YOTA_COMPILE_NOTICE_S=%r is not a number of seconds; "
                              "using %s", raw, NOTICE_S)
        return NOTICE_S
    return secs if 0 < secs < 1e9 else None


_warned: set[str] = set()


# -- logging -----------------------------------------------------------------------------------
def _logger() -> Any:
    import logging

    return logging.getLogger(LOGGER)


def _stderr_handler() -> None:
    """Print ``yota.compile``'s records on stderr at INFO (``YOTA_LOG=compile``), unless a
    handler the user configured takes them: each line shows once."""
    logger = _logger()
    if any(getattr(h, "yota_log", False) for h in logger.handlers):
        return
    import logging

    class Stderr(logging.StreamHandler):
        yota_log = True

        def __init__(self) -> None:
            super().__init__(sys.stderr)

        def emit(self, record: logging.LogRecord) -> None:
            self.stream = sys.stderr  # the current one (as logging's last resort does)
            if not _handled_elsewhere(logger, self, record.levelno):
                super().emit(record)

    logger.addHandler(Stderr())
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)


def _handled_elsewhere(logger: Any, mine: Any, level: int) -> bool:
    """Whether another handler on ``logger`` or where it propagates takes ``level``."""
    c = logger
    while c is not None:
        if any(h is not mine and level >= h.level for h in c.handlers):
            return True
        c = c.parent if c.propagate else None
    return False


# -- the printed forms -------------------------------------------------------------------------
def seconds(s: float) -> str:
    """``210 ms``, ``4.5 ms``, ``0.21 ms``, ``1.62 s``, ``12.3 s``, ``123 s``.

    >>> [seconds(x) for x in (0.00021, 0.0045, 0.21, 1.623, 12.34, 123.4)]
    ['0.21 ms', '4.5 ms', '210 ms', '1.62 s', '12.3 s', '123 s']
    """
    if s >= 100:
        return f"{s:.0f} s"
    if s >= 10:
        return f"{s:.1f} s"
    if s >= 1:
        return f"{s:.2f} s"
    ms = s * 1e3
    return f"{ms:.0f} ms" if ms >= 10 else f"{ms:.1f} ms" if ms >= 1 else f"{ms:.2f} ms"


def _what(rec: Record) -> str:
    how = ", ".join(x for x in (rec.kind, rec.backend) if x)
    return f"{rec.name} ({how})" if how else rec.name


def _counts(rec: Record) -> str:
    if rec.traced is None:
        return "" if rec.ops is None else f"{rec.ops:,} ops"
    more = f" -> {rec.ops:,} ops" if rec.ops is not None and rec.cache != "loaded" else ""
    return f"{rec.traced:,} ops traced{more}"


def summary(rec: Record) -> str:
    """The one line of a compile: what, its op counts, each phase, the total."""
    head = {"loaded": f"loaded {_what(rec)} from the cache",
            "object": f"compiled {_what(rec)}, its object code from the cache"}.get(
        rec.cache or "", f"compiled {_what(rec)}")
    rows = rec.totals()
    parts = []
    for path, secs in rows:
        if "." in path:
            continue
        kids = [(p, s) for p, s in rows if p.rpartition(".")[0] == path]
        top = max(kids, key=lambda r: r[1]) if kids else None
        more = f" ({top[0].rpartition('.')[2]} {seconds(top[1])})" if top else ""
        parts.append(f"{path} {seconds(secs)}{more}")
    total = rec.elapsed()
    other = total - sum(s for p, s in rows if "." not in p)
    if other >= 0.1 * total and other >= 1e-3:
        parts.append(f"other {seconds(other)}")
    counts = _counts(rec)
    return (f"yota: {head}: {counts + '; ' if counts else ''}{', '.join(parts)}; "
            f"total {seconds(total)}")


def detail(rec: Record) -> str:
    """Every part of every phase that has parts (the DEBUG line)."""
    rows = rec.totals()
    groups = [p for p, _ in rows if any(q.rpartition(".")[0] == p for q, _ in rows)]
    text = "; ".join(f"{g}: " + ", ".join(f"{p.rpartition('.')[2]} {seconds(s)}"
                                          for p, s in rows if p.rpartition(".")[0] == g)
                     for g in groups)
    return f"yota: phases of {_what(rec)}: {text or 'no phase has parts'}"


def notice_text(rec: Record) -> str:
    """The notice of a compile still running."""
    counts = _counts(rec)
    where = rec.current.split(".")
    now = f"in {where[-1]}" + (f" ({', '.join(where[:-1])})" if len(where) > 1 else "") \
        if where[0] else "between phases"
    return (f"yota: still compiling {_what(rec)}: {counts + ', ' if counts else ''}{now}, "
            f"{rec.elapsed():.1f} s so far; its phase times follow when it is done")


def table(rec: Record) -> str:
    """The phases as a table (``yota-ir ... --timings``): seconds and share of the total,
    the parts of a phase indented under it."""
    total = rec.elapsed()
    rows = rec.totals()
    other = total - sum(s for p, s in rows if "." not in p)
    lines = [(("  " * p.count(".")) + p.rpartition(".")[2], s) for p, s in rows]
    lines += [("(other)", max(other, 0.0)), ("total", total)]
    width = max(len(n) for n, _ in lines)
    counts = _counts(rec)
    out = [f"phases of {_what(rec)}{': ' + counts if counts else ''}"]
    out += [f"  {n:<{width}}  {s:9.4f} s  {100 * s / total if total else 0.0:5.1f}%"
            for n, s in lines]
    return "\n".join(out)


# -- the notice thread -------------------------------------------------------------------------
class _Watcher:
    """One daemon thread that wakes when a compile's notice time comes (started with the
    first compile, again in a forked child)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.heap: list[tuple[float, int, Record]] = []
        self.order = itertools.count()
        self.thread: threading.Thread | None = None

    def watch(self, rec: Record, at: float) -> None:
        with self.cond:
            heapq.heappush(self.heap, (at, next(self.order), rec))
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, name="yota-compile-notice",
                                               daemon=True)
                self.thread.start()
            elif self.heap[0][2] is rec:  # due before the one the thread waits for
                self.cond.notify()

    def _run(self) -> None:
        while True:
            self._due().notice()

    def _due(self) -> Record:
        with self.cond:
            while True:
                while self.heap and self.heap[0][2].total is not None:
                    heapq.heappop(self.heap)  # finished in time: nothing to say
                wait = self.heap[0][0] - perf_counter() if self.heap else None
                if wait is not None and wait <= 0:
                    return heapq.heappop(self.heap)[2]
                self.cond.wait(wait)


_watcher = _Watcher()


def _after_fork() -> None:
    """A forked child has no watcher thread: a new watcher starts one when needed."""
    global _watcher
    _watcher = _Watcher()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
