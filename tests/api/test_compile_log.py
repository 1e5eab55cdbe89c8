"""Compile feedback (``yota.phases``): one log line per compile with its op counts and the
time of each phase, ``YOTA_LOG=compile``, the notice of a compile still running, and
``yota-ir ... --timings`` / ``yota-ir compile``. No assertion depends on how long anything
takes: times are checked for consistency (non-negative, parts within their whole), never
against a clock."""

from __future__ import annotations

import doctest
import importlib
import logging
import os
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from support import TESTS
from yota.ir.passes import PIPELINE

import yota
from yota import cli, phases, pipeline

EX = TESTS / "cli_examples"
MODEL = f"{EX / 'model.py'}:loss"
LOGGER = "yota.compile"
TIME = re.compile(r"(\w+) (\d+(?:\.\d+)?) (ms|s)\b")
PASSES = list(dict.fromkeys(n for n, _ in PIPELINE))  # (a pass that runs twice: one row)


@pytest.fixture(autouse=True)
def _quiet_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No compile-feedback setting inherited from the caller's shell."""
    monkeypatch.delenv("YOTA_LOG", raising=False)
    monkeypatch.delenv("YOTA_COMPILE_NOTICE_S", raising=False)


def make_loss(name: str = "loss") -> Any:
    """A new function object named ``name``, the programs yota.grad keeps in memory for
    its code dropped (so yota.grad compiles it afresh)."""
    def loss(W: np.ndarray, x: np.ndarray) -> Any:
        h = x
        for _ in range(3):
            h = np.tanh(W @ h)
        return np.sum(h * h)
    loss.__name__ = loss.__qualname__ = name
    importlib.import_module("yota.grad").forget(loss)
    return loss


ARGS = (np.random.default_rng(0).random((4, 4)), np.random.default_rng(1).random((4, 2)))


def compile_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == LOGGER
            and r.getMessage().startswith(("yota: compiled", "yota: loaded"))]


def seconds_of(text: str) -> dict[str, float]:
    """``{"trace": 0.0021, ...}`` from a printed line's ``name 2.1 ms`` pairs."""
    return {n: float(v) * (1e-3 if unit == "ms" else 1.0) for n, v, unit in TIME.findall(text)}


def check_consistent(rec: phases.Record) -> None:
    """Every time >= 0; each group's parts within the group; the phases within the total."""
    rows = dict(rec.totals())
    assert rec.total is not None and rec.total >= 0
    assert all(s >= 0 for s in rows.values()), rows
    top = sum(s for p, s in rows.items() if "." not in p)
    assert top <= rec.total * (1 + 1e-9), (top, rec.total)
    for group in {p.rpartition(".")[0] for p in rows if "." in p}:
        parts = sum(s for p, s in rows.items() if p.rpartition(".")[0] == group)
        assert parts <= rows[group] * (1 + 1e-9) + 1e-12, (group, parts, rows[group])


