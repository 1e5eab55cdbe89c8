"""The on-disk cache across processes: a new process hits (no LLVM compilation) with
identical results, misses after an edit of a callee in another file, of a derivative
rule, or of a static argument, still hits after a byte-identical rewrite; concurrent
processes never see a torn entry."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import TESTS

EXAMPLES = TESTS / "cache_examples"
SOURCES = ("model.py", "helpers.py", "rules_mod.py")


def run_grad(workdir: Path, cache: Path, *extra: str) -> dict:
    env = {**os.environ, "YOTA_CACHE_DIR": str(cache), "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("YOTA_CACHE", None)
    proc = subprocess.run([sys.executable, str(EXAMPLES / "run_grad.py"), str(workdir), *extra],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """Sources and a cache holding their gradient, from a first process (a miss)."""
    root = tmp_path_factory.mktemp("warm")
    src = root / "src"
    src.mkdir()
    for name in SOURCES:
        shutil.copy(EXAMPLES / name, src / name)
    first = run_grad(src, root / "cache")
    assert first["cache"]["misses"] == 1 and first["cache"]["stores"] == 1
    assert first["llvm"]["compiles"] == 1 and not first["warnings"]
    return root, first


@pytest.fixture
def copy(warm, tmp_path):
    """A private copy of the warm sources and cache."""
    root, first = warm
    shutil.copytree(root / "src", tmp_path / "src")
    shutil.copytree(root / "cache", tmp_path / "cache")
    return tmp_path / "src", tmp_path / "cache", first


def assert_hit(r: dict) -> None:
    assert r["cache"]["hits"] == 1 and r["cache"]["misses"] == 0, r
    assert r["llvm"]["compiles"] == 0 and r["llvm"]["loads"] == 1, r  # no LLVM compilation
    assert r["traces"] == 1  # tracing still happens: guards, captured arrays, signature
    assert not r["warnings"]


def assert_miss(r: dict) -> None:
    assert r["cache"]["hits"] == 0 and r["cache"]["misses"] == 1, r
    assert r["llvm"]["compiles"] == 1 and not r["warnings"], r


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_second_process_hits_with_identical_results(copy):
    src, cache, first = copy
    second = run_grad(src, cache)
    assert_hit(second)
    assert second["sha"] == first["sha"] and second["value"] == first["value"]


def test_byte_identical_rewrite_still_hits(copy):
    src, cache, first = copy
    for name in SOURCES:  # new files, new modification times, same bytes
        data = (src / name).read_bytes()
        (src / name).unlink()
        (src / name).write_bytes(data)
        os.utime(src / name, (2e9, 2e9))
    r = run_grad(src, cache)
    assert_hit(r)
    assert r["sha"] == first["sha"]


def test_edited_callee_in_another_file_misses(copy):
    src, cache, first = copy
    edit(src / "helpers.py", "np.tanh(x)", "np.tanh(0.5 * x)")
    r = run_grad(src, cache)
    assert_miss(r)
    assert r["sha"] != first["sha"]
    edit(src / "helpers.py", "np.tanh(0.5 * x)", "np.tanh(x)")  # back: the old entry hits
    assert_hit(run_grad(src, cache))


def test_edited_rule_misses(copy):
    src, cache, first = copy
    edit(src / "rules_mod.py", "return dy / (1.0 + np.exp(-x))",
         "return 2.0 * dy / (1.0 + np.exp(-x))")
    r = run_grad(src, cache)
    assert_miss(r)
    assert r["value"] == pytest.approx(first["value"], rel=1e-12)  # only gradients change
    assert r["sha"] != first["sha"]


def test_changed_static_argument_misses(copy):
    src, cache, first = copy
    r = run_grad(src, cache, "--power", "3")
    assert_miss(r)
    assert r["value"] != first["value"]
    assert_hit(run_grad(src, cache, "--power", "3"))


def test_forward_program_hits_in_a_new_process(copy):
    src, cache, _ = copy
    a = run_grad(src, cache, "--forward")
    assert_miss(a)
    b = run_grad(src, cache, "--forward")
    assert_hit(b | {"traces": 1})  # yota.compile traces outside yota.stats
    assert b["sha"] == a["sha"]


def test_explain_in_a_new_process_names_the_changed_part(copy):
    src, cache, _ = copy
    edit(src / "helpers.py", "np.tanh(x)", "np.tanh(0.5 * x)")
    env = {**os.environ, "YOTA_CACHE_DIR": str(cache), "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run([sys.executable, "-m", "yota.cli", "cache", "explain",
                           str(src / "model.py") + ":loss", "--example", "example"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "MISS" in out and "1 part(s) differ: ir" in out
    assert "-  %" in out and "tanh" in out  # the IR diff shows the edited line


def race(cache: Path, mode: str, rounds: int, workers: int) -> list[dict]:
    env = {**os.environ, "YOTA_CACHE_DIR": str(cache)}
    env.pop("YOTA_CACHE", None)
    proc = subprocess.run([sys.executable, str(EXAMPLES / "race.py"), mode, str(rounds),
                           str(workers)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)["results"]


def test_processes_compiling_the_same_keys_at_once(tmp_path):
    results = race(tmp_path / "cache", "grad", 12, 2)
    stores = sum(r["stats"]["stores"] for r in results)
    assert stores == 12  # each round's key stored exactly once, whoever won
    assert not os.listdir(tmp_path / "cache" / "tmp")
    from yota.cache import DiskCache

    assert DiskCache(tmp_path / "cache").verify() == []


def test_processes_storing_reading_and_removing_one_key(tmp_path):
    results = race(tmp_path / "cache", "store", 300, 3)
    assert all(not r["bad"] for r in results)  # never a torn or corrupt read
    assert sum(r["hits"] for r in results) > 300
    assert not os.listdir(tmp_path / "cache" / "tmp")


@pytest.mark.slow
def test_many_rounds_of_concurrent_writers(tmp_path):
    race(tmp_path / "c1", "grad", 100, 3)
    race(tmp_path / "c2", "store", 3000, 4)
