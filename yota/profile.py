"""Per-step profiling of compiled programs (AutoGrad.jl's ``AUTOGRAD_TIMER``, per step).

Inside ``with yota.profile() as p:``, every compiled program that runs (``yota.grad``,
``yota.compile``; backends interp, llvm and cuda) runs as its *profiled variant*: the same program with
the clock read around each step (a fused kernel, a matrix product, a LAPACK call, a
call, a guard, a copy), compiled the first time a program runs while profiling and kept
beside it (the normal program is not touched, so profiling costs nothing when off).
Steps are aggregated by the user's ``file:line`` and op, forward or backward as their
provenance says ("adjoint of %5 via rule mul" is the backward of the line that made %5).

    >>> import numpy as np, yota
    >>> f = lambda W, x: np.sum(np.tanh(W @ x))
    >>> W, x = np.ones((8, 8)), np.ones((8, 4))
    >>> with yota.profile() as p:
    ...     for _ in range(10):
    ...         _ = yota.grad(f, W, x)
    >>> print(p)  # doctest: +SKIP
    Yota profile: 10 calls of 1 program (llvm), 110.2 us in compiled programs
      calls     total      mean   share  phase     op              where
         10   38.1 us    3.8 us   34.6%  backward  matmul          <doctest>:1
    ...
    >>> p.chrome_trace("trace.json")  # doctest: +SKIP

The time a program's call spends outside its steps (argument checks, output arrays, the
native call itself) is the row ``(call)``, and redrawing its random numbers ``(random
draws)``. What ``yota.grad`` or a compiled function does around the program (flattening
the arguments, finding the variant, checking what the function read from outside, shaping
the gradients) is the row ``(yota.grad)`` (``(yota.compile)``), and a call that traced and
compiled counts in ``(trace and compile)``: so the table's total is the wall time of the
calls, not only of the compiled programs.
``YOTA_PROFILE=1`` profiles the whole process and prints the table at exit
(``YOTA_PROFILE_TRACE=FILE.json`` also writes the trace).
"""

from __future__ import annotations

import atexit
import inspect
import json
import os
import re
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from yota.backends import get_backend
from yota.ir.core import Function, Op
from yota.ir.to_json import value_names

from .lowering import to_ir
from .program import Program

__all__ = ["Profile", "Row", "profile"]

_plain_run = Program.run
_active: list[Profile] = []
_tls = threading.local()  # this thread's time in profiled programs (ns), for front_end
_lock = threading.Lock()
MAX_EVENTS = 200_000  # steps kept for the trace per profile (the table counts them all)
FOLD_EVERY = 256  # calls recorded before their times are added up


@dataclass
class Row:
    """One line of the table: a site (the user's ``where``, the ``op``, the ``phase``)
    and its time."""

    where: str
    op: str
    phase: str
    calls: int = 0
    total_ns: int = 0

    @property
    def mean_ns(self) -> float:
        return self.total_ns / self.calls if self.calls else 0.0


# -- steps: what each one is ------------------------------------------------------------------
_ADJOINT = re.compile(r"adjoint of (%\d+) via rule")
SHAPE_COPY = {"reshape", "transpose", "broadcast", "slice", "squeeze", "expand_dims",
              "flip", "diagonal", "strided_slice", "pad", "concatenate"}


def _locs(op: Op, fn: Function) -> list[str]:
    """Every provenance entry of ``op`` (a fused kernel: those of its body too)."""
    parts = [s.strip() for s in (op.loc or "").split(";")]
    body = fn.callees.get(op.attrs.get("callee", "")) if op.name == "fused" else None
    if body is not None:
        parts += [s.strip() for o in body.ops for s in (o.loc or "").split(";")]
    return list(dict.fromkeys(s for s in parts if s and s != "..."))


def _phase(locs: Sequence[str]) -> str:
    back = {s.startswith("adjoint of") for s in locs}
    return "mixed" if len(back) == 2 else "backward" if True in back else \
        "forward" if back else "-"


