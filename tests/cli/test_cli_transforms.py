"""``yota-ir ir TARGET --transform jvp|vmap|jacobian|hessian``: the transformed program at
each stage, parsed back, computing what the front end computes."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner
from support import TESTS
from yota.ir import parse, run

import yota
from yota import cli

MODEL = f"{TESTS / 'cli_examples' / 'model.py'}:loss"
ARGS = ["--args", "(Linear(np.ones((3, 4)), np.arange(3.0)), np.ones((4, 5)) / 2)"]


def ir(*args: str) -> str:
    r = CliRunner().invoke(cli.main, ["ir", MODEL, *ARGS, *args])
    assert r.exit_code == 0, r.output
    return r.stdout


@pytest.mark.parametrize("transform", ["jvp", "vmap", "jacobian", "hessian"])
def test_each_transformed_program_prints_and_parses(transform: str) -> None:
    text = ir("--transform", transform)
    fn = parse(text)
    assert fn.name.startswith("loss_")
    fused = parse(ir("--transform", transform, "--stage", "fused"))
    assert fused.output_types == fn.output_types


def test_the_printed_jvp_computes_yota_jvp() -> None:
    fn = parse(ir("--transform", "jvp"))
    W, b, X = np.ones((3, 4)), np.arange(3.0), np.ones((4, 5)) / 2
    tW, tb, tX = np.full((3, 4), 0.5), np.ones(3), np.zeros((4, 5))
    value, tangent = run(fn, W, b, X, tW, tb, tX)
    from cli_examples.model import Linear, loss

    y, t = yota.jvp(loss, (Linear(W, b), X), (Linear(tW, tb), tX))
    np.testing.assert_allclose([value, tangent], [y, t])


def test_vmap_axes_and_sizes() -> None:
    fn = parse(ir("--transform", "vmap", "--in-axes", "(None, 1)", "--batch-size", "3"))
    assert [v.shape for v in fn.inputs] == [(3, 4), (3,), (4, 3, 5)]
    assert fn.outputs[0].shape == (3,)
    r = CliRunner().invoke(cli.main, ["ir", MODEL, *ARGS, "--transform", "vmap",
                                      "--in-axes", "(0, 0, 0)"])
    assert r.exit_code != 0 and "one per argument" in r.output
