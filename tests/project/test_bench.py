"""tools/bench.py (the package tools/bench/) stays runnable: a quick run of every
workload, its JSON and Markdown, the hand-written baseline gradients, and how missing,
failing and wrong systems are reported."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bench import cli, systems
from bench.check import tolerance
from bench.workloads import workloads

QUICK = ["--quick", "--budget", "0.02"]
NAMES = ["W1-f64", "W1-f32", "W2-1e3", "W2-1e4", "W3", "W4-f64", "W4-f32", "W5", "W6", "W7", "W8", "W9",
         "W10"]


def _results(report: dict[str, Any], workload: str) -> dict[str, dict[str, Any]]:
    w = next(w for w in report["workloads"] if w["name"] == workload)
    return {r["system"]: r for r in w["results"]}


def test_quick_run_of_yota_and_numpy_writes_json_and_markdown(tmp_path: Path) -> None:
    js, md = tmp_path / "bench.json", tmp_path / "bench.md"
    report = cli.run([*QUICK, "--systems", "numpy,yota", "--json", str(js), "--md", str(md)])
    data = json.loads(js.read_text())
    assert [w["name"] for w in data["workloads"]] == NAMES
    assert data["limits"]["bandwidth_Bps"] > 0 and data["limits"]["flops"]["float32"] > 0
    assert data["meta"]["quick"] is True and data["meta"]["machine"]
    yotas = [s for s in data["meta"]["systems"] if s.startswith("yota[")]
    assert yotas, "every backend in yota.backends.BACKENDS is a system"
    for w in data["workloads"]:
        assert w["bound"]["bound_s"] > 0 and w["bound"]["kind"] in ("bytes", "FLOPs")
        assert w["ratio_reference"] in yotas
        for r in w["results"]:
            if r["status"] != "ok":
                assert r["system"].startswith("yota[") and r["reason"]  # a backend may fail
                continue
            assert r["q1_s"] <= r["median_s"] <= r["q3_s"] and r["first_call_s"] > 0
            assert r["rounds"] >= 2 and r["calls_per_sample"] >= 1
            assert r["max_rel_err"] <= tolerance(np.dtype(w["dtype"]))
            assert r["ratio_to_bound"] > 0 and r["peak_tracemalloc_bytes"] > 0
        assert _results(data, w["name"])[w["ratio_reference"]]["ratio_to_yota"] == 1.0
    text = md.read_text()
    assert text == report["markdown"]
    header = "| workload | bound | " + " | ".join(data["meta"]["systems"]) + " |"
    assert header in text
    for name in NAMES:
        assert f"\n| {name} | " in text and f"\n| {name} | numpy | " in text


def test_a_missing_peer_is_skipped_with_its_reason(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "jax", None)  # import jax now raises ImportError
    report = cli.run([*QUICK, "--only", "W1-f64", "--systems", "numpy,jax", "--json", ""])
    r = _results(report, "W1-f64")["jax"]
    assert r["status"] == "skipped" and "not installed" in r["reason"] and r["median_s"] is None
    assert "- jax: skipped: not installed" in report["markdown"]
    assert "jax: skipped" in capsys.readouterr().err


def _wrong(_: Any, w: Any, inputs: dict[str, np.ndarray]) -> tuple[Any, Any]:
    def read(out: Any) -> Any:
        return out[0], {n: 2 * g for n, g in out[1].items()}
    return (lambda: w.hand(**inputs)), read


def _broken(_: Any, w: Any, inputs: dict[str, np.ndarray]) -> tuple[Any, Any]:
    def step() -> Any:
        raise RuntimeError("no kernel for this\nsecond line")
    return step, lambda out: out


def test_wrong_and_failing_systems_are_reported_not_timed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    extra = [systems.System("wrong", lambda: np, _wrong), systems.System("broken", lambda: np, _broken)]
    real = systems.all_systems
    monkeypatch.setattr(systems, "all_systems", lambda backends: real(backends) + extra)
    report = cli.run([*QUICK, "--only", "W2-1e3,W3", "--systems", "numpy,wrong,broken",
                        "--json", ""])
    for name in ("W2-1e3", "W3"):
        res = _results(report, name)
        assert res["numpy"]["status"] == "ok"
        assert res["wrong"]["status"] == "mismatch" and "relative error" in res["wrong"]["reason"]
        assert res["broken"]["status"] == "failed"
        assert res["broken"]["reason"] == "RuntimeError: no kernel for this"
        for r in (res["wrong"], res["broken"]):
            assert r["samples"] == [] and r["median_s"] is None
    assert "- W3 wrong: mismatch: " in report["markdown"]


def test_a_failing_yota_backend_is_reported_and_the_rest_still_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import yota.backends
    monkeypatch.setitem(yota.backends.BACKENDS, "nowhere", "yota.backends.no_such_module")
    report = cli.run([*QUICK, "--only", "W1-f32", "--systems", "numpy,yota", "--json", ""])
    res = _results(report, "W1-f32")
    assert res["yota[nowhere]"]["status"] == "failed"
    assert "no_such_module" in res["yota[nowhere]"]["reason"]
    assert res["numpy"]["status"] == "ok"


def _directional_fd(f: Any, leaves: dict[str, np.ndarray], dirs: dict[str, np.ndarray],
                    eps: float = 1e-6) -> float:
    plus = {n: v + eps * dirs[n] for n, v in leaves.items()}
    minus = {n: v - eps * dirs[n] for n, v in leaves.items()}
    return (f(plus) - f(minus)) / (2 * eps)


@pytest.mark.parametrize("w", workloads(quick=True), ids=lambda w: w.name)
def test_hand_gradients_match_finite_differences(w: Any) -> None:
    rng = np.random.default_rng(1)
    inputs = {n: v.astype(np.float64) if v.dtype.kind == "f" else v
              for n, v in w.make(rng).items()}
    loss = w.loss(np)
    consts = [inputs[n] for n in w.consts]
    f = lambda leaves: float(loss(*w.pack(leaves), *consts))
    leaves = {n: inputs[n] for n in w.params}
    val, grads = w.hand(**inputs)
    assert val == pytest.approx(f(leaves), rel=1e-12)
    dirs = {n: rng.standard_normal(v.shape) for n, v in leaves.items()}
    exact = sum(float(np.sum(grads[n] * dirs[n])) for n in w.params)
    assert exact == pytest.approx(_directional_fd(f, leaves, dirs), rel=1e-6, abs=1e-8)


def test_selection_that_matches_nothing_is_an_error() -> None:
    with pytest.raises(SystemExit, match="selects nothing"):
        cli.run(["--quick", "--only", "W99", "--json", ""])


def test_installed_peers_agree_with_the_baseline() -> None:
    """The peers that are installed (the bench extra, PyTorch) run and agree; the slow
    torch.compile is left to the full run."""
    report = cli.run([*QUICK, "--only", "W1-f32,W3,W4-f64", "--json", "",
                        "--systems", "numpy,autograd,jax,torch"])
    for w in report["workloads"]:
        for r in w["results"]:
            assert r["status"] in ("ok", "skipped"), (w["name"], r["system"], r["reason"])
    if all(r["status"] == "skipped" for w in report["workloads"] for r in w["results"]
           if r["system"] != "numpy"):
        pytest.skip("no peer installed")
