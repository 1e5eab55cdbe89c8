"""Row tiling (``yota.ir.passes.tile``) and its llvm rendering (``backends/llvm/tiled.py``):
runs of kernels over the same rows become one call of a function the llvm backend runs
block by block of rows (blocks split over threads, results reduced over the rows
combined per block and per thread). Compared against the reference interpreter under
``tests/support/precision.py``'s rules, on shapes that make blocks small (``BLOCK_BYTES``
lowered), with a last block shorter than the others, one column, odd widths,
non-contiguous inputs, f32 and f64, one thread and two."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from support import precision
from yota.backends import llvm as native
from yota.ir import passes, run
from yota.ir.passes import tile as tile_mod
from yota.ir.verifier import verify

import yota
from yota import pipeline


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of a few rows, so that small arrays are tiled into several blocks."""
    monkeypatch.setattr(tile_mod, "BLOCK_BYTES", 2000)
    monkeypatch.setattr(tile_mod, "MIN_BYTES", 0)


def logsumexp(X: Any, b: Any) -> Any:
    z = X + b
    m = np.max(z, axis=1, keepdims=True)
    return np.sum(np.log(np.sum(np.exp(z - m), axis=1)) + m[:, 0])


def softmax_xent(X: Any, w: Any) -> Any:
    e = np.exp(X - np.max(X, axis=1, keepdims=True))
    p = e / np.sum(e, axis=1, keepdims=True)
    return np.sum(p * w) + np.max(np.min(X, axis=0))


def layernorm(x: Any, g: Any) -> Any:
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mu) ** 2, axis=-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + 1e-5) * g
    return np.sum(np.tanh(y))


def grad_program(f: Callable[..., Any], args: tuple[Any, ...]) -> Any:
    _, tape = pipeline.trace(f, *args)
    return passes.optimize(pipeline.grad_ir(tape, optimized=False))


def tiled_calls(fn: Any) -> list[Any]:
    return [fn.callees[op.attrs["callee"]] for op in fn.ops
            if op.name == "call" and "row_block" in fn.callees[op.attrs["callee"]].attrs]


def check_llvm(fn: Any, args: tuple[Any, ...], threads: int) -> None:
    exe = native.compile(fn, threads=threads, par_work=0)
    got = exe(*args)
    want = run(fn, *args)
    assert precision.mismatch(fn, list(args), got, want) is None


def _data(rng: np.random.Generator, shape: tuple[int, ...], dt: Any) -> Any:
    return (rng.standard_normal(shape) * 3).astype(dt)


CASES = [  # (loss, rows, cols, dtype)
    (logsumexp, 37, 11, np.float32),
    (logsumexp, 64, 1, np.float64),
    (logsumexp, 23, 33, np.float64),
    (softmax_xent, 19, 13, np.float32),
    (layernorm, 29, 17, np.float32),
    (layernorm, 11, 64, np.float64),
]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(("f", "rows", "cols", "dt"), CASES)
def test_tiled_gradient_matches_the_interpreter(f: Callable[..., Any], rows: int, cols: int,
                                                dt: Any, threads: int,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tile_mod, "BLOCK_BYTES", 40 * cols * np.dtype(dt).itemsize)
    rng = np.random.default_rng(rows * cols)
    args = (_data(rng, (rows, cols), dt), _data(rng, (cols,), dt))
    fn = grad_program(f, args)
    calls = tiled_calls(fn)
    assert calls, "expected a tiled call"
    assert all(1 < c.attrs["row_block"] < c.attrs["row_count"] for c in calls)
    # prime row counts: the last block is shorter than the others
    assert cols == 1 or all(c.attrs["row_count"] % c.attrs["row_block"] for c in calls)
    check_llvm(fn, args, threads)


def test_the_block_function_is_the_tiled_function_on_its_rows() -> None:
    rng = np.random.default_rng(0)
    X, b = _data(rng, (21, 9), np.float64), _data(rng, (9,), np.float64)
    fn = grad_program(logsumexp, (X, b))
    (body,) = tiled_calls(fn)
    full = run(body, X, b)
    st = tile_mod.row_statuses(body)
    for lo, hi in [(0, 4), (4, 9), (20, 21)]:
        blk = verify(tile_mod.block_function(body, hi - lo))
        part = run(blk, X[lo:hi], b)
        for v, got, want in zip(body.outputs, part, full, strict=True):
            if st[v] == tile_mod.ROW:
                np.testing.assert_allclose(got, want[lo:hi], rtol=1e-12)