def _where(locs: Sequence[str], traced: dict[str, str]) -> str:
    """The user's lines of ``locs``: a backward entry stands for the line of the value
    whose adjoint it computes (``traced``: value name -> loc in the traced IR)."""
    lines: list[str] = []
    for s in locs:
        m = _ADJOINT.match(s)
        s = traced.get(m.group(1), s) if m else s
        for part in s.split(";"):
            part = part.strip()
            if part and part not in lines and not part.startswith("adjoint of"):
                lines.append(part)
    if not lines:
        return "-"
    files = {p.rpartition(":")[0] for p in lines}
    if len(files) == 1 and all(p.rpartition(":")[2].isdigit() for p in lines):
        lines.sort(key=lambda p: int(p.rpartition(":")[2]))
        text = lines[0] + "".join("," + p.rpartition(":")[2] for p in lines[1:4])
    else:
        text = "; ".join(lines[:3])
    return text + (",…" if len(lines) > 4 else "")


def _op_label(op: Op, fn: Function) -> str:
    if op.name == "fused":
        body = fn.callees.get(op.attrs.get("callee", ""))
        names = list(dict.fromkeys(o.name for o in body.ops if o.name not in
                                   ("broadcast", "const"))) if body is not None else []
        return "fused " + ",".join(names[:3]) + (",…" if len(names) > 3 else "")
    if op.name == "call":
        return f"call @{op.attrs.get('callee')}"
    if op.name in SHAPE_COPY:
        return f"copy ({op.name})"
    return op.name


def _traced_locs(program: Program) -> dict[str, str]:
    """Value name -> provenance of the op that made it, in the IR the tape lowered to
    (the names backward provenance refers to)."""
    try:
        fn = to_ir(program.tape)
    except Exception:  # noqa: BLE001 - labels only: the raw provenance is shown instead
        return {}
    names = value_names(fn)
    return {names[r]: op.loc for op in fn.ops for r in op.results if op.loc}


class Variant:
    """A program's profiled variant and what each of its steps is."""

    def __init__(self, program: Program, exe: Any) -> None:
        fn = program.fn
        self.exe = exe
        self.name = program.tape.fname
        self.backend = getattr(exe, "backend", "?")
        traced = _traced_locs(program)
        self.labels: list[tuple[str, str, str]] = []
        for i in exe.steps:
            if i < 0:
                self.labels.append(("-", "copy (outputs)", "-"))
                continue
            op = fn.ops[i]
            locs = _locs(op, fn)
            self.labels.append((_where(locs, traced), _op_label(op, fn), _phase(locs)))
        where = str(program.tape.loc) if program.tape.loc else f"{self.name}()"
        self.call_site = (where, f"(call) {self.name}", "-")
        self.draw_site = (where, f"(random draws) {self.name}", "forward")


_variants: weakref.WeakKeyDictionary[Any, Variant | None] = weakref.WeakKeyDictionary()


def _variant(program: Program) -> Variant | None:
    """The profiled variant of ``program`` (compiled on first use, kept while the program
    lives); None when its backend has none."""
    key = program.exe
    try:
        if key in _variants:
            return _variants[key]
    except TypeError:  # an executable that cannot be weakly referenced
        return None
    mod = get_backend(getattr(key, "backend", None))
    exe = None
    if "profile" in inspect.signature(mod.compile).parameters:
        device = getattr(key, "device", None)  # cuda: the device the program runs on
        exe = mod.compile(program.fn, profile=True, **({"device": device} if device else {}))
    variant = Variant(program, exe) if exe is not None and hasattr(exe, "timed") else None
    _variants[key] = variant
    return variant


def _profiled_run(self: Program, leaves: list[Any], *, traced_draws: bool = False,
                  captured: list[Any] | None = None) -> list[np.ndarray]:
    """``Program.run`` while a profile is active: what ``run`` does, on the variant."""
    profs = list(_active)
    variant = _variant(self) if profs else None
    if variant is None:
        t0 = time.monotonic_ns()
        try:
            return _plain_run(self, leaves, traced_draws=traced_draws, captured=captured)
        finally:
            t1 = time.monotonic_ns()
            _tls.program_ns = getattr(_tls, "program_ns", 0) + (t1 - t0)
            for p in profs:
                p._record_whole(self, t0, t1)
    if self.tape.captured:
        leaves = leaves + (captured if captured is not None else
                           [obj for obj, _, _ in self.captured])
    draws_ns = 0
    if self.tape.randoms:
        t0 = time.monotonic_ns()
        leaves = leaves + (self.tape_draws() if traced_draws else self.tape.draws.replay())
        draws_ns = time.monotonic_ns() - t0
    outs, times = variant.exe.timed(*leaves)
    _tls.program_ns = getattr(_tls, "program_ns", 0) + (times.end - times.start) + draws_ns
    tid = threading.get_ident()
    for p in profs:
        p._record(variant, times, draws_ns, tid)
    return list(outs)


