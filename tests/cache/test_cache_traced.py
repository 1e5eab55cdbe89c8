"""The cache's traced key (yota.cache.traced): a new process finds its compiled program by
the traced program, before differentiation and the passes, and exact invalidation holds.
Cross-process runs are in test_cache_process.py; the MLP's timing is measured by
tests/cache_examples/measure_mlp.py."""

from __future__ import annotations

import importlib
import json
import os
import types

import numpy as np
import pytest
from yota.ir.autodiff import RULES
from yota.ir.printer import print_function

import yota
from yota import cache as yc
from yota import pipeline


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("YOTA_CACHE_DIR", str(d))
    monkeypatch.delenv("YOTA_CACHE", raising=False)
    yc.stats.reset()
    return d


def loss(x, w):
    return np.sum(np.tanh(x @ w) ** 2) + float(np.sum(x) > 0) * np.sum(w)


X = np.linspace(-1.0, 1.0, 12).reshape(3, 4)
W = np.linspace(0.5, -0.5, 8).reshape(4, 2)


def fresh(f):
    """A new function object with ``f``'s code (the programs kept in memory for that code
    dropped): only the on-disk cache knows it."""
    importlib.import_module("yota.grad").forget(f)
    return types.FunctionType(f.__code__, f.__globals__, f.__name__, f.__defaults__,
                              f.__closure__)


def run(f=loss, *args, **kw):
    val, grads = yota.grad(fresh(f), *(args or (X, W)), **kw)
    return [np.asarray(val)] + [np.asarray(g) for g in grads], grads


def names(d):
    return sorted((d / "traced").glob("*.json")) if (d / "traced").exists() else []


def no_building(monkeypatch):
    """Make differentiation, the passes and LLVM compilation fail if they run."""
    def boom(*a, **k):
        raise AssertionError("built a program on a traced-key hit")
    monkeypatch.setattr(pipeline, "differentiate", boom)
    monkeypatch.setattr(pipeline, "optimize", boom)
    from yota.backends import llvm
    monkeypatch.setattr(llvm, "compile", boom)


def test_a_hit_by_the_traced_program_skips_autodiff_passes_and_compilation(
        cache_dir, monkeypatch):
    want, g0 = run()
    built = print_function(g0.tape)
    assert len(names(cache_dir)) == 1 and yc.stats.stores == 1
    no_building(monkeypatch)
    got, g1 = run()
    assert yc.stats.hits == 1
    assert all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))
    assert print_function(g1.tape) == built  # the stored program, parsed on demand


def test_the_name_record_holds_the_traced_key_parts(cache_dir):
    run()
    rec = json.loads(names(cache_dir)[0].read_text())
    assert set(rec["parts"]) == set(yc.TRACED_KEY_PARTS)
    assert rec["parts"]["derivation"]["passes"] == [n for n, _ in pipeline._passes().PIPELINE]
    assert rec["facts"] == {"grads": [0, 1], "guards": 1}
    entry = json.loads((cache_dir / "entries" / rec["entry"] / "meta.json").read_text())
    for p in ("kind", "signature", "backend", "target", "yota"):
        assert entry["parts"][p] == rec["parts"][p]


def test_how_the_program_is_derived_is_part_of_the_key(cache_dir):
    run()
    run(optimize=False)
    run(has_aux=False, dynamic=True)  # the same program as the first: no new name
    assert len(names(cache_dir)) == 2
    yota.autograd.grad(fresh(loss), argnum=1)(X, W)  # w.r.t. one argument only
    assert len(names(cache_dir)) == 3


def test_other_shapes_and_programs_have_other_traced_keys(cache_dir):
    run()
    run(loss, X[:2], W)
    run(lambda x, w: np.sum(np.tanh(x @ w) ** 3), X, W)
    assert len(names(cache_dir)) == 3


def test_user_primitives_and_changed_rules_get_no_traced_key(cache_dir, monkeypatch):
    @yota.primitive
    def softplus(x):
        return np.log1p(np.exp(x))

    @yota.diffrule(softplus, "x")
    def _(x, *, y, dy):
        return dy / (1.0 + np.exp(-x))

    run(lambda x, w: np.sum(softplus(x @ w)), X, W)
    assert yc.stats.stores == 1 and names(cache_dir) == []
    fn = pipeline.lower(yota.trace(loss, X, W)[1])
    sig = yc.tape_signature(yota.trace(loss, X, W)[1])
    assert yc.make_traced_key(fn, None, kind="grad", signature=sig, derivation={})
    exp_rule = RULES["exp"]
    monkeypatch.setitem(RULES, "tanh", lambda b, op, dy: exp_rule(b, op, dy))  # a user's
    assert yc.make_traced_key(fn, None, kind="grad", signature=sig, derivation={}) is None