def test_non_contiguous_inputs_and_yota_grad() -> None:
    rng = np.random.default_rng(1)
    big = _data(rng, (40, 30), np.float32)
    X, b = big[::2, ::3], _data(rng, (20,), np.float32)[::2]
    v1, g1 = yota.grad(logsumexp, X, b, backend="llvm")
    v2, g2 = yota.grad(logsumexp, X, b, backend="interp")
    np.testing.assert_allclose(v1, v2, rtol=1e-5)
    for a, c in zip(g1, g2, strict=True):
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-6)


def test_one_row_a_single_block_or_little_data_is_not_tiled(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(2)
    one = (_data(rng, (1, 50), np.float32), _data(rng, (50,), np.float32))
    assert not tiled_calls(grad_program(logsumexp, one))
    many = (_data(rng, (40, 50), np.float32), _data(rng, (50,), np.float32))
    assert tiled_calls(grad_program(logsumexp, many))
    monkeypatch.setattr(tile_mod, "MIN_BYTES", 40 * 50 * 4 * 20)
    assert not tiled_calls(grad_program(logsumexp, many))
    monkeypatch.setattr(tile_mod, "MIN_BYTES", 0)
    monkeypatch.setattr(tile_mod, "BLOCK_BYTES", 1 << 30)
    assert not tiled_calls(grad_program(logsumexp, many))


def test_rows_read_whole_are_not_sliced() -> None:
    """``b`` of shape [R] broadcast along the columns of an [R, R] value is read whole by
    every block (its axis is not the rows)."""
    def f(X: Any, b: Any) -> Any:
        z = X * b
        return np.sum(np.exp(z - np.max(z, axis=1, keepdims=True)))
    rng = np.random.default_rng(3)
    args = (_data(rng, (24, 24), np.float64), _data(rng, (24,), np.float64))
    fn = grad_program(f, args)
    assert tiled_calls(fn)
    check_llvm(fn, args, 2)


def test_reductions_over_the_rows_combine_max_and_min() -> None:
    def f(X: Any) -> Any:
        e = np.exp(X)
        return np.sum(np.max(e, axis=0) * np.min(X * 2, axis=0)) + np.sum(e / np.sum(e, 1)[:, None])
    rng = np.random.default_rng(4)
    args = (_data(rng, (33, 7), np.float32),)
    fn = grad_program(f, args)
    assert tiled_calls(fn)
    for threads in (1, 2):
        check_llvm(fn, args, threads)


def test_the_pass_is_in_the_pipeline_and_prints_and_parses() -> None:
    from yota.ir import parse
    assert "tile" in [n for n, _ in passes.PIPELINE]
    rng = np.random.default_rng(5)
    args = (_data(rng, (16, 8), np.float32), _data(rng, (8,), np.float32))
    fn = grad_program(logsumexp, args)
    back = verify(parse(str(fn)))
    assert tiled_calls(back)
    for got, want in zip(run(back, *args), run(fn, *args), strict=True):
        np.testing.assert_array_equal(got, want)


def test_other_backends_run_a_tiled_call_as_a_plain_call() -> None:
    """The CUDA backend (in its CPU emulation) and the MLIR backend render the tiled
    function as an ordinary call; results match the interpreter."""
    from yota.backends import cuda
    from yota.backends.cuda.emulate import EmuDevice, emulation_available
    from yota.backends.cuda.lower import module_source

    rng = np.random.default_rng(6)
    args = (_data(rng, (19, 13), np.float32), _data(rng, (13,), np.float32))
    fn = grad_program(softmax_xent, args)
    assert tiled_calls(fn)
    want = run(fn, *args)
    if emulation_available() is None:
        dev = EmuDevice()
        kernels = cuda.lower(fn, config=dev.cfg).kernels
        dev.build(module_source(kernels.values()), list(kernels))
        got = cuda.compile(fn, device=dev)(*args)
        assert precision.mismatch(fn, list(args), got, want) is None
    from support.mlir_cases import MISSING
    if MISSING is None:
        from yota.backends import mlir
        got = mlir.compile(fn)(*args)
        assert precision.mismatch(fn, list(args), got, want) is None


def test_split_column_sums_are_the_same_in_every_run() -> None:
    """Each chunk of blocks has its own partial column sums, combined in chunk order: two
    threads give the same bits on every call, whichever thread took which chunk."""
    rng = np.random.default_rng(7)
    args = (_data(rng, (301, 17), np.float32), _data(rng, (17,), np.float32))
    fn = grad_program(logsumexp, args)
    exe = native.compile(fn, threads=2, par_work=0)
    first = exe(*args)
    for _ in range(20):
        for a, b in zip(exe(*args), first, strict=True):
            np.testing.assert_array_equal(a, b)
    assert precision.mismatch(fn, list(args), first, run(fn, *args)) is None
