"""Graph views with values and gradients: ``yota.graph(f, *args, values=True)`` and
``yota-ir graph TARGET --values`` label each node with its value at the arguments and
the gradient of the scalar result with respect to it; gradients are checked against
``yota.grad`` (inputs) and the analytic derivative (intermediate values)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from support import ROOT, TESTS
from yota.ir.dot import GraphvizError, summary

import yota
from yota import cli, pipeline
from yota.graphview import tape_inputs, value_gradients

EX = TESTS / "cli_examples"


def loss(W: Any, x: Any) -> Any:
    h = np.tanh(W @ x)
    return np.sum(h * h)


def args() -> tuple[np.ndarray, np.ndarray]:
    r = np.random.default_rng(0)
    return r.standard_normal((3, 2)), r.standard_normal((2, 4))


def labels(dot: str) -> dict[str, str]:
    """node id -> its label text (lines joined by newlines)."""
    out = {}
    for m in re.finditer(r'^  (\w+) \[label="((?:[^"\\]|\\.)*)"', dot, re.M):
        out[m.group(1)] = m.group(2).replace("\\n", "\n")
    return out


def test_value_gradients_are_the_gradients_of_every_value() -> None:
    W, x = args()
    _, tape = yota.trace(loss, W, x)
    fn = pipeline.lower(tape)
    grads = value_gradients(fn, tape_inputs(tape, (W, x)))
    _, (gW, gx) = yota.grad(loss, W, x, backend="interp")
    np.testing.assert_allclose(grads[fn.inputs[0]], gW, rtol=1e-12)
    np.testing.assert_allclose(grads[fn.inputs[1]], gx, rtol=1e-12)
    by_op = {op.name: op.results[0] for op in fn.ops}
    h = np.tanh(W @ x)
    np.testing.assert_allclose(grads[by_op["tanh"]], 2 * h, rtol=1e-12)  # d sum(h²)/dh
    np.testing.assert_allclose(grads[by_op["matmul"]], 2 * h * (1 - h * h), rtol=1e-12)
    assert grads[by_op["sum"]] == 1.0


@pytest.mark.parametrize("stage", ["traced", "grad", "planned"])
def test_the_dot_text_holds_value_and_gradient_summaries(stage: str) -> None:
    W, x = args()
    g = yota.graph(loss, W, x, values=True, stage=stage)
    nodes = labels(g.dot)
    h = np.tanh(W @ x)
    assert summary(W) in nodes["in0"] and summary(x) in nodes["in1"]
    _, (gW, gx) = yota.grad(loss, W, x)
    grad_lines = {n: ln for n, lab in nodes.items() for ln in lab.split("\n")
                  if ln.startswith("grad ")}
    assert grad_lines["in0"] == summary(gW, "grad")
    assert grad_lines["in1"] == summary(gx, "grad")
    value = summary(np.sum(h * h))
    assert any(value in lab for lab in nodes.values())  # the loss (a fused result: "%n = ")
    if stage != "planned":  # the tanh node (fused with others once planned)
        tanh = next(lab for lab in nodes.values() if "= tanh" in lab)
        assert summary(h) in tanh and summary(2 * h, "grad") in tanh
    # every op node shows its value (a const's too); backward values have no gradient
    ops = {n: lab for n, lab in nodes.items() if n.startswith("op")}
    assert all(re.search(r"\n(%\d+ )?= ", lab) for lab in ops.values())
    assert not any("adjoint of" in lab and "\ngrad " in lab for lab in ops.values())
    assert str(g) == g.dot and "Graph of @" in repr(g)


def test_without_values_the_graph_is_the_plain_one_and_non_scalars_get_no_gradient() -> None:
    W, x = args()
    plain = yota.graph(loss, W, x)
    assert "\n= " not in plain.dot.replace("\\n", "\n")
    assert plain.dot == cli.to_dot(plain.fn, "loss: grad (@loss_vjp)")
    vec = yota.graph(lambda W, x: np.tanh(W @ x), W, x, values=True, stage="traced")
    text = vec.dot.replace("\\n", "\n")
    assert summary(np.tanh(W @ x)) in text and "\ngrad " not in text
    with pytest.raises(yota.YotaError, match="unknown stage 'nope'"):
        yota.graph(loss, W, x, stage="nope")


def test_captured_arrays_and_random_draws_get_their_values() -> None:
    C = np.linspace(1.0, 2.0, 4)
    np.random.seed(0)
    g = yota.graph(lambda x: np.sum(x * C + np.random.standard_normal(4)), np.ones(4),
                   values=True, stage="traced")
    text = g.dot.replace("\\n", "\n")
    np.random.seed(0)
    noise = np.random.standard_normal(4)
    assert summary(C) in text and summary(noise) in text
    assert summary(C, "grad") in text  # d/dx of sum(x * C)


def test_render_skips_cleanly_without_graphviz(tmp_path: Path, monkeypatch: Any) -> None:
    g = yota.graph(loss, *args(), values=True)
    (tmp_path / "g.dot").write_bytes(b"")
    assert g.render(str(tmp_path / "g.dot")) == g.dot.encode()  # DOT needs no Graphviz
    assert (tmp_path / "g.dot").read_text() == g.dot
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(GraphvizError, match="apt-get install graphviz"):
        g.render(str(tmp_path / "g.svg"))
    assert not (tmp_path / "g.svg").exists()
    assert g._repr_svg_() is None


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_render_svg_with_graphviz(tmp_path: Path) -> None:
    g = yota.graph(loss, *args(), values=True)
    data = g.render(str(tmp_path / "g.svg"))
    assert b"<svg" in data and (tmp_path / "g.svg").read_bytes() == data
    svg = g._repr_svg_()
    assert svg is not None and "<svg" in svg and "grad" in svg


def test_cli_graph_values() -> None:
    run = lambda *a: CliRunner().invoke(cli.main, list(a))  # noqa: E731
    r = run("graph", f"{EX / 'model.py'}:loss", "--example", "example", "--values")
    assert r.exit_code == 0, r.output
    nodes = labels(r.stdout)
    assert all("\n= " in lab for n, lab in nodes.items() if n.startswith(("in", "op")))
    assert "grad" in nodes["in0"] and "grad 5 (all 3)" in nodes["in1"]  # d/db: 5 columns
    r2 = run("graph", f"{EX / 'model.py'}:loss", "--example", "example")
    plain = "\n".join(labels(r2.stdout).values()).splitlines()
    assert r2.exit_code == 0 and not any(ln.startswith(("= ", "grad ")) for ln in plain)
    r3 = run("graph", f"{EX / 'model.py'}:loss", "--example", "example", "--values",
             "--stage", "traced")
    traced = "\n".join(labels(r3.stdout).values())
    assert r3.exit_code == 0 and "adjoint of" not in traced and "\ngrad " in traced


def test_manual_values_graph_is_real_output(monkeypatch: Any) -> None:
    root = ROOT
    page = (root / "docs" / "guide" / "inspecting.md").read_text()
    m = re.search(r"^\$ yota-ir (graph [^|\n]*--values[^|\n]*)\|[^\n]*\n(.*?)\n```", page,
                  re.M | re.S)
    assert m, "docs/guide/inspecting.md has no `$ yota-ir graph ... --values` example"
    monkeypatch.chdir(root)
    r = CliRunner().invoke(cli.main, m.group(1).split())
    assert r.exit_code == 0, r.output
    out = r.stdout.splitlines()
    for shown in m.group(2).splitlines():
        assert shown in out


def test_docstring_examples() -> None:
    import doctest

    from yota.ir import dot

    from yota import graphview

    for mod in (graphview, dot):
        assert doctest.testmod(mod).failed == 0