def test_a_damaged_name_is_removed_and_the_program_built(cache_dir, monkeypatch):
    want, _ = run()
    path = names(cache_dir)[0]
    rec = json.loads(path.read_text())
    rec["entry"] = "0" * 64  # checksum no longer matches
    path.write_text(json.dumps(rec))
    got, _ = run()
    assert all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))
    assert yc.stats.hits == 1  # by the built program's key; the name is written again
    assert json.loads(names(cache_dir)[0].read_text())["entry"] != "0" * 64


def test_a_name_whose_entry_differs_is_not_used(cache_dir):
    want, _ = run()
    run(loss, X[:2], W)
    a, b = (json.loads(p.read_text()) for p in names(cache_dir))
    # point the first name at the second entry, with a valid checksum: the parts differ
    path = names(cache_dir)[0]
    rec = json.loads(path.read_text())
    other = b["entry"] if rec["entry"] == a["entry"] else a["entry"]
    rec["entry"] = other
    rec["checksum"] = yc.traced._checksum(rec)
    path.write_text(json.dumps(rec))
    yc.stats.reset()
    got1, _ = run()
    got2, _ = run(loss, X[:2], W)
    assert all(np.array_equal(x, y) for x, y in zip(want, got1, strict=True))
    assert got2[1].shape == (2, 4) and yc.stats.errors == 0


def test_an_evicted_entry_is_a_miss_and_clear_removes_names(cache_dir):
    want, _ = run()
    for k in yc.default_cache().keys():
        yc.default_cache().remove(k)
    got, _ = run()
    assert yc.stats.misses == 2 and yc.stats.stores == 2
    assert all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))
    assert yc.clear() == 1 and names(cache_dir) == []


def test_compile_forward_programs_hit_by_the_traced_program(cache_dir, monkeypatch):
    f = lambda x, w: np.tanh(x @ w) * 2.0  # noqa: E731
    out = yota.compile(f, X, W)(X, W)
    assert len(names(cache_dir)) == 1
    no_building(monkeypatch)
    assert np.array_equal(yota.compile(fresh(f), X, W)(X, W), out)
    assert yc.stats.hits == 1


def test_guards_re_anchored_after_a_traced_hit(cache_dir):
    def g(x):
        return np.sum(x * x) * (2.0 if float(np.mean(x)) > 0.1 else 3.0)

    x = np.linspace(0.0, 1.0, 7)
    want, _ = run(g, x)
    got, _ = run(g, x)
    assert yc.stats.hits >= 1
    assert all(np.array_equal(a, b) for a, b in zip(want, got, strict=True))
    got2, _ = run(g, -x)  # the guard fails: traced again, another program
    assert float(got2[0]) == pytest.approx(3.0 * np.sum(x * x))


def test_the_sources_digest_is_kept_while_the_files_are_unchanged(cache_dir, tmp_path,
                                                                   monkeypatch):
    from pathlib import Path

    from yota.cache import key as K

    cache_dir.mkdir(mode=0o700)
    files = []
    for name in ("a.py", "b.py"):
        p = tmp_path / name
        p.write_text(f"# {name}\n")
        files.append((f"yota/{name}", p))
    d1 = K._sources_digest("mod", files)
    assert list((cache_dir / "sources").glob("*.json"))
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: (_ for _ in ()).throw(
        AssertionError("read a source")) if self.suffix == ".py" else real(self))
    assert K._sources_digest("mod", files) == d1  # from the record: nothing read
    monkeypatch.setattr(Path, "read_bytes", real)
    st = files[0][1].stat()
    files[0][1].write_text("# A.py\n")  # same size, new contents and time
    os.utime(files[0][1], ns=(st.st_atime_ns, st.st_mtime_ns + 1000))
    d2 = K._sources_digest("mod", files)
    assert d2 != d1
    files[0][1].write_text("# a.py\n")
    assert K._sources_digest("mod", files) == d1