def front_end(api: str, f: Any, call: Callable[[], Any]) -> Any:
    """``call()`` (a ``yota.grad`` or compiled-function call while a profile is active),
    the time it spends outside compiled programs recorded as the row ``(api) name``
    (``(trace and compile) name`` when it traced)."""
    from .pipeline import stats

    before, traces = getattr(_tls, "program_ns", 0), stats.traces
    t0 = time.monotonic_ns()
    try:
        return call()
    finally:
        ns = time.monotonic_ns() - t0 - (getattr(_tls, "program_ns", 0) - before)
        code = getattr(getattr(f, "__func__", f), "__code__", None)
        where = f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}" if code else "-"
        name = getattr(f, "__name__", type(f).__name__)
        op = f"(trace and compile) {name}" if stats.traces != traces else f"({api}) {name}"
        for p in list(_active):
            p._record_front((where, op, "-"), ns)


def _install() -> None:
    """``Program.run`` is the profiled one while any profile is active (a class attribute
    swapped on start and stop: the normal path has no test for profiling)."""
    Program.run = _profiled_run if _active else _plain_run  # type: ignore[method-assign]


# -- the profile ------------------------------------------------------------------------------
class _Acc:
    """One variant's accumulated step times in one profile."""

    def __init__(self, variant: Variant) -> None:
        n = len(variant.labels)
        self.variant = variant
        self.totals = np.zeros(n, np.int64)
        self.counts = np.zeros(n, np.int64)
        self.calls = self.call_ns = self.steps_ns = self.draws_ns = 0


