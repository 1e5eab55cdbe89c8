"""yota-ir: every subcommand on the example files in tests/cli_examples.

Golden files live in tests/golden/cli; regenerate them with
``YOTA_UPDATE_GOLDEN=1 python -m pytest tests/cli/test_cli.py``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner, Result
from support import ROOT, TESTS
from yota.ir import parse, print_function
from yota.ir.autodiff import vjp
from yota.ir.passes import PASSES, PIPELINE, optimize

import yota
from yota import cli

EX = TESTS / "cli_examples"
GOLDEN = TESTS / "golden" / "cli"
MODEL = f"{EX / 'model.py'}:loss"
MLP = f"{EX / 'mlp.py'}:loss"
GUARDS = f"{EX / 'guards.py'}:clipped"
FAULTY = EX / "faulty.py"
RULES = EX / "custom_rules.py"
EXAMPLE = ["--example", "example"]


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli.main, list(args), input=input)


def ok(*args: str, input: str | None = None) -> str:
    r = run(*args, input=input)
    assert r.exit_code == 0, r.output
    return r.stdout


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("YOTA_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"missing golden file {path}; run with YOTA_UPDATE_GOLDEN=1"
    assert text == path.read_text()


def load_example(path: Path, fname: str, seed: int = 0) -> cli.Target:
    return cli.load_target(f"{path}:{fname}", None, "example", seed)


# -- help ----------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [[], ["tape"], ["ir"], ["opt"], ["graph"], ["llvm"],
                                     ["check"], ["passes"]])
def test_help_has_examples(command: list[str]) -> None:
    out = ok(*command, "--help")
    assert "Usage: " in out and "Example" in out


def test_python_m_yota_help() -> None:
    r = subprocess.run([sys.executable, "-m", "yota", "--help"], capture_output=True,
                       text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    assert "Usage: yota-ir" in r.stdout
    for cmd in ("tape", "ir", "opt", "graph", "llvm", "check"):
        assert re.search(rf"^\s+{cmd}\s", r.stdout, re.M), cmd


def test_library_modules_behind_the_commands() -> None:
    """The commands are thin: JSON and DOT of IR live beside the printer, the tape's JSON in
    yota.tape_json; their docstring examples run."""
    import doctest

    import yota.ir.dot
    import yota.ir.to_json

    import yota.tape_json

    for mod in (yota.ir.to_json, yota.ir.dot, yota.tape_json):
        assert doctest.testmod(mod).failed == 0, mod.__name__
    assert cli.to_dot is yota.ir.dot.to_dot and cli.COLORS is yota.ir.dot.COLORS
    assert yota.ir.dot.format_of("g.SVG") == "svg" and yota.ir.dot.format_of("-") == "dot"
    r = subprocess.run([sys.executable, "-m", "yota.cli", "passes"], capture_output=True,
                       text=True, timeout=60, check=False)
    assert r.returncode == 0 and "default pipeline" in r.stdout, r.stderr


# -- targets -------------------------------------------------------------------------------
def test_args_are_evaluated_in_the_module_with_np() -> None:
    out = ok("tape", MODEL, "--args",
             "Linear(np.ones((3, 4)), np.ones(3)), np.ones((4, 5))")
    assert out == ok("tape", MODEL, *EXAMPLE)


def test_package_module_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EX)
    out = ok("tape", "cli_pkg.losses:l2", *EXAMPLE)
    assert out.startswith("Tape for l2 (losses.py:6)")


def test_seed_makes_example_arguments_reproducible() -> None:
    a, b, c = (load_example(EX / "mlp.py", "loss", s) for s in (1, 1, 2))
    np.testing.assert_array_equal(a.args[0].W1, b.args[0].W1)
    assert not np.array_equal(a.args[0].W1, c.args[0].W1)
    m1, m2 = (load_example(EX / "model.py", "loss", 5) for _ in range(2))
    np.testing.assert_array_equal(m1.args[1], m2.args[1])  # np.random.rand, seeded


def test_target_errors_are_clean() -> None:
    r = run("tape", str(EX / "model.py"))
    assert r.exit_code == 2 and "FILE.py:FUNC" in r.output
    r = run("tape", f"{FAULTY}:raises")
    assert r.exit_code == 2 and "--args" in r.output and "--example" in r.output
    r = run("tape", f"{FAULTY}:nothere", "--args", "1.0")
    assert r.exit_code == 1 and "'nothere' not found" in r.output and "raises" in r.output
    r = run("tape", "no_such_module_xyz:f", "--args", "1.0")
    assert r.exit_code == 1 and "cannot import 'no_such_module_xyz'" in r.output
    r = run("tape", MODEL, "--args", "1.0", "--example", "example")
    assert r.exit_code == 2 and "not both" in r.output


# -- errors in user code ---------------------------------------------------------------------
def test_user_error_shows_the_users_traceback() -> None:
    r = run("tape", f"{FAULTY}:raises", "--args", "np.ones(3)")
    assert r.exit_code == 1
    assert isinstance(r.exception, SystemExit)  # reported, not a crash of the tool
    assert "Traceback (most recent call last)" in r.stderr
    assert 'faulty.py", line 7, in helper' in r.stderr
    assert "ValueError: bad input from the user's code" in r.stderr
    assert "cli.py" not in r.stderr and "click" not in r.stderr


def test_errors_in_args_and_example_functions() -> None:
    r = run("tape", f"{FAULTY}:raises", "--args", "np.ones(3")
    assert r.exit_code == 1 and "SyntaxError" in r.stderr and "<--args>" in r.stderr
    r = run("tape", f"{FAULTY}:raises", "--example", "bad_example")
    assert r.exit_code == 1 and "in bad_example" in r.stderr and "ValueError" in r.stderr


def test_yota_error_is_printed_cleanly() -> None:
    r = run("tape", f"{FAULTY}:mutates", "--args", "np.ones(3)")
    assert r.exit_code == 1
    assert r.stderr.startswith("error: UnsupportedError: ") and "faulty.py:15" in r.stderr
    assert "Traceback" not in r.stderr
    r = run("--traceback", "tape", f"{FAULTY}:mutates", "--args", "np.ones(3)")
    assert r.exit_code == 1 and "Traceback" in r.stderr


def test_internal_error_is_reported_as_a_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: Any, **k: Any) -> str:
        raise RuntimeError("boom")

    import yota.ir.dot

    monkeypatch.setattr(yota.ir.dot, "to_dot", boom)
    r = run("graph", MODEL, *EXAMPLE)
    assert r.exit_code == cli.EXIT_INTERNAL
    assert "internal error in Yota" in r.stderr and "RuntimeError: boom" in r.stderr


# -- tape ------------------------------------------------------------------------------------
def test_tape_golden() -> None:
    golden("model.tape", ok("tape", MODEL, *EXAMPLE))
    golden("guards.tape", ok("tape", GUARDS, *EXAMPLE))


def test_tape_shows_guards_and_source() -> None:
    out = ok("tape", GUARDS, *EXAMPLE, "--source")
    assert "guard bool(%5) == True  # guards.py:8  | if np.max(y) > 1.0:" in out
    assert "guard int(%9) == 2  # guards.py:10" in out


def test_tape_json() -> None:
    d = json.loads(ok("tape", GUARDS, *EXAMPLE, "--json"))
    assert d["schema"] == "yota-ir/1" and d["kind"] == "tape" and d["function"] == "clipped"
    assert d["text"] == ok("tape", GUARDS, *EXAMPLE).rstrip("\n")
    assert [leaf["path"] for leaf in d["leaves"]] == ["x", "w"]
    guards = [e for e in d["entries"] if e["kind"] == "guard"]
    assert [g["guard"] for g in guards] == [{"kind": "bool", "expected": True},
                                            {"kind": "int", "expected": 2}]
    mm = next(e for e in d["entries"] if e["fn"] == "matmul")
    assert mm["args"] == [{"var": 1}, {"var": 2}]
    assert mm["outs"] == [{"id": 3, "weak": False, "type": "f64[2]", "dtype": "f64",
                           "shape": [2]}]
    assert mm["loc"]["line"] == 7 and mm["loc"]["source"] == "y = x @ w"
    gt = next(e for e in d["entries"] if e["fn"] == "greater")
    assert gt["args"][1] == {"static": "1.0"}
    model = json.loads(ok("tape", MODEL, *EXAMPLE, "--json"))
    assert model["entries"][0]["outs"][0]["python_type"] == "Linear"
    assert [leaf["path"] for leaf in model["leaves"]] == ["m.W", "m.b", "X"]


# -- ir --------------------------------------------------------------------------------------
def test_ir_golden() -> None:
    golden("model.traced.yir", ok("ir", MODEL, *EXAMPLE))
    golden("model.grad.yir", ok("ir", MODEL, *EXAMPLE, "--stage", "grad"))
    golden("mlp.traced.yir", ok("ir", MLP, *EXAMPLE, "--stage", "traced"))


def test_ir_stages_equal_the_python_api() -> None:
    t = load_example(EX / "mlp.py", "loss")
    _, tape = yota.trace(t.func, *t.args)
    fn = yota.to_ir(tape)
    gfn = vjp(fn, cli.float_leaves(tape, fn))
    names = [n for n, _ in PIPELINE]
    pre_fuse = names[:names.index("fuse")]
    want = {"traced": fn, "grad": gfn, "optimized": optimize(gfn, pre_fuse),
            "fused": optimize(gfn, names[:names.index("plan_memory")])}
    for stage, f in want.items():
        assert ok("ir", MLP, *EXAMPLE, "--stage", stage) == print_function(f) + "\n", stage
    _, g = yota.grad(t.func, *t.args)  # the planned stage is what yota.grad runs
    assert ok("ir", MLP, *EXAMPLE, "--stage", "planned") == print_function(g.tape) + "\n"


def test_fused_stage_has_kernels_and_planned_stage_a_memory_plan() -> None:
    fused = ok("ir", MLP, *EXAMPLE, "--stage", "fused")
    assert "= fused " in fused and "func @fused_0" in fused and "mem_buffers" not in fused
    assert "mem_buffers" in ok("ir", MLP, *EXAMPLE, "--stage", "planned")


def _headers(out: str) -> list[str]:
    return re.findall(r"^# ==== (.*) ====$", out, re.M)


def test_all_stages_and_changed() -> None:
    out = ok("ir", MODEL, *EXAMPLE, "--all-stages")
    heads = _headers(out)
    n = len(PIPELINE)
    assert heads[:2] == ["traced", "grad"] and len(heads) == 2 + n
    assert heads[2].startswith(f"pass 1/{n}: {PIPELINE[0][0]}")
    bodies = re.split(r"^# ==== .* ====\n", out, flags=re.M)[1:]
    assert bodies[-1] == ok("ir", MODEL, *EXAMPLE, "--stage", "planned")
    changed = ok("ir", MODEL, *EXAMPLE, "--all-stages", "--changed")
    cheads = _headers(changed)
    assert set(cheads) <= set(heads) and len(cheads) < len(heads)
    assert not any("unchanged" in h for h in cheads)
    assert [h for h in heads if "unchanged" not in h] == cheads
    upto = _headers(ok("ir", MODEL, *EXAMPLE, "--all-stages", "--stage", "grad"))
    assert upto == ["traced", "grad"]


def test_ir_json() -> None:
    d = json.loads(ok("ir", MLP, *EXAMPLE, "--stage", "planned", "--json"))
    assert d["kind"] == "ir" and d["stage"] == "planned" and d["entry"] == "loss_vjp"
    assert d["text"] + "\n" == ok("ir", MLP, *EXAMPLE, "--stage", "planned")
    entry = d["functions"][-1]
    assert entry["name"] == "loss_vjp"
    assert [i["label"] for i in entry["inputs"]][:2] == ["m.W1", "m.b1"]
    assert entry["outputs"][0]["label"] == "value" and entry["outputs"][0]["shape"] == []
    fn = parse(d["text"])
    assert len(entry["ops"]) == len(fn.ops)
    assert {op["phase"] for op in entry["ops"]} >= {"forward", "backward"}
    fused = [op for op in entry["ops"] if op["op"] == "fused"]
    assert fused and all(op["attrs"]["callee"] in entry["callees"] for op in fused)
    assert all("buffer" in r for op in entry["ops"] for r in op["results"])
    const = next(op for op in entry["ops"] if op["op"] == "const")
    assert set(const["attrs"]["value"]) == {"dtype", "shape", "value"}
    stages = json.loads(ok("ir", MODEL, *EXAMPLE, "--all-stages", "--changed", "--json"))
    assert [s["name"] for s in stages["stages"]][:2] == ["traced", "grad"]
    assert all(s["changed"] for s in stages["stages"])


def test_grad_stage_needs_a_scalar() -> None:
    r = run("ir", f"{FAULTY}:vector", "--args", "np.ones(3)", "--stage", "grad")
    assert r.exit_code == 1 and "must return a scalar float" in r.stderr
    assert "f64[3]" in ok("ir", f"{FAULTY}:vector", "--args", "np.ones(3)")


def test_missing_stage_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    import yota.ir.passes as passes

    monkeypatch.setattr(passes, "PIPELINE", [p for p in PIPELINE if p[0] != "fuse"])
    r = run("ir", MODEL, *EXAMPLE, "--stage", "fused")
    assert r.exit_code == 1 and "not available yet" in r.stderr and "'fuse'" in r.stderr


# -- opt -------------------------------------------------------------------------------------
@pytest.mark.parametrize("stage", ["traced", "grad", "planned"])
def test_opt_without_passes_round_trips(stage: str, tmp_path: Path) -> None:
    text = ok("ir", MLP, *EXAMPLE, "--stage", stage)
    path = tmp_path / f"{stage}.yir"
    path.write_text(text)
    assert ok("opt", str(path)) == text
    assert ok("opt", "-", input=text) == text


@pytest.mark.parametrize("passes", ["dce", "simplify,cse,dce", "fold,simplify,fuse",
                                    "default"])
def test_opt_passes_equal_python(passes: str, tmp_path: Path) -> None:
    text = ok("ir", MLP, *EXAMPLE, "--stage", "grad")
    path = tmp_path / "grad.yir"
    path.write_text(text)
    names = [n for n, _ in PIPELINE] if passes == "default" else passes.split(",")
    want = print_function(optimize(parse(text), names)) + "\n"
    assert ok("opt", str(path), "--passes", passes) == want
    assert ok("opt", "-", "-p", passes, input=text) == want


def test_opt_all_stages_and_errors(tmp_path: Path) -> None:
    path = tmp_path / "grad.yir"
    path.write_text(ok("ir", MODEL, *EXAMPLE, "--stage", "grad"))
    heads = _headers(ok("opt", str(path), "-p", "simplify,dce", "--all-stages"))
    assert heads[0] == "input" and heads[1].startswith("pass 1/2: simplify")
    r = run("opt", str(path), "-p", "dce,nope")
    assert r.exit_code == 2 and "unknown pass 'nope'" in r.output and "fuse" in r.output
    r = run("opt", "-", input="func @f(%0: f32[3]) -> (f32[3]) {\n  %1 = neg %0 : f32[3\n}\n")
    assert r.exit_code == 1 and r.stderr.startswith("error: ParseError: line 3")


def test_opt_verifies_its_input() -> None:
    bad = ('func @k(%0: f32[3]) -> (f32[3]) {\n  %1 = neg %0 : f32[3]\n  return %1\n}\n\n'
           'func @f(%0: f32[3]) -> (f32[3]) {\n  %1 = fused %0 {callee = "k"} : f32[3]\n'
           '  return %1\n}\n')
    r = run("opt", "-", input=bad)
    assert r.exit_code == 1
    assert r.stderr.startswith("error: the input gives invalid IR: VerifyError: kernel @k")
    assert ok("opt", "-", "--no-verify", input=bad) == bad


def test_passes_lists_the_pipeline() -> None:
    out = ok("passes")
    assert all(name in out for name in PASSES)
    assert f"{len(PIPELINE):2}. {PIPELINE[-1][0]}" in out


# -- graph -----------------------------------------------------------------------------------
def test_graph_dot_golden() -> None:
    golden("model.grad.dot", ok("graph", MODEL, *EXAMPLE))


def _dot_nodes_edges(dot: str) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    nodes = dict(re.findall(r"^  (\w+) \[(.*)\];$", dot, re.M))
    edges = re.findall(r"^  (\w+) -> (\w+) \[label=\"(.*)\"\];$", dot, re.M)
    return nodes, edges


def test_graph_of_mlp_gradient() -> None:
    text = ok("ir", MLP, *EXAMPLE, "--stage", "grad")
    fn = parse(text)
    dot = ok("graph", MLP, *EXAMPLE)
    assert dot.startswith('digraph "loss_vjp" {') and dot.rstrip().endswith("}")
    nodes, edges = _dot_nodes_edges(dot)
    assert sum(n.startswith("op") for n in nodes) == len(fn.ops)
    assert sum(n.startswith("in") for n in nodes) == len(fn.inputs)
    fwd, bwd = cli.COLORS["forward"], cli.COLORS["backward"]
    assert any(fwd in a for a in nodes.values()) and any(bwd in a for a in nodes.values())
    matmul_bwd = [a for a in nodes.values() if "= matmul" in a and "adjoint of" in a]
    assert matmul_bwd and all(bwd in a for a in matmul_bwd)
    assert ("op0", "op2", "%6 f64[5,8]") in edges  # matmul -> add, labelled with its type
    assert any(e[1] == "ret" and "grad m.W1" in e[2] for e in edges)
    planned = ok("graph", MLP, *EXAMPLE, "--stage", "planned")
    assert "peripheries=2" in planned and "buf " in planned
    assert cli.COLORS["mixed"] in planned  # a kernel fusing forward and backward ops


def test_graph_writes_dot_file(tmp_path: Path) -> None:
    out = tmp_path / "g.dot"
    r = run("graph", MODEL, *EXAMPLE, "--stage", "traced", "-o", str(out))
    assert r.exit_code == 0 and out.read_text() == ok("graph", MODEL, *EXAMPLE, "--stage",
                                                      "traced")


@pytest.mark.skipif(shutil.which("dot") is None,
                    reason="Graphviz's `dot` is not installed (apt-get install graphviz); "
                           "the DOT output is tested without it")
def test_graph_svg_of_mlp_gradient(tmp_path: Path) -> None:
    out = tmp_path / "mlp.svg"
    r = run("graph", MLP, *EXAMPLE, "-o", str(out))
    assert r.exit_code == 0, r.output
    svg = out.read_text()
    assert "<svg" in svg and "loss_vjp" in svg and "grad m.W1" in svg


def test_graph_svg_without_dot_explains(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    r = run("graph", MODEL, *EXAMPLE, "-o", str(tmp_path / "g.svg"))
    assert r.exit_code == 1 and "apt-get install graphviz" in r.stderr
    assert not (tmp_path / "g.svg").exists()


# -- llvm ------------------------------------------------------------------------------------
def test_llvm() -> None:
    r = run("llvm", MODEL, *EXAMPLE)
    if importlib.util.find_spec("yota.backends.llvm") is None:
        assert r.exit_code == 1 and "not available yet" in r.stderr
        return
    assert r.exit_code == 0, r.output
    assert "define" in r.stdout and "target triple" in r.stdout
    from yota.backends import llvm as backend

    fn = parse(ok("ir", MODEL, *EXAMPLE, "--stage", "planned"))
    want = backend.llvm_ir(fn, optimized=True).rstrip() + "\n"
    assert ok("llvm", MODEL, *EXAMPLE, "--optimized") == want
    asm = ok("llvm", MODEL, *EXAMPLE, "--asm")
    assert "yota_main" in asm and "define" not in asm


# -- check -----------------------------------------------------------------------------------
def test_check_mlp() -> None:
    out = ok("check", MLP, *EXAMPLE)
    lines = out.splitlines()
    assert lines[-1] == "OK"
    for leaf in ("m.W1", "m.b1", "m.W2", "m.b2", "X"):
        assert any(line.split()[:1] == [leaf] for line in lines), leaf
    per_arg = lines[lines.index("worst relative error per argument:") + 1:-1]
    assert [line.split()[0] for line in per_arg] == ["m", "X", "labels"]
    assert "ok" in per_arg[0] and "not differentiable" in per_arg[2]


def test_check_a_float32_model_takes_float64_differences() -> None:
    out = ok("check", MLP, "--example", "example32")
    assert out.endswith("OK\n") and "f32[4,8]" in out
    errors = [float(line.split()[-1]) for line in out.splitlines() if "f32[" in line]
    assert errors and max(errors) < 1e-4  # float32 rounding only, not a float32 step


def test_check_guards_and_custom_rule() -> None:
    assert ok("check", GUARDS, *EXAMPLE).endswith("OK\n")
    assert ok("check", f"{RULES}:good", *EXAMPLE).endswith("OK\n")


def test_check_fails_on_a_wrong_rule() -> None:
    r = run("check", f"{RULES}:bad", *EXAMPLE)
    assert r.exit_code == 1
    assert "FAIL" in r.stdout and "3.33e-01" in r.stdout  # 2x^2 instead of 3x^2


def test_check_samples_large_leaves() -> None:
    out = ok("check", MLP, *EXAMPLE, "--max-elements", "4")
    assert re.search(r"m\.W1\s+f64\[4,8\]\s+4/32", out)


# -- the manual ----------------------------------------------------------------------------------
def test_manual_tape_listing_is_real_output(monkeypatch: pytest.MonkeyPatch) -> None:
    root = ROOT
    page = (root / "docs" / "guide" / "inspecting.md").read_text()
    m = re.search(r"^\$ yota-ir (tape [^\n]*)\n(.*?)\n```", page, re.M | re.S)
    assert m, "docs/guide/inspecting.md has no `$ yota-ir tape ...` example"
    monkeypatch.chdir(root)
    assert ok(*shlex.split(m.group(1))) == m.group(2) + "\n"