# -- the log line ---------------------------------------------------------------------------
def test_one_line_per_compile_names_every_phase(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    f = make_loss("loss_one_line")
    yota.grad(f, *ARGS, cache=False)
    yota.grad(f, *ARGS, cache=False)  # the compiled program runs: no second line
    lines = compile_lines(caplog)
    assert len(lines) == 1 and lines[0].levelno == logging.INFO
    text = lines[0].getMessage()
    assert text.startswith("yota: compiled loss_one_line (grad, llvm): ")
    _, tape = yota.trace(f, *ARGS)
    traced, built = len(pipeline.lower(tape).ops), len(pipeline.grad_ir(tape).ops)
    assert f"{traced:,} ops traced -> {built:,} ops; " in text
    times = seconds_of(text)
    for name in ("trace", "to_ir", "vjp", "passes", "lower", "codegen", "run", "total"):
        assert name in times, (name, text)
    assert all(t >= 0 for t in times.values())
    rec = phases.last()
    assert rec is not None and (rec.name, rec.traced, rec.ops) == ("loss_one_line", traced,
                                                                  built)
    check_consistent(rec)
    passes = [p.partition(".")[2] for p, _ in rec.totals() if p.startswith("passes.")]
    assert passes == PASSES  # every pass timed, in pipeline order
    assert text.endswith(f"; total {phases.seconds(rec.total or 0.0)}")


def test_debug_line_lists_every_pass(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    yota.grad(make_loss("loss_debug"), *ARGS, cache=False)
    debug = [r.getMessage() for r in caplog.records
             if r.name == LOGGER and r.levelno == logging.DEBUG]
    assert len(debug) == 1 and debug[0].startswith("yota: phases of loss_debug (grad, llvm): ")
    listed = re.search(r"passes: ([^;]*)", debug[0])
    assert listed is not None
    assert [n for n, _, _ in TIME.findall(listed.group(1))] == PASSES


def test_cache_phases_and_a_hit(caplog: pytest.LogCaptureFixture, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YOTA_CACHE_DIR", str(tmp_path))
    caplog.set_level(logging.INFO, logger=LOGGER)
    yota.grad(make_loss("loss_cached"), *ARGS)
    first = phases.last()
    assert first is not None and first.cache is None
    parts = {p for p, _ in first.totals()}
    assert {"cache", "cache.key", "cache.load", "cache.store", "lower", "codegen"} <= parts
    check_consistent(first)
    yota.grad(make_loss("loss_cached"), *ARGS)  # same program, a new function: a cache hit
    hit = phases.last()
    assert hit is not None and hit is not first and hit.cache == "loaded"
    assert not {"vjp", "passes", "lower", "codegen"} & {p for p, _ in hit.totals()}
    lines = [r.getMessage() for r in compile_lines(caplog)]
    assert len(lines) == 2
    assert lines[1].startswith("yota: loaded loss_cached (grad, llvm) from the cache: ")
    assert f"{hit.traced:,} ops traced; " in lines[1]


def test_forward_compile_and_interp(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    cf = yota.compile(lambda x: np.tanh(x) * 2.0, np.zeros(3), backend="interp", cache=False)
    cf(np.ones(4))  # a new signature: traced and compiled again
    lines = [r.getMessage() for r in compile_lines(caplog)]
    assert len(lines) == 2
    assert all(t.startswith("yota: compiled <lambda> (forward, interp): ") for t in lines)
    assert "vjp" not in seconds_of(lines[0]) and "lower" in seconds_of(lines[0])


def test_nothing_logged_for_a_failed_or_repeated_trace(caplog: pytest.LogCaptureFixture
                                                        ) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    with pytest.raises(yota.YotaError):
        yota.grad(lambda x: x * 2.0, np.ones(3), cache=False)  # not a scalar
    g = make_loss("loss_dynamic")
    yota.grad(g, *ARGS, dynamic=True, cache=False)
    yota.grad(g, *ARGS, dynamic=True, cache=False)  # traced again, program known
    assert [r.getMessage().split(":")[1] for r in compile_lines(caplog)] == [
        " compiled loss_dynamic (grad, llvm)"]


def test_a_compile_inside_a_trace_joins_the_outer_one(caplog: pytest.LogCaptureFixture
                                                      ) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    inner = yota.compile(lambda x: np.sin(x), np.ones(3), cache=False)
    caplog.clear()

    def outer(x: np.ndarray) -> Any:
        return np.sum(inner(x) * yota.compile(np.cos, x, cache=False)(x))
    yota.grad(outer, np.ones(3), cache=False)
    lines = [r.getMessage() for r in compile_lines(caplog)]
    assert len(lines) == 1 and lines[0].startswith("yota: compiled outer (grad, llvm)")
    rec = phases.last()
    assert rec is not None and any(p.startswith("trace.") for p, _ in rec.totals())
    check_consistent(rec)


def test_threads_keep_their_own_records(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=LOGGER)
    names = [f"loss_thread{i}" for i in range(3)]
    errors: list[BaseException] = []

    def work(name: str) -> None:
        try:
            yota.grad(make_loss(name), *ARGS, cache=False)
        except BaseException as e:  # reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    lines = sorted(r.getMessage() for r in compile_lines(caplog))
    assert [t.split(" (")[0] for t in lines] == [f"yota: compiled {n}" for n in names]
    for t in lines:  # each record holds its own compile's phases, once each
        assert list(seconds_of(t)).count("trace") == 1 and "codegen" in t


# -- the printed forms ----------------------------------------------------------------------
def fixed_record() -> phases.Record:
    rec = phases.Record("loss", "grad", "llvm")
    rec.entries = [["trace", 0.21], ["to_ir", 0.05], ["vjp", 0.03], ["passes", 0.40],
                   ["passes.cse", 0.06], ["passes.fuse", 0.31], ["lower", 0.12],
                   ["codegen", 0.78], ["cache.key", 0.02], ["cache.store", 0.01]]
    rec.traced, rec.ops, rec.total = 1234, 456, 1.7
    return rec


def test_printed_forms() -> None:
    rec = fixed_record()
    assert phases.summary(rec) == (
        "yota: compiled loss (grad, llvm): 1,234 ops traced -> 456 ops; trace 210 ms, "
        "to_ir 50 ms, vjp 30 ms, passes 400 ms (fuse 310 ms), lower 120 ms, codegen 780 ms, "
        "cache 30 ms (key 20 ms); total 1.70 s")
    assert phases.detail(rec) == ("yota: phases of loss (grad, llvm): passes: cse 60 ms, "
                                  "fuse 310 ms; cache: key 20 ms, store 10 ms")
    assert phases.table(rec) == textwrap.dedent("""\
        phases of loss (grad, llvm): 1,234 ops traced -> 456 ops
          trace       0.2100 s   12.4%
          to_ir       0.0500 s    2.9%
          vjp         0.0300 s    1.8%
          passes      0.4000 s   23.5%
            cse       0.0600 s    3.5%
            fuse      0.3100 s   18.2%
          lower       0.1200 s    7.1%
          codegen     0.7800 s   45.9%
          cache       0.0300 s    1.8%
            key       0.0200 s    1.2%
            store     0.0100 s    0.6%
          (other)     0.0800 s    4.7%
          total       1.7000 s  100.0%""")
    rec.cache, rec.total = "loaded", 10.0
    assert phases.summary(rec).startswith(
        "yota: loaded loss (grad, llvm) from the cache: 1,234 ops traced; trace 210 ms")
    assert phases.summary(rec).endswith(", other 8.38 s; total 10.0 s")


def test_notice_text() -> None:
    rec = fixed_record()
    rec.total, rec.ops = None, None
    rec.current = "passes.fuse"
    text = phases.notice_text(rec)
    assert re.fullmatch(r"yota: still compiling loss \(grad, llvm\): 1,234 ops traced, in "
                        r"fuse \(passes\), \d+\.\d s so far; its phase times follow when it "
                        r"is done", text), text


def test_settings(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    assert phases.notice_seconds() == phases.NOTICE_S == 2.0
    for raw, want in (("0", None), ("off", None), ("never", None), ("0.5", 0.5),
                      ("inf", None), ("3", 3.0)):
        monkeypatch.setenv("YOTA_COMPILE_NOTICE_S", raw)
        assert phases.notice_seconds() == want, raw
    monkeypatch.setenv("YOTA_COMPILE_NOTICE_S", "soon")
    assert phases.notice_seconds() == 2.0 and phases.notice_seconds() == 2.0
    warned = [r for r in caplog.records if "YOTA_COMPILE_NOTICE_S='soon'" in r.getMessage()]
    assert len(warned) == 1  # once
    monkeypatch.setenv("YOTA_LOG", " Compile , cache")
    assert phases.log_topics() == {"compile", "cache"}


def test_phases_outside_a_compile_record_nothing() -> None:
    assert phases.current() is None
    with phases.phase("trace"):
        phases.split("codegen")
        phases.note(traced=3)
    assert phases.current() is None


def test_a_backend_splits_only_its_own_phase() -> None:
    with phases.compiling("f", "grad", "llvm") as rec:
        with phases.phase("run"):
            phases.split("codegen")  # a backend compile outside phase lower
        with phases.phase("lower"):
            phases.split("codegen")
    assert [p for p, _ in rec.totals()] == ["run", "lower", "codegen"]
    check_consistent(rec)


def test_module_doctests() -> None:
    assert doctest.testmod(phases).failed == 0


# -- the notice of a slow compile -----------------------------------------------------------
class Seen(logging.Handler):
    """Keeps the records of ``yota.compile``; ``noticed`` is set at the first notice."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self.noticed = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        if record.getMessage().startswith("yota: still compiling"):
            self.noticed.set()


def test_slow_compile_notice_fires_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("YOTA_COMPILE_NOTICE_S", "0.001")
    seen = Seen()
    logger = logging.getLogger(LOGGER)
    logger.addHandler(seen)
    waited: list[bool] = []

    def slow_loss(x: np.ndarray) -> Any:  # tracing waits until the notice has come
        waited.append(seen.noticed.wait(60))
        return np.sum(x * x)
    try:
        yota.grad(slow_loss, np.ones(3), cache=False)
    finally:
        logger.removeHandler(seen)
    assert waited == [True]
    msgs = [(r.levelno, r.getMessage()) for r in seen.records]
    notices = [m for m in msgs if m[1].startswith("yota: still compiling")]
    assert len(notices) == 1 and notices[0][0] == logging.WARNING
    assert notices[0][1].startswith("yota: still compiling slow_loss (grad, llvm): in trace, ")
    after = msgs[msgs.index(notices[0]) + 1:]  # the summary follows, at the same level
    done = [m for m in after if m[1].startswith("yota: compiled slow_loss")]
    assert len(done) == 1 and done[0][0] == logging.WARNING


def test_no_notice_when_off(monkeypatch: pytest.MonkeyPatch,
                            caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("YOTA_COMPILE_NOTICE_S", "off")
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    yota.grad(make_loss("loss_no_notice"), *ARGS, cache=False)
    assert not [r for r in caplog.records if "still compiling" in r.getMessage()]
    assert all(r.levelno < logging.WARNING for r in caplog.records if r.name == LOGGER)


# -- YOTA_LOG=compile in a new process --------------------------------------------------------
SCRIPT = textwrap.dedent("""
    import sys, numpy as np, yota
    if "--basic" in sys.argv:
        import logging
        logging.basicConfig(level=logging.INFO, format="LOG %(name)s %(message)s")
    def f(x):
        return np.sum(np.tanh(x) ** 2)
    yota.grad(f, np.ones(5))
    yota.grad(f, np.ones(5))
    print("ok")
""")


def run_script(tmp_path: Path, *extra: str, **env: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    full = {k: v for k, v in os.environ.items() if k not in ("YOTA_LOG",)}
    full.update(YOTA_CACHE="0", YOTA_COMPILE_NOTICE_S="off", **env)
    p = subprocess.run([sys.executable, str(script), *extra], capture_output=True, text=True,
                       timeout=300, env=full, check=False)
    assert p.returncode == 0 and p.stdout == "ok\n", p.stderr
    return p


def test_yota_log_compile_prints_the_line(tmp_path: Path) -> None:
    lines = run_script(tmp_path, YOTA_LOG="compile").stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("yota: compiled f (grad, llvm): "), lines
    assert {"trace", "to_ir", "vjp", "passes", "lower", "codegen", "total"} <= set(
        seconds_of(lines[0]))


def test_silent_without_yota_log(tmp_path: Path) -> None:
    assert run_script(tmp_path).stderr == ""


def test_yota_log_with_logging_configured_prints_once(tmp_path: Path) -> None:
    lines = run_script(tmp_path, "--basic", YOTA_LOG="compile").stderr.splitlines()
    mine = [t for t in lines if "compiled f" in t]
    assert len(mine) == 1 and mine[0].startswith("LOG yota.compile yota: compiled f "), lines


# -- yota-ir --------------------------------------------------------------------------------
def invoke(*args: str) -> Any:
    r = CliRunner().invoke(cli.main, list(args))
    assert r.exit_code == 0, r.output
    return r


def table_rows(text: str) -> dict[str, float]:
    """A printed table's rows (after its header line), by name."""
    rows = {}
    for line in text.splitlines()[1:]:
        m = re.fullmatch(r"\s+(\S+)\s+(\d+\.\d+) s\s+(\d+\.\d)%", line)
        assert m, line
        rows[m.group(1)] = float(m.group(2))
    return rows


def test_timings_prints_the_table_on_stderr() -> None:
    plain = invoke("ir", MODEL, "--example", "example", "--stage", "planned")
    r = invoke("ir", MODEL, "--example", "example", "--stage", "planned", "--timings")
    assert r.stdout == plain.stdout  # the IR, unchanged
    head = r.stderr.partition("\n")[0]
    assert re.fullmatch(r"phases of loss \(ir\): \d+ ops traced -> \d+ ops", head), head
    rows = table_rows(r.stderr)
    want = ["target", "trace", "to_ir", "vjp", "passes", *PASSES, "(other)", "total"]
    assert [n for n in rows if n in want] == want  # (and any phase added since, in its place)
    assert all(v >= 0 for v in rows.values())


def test_timings_on_a_command_without_passes() -> None:
    r = invoke("tape", MODEL, "--example", "example", "--timings")
    assert "Tape for loss" in r.stdout
    assert list(table_rows(r.stderr)) == ["target", "trace", "(other)", "total"]


def test_compile_command() -> None:
    r = invoke("compile", MODEL, "--example", "example")
    head = r.stdout.partition("\n")[0]
    assert re.fullmatch(r"phases of loss \(grad, llvm\): \d+ ops traced -> \d+ ops", head)
    rows = table_rows(r.stdout)
    assert {"trace", "to_ir", "vjp", "passes", "lower", "codegen", "run", "total"} <= set(rows)
    assert "cache" not in rows  # --no-cache by default
    r = invoke("compile", MODEL, "--example", "example", "--forward", "--backend", "interp",
               "--timings")
    assert r.stdout == "" and r.stderr.startswith("phases of loss (compile): ")
    assert "vjp" not in table_rows(r.stderr)


def test_help_mentions_timings() -> None:
    assert "--timings" in invoke("ir", "--help").stdout
    assert "Example" in invoke("compile", "--help").stdout


def test_the_garbage_collector_is_paused_while_compiling() -> None:
    import gc

    import numpy as np

    import yota

    seen: list[bool] = []

    def loss(x: np.ndarray) -> object:
        seen.append(gc.isenabled())
        return np.sum(np.sin(x) * x)

    assert gc.isenabled()
    yota.grad(loss, np.ones(3), cache=False)
    assert seen == [False] and gc.isenabled()

    def bad(x: np.ndarray) -> object:
        raise ValueError("in the user's code")

    with pytest.raises(ValueError):
        yota.grad(bad, np.ones(3), cache=False)
    assert gc.isenabled()  # turned back on after a failed compile too
    gc.disable()
    try:
        yota.grad(loss, np.ones(4), cache=False)
        assert not gc.isenabled()  # left off: it was off before
    finally:
        gc.enable()