class Profile:
    """The step times of the compiled programs run while it is active.

    ``with yota.profile() as p:`` (or ``p.start()``/``p.stop()``); ``print(p)`` shows the
    table, ``p.rows()`` its lines, ``p.total_ns`` the time in compiled programs,
    ``p.chrome_trace(path)`` writes a Chrome/Perfetto trace, ``p.reset()`` forgets."""

    def __init__(self, *, max_events: int = MAX_EVENTS) -> None:
        self.max_events = max_events
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._accs: dict[int, _Acc] = {}
            self._pending: list[tuple[Variant, Any, int]] = []
            self._whole: dict[tuple[str, str, str], list[int]] = {}
            self._front: dict[tuple[str, str, str], list[int]] = {}
            self._events: list[tuple[Variant | None, Any, int, int]] = []
            self._nevents = 0
            self.origin = time.monotonic_ns()

    # -- activation ---------------------------------------------------------------------------
    def start(self) -> Profile:
        with _lock:
            if self not in _active:
                _active.append(self)
            _install()
        return self

    def stop(self) -> None:
        with _lock:
            if self in _active:
                _active.remove(self)
            _install()

    @property
    def active(self) -> bool:
        return self in _active

    def __enter__(self) -> Profile:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- recording ---------------------------------------------------------------------------
    def _record(self, variant: Variant, times: Any, draws_ns: int, tid: int) -> None:
        """One call: kept as it is and folded into the sums in batches (``_fold``)."""
        with self._lock:
            self._pending.append((variant, times, draws_ns))
            if self._nevents < self.max_events:
                self._events.append((variant, times, tid, draws_ns))
                self._nevents += len(times.starts) + 1
            if len(self._pending) >= FOLD_EVERY:
                self._fold()

    def _fold(self) -> None:
        """Add the pending calls to each variant's sums (under ``_lock``)."""
        by_variant: dict[int, list[tuple[Variant, Any, int]]] = {}
        for rec in self._pending:
            by_variant.setdefault(id(rec[0]), []).append(rec)
        self._pending = []
        for recs in by_variant.values():
            variant = recs[0][0]
            acc = self._accs.get(id(variant))
            if acc is None or acc.variant is not variant:
                acc = self._accs[id(variant)] = _Acc(variant)
            starts = np.stack([t.starts for _, t, _ in recs])
            ran = starts > 0
            durs = np.where(ran, np.stack([t.ends for _, t, _ in recs]) - starts, 0)
            acc.totals += durs.sum(axis=0)
            acc.counts += ran.sum(axis=0)
            acc.calls += len(recs)
            acc.call_ns += sum(t.end - t.start for _, t, _ in recs)
            acc.steps_ns += int(durs.sum())
            acc.draws_ns += sum(d for _, _, d in recs)

    def _record_front(self, key: tuple[str, str, str], ns: int) -> None:
        with self._lock:
            cell = self._front.setdefault(key, [0, 0])
            cell[0] += 1
            cell[1] += max(ns, 0)

    def _record_whole(self, program: Program, t0: int, t1: int) -> None:
        """A program without a profiled variant: its calls as one step."""
        where = str(program.tape.loc) if program.tape.loc else f"{program.tape.fname}()"
        key = (where, f"(program, not instrumented) {program.tape.fname}", "-")
        with self._lock:
            cell = self._whole.setdefault(key, [0, 0])
            cell[0] += 1
            cell[1] += t1 - t0

    # -- results -----------------------------------------------------------------------------
    def rows(self) -> list[Row]:
        """The table's lines, most time first."""
        agg: dict[tuple[str, str, str], Row] = {}

        def add(key: tuple[str, str, str], calls: int, ns: int) -> None:
            if calls:
                row = agg.setdefault(key, Row(*key))
                row.calls += calls
                row.total_ns += ns
        with self._lock:
            self._fold()
            for acc in self._accs.values():
                v = acc.variant
                for s, key in enumerate(v.labels):
                    add(key, int(acc.counts[s]), int(acc.totals[s]))
                add(v.call_site, acc.calls, acc.call_ns - acc.steps_ns)
                add(v.draw_site, acc.calls if acc.draws_ns else 0, acc.draws_ns)
            for key, (calls, ns) in [*self._whole.items(), *self._front.items()]:
                add(key, calls, ns)
        return sorted(agg.values(), key=lambda r: (-r.total_ns, r.where, r.op))

    @property
    def total_ns(self) -> int:
        """The time of the profiled calls: in compiled programs (and their random draws)
        and around them (``(yota.grad)``, ``(trace and compile)`` rows)."""
        return sum(r.total_ns for r in self.rows())

    @property
    def calls(self) -> int:
        """Program calls profiled."""
        with self._lock:
            self._fold()
            return sum(a.calls for a in self._accs.values()) + \
                sum(c for c, _ in self._whole.values())

    def by_phase(self) -> dict[str, int]:
        """Total nanoseconds per phase (forward, backward, mixed, ``-``: the runtime)."""
        out: dict[str, int] = {}
        for r in self.rows():
            out[r.phase] = out.get(r.phase, 0) + r.total_ns
        return out

    def __str__(self) -> str:
        return format_table(self)

    def __repr__(self) -> str:
        return f"<yota.Profile: {self.calls} calls, {_fmt_ns(self.total_ns)}>"

    def chrome_trace(self, path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
        """The recorded calls and steps as Chrome trace events (JSON that Perfetto and
        chrome://tracing open); written to ``path`` when given."""
        trace = chrome_events(self)
        if path is not None:
            with open(path, "w") as f:
                json.dump(trace, f)
        return trace


def profile(*, max_events: int = MAX_EVENTS) -> Profile:
    """A new ``Profile``: use it as ``with yota.profile() as p:``, then ``print(p)``.

    ``max_events``: the most steps kept for ``p.chrome_trace`` (the table counts all)."""
    return Profile(max_events=max_events)


# -- the table ------------------------------------------------------------------------------
def _fmt_ns(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.1f} {unit}" if ns / scale >= 100 else f"{ns / scale:.2f} {unit}"
    return f"{ns:.0f} ns"


def format_table(p: Profile, limit: int | None = None) -> str:
    """The table ``print(p)`` shows: calls, total, mean and share per site, most first."""
    rows = p.rows()
    total = sum(r.total_ns for r in rows)
    with p._lock:
        p._fold()
        progs = {id(a.variant): a.variant for a in p._accs.values()}
    backends = sorted({v.backend for v in progs.values()})
    nprog = len(progs) + len(p._whole)
    head = (f"Yota profile: {p.calls} calls of {nprog} program{'s' if nprog != 1 else ''}"
            f"{' (' + ', '.join(backends) + ')' if backends else ''}, "
            f"{_fmt_ns(total)} in all")
    if not rows:
        return head + "\n  (no compiled program ran while profiling)"
    opw = max(8, min(28, max(len(r.op) for r in rows)))
    lines = [head, f"  {'calls':>7}  {'total':>9}  {'mean':>9}  {'share':>6}  "
                   f"{'phase':<8}  {'op':<{opw}}  where"]
    for r in rows[:limit]:
        share = 100.0 * r.total_ns / total if total else 0.0
        op = r.op if len(r.op) <= opw else r.op[:opw - 1] + "…"
        lines.append(f"  {r.calls:>7}  {_fmt_ns(r.total_ns):>9}  {_fmt_ns(r.mean_ns):>9}  "
                     f"{share:>5.1f}%  {r.phase:<8}  {op:<{opw}}  {r.where}")
    if limit is not None and len(rows) > limit:
        lines.append(f"  ... {len(rows) - limit} more rows")
    phases = p.by_phase()
    lines.append("  " + "   ".join(f"{k if k != '-' else 'runtime'} {_fmt_ns(v)} "
                                    f"({100.0 * v / total if total else 0:.1f}%)"
                                    for k, v in sorted(phases.items(), key=lambda kv: -kv[1])))
    return "\n".join(lines)


# -- the trace ------------------------------------------------------------------------------
def chrome_events(p: Profile) -> dict[str, Any]:
    """Trace events: one ``X`` (complete) event per program call and per step in it,
    times in microseconds since the profile started."""
    pid = os.getpid()
    us = lambda ns: (ns - p.origin) / 1e3  # noqa: E731
    events: list[dict[str, Any]] = [
        {"name": "process_name", "ph": "M", "pid": pid, "args": {"name": "yota"}}]
    tids: dict[int, int] = {}  # thread ident -> small trace tid (1, 2, ...)
    with p._lock:
        recorded = list(p._events)
    for variant, times, ident, draws_ns in recorded:
        if variant is None:
            continue
        tid = tids.setdefault(ident, len(tids) + 1)
        events.append({"name": variant.name, "cat": "program", "ph": "X", "pid": pid,
                       "tid": tid, "ts": us(times.start), "dur": (times.end - times.start) / 1e3,
                       "args": {"backend": variant.backend, "random draws us": draws_ns / 1e3}})
        for s, (where, op, phase) in enumerate(variant.labels):
            if times.starts[s] <= 0:
                continue
            events.append({"name": op, "cat": phase, "ph": "X", "pid": pid, "tid": tid,
                           "ts": us(int(times.starts[s])),
                           "dur": (int(times.ends[s]) - int(times.starts[s])) / 1e3,
                           "args": {"where": where, "phase": phase, "program": variant.name}})
    for ident, tid in tids.items():
        name = "main thread" if ident == threading.main_thread().ident else f"thread {ident}"
        events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                       "args": {"name": name}})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"producer": "yota.profile", "calls": p.calls,
                          "total us": p.total_ns / 1e3}}


# -- YOTA_PROFILE=1 ---------------------------------------------------------------------------
_from_env: Profile | None = None


def from_env() -> Profile | None:
    """With ``YOTA_PROFILE`` set (not 0/false/no/off), profile the whole process and print
    the table to stderr at exit (``YOTA_PROFILE_TRACE=FILE.json``: also write the trace)."""
    global _from_env
    flag = os.environ.get("YOTA_PROFILE", "").strip().lower()
    if not flag or flag in ("0", "false", "no", "off") or _from_env is not None:
        return _from_env
    _from_env = Profile().start()
    atexit.register(_report_at_exit, _from_env, os.environ.get("YOTA_PROFILE_TRACE"))
    return _from_env


def _report_at_exit(p: Profile, trace_path: str | None) -> None:
    p.stop()
    print(p, file=sys.stderr)
    if trace_path:
        p.chrome_trace(trace_path)
        print(f"yota: profile trace written to {trace_path}", file=sys.stderr)
